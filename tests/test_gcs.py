"""gs:// end to end, against a real GCS emulator on loopback (tests/gcs_emulator.py).

Document keys name files relative to the input patterns' directory, so the
same corpus gives the same bytes wherever it lives:
- local input, output local vs gs://: the write path (bucket files, shards,
  renames, manifest) gives byte-identical shards on both;
- gs:// input and vocabulary vs all local: the read path gives byte-identical
  shards and equal read-side counters.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys

import pytest

from conftest import DATA, UNCASED_VOCAB
from helpers.gcs_emulator import gcs  # noqa: F401  (fixture)
from bert_pretraining_data.loaders.manifest import read_manifest
from bert_pretraining_data.loaders.records import read_instances
from bert_pretraining_data.pipeline.main import run
from helpers.client_venvs import (MOSAICML_STREAMING_GCS, STREAMING_IMPORTS, client_python,
                                  run_client)
from helpers.records import read_examples

FLAGS = ["--dupe_factor=2", "--num_shards=3", "--max_seq_length=64",
         "--max_predictions_per_seq=10"]
READ_COUNTERS = ("documents", "lines", "sentences", "tokens", "unk_tokens",
                 "tokenized_documents", "undecodable_bytes", "empty_documents")
SHARDS = [f"part-{i:05d}-of-00003.tfrecord" for i in range(3)]


def _run(input_file: str, vocab_file: str, output_dir: str) -> dict:
    return run([f"--input_file={input_file}", f"--vocab_file={vocab_file}",
                f"--output_dir={output_dir}", *FLAGS])


def _local_shards(directory: pathlib.Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in SHARDS}


def _gcs_shards(emulator, prefix: str) -> dict[str, bytes]:
    return {name: emulator.read(f"{prefix}/{name}") for name in SHARDS}


@pytest.fixture(scope="module")
def corpus(gcs):  # noqa: F811
    """The corpus and vocabulary, uploaded once."""
    return {"input": gcs.upload(DATA / "sample_text.txt", "corpus/sample_text.txt"),
            "vocab": gcs.upload(UNCASED_VOCAB, "vocab/vocab.txt")}


@pytest.mark.slow
def test_gs_output_is_byte_identical_to_local_output(gcs, tmp_path):  # noqa: F811
    local_input = str(DATA / "sample_text.txt")
    _run(local_input, str(UNCASED_VOCAB), str(tmp_path / "local"))
    manifest = _run(local_input, str(UNCASED_VOCAB), gcs.url("write-test"))

    assert gcs.names("write-test/") == sorted(
        [f"write-test/{name}" for name in SHARDS]
        + ["write-test/manifest.json", "write-test/vocab.txt"])
    assert gcs.read("write-test/vocab.txt") == UNCASED_VOCAB.read_bytes()
    ours = _gcs_shards(gcs, "write-test")
    assert ours == _local_shards(tmp_path / "local")
    stored = json.loads(gcs.read("write-test/manifest.json"))
    assert stored["total_instances"] == manifest["total_instances"] > 0
    for shard in stored["shards"]:
        data = ours[shard["path"].rsplit("/", 1)[1]]
        assert shard["sha256"] == hashlib.sha256(data).hexdigest()
        assert shard["bytes"] == len(data)


@pytest.mark.slow
def test_gs_input_vocab_and_output_match_local_runs(gcs, corpus, tmp_path):  # noqa: F811
    everything_gs = _run(corpus["input"], corpus["vocab"], gcs.url("all-gs"))
    gs_input_local_output = _run(corpus["input"], corpus["vocab"], str(tmp_path / "out"))
    all_local = _run(str(DATA / "sample_text.txt"), str(UNCASED_VOCAB), str(tmp_path / "local"))

    shards = _gcs_shards(gcs, "all-gs")
    assert shards == _local_shards(tmp_path / "out") == _local_shards(tmp_path / "local")
    for name in READ_COUNTERS:
        assert everything_gs["counters"][name] == all_local["counters"][name], name
    assert everything_gs["counters"]["tokenized_documents"] == 3
    assert everything_gs["inputs"] == [{"path": corpus["input"],
                                        "bytes": (DATA / "sample_text.txt").stat().st_size}]
    assert everything_gs["vocab_sha256"] == all_local["vocab_sha256"]
    assert gs_input_local_output["total_instances"] == everything_gs["total_instances"]

    # The shards read back from the emulator are what run_pretraining.py reads.
    copies = []
    for name, data in shards.items():
        copies.append(tmp_path / name)
        copies[-1].write_bytes(data)
    records = read_examples([str(p) for p in copies], 64, 10)
    assert len(records) == everything_gs["total_instances"]
    assert everything_gs["counters"]["masked_tokens"] == sum(
        sum(r["masked_lm_weights"]) for r in records)


@pytest.mark.parametrize("flag, value, message", [
    ("vocab_file", "vocab/missing.txt", "cannot read the vocabulary"),
    ("input_file", "corpus/*.nothing", "matches no files"),
])
def test_bad_gs_paths_fail_in_one_line_before_writing(gcs, corpus, flag, value, message):  # noqa: F811
    paths = dict(corpus, **{flag.split("_")[0]: gcs.url(value)})
    with pytest.raises(ValueError, match=message):
        _run(paths["input"], paths["vocab"], gcs.url("never"))
    assert gcs.names("never") == []


def test_a_gs_tokenizer_file_gives_the_local_files_shards(gcs, tmp_path):  # noqa: F811
    from helpers.tokenizer_files import roberta_bpe

    training = (DATA / "en_ewt-ud-test.sentences.txt").read_text(encoding="utf-8")
    local = tmp_path / "roberta.json"
    roberta_bpe([line for line in training.splitlines() if line.strip()], local, 1000)
    remote = gcs.upload(local, "tokenizers/roberta.json")
    flags = [f"--input_file={DATA / 'sample_text.txt'}", "--recipe=roberta",
             "--masking=static", "--num_shards=2", "--max_seq_length=64"]
    run([*flags, f"--tokenizer_file={local}", f"--output_dir={tmp_path / 'local'}"])
    run([*flags, f"--tokenizer_file={remote}", f"--output_dir={tmp_path / 'remote'}"])
    shards = sorted(p.name for p in (tmp_path / "local").glob("part-*"))
    assert len(shards) == 2 and shards == sorted(
        p.name for p in (tmp_path / "remote").glob("part-*"))
    for name in shards:
        assert (tmp_path / "local" / name).read_bytes() == (
            tmp_path / "remote" / name).read_bytes()
    assert (tmp_path / "remote" / "tokenizer.json").read_bytes() == local.read_bytes()
    with pytest.raises(ValueError, match="cannot read the tokenizer file .*--tokenizer_file"):
        run([*flags, f"--tokenizer_file={gcs.url('tokenizers/missing.json')}",
             f"--output_dir={tmp_path / 'never'}"])
    assert not (tmp_path / "never").exists()


@pytest.mark.slow
def test_gs_output_is_replaced_only_with_overwrite(gcs, corpus):  # noqa: F811
    first = _run(corpus["input"], corpus["vocab"], gcs.url("again"))
    with pytest.raises(ValueError, match="not empty"):
        _run(corpus["input"], corpus["vocab"], gcs.url("again"))
    second = run([f"--input_file={corpus['input']}", f"--vocab_file={corpus['vocab']}",
                  f"--output_dir={gcs.url('again')}", "--overwrite", *FLAGS])
    assert [s["sha256"] for s in second["shards"]] == [s["sha256"] for s in first["shards"]]
    assert gcs.names("again/") == sorted(
        [f"again/{name}" for name in SHARDS] + ["again/manifest.json", "again/vocab.txt"])


def _batches(dataset: str, **kwargs) -> list[dict[str, list]]:
    from bert_pretraining_data.loaders import make_dataloader

    return [{name: value.tolist() for name, value in batch.items()}
            for batch in make_dataloader(dataset, batch_size=8, seed=5, **kwargs)]


@pytest.mark.slow
def test_the_pytorch_loader_reads_a_bucket_through_fsspec(gcs, corpus, tmp_path):  # noqa: F811
    """A dataset and its vocabulary on gs:// load as they do from a local
    copy, through gcsfs (the `[gcs]` extra), not TensorFlow."""
    import gcsfs

    from bert_pretraining_data.transforms.handoff import files

    dynamic = ["--masking=none", "--padding=none"]
    _run(corpus["input"], corpus["vocab"], gcs.url("torch-read"))
    local = run([f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
                 f"--output_dir={tmp_path / 'local'}", *FLAGS, *dynamic])
    gcs_dataset = gcs.url("torch-read-dynamic")
    run([f"--input_file={corpus['input']}", f"--vocab_file={corpus['vocab']}",
         f"--output_dir={gcs_dataset}", *FLAGS, *dynamic])

    assert isinstance(files._filesystem(gcs_dataset), gcsfs.GCSFileSystem)
    from_bucket = _batches(gcs_dataset)  # masks made at load time: the vocabulary is read
    assert from_bucket == _batches(str(tmp_path / "local"))
    assert sum(len(b["input_ids"]) for b in from_bucket) == local["total_instances"] > 0
    assert _batches(gcs.url("torch-read"), shuffle=False) != []


def test_urls_fall_back_to_tensorflow_then_fail_in_one_line(monkeypatch):
    import fsspec

    from bert_pretraining_data.transforms.handoff import files

    def no_implementation(url):
        raise ImportError("Install gcsfs to access Google Storage")

    monkeypatch.setattr(fsspec.core, "url_to_fs", no_implementation)
    assert isinstance(files._filesystem("gs://b/data"), files._GFileSystem)
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # not installed
    with pytest.raises(OSError, match=r"^reading gs:// paths needs an fsspec filesystem for "
                                      r"them \(for gs://: pip install 'bert-pretraining-data"
                                      r"\[gcs\]'\) or TensorFlow"):
        files.exists("gs://b/data/manifest.json")


@pytest.mark.slow
def test_parquet_on_a_bucket_reads_back_through_datasets_and_the_loader(gcs, corpus,  # noqa: F811
                                                                         tmp_path):
    """--output_format=parquet to gs://: the shards equal a local run's bytes,
    and `datasets` (through gcsfs) and the PyTorch loader read them back."""
    import datasets

    parquet = ["--output_format=parquet"]
    bucket = run([f"--input_file={corpus['input']}", f"--vocab_file={corpus['vocab']}",
                  f"--output_dir={gcs.url('parquet')}", *FLAGS, *parquet])
    local = tmp_path / "local"
    run([f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
         f"--output_dir={local}", *FLAGS, *parquet])
    names = [f"part-{i:05d}-of-00003.parquet" for i in range(3)]
    assert [gcs.read(f"parquet/{name}") for name in names] == [
        (local / name).read_bytes() for name in names]
    # streamed: read through fsspec's open, a row group at a time
    rows = datasets.load_dataset("parquet", data_files=[gcs.url(f"parquet/{n}") for n in names],
                                 split="train", streaming=True)
    assert sum(1 for _ in rows) == bucket["total_instances"] > 0
    assert _batches(gcs.url("parquet"), shuffle=False) == _batches(str(local), shuffle=False)


_STREAM_FROM_BUCKET = STREAMING_IMPORTS + """
import json, sys

