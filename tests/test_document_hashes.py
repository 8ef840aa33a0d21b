"""Document hashes (transforms/hashes/document_hashes.py): the hash of a document's text
as read, the same in every input format; hash files range-partitioned and
sorted; what changed between two versions counted as multisets, against a
Counter over all hashes, across versions with different numbers of files."""

from __future__ import annotations

import bz2
import collections
import dataclasses
import hashlib
import pathlib
import random

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing import test_pipeline
from hypothesis import given, strategies as st
from test_read_tables import DUMP, dump_articles, ewt_documents, write_jsonl, write_parquet

from bert_pretraining_data.transforms.hashes.beam import WriteDocumentHashes
from bert_pretraining_data.transforms.hashes.document_hashes import (MAX_HASH_FILES,
                                                                     DocumentChanges, count_changes,
                                                                     decode, document_hash, encode,
                                                                     file_of, files_covering,
                                                                     first_bytes, hash_files_for)
from bert_pretraining_data.transforms.read.beam import ReadDocuments, ReadDump, ReadTables
from bert_pretraining_data.transforms.read.documents import DOCUMENTS
from conftest import DATA

hashes_ = st.lists(st.integers(0, 2**64 - 1), max_size=60)


def test_the_hash_is_of_the_lines_as_read_joined_by_newlines():
    lines = ["Zürich is a city.", "它很大。"]
    digest = hashlib.sha256("Zürich is a city.\n它很大。".encode("utf-8")).digest()
    assert document_hash(lines) == int.from_bytes(digest[:8], "big")
    assert document_hash(lines) != document_hash(lines[::-1])
    assert document_hash(["a b"]) != document_hash(["a", "b"])
    # A lone surrogate (a JSON escape) is hashed, not an error.
    assert document_hash(["\ud800"]) != document_hash(["\ud801"])


def test_hash_files_are_sized_from_the_input():
    assert hash_files_for(0) == hash_files_for(1000) == 1
    assert hash_files_for(16 * 10**9) == 60  # 16 GB
    assert hash_files_for(10**13) == MAX_HASH_FILES


@given(st.integers(1, MAX_HASH_FILES), st.integers(1, MAX_HASH_FILES))
def test_files_partition_the_first_byte_into_ranges(num_files, other):
    ranges = [first_bytes(i, num_files) for i in range(num_files)]
    assert [b for r in ranges for b in r] == list(range(256))  # contiguous, in order
    every_byte = np.arange(256, dtype=np.uint64) << np.uint64(56)
    assert file_of(every_byte, num_files).tolist() == [
        i for i, r in enumerate(ranges) for _ in r]
    for i, covered in enumerate(ranges):
        holders = file_of(np.array([b << 56 for b in covered], dtype=np.uint64), other)
        assert files_covering(covered, other) == sorted(set(holders.tolist()))


@given(hashes_)
def test_hash_files_hold_the_hashes_sorted(hashes):
    array = np.array(hashes, dtype=np.uint64)
    data = encode(array)
    assert len(data) == 8 * len(hashes)
    assert decode(data).tolist() == sorted(hashes)
    assert data == b"".join(h.to_bytes(8, "big") for h in sorted(hashes))
    with pytest.raises(ValueError, match="not a whole number"):
        decode(data + b"x")


@given(hashes_, hashes_, st.randoms())
def test_changes_are_counted_as_multisets(now, before, rng):
    pool = before[:rng.randint(0, len(before))]  # some of the old documents stay
    now = now + pool
    rng.shuffle(now)
    expected_unchanged = sum((collections.Counter(now) & collections.Counter(before)).values())
    changes = count_changes(np.array(now, dtype=np.uint64), np.array(before, dtype=np.uint64))
    assert changes == DocumentChanges(added=len(now) - expected_unchanged,
                                      removed=len(before) - expected_unchanged,
                                      unchanged=expected_unchanged)


def test_a_text_present_twice_before_and_three_times_now():
    changes = count_changes(np.array([7, 7, 7, 9], dtype=np.uint64),
                            np.array([7, 7, 8], dtype=np.uint64))
    assert changes == DocumentChanges(added=2, removed=1, unchanged=2)


