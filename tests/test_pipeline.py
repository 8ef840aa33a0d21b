"""End to end: the CLI on real corpora, read back as run_pretraining.py reads it."""

from __future__ import annotations

import gzip
import hashlib
import json
import pathlib
import shutil

import pytest

from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.main import run
from conftest import DATA, UNCASED_VOCAB
from helpers.records import read_examples
from helpers.stats_util import instance_stats

GOLDEN = DATA / "golden_pipeline"
SMALL_INPUTS = f"{DATA / 'sample_text.txt'},{DATA / 'wiki_small.txt'}"


def _flags(**flags) -> list[str]:
    return [f"--{name}={value}" for name, value in flags.items()]


def _shard_bytes(directory: pathlib.Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.glob("part-*"))}


@pytest.mark.slow
@pytest.mark.parametrize("case", json.loads((GOLDEN / "cases.json").read_text()),
                         ids=lambda case: case["name"])
def test_compat_mode_reproduces_the_original_record_for_record(case, tmp_path, monkeypatch):
    monkeypatch.chdir(DATA)  # the case's paths are relative to tests/data
    outputs = [str(tmp_path / f"out-{k}.tfrecord") for k in range(case["num_output_files"])]
    flags = dict(case["flags"], output_file=",".join(outputs), reference_compatible=True)
    run(_flags(**flags))
    for output, golden in zip(outputs, case["outputs"]):
        with gzip.open(GOLDEN / golden["path"], "rt") as handle:
            expected = [json.loads(line) for line in handle]
        ours = read_examples([output], flags["max_seq_length"],
                             flags["max_predictions_per_seq"])
        assert len(ours) == len(expected) == golden["records"]
        for index, (mine, theirs) in enumerate(zip(ours, expected)):
            assert mine == theirs, f"record {index} of {output}"


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> pathlib.Path:
    """One in-memory DirectRunner run that the determinism tests compare against."""
    out = tmp_path_factory.mktemp("reference") / "out"
    run(_flags(input_file=SMALL_INPUTS, output_dir=out, vocab_file=UNCASED_VOCAB,
               dupe_factor=2, num_shards=3, max_seq_length=64,
               max_predictions_per_seq=10, do_whole_word_mask=True))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("extra", [
    [],  # the same command again
    ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    ["--input_split_bytes=997", "--direct_running_mode=in_memory"],
    # The runner's shuffle (Dataflow's path) instead of bucket files.
    ["--shuffle=runner"],
    ["--shuffle=runner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"],
], ids=["again", "multi_processing", "small_splits", "runner_shuffle",
        "runner_shuffle_multi_processing"])
def test_output_is_byte_identical_across_runners_and_splits(reference_run, tmp_path, extra):
    out = tmp_path / "out"
    run(_flags(input_file=SMALL_INPUTS, output_dir=out, vocab_file=UNCASED_VOCAB,
               dupe_factor=2, num_shards=3, max_seq_length=64,
               max_predictions_per_seq=10, do_whole_word_mask=True) + extra)
    assert _shard_bytes(out) == _shard_bytes(reference_run)
    assert len(_shard_bytes(out)) == 3


@pytest.mark.parametrize("shuffle, through_files", [("files", True), ("runner", False)])
def test_documents_are_spread_through_files_only_on_the_direct_runner(tmp_path, shuffle,
                                                                      through_files):
    """The DirectRunner's GroupByKey would hold the tokenized corpus decoded in
    memory: there only the batch files' paths are reshuffled (SpreadBatchFiles),
    where the runner's shuffle takes the batches; so do the documents that wait
    for the dedup decisions. The byte-identity tests above run both graphs."""
    import apache_beam as beam

    from bert_pretraining_data.pipeline.build import build_pipeline
    from bert_pretraining_data.pipeline.options import parse_args
    from bert_pretraining_data.pipeline.prepare import prepare

    config, beam_args = parse_args(_flags(input_file=SMALL_INPUTS, output_dir=tmp_path / "out",
                                          vocab_file=UNCASED_VOCAB, shuffle=shuffle))
    run_ = prepare(config, beam_args)
    pipeline = beam.Pipeline()
    build_pipeline(pipeline, config=config, stages=run_.stages, patterns=run_.patterns,
                   output=run_.output)
    labels = {t.unique_name for t in pipeline.to_runner_api().components.transforms.values()}
    assert "SpreadDocuments" in labels
    assert ("SpreadDocuments/WriteBatchFiles" in labels) == through_files
    assert ("Deduplicate/SpreadBatches/WriteBatchFiles" in labels) == through_files
    assert {"BatchDocuments", "FanOutDupes", "CreateInstances"} <= labels


