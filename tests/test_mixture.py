"""--mixture end to end, on three sources of three shapes the feature was not
developed on: long articles (an enwiki dump excerpt, read as a dump), short
documents (the English Web Treebank, two sentences each, as text) and tiny
ones (WikiText-2's sentences, a JSONL record each, under another field).

What must hold: with weights, each source's share of the output tokens is
w_i o_i / sum_j w_j o_j (o_i: its output tokens at weight 1, so truncation,
which differs by shape, cancels), each document made floor(w) or ceil(w)
times; with alpha, the shares follow q_i c_i from the sources' own token
counts; a document in two sources is kept in the first; by_source folders
hold one copy of each document; the bytes do not depend on the runner.
"""

from __future__ import annotations

import collections
import datetime
import json
import math
import pathlib
import re
import shutil

import pytest
import yaml

from conftest import DATA, UNCASED_VOCAB
from helpers.client_venvs import MOSAICML_STREAMING, STREAMING_IMPORTS, client_python, run_client
from helpers.corpora import web_treebank_documents
from bert_pretraining_data.loaders.manifest import read_manifest
from bert_pretraining_data.loaders.records import read_instances
from bert_pretraining_data.pipeline.inspect_data import report
from bert_pretraining_data.pipeline.main import main, run
from bert_pretraining_data.pipeline.refresh import refresh
from bert_pretraining_data.transforms.dedup.normalise import normalised_text
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec

FLAGS = ["--max_seq_length=128", "--max_predictions_per_seq=20", "--dedup=exact"]
WEIGHTS = {"articles": 2.0, "short": 1.5, "tiny": 1.3}
PLANTED = 20  # short documents also in the tiny source


def _tiny_lines() -> list[str]:
    """WikiText-2's sentences, each a document (~7,400 of them): enough that
    the fraction of a weight, drawn per document, moves a share by under 1%."""
    lines = (DATA / "wikitext2_valid.raw.txt").read_text(encoding="utf-8").splitlines()
    return [sentence for line in lines if line.strip() and not line.strip().startswith("=")
            for sentence in re.split(r"(?<=[.!?]) ", line.strip())
            if 3 <= len(sentence.split()) <= 40]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixture")
    short = web_treebank_documents()
    (root / "short").mkdir()
    (root / "short" / "treebank.txt").write_text(
        "\n\n".join("\n".join(d) for d in short) + "\n", encoding="utf-8")
    tiny = [" ".join(d) for d in short[:PLANTED]] + _tiny_lines()
    (root / "tiny").mkdir()
    (root / "tiny" / "lines.jsonl").write_text(
        "".join(json.dumps({"body": line}) + "\n" for line in tiny), encoding="utf-8")
    return {"root": root, "short": short, "tiny": tiny}


def _mixture(sources, path, weights=None, **top) -> str:
    root = sources["root"]
    entries = [
        {"name": "articles", "input_file": str(DATA / "enwiki-excerpt-pages-articles.xml.bz2"),
         "input_format": "wikipedia"},
        {"name": "short", "input_file": [str(root / "short" / "treebank.txt")]},
        {"name": "tiny", "input_file": str(root / "tiny" / "*.jsonl"), "input_format": "jsonl",
         "text_field": "body", "sentence_splitter": "none"},  # a line, a sentence
    ]
    for entry in entries:
        if weights is not None:
            entry["weight"] = weights[entry["name"]]
    path.write_text(json.dumps({"sources": entries, **top}), encoding="utf-8")
    return str(path)


def _run(sources, name, *flags, **mixture) -> tuple[str, dict]:
    root = sources["root"]
    out = root / f"out-{name}"
    manifest = run([f"--mixture={_mixture(sources, root / f'{name}.json', **mixture)}",
                    f"--output_dir={out}", f"--vocab_file={UNCASED_VOCAB}", *FLAGS, *flags])
    return str(out), manifest


@pytest.fixture(scope="module")
def once(sources):
    """Every source at weight 1: each one's output tokens o_i."""
    return _run(sources, "once")


def _by_name(manifest: dict, key: str) -> dict[str, float]:
    return {source["name"]: source[key] for source in manifest["mixture"]["sources"]}