import google.auth
import numpy as np
from google.auth.credentials import AnonymousCredentials
from streaming import StreamingDataset
from streaming.base.util import clean_stale_shared_memory

# The emulator takes anonymous requests (as the library's own tests patch it).
google.auth.default = lambda *args, **kwargs: (AnonymousCredentials(), "emulator")
clean_stale_shared_memory()
dataset = StreamingDataset(remote=sys.argv[1], local=sys.argv[2], shuffle=False, batch_size=1)
print(json.dumps([np.frombuffer(dataset[i]["input_ids"], np.int64).tolist()
                  for i in range(len(dataset))]))
"""


@pytest.mark.slow
def test_mds_on_a_bucket_streams_through_streaming_dataset(gcs, corpus, tmp_path):  # noqa: F811
    """--output_format=mds to gs://: every file equals a local run's, and
    StreamingDataset(remote=gs://...) downloads and reads the instances the
    loaders read from the local copy."""
    mds = ["--output_format=mds"]
    run([f"--input_file={corpus['input']}", f"--vocab_file={corpus['vocab']}",
         f"--output_dir={gcs.url('mds')}", *FLAGS, *mds])
    local = tmp_path / "local"
    run([f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
         f"--output_dir={local}", *FLAGS, *mds])
    names = ["index.json", *(f"part-{i:05d}-of-00003/{name}" for i in range(3)
                             for name in ("index.json", "shard.00000.mds"))]
    assert gcs.names("mds/") == sorted(f"mds/{name}" for name in
                                       [*names, "manifest.json", "vocab.txt"])
    assert [gcs.read(f"mds/{name}") for name in names] == [(local / name).read_bytes()
                                                           for name in names]
    python = client_python("mosaicml-streaming-gcs", MOSAICML_STREAMING_GCS)
    streamed = run_client(python, _STREAM_FROM_BUCKET, gcs.url("mds"), str(tmp_path / "cache"))
    expected = [i.input_ids.tolist() for i in read_instances(read_manifest(str(local)))]
    assert streamed == expected and len(expected) > 30


def test_the_original_interface_reads_a_gs_vocabulary(gcs, corpus):  # noqa: F811
    """`FullTokenizer(vocab_file="gs://...")` works as the original's, which
    read it through tf.gfile: the tokenizers' default opener is the loaders'
    (gcsfs here), not a local open."""
    from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer

    remote, local = FullTokenizer(corpus["vocab"]), FullTokenizer(str(UNCASED_VOCAB))
    assert remote.vocab == local.vocab and len(remote.vocab) == 30522
    assert remote.tokenize("The unaffable Tokenizer") == ["the", "una", "##ffa", "##ble",
                                                          "token", "##izer"]


@pytest.mark.slow
def test_splits_and_decontamination_on_a_bucket_match_a_local_run(gcs, tmp_path):  # noqa: F811
    """Held-out splits and --decontaminate with gs:// input, benchmarks and
    output: each split's folder holds the local run's bytes, the audit list is
    beside the manifest, and the loader reads the validation split there."""
    from bert_pretraining_data.loaders import make_dataloader

    corpus = gcs.upload(DATA / "wiki_small.txt", "splits/wiki_small.txt")  # keys: its name
    local_bench = tmp_path / "bench.txt"
    local_bench.write_text((DATA / "wiki_small.txt").read_text(encoding="utf-8")
                           .split("\n\n")[2].split("\n")[0] + "\n", encoding="utf-8")
    bench = gcs.upload(local_bench, "splits/bench/bench.txt")
    flags = [*FLAGS, "--validation_fraction=0.3", "--decontaminate_field=text"]
    local = run([f"--input_file={DATA / 'wiki_small.txt'}", f"--vocab_file={UNCASED_VOCAB}",
                 f"--output_dir={tmp_path / 'local'}", f"--decontaminate={local_bench}", *flags])
    remote = run([f"--input_file={corpus}", f"--vocab_file={UNCASED_VOCAB}",
                  f"--output_dir={gcs.url('splits/out')}",
                  f"--decontaminate={gcs.url('splits/bench/*.txt')}", *flags])
    assert bench.endswith("bench.txt") and remote["decontamination"]["documents_removed"] >= 1
    assert remote["decontamination"]["documents_removed"] == local["decontamination"][
        "documents_removed"]
    names = gcs.names("splits/out/")
    assert "splits/out/decontamination.json" in names
    for split in ("train", "validation"):
        shards = sorted(n for n in names if n.startswith(f"splits/out/{split}/"))
        assert [gcs.read(n) for n in shards] == [
            p.read_bytes() for p in sorted((tmp_path / "local" / split).iterdir())], split
    rows = sum(len(batch["input_ids"]) for batch in make_dataloader(
        gcs.url("splits/out"), batch_size=8, split="validation"))
    assert rows == remote["splits"]["validation"]["instances"] > 0


@pytest.mark.slow
def test_quality_filters_on_a_bucket_match_a_local_run(gcs, tmp_path):  # noqa: F811
    """--quality_filters with a gs:// --quality_config, --languages, a WET file
    and the output on the bucket: the local run's shards and quality.jsonl."""
    from helpers.corpora import write_wet

    text = (DATA / "en_ewt-ud-test.paragraphs.txt").read_text(encoding="utf-8")
    pages = [page for page in text.split("\n\n") if page.strip()][:60]
    pages += [(DATA / "zh_gsd-ud-test.paragraphs.txt").read_text(encoding="utf-8")[:400]]
    wet = write_wet(tmp_path / "crawl.warc.wet.gz",
                    [(f"https://example.org/{number}", page) for number, page in enumerate(pages)],
                    info=False)
    settings = tmp_path / "quality.json"
    settings.write_text(json.dumps({"c4_min_words_per_line": 3, "c4_min_sentences": 2}))
    flags = [*FLAGS, "--quality_filters=c4", "--languages=en", f"--vocab_file={UNCASED_VOCAB}"]
    local = run([f"--input_file={wet}", f"--quality_config={settings}",
                 f"--output_dir={tmp_path / 'local'}", *flags])
    remote = run([f"--input_file={gcs.upload(wet, 'quality/crawl.warc.wet.gz')}",
                  f"--quality_config={gcs.upload(settings, 'quality/quality.json')}",
                  f"--output_dir={gcs.url('quality/out')}", *flags])
    assert remote["counters"] == local["counters"]
    sampled = [json.loads(line) for line in gcs.read("quality/out/quality.jsonl").splitlines()]
    assert {"key": f"https://example.org/{len(pages) - 1}", "language": "zh"}.items() <= next(
        record for record in sampled if record.get("language") == "zh").items()
    assert _gcs_shards(gcs, "quality/out") == _local_shards(tmp_path / "local")
    assert gcs.read("quality/out/quality.jsonl") == (tmp_path / "local" / "quality.jsonl"
                                                    ).read_bytes()
