"""Dedup end to end: the CLI on a corpus with planted copies, against runs
without dedup on the corpus without them (the oracle: the same documents
under the same keys must give the same bytes), across runners, worker
counts, splits and shuffle paths, for text, JSONL and gs:// input."""

from __future__ import annotations

import hashlib
import json
import pathlib

import pytest

from conftest import DATA, UNCASED_VOCAB
from helpers.gcs_emulator import gcs  # noqa: F401  (fixture)
from bert_pretraining_data.pipeline.main import run

FLAGS = ["--dupe_factor=2", "--num_shards=3", "--max_seq_length=64",
         "--max_predictions_per_seq=10", "--progress=none"]
MULTI = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def _documents(*names: str) -> list[list[str]]:
    text = "\n".join((DATA / name).read_text(encoding="utf-8") for name in names)
    return [block.strip().split("\n") for block in text.split("\n\n") if block.strip()]


def _write(path: pathlib.Path, documents: list[list[str]]) -> str:
    path.write_text("\n\n".join("\n".join(lines) for lines in documents) + "\n", encoding="utf-8")
    return str(path)


def _near_copy(lines: list[str]) -> list[str]:
    """One word of a long document replaced: Jaccard of 5-grams above 0.9."""
    words = " ".join(lines).split(" ")
    words[len(words) // 2] = "zeppelin"
    return [" ".join(words[i:i + 20]) for i in range(0, len(words), 20)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, str]:
    """a_originals.txt: 11 documents; b_copies.txt: 3 exact and 2 whitespace/case
    copies of them; c_near.txt: 2 near copies (one word of ~300-400 changed).
    Keys sort by file, so the originals are the copies kept."""
    root = tmp_path_factory.mktemp("corpus")
    originals = _documents("sample_text.txt", "wiki_small.txt")
    copies = [originals[0], originals[3], originals[3],
              [line.upper() for line in originals[1]],
              ["  ".join(" ".join(originals[2]).split(" "))]]
    near = [_near_copy(originals[1]), _near_copy(originals[2])]
    return {"originals": _write(root / "a_originals.txt", originals),
            "copies": _write(root / "b_copies.txt", copies),
            "near": _write(root / "c_near.txt", near)}


def _run(inputs: list[str], out: pathlib.Path | str, *extra: str) -> dict:
    return run([f"--input_file={','.join(inputs)}", f"--output_dir={out}",
                f"--vocab_file={UNCASED_VOCAB}", *FLAGS, *extra])


def _shards(directory: pathlib.Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.glob("part-*"))}


@pytest.fixture(scope="module")
def without_copies(corpus, tmp_path_factory) -> dict[str, pathlib.Path]:
    """The oracles: --dedup=none on the corpus without the copies each mode removes."""
    root = tmp_path_factory.mktemp("oracle")
    _run([corpus["originals"], corpus["near"]], root / "exact", "--dedup=none")
    _run([corpus["originals"]], root / "near", "--dedup=none")
    return {"exact": root / "exact", "near": root / "near"}


EXPECTED = {  # mode: (duplicate_documents, near_duplicate_documents, clusters, largest)
    "exact": (5, 0, 4, 3),
    "near": (5, 2, 4, 3),
}


@pytest.mark.slow
@pytest.mark.parametrize("mode, extra", [
    ("exact", []),
    ("exact", [*MULTI, "--input_split_bytes=997", "--shuffle=runner"]),
    ("near", ["--input_split_bytes=997"]),
    ("near", [*MULTI, "--shuffle=runner"]),
], ids=["exact", "exact-2workers-splits-runner", "near-splits", "near-2workers-runner"])
def test_dedup_output_equals_the_corpus_without_its_copies(corpus, without_copies, tmp_path,
                                                           mode, extra):
    inputs = [corpus["originals"], corpus["copies"], corpus["near"]]
    manifest = _run(inputs, tmp_path / "out", f"--dedup={mode}", *extra)
    assert _shards(tmp_path / "out") == _shards(without_copies[mode])
    assert len(_shards(tmp_path / "out")) == 3
    dedup = manifest["dedup"]
    assert (dedup["duplicate_documents"], dedup["near_duplicate_documents"],
            dedup["duplicate_clusters"], dedup["largest_duplicate_cluster"]) == EXPECTED[mode]
    for name in ("duplicate_documents", "near_duplicate_documents", "duplicate_clusters",
                 "largest_duplicate_cluster"):
        assert manifest["counters"][name] == dedup[name], name
    assert manifest["counters"]["documents"] == 18
    assert manifest["counters"]["tokenized_documents"] == 18 - sum(EXPECTED[mode][:2])
    stored = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert stored["dedup"] == dedup and stored["flags"]["dedup"] == mode


@pytest.mark.slow
def test_jsonl_identical_records_are_kept_once(tmp_path):
    """A JSONL document's key is a hash of its text: identical records share
    a key, and without dedup gave identical instances. (Of copies that differ
    in case or spacing, the one with the smaller hash is kept.)"""
    texts = ["\n".join(lines) for lines in _documents("sample_text.txt")]
    copies = [texts[1], texts[1], texts[0]]
    unique, repeated = tmp_path / "unique.jsonl", tmp_path / "repeated.jsonl"
    unique.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    repeated.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts + copies))
    oracle = _run([str(unique)], tmp_path / "unique", "--input_format=jsonl", "--dedup=none")
    deduped = _run([str(repeated)], tmp_path / "repeated", "--input_format=jsonl")
    assert _shards(tmp_path / "repeated") == _shards(tmp_path / "unique")
    assert deduped["dedup"]["duplicate_documents"] == 3
    assert deduped["total_instances"] == oracle["total_instances"] > 0


@pytest.mark.slow
def test_gs_input_and_output_give_the_local_bytes(gcs, corpus, without_copies):  # noqa: F811
    inputs = [gcs.upload(pathlib.Path(corpus[name]), f"dedup/{pathlib.Path(corpus[name]).name}")
              for name in ("originals", "copies", "near")]
    manifest = _run(inputs, gcs.url("dedup-out"), "--dedup=near")
    for name, digest in _shards(without_copies["near"]).items():
        assert hashlib.sha256(gcs.read(f"dedup-out/{name}")).hexdigest() == digest, name
    assert manifest["dedup"]["near_duplicate_documents"] == 2
    assert json.loads(gcs.read("dedup-out/manifest.json"))["dedup"] == manifest["dedup"]
