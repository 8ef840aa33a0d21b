"""Dirty corpora end to end: every problem is handled and shows in the manifest."""

from __future__ import annotations

import bz2
import gzip
import json
import pathlib

import pytest

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.pipeline.publish import dataset_warnings
from helpers.records import read_examples
from bert_pretraining_data.transforms.read.documents import MAX_SENTENCE_CHARS

SENTENCES = [line for line in (DATA / "wiki_small.txt").read_text(encoding="utf-8")
             .splitlines() if line.strip()]


def corpus(n_docs: int, per_doc: int, *, start: int = 0) -> list[list[str]]:
    """Real sentences grouped into documents."""
    it = iter(SENTENCES[start:])
    return [[next(it) for _ in range(per_doc)] for _ in range(n_docs)]


def text(documents: list[list[str]], *, newline: str = "\n", blank: str = "") -> str:
    return (newline + blank + newline).join(newline.join(d) for d in documents) + newline


def run_on(tmp_path: pathlib.Path, files: dict[str, bytes], **flags) -> tuple[dict, list]:
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    out = tmp_path / "out"
    argv = [f"--input_file={','.join(str(tmp_path / n) for n in files)}",
            f"--output_dir={out}", f"--vocab_file={UNCASED_VOCAB}", "--dupe_factor=1",
            "--max_seq_length=64", "--max_predictions_per_seq=10", "--num_shards=1"]
    manifest = run(argv + [f"--{k}={v}" for k, v in flags.items()])
    records = read_examples([str(p) for p in sorted(out.glob("part-*"))], 64, 10)
    assert len(records) == manifest["total_instances"]
    assert not (out / ".staging").exists()
    return manifest, records


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The reference: 6 documents of 5 sentences, LF endings, empty separators."""
    tmp = tmp_path_factory.mktemp("clean")
    return run_on(tmp, {"c.txt": text(corpus(6, 5)).encode()})[0]["counters"]


def test_invalid_utf8_is_dropped_and_counted(tmp_path, clean):
    docs = corpus(6, 5)
    docs[0][0] = docs[0][0] + " \xff\xfe"  # placeholders for invalid bytes
    data = text(docs).encode("utf-8").replace("\xff\xfe".encode(), b"\xff\xfe\xc3")
    manifest, _ = run_on(tmp_path, {"bad.txt": data})
    counters = manifest["counters"]
    assert counters["undecodable_bytes"] == 3
    assert counters["tokens"] == clean["tokens"]  # nothing else changed


def test_control_characters_and_bom_are_removed_and_counted(tmp_path, clean):
    docs = corpus(6, 5)
    docs[1][2] = docs[1][2].replace(" ", " \x00", 1).replace("e", "e\x07", 1)
    manifest, _ = run_on(tmp_path, {"ctl.txt": b"\xef\xbb\xbf" + text(docs).encode()})
    counters = manifest["counters"]
    assert counters["control_characters"] == 2 and counters["bom_removed"] == 1
    assert counters["tokens"] == clean["tokens"]


@pytest.mark.parametrize("newline, blank", [
    ("\r\n", ""), ("\r", ""), ("\n", "  \t "), ("\n", "\u00a0"), ("\n", "\n\n\n"),
    ("\r\n", " \u3000 "),
], ids=["crlf", "lone-cr", "spaces-tabs", "nbsp", "blank-runs", "crlf-ideographic-space"])
def test_line_endings_and_separators_give_the_same_documents(tmp_path, clean, newline, blank):
    data = text(corpus(6, 5), newline=newline, blank=blank).encode("utf-8")
    counters = run_on(tmp_path, {"c.txt": data})[0]["counters"]
    for name in ("tokenized_documents", "sentences", "tokens"):
        assert counters[name] == clean[name], name
    assert counters["lone_cr_breaks"] == (29 if newline == "\r" else 0)  # all but the first


def test_missing_final_newline_empty_and_blank_files(tmp_path, clean):
    data = text(corpus(6, 5)).encode().rstrip(b"\n")
    files = {"c.txt": data, "empty.txt": b"", "blank.txt": b"\n \n\t\n\r\n"}
    counters = run_on(tmp_path, files)[0]["counters"]
    for name in ("tokenized_documents", "sentences", "tokens"):
        assert counters[name] == clean[name], name


def test_file_end_ends_a_document(tmp_path, clean):
    docs = corpus(6, 5)
    files = {"a.txt": text(docs[:3]).encode().rstrip(b"\n"), "b.txt": text(docs[3:]).encode()}
    counters = run_on(tmp_path, files)[0]["counters"]
    assert counters["tokenized_documents"] == clean["tokenized_documents"] == 6


def test_only_blank_input_publishes_an_empty_dataset_with_a_warning(tmp_path):
    manifest, records = run_on(tmp_path, {"blank.txt": b"\n\n  \n", "e.txt": b""})
    assert records == [] and manifest["total_instances"] == 0
    assert any("holds no text" in w for w in manifest["warnings"])


def test_one_document_corpus_never_labels_its_own_text_random(tmp_path):
    # short_seq_prob=0: a short target (drawn once per document copy) could
    # make every chunk a lone sentence, all of them dropped, for some paths.
    manifest, records = run_on(tmp_path, {"one.txt": text(corpus(1, 40)).encode()},
                               short_seq_prob=0)
    assert records and all(r["next_sentence_labels"] == [0] for r in records)
    assert manifest["counters"]["random_next_unavailable"] > 0
    assert any("no other document" in w for w in manifest["warnings"])


def test_one_sentence_documents_warn(tmp_path):
    manifest, records = run_on(tmp_path, {"lines.txt": text(corpus(30, 1)).encode()})
    assert records and all(r["next_sentence_labels"] == [1] for r in records)
    assert any("single sentence" in w for w in manifest["warnings"])


@pytest.mark.slow
@pytest.mark.parametrize("spaced", [True, False], ids=["with-spaces", "no-spaces"])
def test_a_line_of_tens_of_megabytes_is_cut_into_sentences(tmp_path, spaced):
    word = "lobster " if spaced else "lobster"
    huge = (word * (20_000_000 // len(word))).strip()
    data = text(corpus(3, 5)).encode() + b"\n" + huge.encode() + b"\n"
    manifest, records = run_on(tmp_path, {"huge.txt": data})
    counters = manifest["counters"]
    assert counters["long_lines_cut"] == 1
    assert counters["sentences"] >= 15 + len(huge) // MAX_SENTENCE_CHARS
    assert all(sum(r["input_mask"]) <= 64 for r in records)


@pytest.mark.slow
def test_a_document_of_two_hundred_thousand_sentences(tmp_path):
    lines = "\n".join(f"sentence number {i} of the long one ." for i in range(200_000))
    manifest, records = run_on(tmp_path, {"long.txt": (lines + "\n\n" + text(corpus(2, 5)))
                                          .encode()})
    assert manifest["counters"]["sentences"] == 200_010
    assert len(records) > 200_000 * 8 // 61  # ~8 tokens per sentence, 61 per instance


@pytest.mark.parametrize("damage", ["truncated-gz", "corrupt-gz", "not-gz", "truncated-bz2"])
def test_damaged_compressed_file_is_named_and_the_rest_is_read(tmp_path, clean, damage):
    plain = text(corpus(6, 5)).encode()
    other = text(corpus(4, 5, start=200)).encode()
    if damage == "truncated-gz":
        name, data = "d.txt.gz", gzip.compress(other)[:-40]
    elif damage == "corrupt-gz":
        packed = bytearray(gzip.compress(other))
        packed[len(packed) // 2] ^= 0xFF
        name, data = "d.txt.gz", bytes(packed)
    elif damage == "not-gz":
        name, data = "d.txt.gz", other
    else:
        name, data = "d.txt.bz2", bz2.compress(other)[:-20]
    manifest, records = run_on(tmp_path, {"c.txt": plain, name: data})
    assert manifest["counters"]["unreadable_files"] == 1
    [problem] = manifest["input_problems"]
    assert problem["path"].endswith(name) and "remove it from --input_file" in problem["message"]
    assert any(name in w for w in manifest["warnings"])
    assert manifest["counters"]["tokenized_documents"] >= clean["tokenized_documents"]


def test_warnings_are_printed_by_the_cli(tmp_path, capsys):
    from bert_pretraining_data.pipeline.main import main

    (tmp_path / "lines.txt").write_text(text(corpus(5, 1)))
    main([f"--input_file={tmp_path / 'lines.txt'}", f"--output_dir={tmp_path / 'o'}",
          f"--vocab_file={UNCASED_VOCAB}", "--dupe_factor=1"])
    err = capsys.readouterr().err
    assert "create-pretraining-data: warning: every document has a single sentence" in err
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["warnings"]


def test_warnings_name_each_problem_file():
    problems = [{"path": "gs://b/x.gz", "message": "EOFError: ..."}]
    assert dataset_warnings({"tokenized_documents": 2, "sentences": 9}, problems) == [
        "gs://b/x.gz: EOFError: ..."]