def _write_hashes(read: beam.PTransform, directory: pathlib.Path, num_files: int,
                  previous: list[str] | None = None) -> tuple[list[str], list[dict]]:
    """Runs `read` and the hash stage; returns the files and their descriptions."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [str(directory / f"hashes-{i}") for i in range(num_files)]
    with test_pipeline.TestPipeline() as p:
        read_output = p | "Read" >> read
        documents = (read_output if isinstance(read_output, beam.PCollection)
                     else read_output[DOCUMENTS])
        _ = (documents
             | WriteDocumentHashes(paths=paths, previous=previous)
             | beam.combiners.ToList()
             | beam.Map(_save_json, directory / "written.json"))
    return paths, _load_json(directory / "written.json")


def _save_json(items, path):
    import json

    path.write_text(json.dumps(sorted(items, key=lambda item: item["file"])))


def _load_json(path):
    import json

    return json.loads(path.read_text())


def _hashes(paths: list[str]) -> list[int]:
    return decode(b"".join(pathlib.Path(p).read_bytes() for p in paths)).tolist()


def _sum(written: list[dict]) -> dict[str, int]:
    return {name: sum(w[name] for w in written)
            for name in ("documents", "previous_documents", "added", "removed", "unchanged")}


def test_hash_files_in_order_are_every_document_sorted_and_every_file_is_written(tmp_path):
    documents = [(f"k{i}", [f"document {i % 40}", "second line"]) for i in range(100)]
    paths, written = _write_hashes(beam.Create(documents), tmp_path / "v", num_files=7)
    assert _hashes(paths) == sorted(document_hash(lines) for _, lines in documents)
    assert [w["file"] for w in written] == list(range(7))
    for path, w in zip(paths, written):
        data = pathlib.Path(path).read_bytes()
        assert (w["documents"], w["bytes"], w["sha256"]) == (
            len(data) // 8, len(data), hashlib.sha256(data).hexdigest())
    empty, written = _write_hashes(beam.Create([]), tmp_path / "empty", num_files=3)
    assert [pathlib.Path(p).read_bytes() for p in empty] == [b""] * 3
    assert [w["documents"] for w in written] == [0, 0, 0]


@pytest.mark.parametrize("before_files, after_files", [(1, 1), (3, 5), (8, 2)])
def test_changes_between_versions_with_any_numbers_of_files(tmp_path, before_files,
                                                           after_files):
    rng = random.Random(before_files * 10 + after_files)
    texts = [f"text {i}" for i in range(300)]
    before = [rng.choice(texts) for _ in range(400)]
    after = before[50:] + [rng.choice(texts) for _ in range(80)]
    old, _ = _write_hashes(beam.Create([("k", [t]) for t in before]), tmp_path / "old",
                           before_files)
    _, written = _write_hashes(beam.Create([("k", [t]) for t in after]), tmp_path / "new",
                               after_files, previous=old)
    oracle = count_changes(np.array([document_hash([t]) for t in after], dtype=np.uint64),
                           np.array([document_hash([t]) for t in before], dtype=np.uint64))
    unchanged = sum((collections.Counter(after) & collections.Counter(before)).values())
    assert oracle.unchanged == unchanged
    assert _sum(written) == {"documents": len(after), "previous_documents": len(before),
                             "added": oracle.added, "removed": oracle.removed,
                             "unchanged": unchanged}


def test_hash_files_do_not_depend_on_input_splits(tmp_path):
    corpus = str(DATA / "wiki_small.txt")
    whole, _ = _write_hashes(ReadDocuments(patterns=[corpus]), tmp_path / "whole", 4)
    split, _ = _write_hashes(ReadDocuments(patterns=[corpus], split_bytes=2000),
                             tmp_path / "split", 4)
    assert [pathlib.Path(p).read_bytes() for p in whole] == [
        pathlib.Path(p).read_bytes() for p in split]
    assert len(_hashes(whole)) == 8


# --- every input format -----------------------------------------------------------


def _edited(texts: list[str]) -> tuple[list[str], list[str], DocumentChanges]:
    """Two versions of a corpus: 5 documents dropped, 5 new, one edited."""
    before = texts[:40]
    after = texts[5:45]
    after[20] = after[20].replace(" the ", " a ", 1)
    assert after[20] != texts[25]
    return before, after, DocumentChanges(added=6, removed=6, unchanged=34)


def _text_corpus(path: pathlib.Path, texts: list[str]) -> pathlib.Path:
    path.write_text("\n\n".join(texts) + "\n", encoding="utf-8")
    return path


def _reader(kind: str, path: pathlib.Path) -> beam.PTransform:
    if kind == "text":
        return ReadDocuments(patterns=[str(path)])
    if kind == "wikipedia":
        return ReadDump(patterns=[str(path)])
    return ReadTables(patterns=[str(path)], input_format=kind, text_field="text")


def _corpus(kind: str, path: pathlib.Path, texts: list[str]) -> pathlib.Path:
    if kind == "text":  # EWT: a paragraph per line, a blank line between documents
        return _text_corpus(path.with_suffix(".txt"), texts)
    if kind == "jsonl":
        return write_jsonl(path.with_suffix(".jsonl"), [{"text": t} for t in texts])
    return write_parquet(path.with_suffix(".parquet"), texts)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["text", "jsonl", "parquet"])
def test_every_record_format_gives_the_hashes_of_the_text_and_its_changes(tmp_path, kind):
    texts = ewt_documents()
    before, after, expected = _edited(texts)
    old, _ = _write_hashes(_reader(kind, _corpus(kind, tmp_path / "before", before)),
                           tmp_path / "old", 2)
    new, written = _write_hashes(_reader(kind, _corpus(kind, tmp_path / "after", after)),
                                 tmp_path / "new", 3, previous=old)
    # The hash of each document's text: what JSONL's text gives, in every format.
    assert _hashes(old) == sorted(document_hash([line.strip() for line in t.splitlines()
                                                 if line.strip()]) for t in before)
    assert _sum(written) == {"documents": 40, "previous_documents": 40,
                             **dataclasses.asdict(expected)}
    assert len(_hashes(new)) == 40


def _page(xml: str, title: str) -> tuple[int, int]:
    """Where the page of this title starts and ends in a dump's XML."""
    start = xml.rindex("<page>", 0, xml.index(f"<title>{title}</title>"))
    return start, xml.index("</page>", start) + len("</page>")


