"""Benchmark decontamination: the words, the n-gram index, benchmark files,
the audit list's summary, and the Beam stage on real text with planted
benchmark items (disguised by case, spacing, punctuation, Unicode forms and
line breaks) beside a clean corpus."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
import unicodedata

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from conftest import DATA
from bert_pretraining_data.transforms.counters import read_counters
from bert_pretraining_data.transforms.decontaminate.beam import Decontaminate, match_benchmarks
from bert_pretraining_data.transforms.decontaminate.benchmarks import (
    MATCHES, BenchmarkIndex, DecontaminationError, audit_records, benchmark_words, ngram_hashes,
    read_benchmark_items, summary)
from bert_pretraining_data.transforms.dedup.decisions import SUMMARY
from bert_pretraining_data.transforms.hashes.document_hashes import document_hash
from bert_pretraining_data.transforms.read.documents import DOCUMENTS

N = 13


def _blocks(name: str) -> list[list[str]]:
    text = (DATA / name).read_text(encoding="utf-8")
    return [block.strip().split("\n") for block in text.split("\n\n") if block.strip()]


def _clean_documents() -> list[list[str]]:
    """WikiText-2 articles cut into documents of 4 sentences (~2,000 of them)."""
    sentences = [line for block in _blocks("wikitext2_valid.txt") for line in block]
    return [sentences[i:i + 4] for i in range(0, len(sentences), 4)]


def _paragraphs(name: str) -> list[str]:
    """Consecutive sentences of each web-treebank document joined until they
    hold at least N words, each sharing no n-gram with an earlier one:
    benchmark items from text unlike WikiText."""
    items, seen = [], set()
    for block in _blocks(name):
        item: list[str] = []
        for sentence in block:
            item.append(sentence)
            ngrams = set(ngram_hashes(benchmark_words(" ".join(item)), N).tolist())
            if ngrams:
                if not ngrams & seen:
                    items.append(" ".join(item))
                seen |= ngrams
                item = []
    return items


def _full_width(word: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in word)


def _disguise(text: str, rng: random.Random) -> str:
    """The same words: each re-cased or in full-width forms, punctuation
    swapped for other punctuation, words re-spaced and re-punctuated."""
    punctuation = "!?;:—«»\u2026"
    words = []
    for word in text.split():
        word = "".join(rng.choice(punctuation) if unicodedata.category(c)[0] == "P" else c
                       for c in word)
        words.append(rng.choice([str.upper, str.title, str.lower, _full_width, str])(word))
    return "".join(word + rng.choice([" ", "  ", "\t", " , ", " - ", "\u00a0", "...\u3000"])
                   for word in words)


# --- words and n-grams -------------------------------------------------------------

def test_words_are_folded_and_split_at_punctuation_and_whitespace():
    assert benchmark_words("Ｔｈｅ U.S.\u00a0ARMY’s\tﬁnal—“Straße”…") == [
        "the", "u", "s", "army", "s", "final", "strasse"]
    assert benchmark_words(" \n\t ") == [] and benchmark_words("$5 + x") == ["$5", "+", "x"]


def test_ascii_text_takes_the_byte_table_with_the_general_paths_words():
    """Every ASCII character beside letters: the same words as on the path of
    non-ASCII text (the text forced onto it by a last non-ASCII word)."""
    text = " ".join(f"a{chr(c)}B{chr(c)}" for c in range(128))
    assert benchmark_words(text + " é")[:-1] == benchmark_words(text)
    assert len(benchmark_words(text)) > 128


def test_ngram_hashes_one_per_ngram_equal_for_equal_ngrams():
    words = benchmark_words(" ".join(_paragraphs("en_ewt-ud-test.sentences.txt")[:40]))
    hashes = ngram_hashes(words, N)
    assert hashes.dtype == np.uint64 and len(hashes) == len(words) - N + 1
    ngrams = [tuple(words[i:i + N]) for i in range(len(hashes))]
    assert len(set(hashes.tolist())) == len(set(ngrams))  # no collision, no merge
    assert np.array_equal(ngram_hashes(words[5:5 + N], N), hashes[5:6])
    assert len(ngram_hashes(words[:N - 1], N)) == 0


def test_ngram_hashes_are_the_same_in_another_process():
    words = ["a", "benchmark", "item", "of", "a", "few", "words", "only"]
    code = ("from bert_pretraining_data.transforms.decontaminate.benchmarks import "
            f"ngram_hashes; print(ngram_hashes({words!r}, 3).tolist())")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": "12345"})
    assert json.loads(other.stdout) == ngram_hashes(words, 3).tolist()


# --- the index ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def items() -> list[str]:
    return _paragraphs("en_ewt-ud-test.sentences.txt")


@pytest.fixture(scope="module")
def index(items) -> BenchmarkIndex:
    short = ["Thank you very much for your help today", "ok"]  # fewer than N words
    return BenchmarkIndex.build(
        ["a.txt", "b.txt"],
        [(0, line, text) for line, text in enumerate(items, start=1)]
        + [(1, 2 * line, text) for line, text in enumerate(short, start=1)], N)


def test_the_index_counts_items_and_items_too_short(index, items):
    assert index.files == ("a.txt", "b.txt")
    assert index.items == (len(items), 2) and index.items_too_short == (0, 2)
    assert np.all(np.diff(index.hashes.astype(np.float64)) >= 0)
    assert len(np.unique(index.hashes)) == len(index.hashes)
    assert set(index.item_files.tolist()) == {0}


def test_planted_items_are_found_however_disguised(index, items):
    rng = random.Random(7)
    clean = _clean_documents()
    for trial in range(60):
        line = rng.randrange(len(items)) + 1
        host = clean[rng.randrange(len(clean))]
        item = _disguise(items[line - 1], rng)
        words = item.split()
        cut = rng.randrange(1, len(words))
        if trial % 2:  # across a line break
            document = [*host[:2], f"{host[2]} {' '.join(words[:cut])}",
                        f"{' '.join(words[cut:])} {host[3]}"]
        else:
            document = [*host[:2], item, *host[2:]]
        assert (0, line) in index.matches(document), (item, document)


def test_an_item_found_is_the_first_holding_its_ngrams_and_short_items_never_match(index,
                                                                                   items):
    document = ["Thank you very much for your help today and ok", items[3], items[3]]
    assert index.matches(document) == [(0, 4)]
    twice = BenchmarkIndex.build(["a.txt"], [(0, 9, items[0]), (0, 5, items[0])], N)
    assert twice.matches([items[0]]) == [(0, 5)]
    exactly_n = " ".join(benchmark_words(items[0])[:N])
    assert BenchmarkIndex.build(["a.txt"], [(0, 1, exactly_n)], N).matches(
        [f"before {exactly_n} after"]) == [(0, 1)]
    assert BenchmarkIndex.build(["a.txt"], [(0, 1, exactly_n)], N + 1).matches(
        [f"before {exactly_n} after"]) == []


def test_clean_documents_are_untouched(index):
    clean = _clean_documents()
    touched = sum(bool(found) for found in index.batch_matches(clean))
    assert len(clean) > 1500 and touched <= 0.005 * len(clean)


def test_matches_do_not_depend_on_the_batch(index, items):
    rng = random.Random(3)
    documents = _clean_documents()[:300]
    for i in range(0, 300, 7):
        documents[i] = [documents[i][0], _disguise(items[i], rng)]
    one_by_one = [index.matches(document) for document in documents]
    assert sum(bool(found) for found in one_by_one) == len(range(0, 300, 7))
    words = benchmark_words(items[0])[:N + 4]
    halves = [[" ".join(words[:N // 2])], [" ".join(words[N // 2:])]]
    assert index.batch_matches(halves) == [[], []]  # no n-gram spans two documents
    assert index.matches([line for half in halves for line in half]) == [(0, 1)]
    order = list(range(len(documents)))
    rng.shuffle(order)
    for size in (1, 13, 300):
        batches = [order[i:i + size] for i in range(0, len(order), size)]
        for batch in batches:
            found = index.batch_matches([documents[i] for i in batch])
            assert found == [one_by_one[i] for i in batch]


def test_an_empty_index_matches_nothing(items):
    empty = BenchmarkIndex.build(["a.txt"], [(0, 1, "too short")], N)
    assert len(empty.hashes) == 0 and empty.items_too_short == (1,)
    assert empty.batch_matches([[items[0]], []]) == [[], []]


# --- benchmark files ---------------------------------------------------------------

def test_text_items_are_non_blank_lines_numbered_from_one():
    data = "\ufefffirst item\n\n  \nthird line item\r\n".encode("utf-8")
    assert read_benchmark_items("/b/glue.txt", data, "text") == [
        (1, "first item"), (4, "third line item")]


def test_json_lines_items_are_their_field():
    data = b'{"text": "one", "id": 1}\n\n{"text": "two\\nlines"}\n'
    for path in ("/b/squad.jsonl", "/b/squad.JSON", "gs://b/squad.jsonl.gz"):
        assert read_benchmark_items(path, data, "text") == [(1, "one"), (3, "two\nlines")]
    assert read_benchmark_items("/b/squad.txt", data, "text")[0] == (1, '{"text": "one", "id": 1}')


def test_several_fields_read_each_lines_first():
    """--decontaminate_field=sentence,context: a GLUE-style file and a
    SQuAD-style file in one run, each line's first field that holds text
    (issue 53: one field per run, and the error's advice could satisfy
    neither file)."""
    glue = b'{"sentence": "the movie was fine", "label": 1}\n'
    squad = b'{"question": "who?", "context": "a long passage"}\n'
    both = b'{"context": "second", "sentence": "first"}\n'
    assert read_benchmark_items("/b/sst2.jsonl", glue, "sentence,context") == [
        (1, "the movie was fine")]
    assert read_benchmark_items("/b/squad.jsonl", squad, "sentence, context") == [
        (1, "a long passage")]
    assert read_benchmark_items("/b/both.jsonl", both, "sentence,context") == [(1, "first")]
    with pytest.raises(DecontaminationError, match=r"line 1: no text field 'sentence' or "
                       r"'context' \(its fields: question, answer\); pass "):
        read_benchmark_items("/b/qa.jsonl", b'{"question": "q", "answer": "a"}\n',
                             "sentence,context")


@pytest.mark.parametrize("path, data, named", [
    ("/b/empty.txt", b"", "holds no benchmark item"),
    ("/b/blank.jsonl", b"\n \n", "holds no benchmark item"),
    ("/b/latin1.txt", "caf\u00e9 au lait\n".encode("latin-1"), "convert it to UTF-8"),
    ("/b/bad.jsonl", b'{"text": "fine"}\n{"text": \n', "line 2: not JSON"),
    ("/b/field.jsonl", b'{"text": "fine"}\n{"question": "q", "context": "c"}\n',
     "line 2: no text field 'text' (its fields: question, context); pass --decontaminate_field"),
    ("/b/list.jsonl", b'["text"]\n', "line 1: no text field 'text'"),
    ("/b/number.jsonl", b'{"text": 5}\n', "pass --decontaminate_field"),
    ("/b/scalar.jsonl", b'5\n', "(its fields: none: not an object)"),
    ("/b/wide.jsonl", json.dumps({f"f{i}": i for i in range(20)}).encode(),
     "(its fields: f0, f1, f2, f3, f4, f5, f6, f7, ...)"),
])
def test_a_bad_benchmark_file_is_one_line_naming_the_fix(path, data, named):
    with pytest.raises(DecontaminationError) as raised:
        read_benchmark_items(path, data, "text")
    message = str(raised.value)
    assert "\n" not in message and path in message and named in message
    assert any(fix in message for fix in ("give", "convert", "pass"))


def test_patterns_match_sorted_files_or_fail_in_one_line(tmp_path):
    for name in ("b.txt", "a.jsonl", "c.txt"):
        (tmp_path / name).write_text("an item\n")
    assert match_benchmarks(f"{tmp_path}/*.txt, {tmp_path}/a.jsonl,{tmp_path}/b.txt") == [
        str(tmp_path / name) for name in ("a.jsonl", "b.txt", "c.txt")]
    for patterns, named in ((f"{tmp_path}/a.jsonl,{tmp_path}/*.csv", "matches no file; check"),
                            (" , ", "--decontaminate is empty")):
        with pytest.raises(DecontaminationError) as raised:
            match_benchmarks(patterns)
        assert "\n" not in str(raised.value) and named in str(raised.value)


# --- the audit list and its summary ------------------------------------------------

def test_the_summary_counts_a_document_once_however_many_items_it_holds(items):
    both = BenchmarkIndex.build(["a.txt", "b.txt"],
                                [(0, 1, items[0]), (0, 2, items[1]), (1, 7, items[0]),
                                 (1, 8, items[2]), (1, 9, "too short")], N)
    documents = [("d:1", [items[0], items[1]]),  # a.txt:1 (b.txt:7 is the same) and a.txt:2
                 ("d:2", [items[1], items[2]]),  # a.txt:2 and b.txt:8: two files
                 ("d:3", ["clean text"]),
                 ("sha:x", [items[2]]), ("sha:x", [items[2]])]  # identical, one key
    records = [record for key, lines in documents
               for record in audit_records(both, key, lines, both.matches(lines))]
    assert [(record["key"], record["file"], record["line"]) for record in records] == [
        ("d:1", "a.txt", 1), ("d:1", "a.txt", 2), ("d:2", "a.txt", 2), ("d:2", "b.txt", 8),
        ("sha:x", "b.txt", 8), ("sha:x", "b.txt", 8)]
    assert summary(both, records) == {"ngram": N, "documents_removed": 4, "files": {
        "a.txt": {"items": 2, "items_too_short": 0, "items_matched": 2, "documents_removed": 2},
        "b.txt": {"items": 3, "items_too_short": 1, "items_matched": 1, "documents_removed": 3}}}
    assert summary(both, [])["documents_removed"] == 0


# --- the Beam stage ----------------------------------------------------------------

@pytest.fixture(scope="module")
def stage_input(tmp_path_factory, items):
    """Benchmark files (text, gzipped JSON lines with another field) and
    documents: clean WikiText ones and ones with a disguised item planted,
    with the audit records their construction implies."""
    root = tmp_path_factory.mktemp("benchmarks")
    text_items = items[:100]
    json_items = items[100:200]
    text_path, json_path = root / "glue.txt", root / "squad.jsonl.gz"
    text_path.write_text("\n".join(f"{item}\n" for item in text_items) + "ok then\n")
    json_path.write_bytes(gzip.compress("".join(
        json.dumps({"id": i, "passage": item}) + "\n" for i, item in enumerate(json_items))
        .encode()))
    rng = random.Random(11)
    documents, planted = [], []
    for number, lines in enumerate(_clean_documents()[:400]):
        key = f"wiki.txt:{number:012d}"
        if number % 10 == 3:
            in_json = number % 20 == 3
            line = rng.randrange(100) + 1
            source = (json_items if in_json else text_items)[line - 1]
            lines = [lines[0], _disguise(source, rng), *lines[1:]]
            planted.append({"key": key, "lines": lines,
                            "file": str(json_path if in_json else text_path),
                            "line": line if in_json else 2 * line - 1})
        documents.append((key, lines))
    lines = documents[5][1]
    documents[5] = (documents[5][0], [*lines, "OK, then."])  # a short item: no match
    return {"paths": [str(text_path), str(json_path)], "documents": documents,
            "planted": planted}


def test_decontaminate_drops_the_planted_documents_and_audits_them(stage_input):
    planted = stage_input["planted"]
    removed = {record["key"] for record in planted}
    expected_records = [{"document": f"{document_hash(record['lines']):016x}",
                         "key": record["key"], "file": record["file"], "line": record["line"]}
                        for record in planted]
    pipeline = TestPipeline()
    out = (pipeline | beam.Create(stage_input["documents"])
           | Decontaminate(paths=stage_input["paths"], field="passage"))
    assert_that(out[DOCUMENTS], equal_to([document for document in stage_input["documents"]
                                          if document[0] not in removed]), label="kept")
    def in_order(records):
        return sorted(records, key=lambda r: (r["key"], r["file"], r["line"]))
    assert_that(out[MATCHES] | beam.Map(in_order), equal_to([in_order(expected_records)]),
                label="matches")
    text_path, json_path = stage_input["paths"]
    in_json = sum(record["file"] == json_path for record in planted)
    assert_that(out[SUMMARY], equal_to([{"ngram": N, "documents_removed": len(planted), "files": {
        text_path: {"items": 101, "items_too_short": 1,
                    "items_matched": len({r["line"] for r in planted if r["file"] == text_path}),
                    "documents_removed": len(planted) - in_json},
        json_path: {"items": 100, "items_too_short": 0,
                    "items_matched": len({r["line"] for r in planted if r["file"] == json_path}),
                    "documents_removed": in_json}}}]), label="summary")
    result = pipeline.run()
    result.wait_until_finish()
    assert len(planted) == 40 and 0 < in_json < 40
    assert read_counters(result)["decontaminated_documents"] == len(planted)


def test_a_bad_benchmark_file_fails_the_pipeline_in_one_line(tmp_path, stage_input):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n')
    with pytest.raises(DecontaminationError) as raised:
        with TestPipeline() as p:
            _ = (p | beam.Create(stage_input["documents"][:3])
                 | Decontaminate(paths=[str(bad)], field="passage"))
    assert "\n" not in str(raised.value) and "pass --decontaminate_field" in str(raised.value)