@pytest.fixture(scope="module")
def weighted(sources):
    """The sources at WEIGHTS."""
    return _run(sources, "weighted", weights=WEIGHTS)


def test_weights_set_each_sources_share_of_the_output_tokens(once, weighted):
    _, weighted = weighted
    o = _by_name(once[1], "output_tokens")
    expected = {name: WEIGHTS[name] * o[name] / sum(WEIGHTS[n] * o[n] for n in o) for name in o}
    share = _by_name(weighted, "share")
    for name in WEIGHTS:
        assert share[name] == pytest.approx(expected[name], rel=0.03), name
    documents, copies = _by_name(weighted, "documents"), _by_name(weighted, "copies")
    for name, weight in WEIGHTS.items():  # each document floor(w) or ceil(w) times
        assert math.floor(weight) * documents[name] <= copies[name] <= (
            math.ceil(weight) * documents[name])
        if weight != math.floor(weight):  # the fraction, drawn per document
            extra = (copies[name] - math.floor(weight) * documents[name]) / documents[name]
            tolerance = 4 * math.sqrt(weight % 1 * (1 - weight % 1) / documents[name])
            assert abs(extra - weight % 1) <= tolerance, name
    assert weighted["total_instances"] == sum(_by_name(weighted, "instances").values())


def test_each_tiny_document_is_made_floor_or_ceil_of_its_weight_times(sources, weighted):
    """Counted outside the pipeline: a one-sentence document makes one
    instance a copy, its sentence segment A, so a tiny document's copies are
    the instances of its source whose segment A is its tokens (masks undone;
    or a cut of them, where the pair was truncated)."""
    out, manifest = weighted
    spec = TokenizerSpec(str(UNCASED_VOCAB), True)
    tokenizer = spec.tokenizer(spec.load_vocabulary())
    kept = {normalised_text([line]): line for line in sources["tiny"][PLANTED:]}
    # documents per token sequence: two texts can tokenize alike (accents stripped)
    expected = collections.Counter(tuple(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)))
                                   for line in kept.values())
    made = collections.Counter()
    for instance in read_instances(read_manifest(out)):
        if instance.source == 2:
            ids = instance.input_ids.copy()
            ids[instance.masked_lm_positions] = instance.masked_lm_ids
            made[tuple(int(i) for i in ids[1:int((instance.segment_ids == 0).sum()) - 1])] += 1
    # beside a long random next, a pair is cut to the length from either end:
    # such an A is the one document's tokens that hold it
    for cut in set(made) - set(expected):
        whole = [tokens for tokens in expected if any(
            tokens[start:start + len(cut)] == cut for start in range(len(tokens) - len(cut) + 1))]
        assert len(whole) == 1, cut
        made[whole[0]] += made.pop(cut)
    assert set(made) == set(expected)
    weight = WEIGHTS["tiny"]
    for tokens, documents in expected.items():
        assert documents * math.floor(weight) <= made[tokens] <= documents * math.ceil(weight)
    assert {made[tokens] for tokens, documents in expected.items() if documents == 1} == {
        math.floor(weight), math.ceil(weight)}
    assert sum(made.values()) == _by_name(manifest, "copies")["tiny"]


def test_alpha_sets_the_shares_from_the_sources_own_token_counts(sources, once):
    alpha = 0.3
    held = _by_name(once[1], "tokens")
    total = sum(held.values())
    # a budget that makes the 105 articles' weight whole: a fraction drawn per
    # article would move their share by a few per cent
    budget = round(3 * held["articles"] / ((held["articles"] / total) ** alpha / sum(
        (n / total) ** alpha for n in held.values())))
    _, sampled = _run(sources, "alpha", alpha=alpha, total_tokens=budget)
    assert _by_name(sampled, "tokens") == held  # measured after dedup, the same documents
    q = {name: (n / total) ** alpha for name, n in held.items()}
    c = {name: once[1]["mixture"]["sources"][i]["output_tokens"] / held[name]
         for i, name in enumerate(held)}
    expected = {name: q[name] * c[name] / sum(q[n] * c[n] for n in q) for name in q}
    share = _by_name(sampled, "share")
    for name in q:
        assert share[name] == pytest.approx(expected[name], rel=0.03), name
    weights = _by_name(sampled, "weight")
    assert sum(weights[n] * held[n] for n in held) == pytest.approx(budget)
    assert weights["articles"] == pytest.approx(3)