def _dump_edited(xml: str) -> str:
    """The dump without the Albedo article and with Achilles edited."""
    start, end = _page(xml, "Albedo")
    xml = xml[:start] + xml[end:]
    start, end = _page(xml, "Achilles")
    return xml[:start] + xml[start:end].replace("Greek mythology", "Greek myth", 1) + xml[end:]


@pytest.mark.slow
def test_a_wikipedia_dump_gives_the_hashes_of_its_articles_and_their_changes(tmp_path):
    xml = bz2.decompress(DUMP.read_bytes()).decode("utf-8")
    (tmp_path / "after.xml").write_text(_dump_edited(xml), encoding="utf-8")
    old, _ = _write_hashes(ReadDump(patterns=[str(DUMP)]), tmp_path / "old", 1)
    # The articles' text as JSONL gives the dump's hashes.
    jsonl = write_jsonl(tmp_path / "articles.jsonl", [{"text": t} for t in dump_articles()])
    as_jsonl, _ = _write_hashes(_reader("jsonl", jsonl), tmp_path / "as-jsonl", 1)
    assert _hashes(old) == _hashes(as_jsonl) and len(_hashes(old)) == 12
    _, written = _write_hashes(ReadDump(patterns=[str(tmp_path / "after.xml")]),
                               tmp_path / "new", 2, previous=old)
    assert _sum(written) == {"documents": 11, "previous_documents": 12,
                             "added": 1, "removed": 2, "unchanged": 10}