@pytest.mark.slow
def test_output_reads_with_run_pretraining_spec_and_manifest_counts(reference_run):
    manifest = json.loads((reference_run / "manifest.json").read_text())
    shards = sorted(str(p) for p in reference_run.glob("part-*-of-00003.tfrecord"))
    records = read_examples(shards, 64, 10)
    assert len(records) == manifest["total_instances"] > 0
    assert [s["records"] for s in manifest["shards"]] == [
        len(read_examples([s], 64, 10)) for s in shards]
    counters = manifest["counters"]
    assert counters["instances"] == len(records)
    assert counters["random_next_instances"] == sum(r["next_sentence_labels"][0]
                                                   for r in records)
    assert counters["masked_tokens"] == sum(sum(r["masked_lm_weights"]) for r in records)
    assert counters["tokenized_documents"] == 11  # 3 in sample_text, 8 in wiki_small
    for record in records:
        length = sum(record["input_mask"])
        assert record["input_ids"][0] == 101 and record["input_ids"][:length].count(102) == 2
        assert record["input_ids"][length:] == [0] * (64 - length)
    assert manifest["vocab_sha256"] == hashlib.sha256(UNCASED_VOCAB.read_bytes()).hexdigest()
    assert not (reference_run / ".staging").exists()


@pytest.mark.slow
def test_gzip_input_and_output_match_plain(reference_run, tmp_path):
    inputs = []
    for name in ("sample_text.txt", "wiki_small.txt"):
        target = tmp_path / f"{name}.gz"
        target.write_bytes(gzip.compress((DATA / name).read_bytes()))
        inputs.append(str(target))
    out = tmp_path / "out"
    run(_flags(input_file=",".join(inputs), output_dir=out, vocab_file=UNCASED_VOCAB,
               dupe_factor=2, num_shards=3, max_seq_length=64, max_predictions_per_seq=10,
               do_whole_word_mask=True, compression="gzip"))
    shards = sorted(str(p) for p in out.glob("part-*.tfrecord.gz"))
    ours = read_examples(shards, 64, 10, compression="GZIP")
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(shards) == 3 and len(ours) == manifest["total_instances"] > 0
    # Document keys hold the file names, so the draws differ from the plain
    # run; what was read must not.
    plain = json.loads((reference_run / "manifest.json").read_text())["counters"]
    for name in ("tokenized_documents", "sentences", "tokens", "unk_tokens"):
        assert manifest["counters"][name] == plain[name], name


@pytest.mark.slow
def test_statistics_match_the_original_on_wikitext(tmp_path):
    """Distributed mode draws differently from the original but must build the
    same distribution: every statistic within 4 run-to-run standard deviations
    of the original's mean over ten seeds. Document keys do not depend on where
    the corpus lives, so this run gives the same figures on every checkout."""
    golden = json.loads((GOLDEN / "wikitext2_valid_stats.json").read_text())
    flags = dict(golden["flags"], input_file=DATA / golden["corpus"], random_seed=12345,
                 vocab_file=UNCASED_VOCAB, output_dir=tmp_path / "out", num_shards=2)
    run(_flags(**flags))
    shards = sorted(str(p) for p in (tmp_path / "out").glob("part-*"))
    ours = instance_stats(read_examples(shards, 128, 20), 128, golden["mask_id"])
    assert len(golden["runs"]) >= 8
    for name, mean in golden["mean"].items():
        assert abs(ours[name] - mean) <= 4 * golden["sd"][name], (name, ours[name], mean)


def test_output_file_list_gets_exactly_those_files(tmp_path):
    outputs = [tmp_path / "a" / "x.tfrecord", tmp_path / "b.tfrecord"]
    (tmp_path / "a").mkdir()
    run(_flags(input_file=DATA / "sample_text.txt", vocab_file=UNCASED_VOCAB,
               output_file=",".join(map(str, outputs)), dupe_factor=1))
    assert all(p.exists() for p in outputs)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "b.tfrecord", "x.tfrecord", "x.tfrecord.manifest.json"]
    total = sum(len(read_examples([str(p)], 128, 20)) for p in outputs)
    manifest = json.loads((tmp_path / "a" / "x.tfrecord.manifest.json").read_text())
    assert manifest["total_instances"] == total > 0
    shutil.rmtree(tmp_path / "a")


@pytest.mark.slow
def test_leftovers_of_an_interrupted_run_do_not_leak_into_the_rerun(reference_run, tmp_path):
    out = tmp_path / "out"
    stale = out / ".staging" / "buckets" / "shard-00000"
    stale.mkdir(parents=True)
    (stale / "killed-bundle.bucket").write_bytes(b"\x00" * 64)
    (out / ".staging" / "shard-00001").write_bytes(b"half a shard")
    run(_flags(input_file=SMALL_INPUTS, output_dir=out, vocab_file=UNCASED_VOCAB,
               dupe_factor=2, num_shards=3, max_seq_length=64,
               max_predictions_per_seq=10, do_whole_word_mask=True))
    assert _shard_bytes(out) == _shard_bytes(reference_run)
    assert not (out / ".staging").exists()


def test_existing_output_is_refused_and_kept_unless_overwrite(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-00000-of-00009.tfrecord").write_bytes(b"old")
    flags = _flags(input_file=DATA / "sample_text.txt", vocab_file=UNCASED_VOCAB,
                   output_dir=out, dupe_factor=1)
    with pytest.raises(ConfigError, match="pass --overwrite"):
        run(flags)
    assert (out / "part-00000-of-00009.tfrecord").read_bytes() == b"old"
    run(flags + ["--overwrite"])
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json", "part-00000-of-00001.tfrecord", "vocab.txt"]
    assert (out / "vocab.txt").read_bytes() == UNCASED_VOCAB.read_bytes()