def test_a_document_in_two_sources_is_kept_in_the_first(sources, once):
    _, manifest = once
    assert manifest["mixture"]["duplicates_across_sources"] == [
        {"kept": "short", "dropped": "tiny", "documents": PLANTED}]
    distinct = {normalised_text([line]) for line in sources["tiny"]}
    assert _by_name(manifest, "documents")["tiny"] == len(distinct) - PLANTED
    assert _by_name(manifest, "documents")["short"] == len(
        {normalised_text(d) for d in sources["short"]})


def test_every_instance_names_its_source(once):
    out, manifest = once
    counters = manifest["counters"]  # every source's documents, its JSONL one's too
    assert counters["documents"] == (counters["tokenized_documents"] + counters["empty_documents"]
                                      + counters["duplicate_documents"])
    assert manifest["features"]["source"] == "source"
    counts = collections.Counter(i.source for i in read_instances(read_manifest(out)))
    assert dict(counts) == {i: s["instances"]
                            for i, s in enumerate(manifest["mixture"]["sources"])}


def test_by_source_folders_hold_one_copy_of_each_document(sources, once):
    out, manifest = _run(sources, "by-source", "--mixture_layout=by_source", weights=WEIGHTS)
    assert _by_name(manifest, "weight") == WEIGHTS  # planned, for the trainer
    assert _by_name(manifest, "copies") == _by_name(manifest, "documents")
    # one copy each: the same instances as copy 0 of the weight-1 mixed run
    mixed = collections.Counter((i.source, tuple(i.input_ids.tolist()))
                                for i in read_instances(read_manifest(once[0])))
    for index, name in enumerate(WEIGHTS):
        folder = sorted((sources["root"] / "out-by-source" / name).iterdir())
        assert folder and all(p.suffix == ".tfrecord" for p in folder)
        assert _by_name(manifest, "instances")[name] == _by_name(once[1], "instances")[name]
    by_source = collections.Counter((i.source, tuple(i.input_ids.tolist()))
                                    for i in read_instances(read_manifest(out)))
    assert by_source == mixed


@pytest.mark.slow
def test_the_bytes_do_not_depend_on_the_runner_or_the_shuffle(sources):
    runs = [_run(sources, name, *flags, weights=WEIGHTS)[1] for name, flags in (
        ("in-memory", ["--direct_running_mode=in_memory"]),
        ("two-workers", ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]),
        ("runner-shuffle", ["--shuffle=runner"]))]
    digests = [[s["sha256"] for s in manifest["shards"]] for manifest in runs]
    assert digests[0] == digests[1] == digests[2]


def test_a_yaml_mixture_reads_as_the_json_one(sources, once, tmp_path):
    data = json.loads((sources["root"] / "once.json").read_text())
    path = tmp_path / "mixture.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    manifest = run([f"--mixture={path}", f"--output_dir={tmp_path / 'out'}",
                    f"--vocab_file={UNCASED_VOCAB}", *FLAGS])
    assert [s["sha256"] for s in manifest["shards"]] == [s["sha256"] for s in once[1]["shards"]]


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(blend=1), "unknown key 'blend'"),
    (lambda m: m["sources"][0].update(epochs=2), "unknown key 'epochs'"),
    (lambda m: m["sources"][1].update(input_file="/nowhere/*.txt"),
     "source 'short': --input_file pattern"),
    (lambda m: m["sources"][1].update(name="articles"), "two sources have this name"),
    (lambda m: m["sources"][1].update(name="train"),  # by source, its folder would be training's
     "'train' names a split's folder; give the source another name"),
    (lambda m: m["sources"][2].update(weight=-1), "weight must be at least 0"),
    (lambda m: m.update(alpha=0.3), "give weights or alpha, not both"),
])
def test_a_bad_mixture_is_one_line_before_any_work(sources, tmp_path, capsys, change, message):
    data = json.loads(pathlib.Path(_mixture(sources, tmp_path / "good.json", weights=WEIGHTS))
                      .read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        main([f"--mixture={path}", f"--output_dir={tmp_path / 'out'}",
              f"--vocab_file={UNCASED_VOCAB}"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and message in error, error
    assert not (tmp_path / "out").exists()


def test_a_mixture_with_input_file_is_one_line(sources, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([f"--mixture={_mixture(sources, tmp_path / 'm.json')}",
              f"--input_file={DATA / 'sample_text.txt'}", f"--output_dir={tmp_path / 'out'}",
              f"--vocab_file={UNCASED_VOCAB}"])
    error = capsys.readouterr().err.strip()
    assert "drop --input_file" in error and "\n" not in error


def test_interleave_datasets_over_by_source_parquet_gives_the_mixed_shares(sources, once):
    """docs/mixtures.md's recipe: each source's folder, sampled in proportion
    to its planned weight times its instances, mixes as the mixed layout."""
    datasets = pytest.importorskip("datasets")
    out, manifest = _run(sources, "by-source-parquet", "--mixture_layout=by_source",
                         "--output_format=parquet", weights=WEIGHTS)
    listed = manifest["mixture"]["sources"]
    parts = [datasets.load_dataset("parquet", data_files=f"{out}/{s['name']}/*.parquet")["train"]
             for s in listed]
    assert [len(part) for part in parts] == [s["instances"] for s in listed]
    mass = [s["weight"] * s["instances"] for s in listed]
    mixed = datasets.interleave_datasets(parts, probabilities=[m / sum(mass) for m in mass],
                                         seed=0, stopping_strategy="all_exhausted")
    drawn = collections.Counter(mixed["source"])
    for index, m in enumerate(mass):
        assert drawn[index] / len(mixed) == pytest.approx(m / sum(mass), abs=0.03)


_STREAMS = STREAMING_IMPORTS + """
import json, sys

import numpy as np
from streaming import Stream, StreamingDataset
from streaming.base.util import clean_stale_shared_memory

clean_stale_shared_memory()
out, manifest = sys.argv[1], json.load(open(sys.argv[1] + "/manifest.json"))
# docs/mixtures.md: a Stream per source folder, repeated by its planned weight
streams = [Stream(local=f"{out}/{source['name']}", repeat=source["weight"])
           for source in manifest["mixture"]["sources"]]
dataset = StreamingDataset(streams=streams, shuffle=False, batch_size=1)
drawn = list(dataset)  # one epoch
print(json.dumps([[int(s["source"]), int(s["len"])] for s in drawn]))
"""


@pytest.mark.slow
def test_streaming_streams_over_by_source_mds_give_the_mixed_shares(sources, once, weighted):
    """docs/mixtures.md's recipe for MosaicML Streaming: each source's MDS
    folder a Stream, repeated by its planned weight, draws each source's
    instances weight times, and so the mixed layout's shares of tokens."""
    out, manifest = _run(sources, "by-source-mds", "--mixture_layout=by_source",
                         "--output_format=mds", weights=WEIGHTS)
    listed = manifest["mixture"]["sources"]
    drawn = run_client(client_python("mosaicml-streaming", MOSAICML_STREAMING), _STREAMS, out)
    count = collections.Counter(source for source, _ in drawn)
    tokens = collections.Counter()
    for source, length in drawn:
        tokens[source] += length
    for index, source in enumerate(listed):  # a fractional repeat draws its fraction's samples
        assert count[index] == pytest.approx(source["weight"] * source["instances"], abs=1)
    mixed = _by_name(weighted[1], "share")
    for index, source in enumerate(listed):
        assert tokens[index] / sum(tokens.values()) == pytest.approx(mixed[source["name"]],
                                                                      rel=0.03)


def test_held_out_splits_of_a_mixture_name_each_instance_source(sources, tmp_path):
    out = tmp_path / "out"
    manifest = run([f"--mixture={_mixture(sources, tmp_path / 'm.json', weights=WEIGHTS)}",
                    f"--output_dir={out}", f"--vocab_file={UNCASED_VOCAB}", *FLAGS,
                    "--validation_fraction=0.1"])
    counts = collections.Counter(
        i.source for i in read_instances(read_manifest(str(out), split="validation")))
    assert set(counts) == {0, 1, 2}  # each source has its share of validation
    assert sum(counts.values()) == manifest["splits"]["validation"]["instances"]


def test_a_refresh_reports_what_changed_per_source(sources, tmp_path):
    monday = datetime.datetime(2026, 1, 5, 3, 0, tzinfo=datetime.timezone.utc)
    tiny = tmp_path / "tiny.jsonl"
    tiny.write_text((sources["root"] / "tiny" / "lines.jsonl").read_text(encoding="utf-8"),
                    encoding="utf-8")
    mixture = tmp_path / "mixture.yaml"
    mixture.write_text(yaml.safe_dump({"sources": [
        {"name": "short", "input_file": str(sources["root"] / "short" / "treebank.txt")},
        {"name": "tiny", "input_file": str(tiny), "input_format": "jsonl",
         "text_field": "body", "weight": 2}]}), encoding="utf-8")
    flags = [f"--mixture={mixture}", f"--output_root={tmp_path / 'root'}",
             f"--vocab_file={UNCASED_VOCAB}", *FLAGS]
    first = refresh(flags, now=monday)
    with open(tiny, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"body": "A new line of the tiny source arrives."}) + "\n")
    second = refresh(flags, now=monday + datetime.timedelta(days=7))
    assert first["status"] == second["status"] == "published"
    changes = json.loads(pathlib.Path(second["manifest"]).read_text())["changes"]["sources"]
    assert changes["tiny"]["documents"] == {"previous": changes["tiny"]["documents"]["previous"],
                                            "current": changes["tiny"]["documents"]["previous"]
                                            + 1}
    assert changes["short"]["documents"]["previous"] == changes["short"]["documents"]["current"]


def test_inspect_prints_the_mixture_as_a_table(once):
    out, manifest = once
    text = report(out, num_instances=0, max_records=10)
    assert "mixture (mixed):" in text
    for source in manifest["mixture"]["sources"]:
        row = next(line for line in text.splitlines()
                   if line.strip().startswith(source["name"] + " "))
        assert f"{source['instances']:,}" in row and f"{source['documents']:,}" in row
    assert "20 document(s) of tiny kept in short" in text


def test_a_copied_by_source_dataset_loads_from_its_new_place(sources, tmp_path):
    out, manifest = _run(sources, "by-source-copied", "--mixture_layout=by_source",
                         weights=WEIGHTS)
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    shutil.rmtree(out)
    instances = list(read_instances(read_manifest(str(moved))))
    assert len(instances) == manifest["total_instances"]
    assert {pathlib.Path(shard.path).parent.parent for shard in read_manifest(str(moved)).shards
            } == {moved}


def test_a_by_source_dataset_with_a_held_out_split_loads_from_its_new_place(sources, tmp_path):
    """Training's sources in train/<source>/, the validation split in validation/
    (issue 53: by_source with a split was refused): the loaders read each
    split, copied elsewhere too, and every source has its share of validation."""
    out, manifest = _run(sources, "by-source-split", "--mixture_layout=by_source",
                         "--validation_fraction=0.1", weights=WEIGHTS)
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    shutil.rmtree(out)
    train = read_manifest(str(moved))
    assert {pathlib.Path(shard.path).parent.relative_to(moved).as_posix()
            for shard in train.shards} == {f"train/{name}" for name in WEIGHTS}
    assert len(list(read_instances(train))) == manifest["total_instances"]
    validation = read_manifest(str(moved), split="validation")
    counts = collections.Counter(i.source for i in read_instances(validation))
    assert set(counts) == {0, 1, 2}
    assert sum(counts.values()) == manifest["splits"]["validation"]["instances"]


def test_a_local_source_on_dataflow_is_one_line(sources, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([f"--mixture={_mixture(sources, tmp_path / 'm.json')}",
              "--output_dir=gs://bucket/out", "--vocab_file=gs://bucket/vocab.txt",
              "--runner=DataflowRunner", "--project=my-project", "--region=us-central1",
              "--temp_location=gs://bucket/tmp", "--setup_file=./setup.py"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip()
    assert "source 'articles'" in error and "must be a gs:// path on Dataflow" in error
    assert "\n" not in error
