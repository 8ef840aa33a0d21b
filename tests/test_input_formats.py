"""Input formats recognised from the files: a run reads a dump, JSONL or
Parquet as what it is without --input_format (the names decide, the first
bytes must agree), for --input_file and a mixture's sources alike, and a file
that holds another format than the run would read is one line before any work."""

from __future__ import annotations

import bz2
import collections
import json
import pytest

from conftest import DATA, UNCASED_VOCAB
from helpers.records import read_examples
from bert_pretraining_data.pipeline.main import main, run
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.transforms.read.input_formats import format_of_head, format_of_name
from bert_pretraining_data.transforms.read.mixture import parse_mixture
from bert_pretraining_data.transforms.tokenize.sentences import DEFAULT_SPLITTER, SPLITTERS

DUMP = DATA / "enwiki-excerpt-small.xml.bz2"  # real pages of a 2016 enwiki dump: 12 articles
SAMPLE = DATA / "sample_text.txt"


@pytest.mark.parametrize("name, expected", [
    ("dumps/enwiki-20160305-pages-articles1.xml-p000000010p000030302.bz2", "wikipedia"),
    ("dumps/enwiki-*-pages-articles*.xml*.bz2", "wikipedia"),
    ("enwiki-latest-pages-articles.xml.bz2", "wikipedia"), ("dump.xml", "wikipedia"),
    ("gs://b/web/*.jsonl.gz", "jsonl"), ("c4-train.00000-of-01024.json.gz", "jsonl"),
    ("x.ndjson.zst", "jsonl"), ("hf/train-00000-of-00042.parquet", "parquet"),
    ("books/*.txt", "text"), ("books/*.TXT.BZ2", "text"), ("corpus/*", None), ("README", None),
    (".jsonl", None),
])
def test_a_files_name_says_its_format(name, expected):
    assert format_of_name(name) == expected


def test_a_files_first_bytes_say_its_format():
    with bz2.open(DUMP) as handle:
        assert format_of_head(handle.read(65536)) == "wikipedia"
    assert format_of_head(b"PAR1\x15\x04") == "parquet"
    assert format_of_head('\ufeff\n{"text": "Ein Satz."}\n{"te'.encode()) == "jsonl"
    assert format_of_head(b'{"text": "' + b"x" * 70000) == "jsonl"  # a line past the head
    assert format_of_head(SAMPLE.read_bytes()[:65536]) == "text"
    assert format_of_head(b'["a list", "not an object"]\n') == "text"
    assert format_of_head(b"{ braces in prose } are text\n") == "text"
    assert format_of_head(b" \n\n") is None


def _config(*flags: str):
    return parse_args([*flags, "--output_dir=/tmp/out", f"--vocab_file={UNCASED_VOCAB}"])[0]


def test_the_defaults_that_follow_a_format_follow_the_named_one():
    dump = _config(f"--input_file={DUMP}")
    assert (dump.input_format, dump.sentence_splitter) == ("wikipedia", DEFAULT_SPLITTER)
    text = _config("--input_file=a/*.txt,b/*")
    assert (text.input_format, text.sentence_splitter) == ("text", "none")
    given = _config(f"--input_file={DUMP}", "--input_format=wikipedia", "--sentence_splitter=none")
    assert (given.input_format, given.sentence_splitter) == ("wikipedia", "none")
    # Names that disagree decide nothing; the files' first bytes are then checked.
    assert _config("--input_file=a.jsonl,b.parquet").input_format == "text"
    with pytest.raises(Exception, match="--reference_compatible reads the original's text"):
        _config("--input_file=web.jsonl", "--reference_compatible")


def test_a_mixture_source_takes_the_format_its_files_name():
    sources = parse_mixture(json.dumps({"sources": [
        {"name": "wiki", "input_file": "dumps/enwiki-*-pages-articles.xml.bz2"},
        {"name": "web", "input_file": ["web/a.jsonl.gz", "web/b.jsonl.gz"], "text_field": "body"},
        {"name": "books", "input_file": "books/*.txt"},
        {"name": "set", "input_file": "x.jsonl", "input_format": "text"},
    ]}), "m.json", defaults={"input_format": "text", "text_field": "text",
                             "sentence_splitter": "syntok"},
        choices={"sentence_splitter": tuple(SPLITTERS)}, default_splitter=DEFAULT_SPLITTER).sources
    assert [(s.input_format, s.sentence_splitter) for s in sources] == [
        ("wikipedia", DEFAULT_SPLITTER), ("jsonl", DEFAULT_SPLITTER),
        ("text", "syntok"),  # the command line's format: its splitter too
        ("text", "none")]   # a source's own key wins over its files' names


def _refused(capsys, tmp_path, *flags) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*flags, f"--output_dir={tmp_path / 'out'}", f"--vocab_file={UNCASED_VOCAB}"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error, error
    assert not (tmp_path / "out").exists()
    return error


def test_a_file_that_holds_another_format_is_one_line_before_any_work(tmp_path, capsys):
    (tmp_path / "lines.txt").write_text('{"text": "A sentence."}\n', encoding="utf-8")
    (tmp_path / "dump.txt").write_bytes(bz2.decompress(DUMP.read_bytes()))
    (tmp_path / "web.jsonl").write_text('{"text": "A sentence."}\n', encoding="utf-8")
    error = _refused(capsys, tmp_path, f"--input_file={tmp_path / 'lines.txt'}")
    assert error.endswith("lines.txt holds JSON Lines, which the run would read as text: "
                          "pass --input_format=jsonl"), error
    error = _refused(capsys, tmp_path, f"--input_file={tmp_path / 'dump.txt'}")
    assert "dump.txt holds a MediaWiki XML dump" in error and "--input_format=wikipedia" in error
    error = _refused(capsys, tmp_path, f"--input_file={DUMP}", "--input_format=text")
    assert "--input_format=wikipedia" in error, error
    error = _refused(capsys, tmp_path, f"--input_file={tmp_path / 'web.jsonl'},{SAMPLE}")
    assert "web.jsonl holds JSON Lines and" in error and "sample_text.txt text" in error
    assert "a source of a --mixture" in error
    mixture = tmp_path / "m.json"
    mixture.write_text(json.dumps({"sources": [
        {"name": "books", "input_file": str(SAMPLE)},
        {"name": "web", "input_file": str(tmp_path / "lines.txt")}]}), encoding="utf-8")
    error = _refused(capsys, tmp_path, f"--mixture={mixture}")
    assert error.endswith("source 'web': " + str(tmp_path / "lines.txt") + " holds JSON Lines, "
                          'which the run would read as text: set its "input_format": "jsonl"')


@pytest.mark.slow
def test_a_dump_and_a_jsonl_file_in_a_mixture_read_as_what_they_are(tmp_path, uncased_vocab):
    """issue 53: a dump named as a source without input_format was read as
    6,497 'documents' of XML; now its 12 articles' text, no markup."""
    (tmp_path / "web.jsonl").write_text("".join(
        json.dumps({"body": line}) + "\n" for line in
        SAMPLE.read_text(encoding="utf-8").split("\n\n") if line.strip()), encoding="utf-8")
    mixture = tmp_path / "m.json"
    mixture.write_text(json.dumps({"sources": [
        {"name": "wiki", "input_file": str(DUMP)},
        {"name": "web", "input_file": str(tmp_path / "web.jsonl"), "text_field": "body"}]}))
    manifest = run([f"--mixture={mixture}", f"--output_dir={tmp_path / 'out'}",
                    f"--vocab_file={UNCASED_VOCAB}", "--max_seq_length=64",
                    "--max_predictions_per_seq=10"])
    counters = manifest["counters"]
    assert (counters["pages"], counters["articles"]) == (76, 12)
    assert counters["records"] == len([b for b in SAMPLE.read_text(encoding="utf-8")
                                       .split("\n\n") if b.strip()])
    assert counters["documents"] == 12 + counters["records"]
    assert [(s["name"], s["input_format"]) for s in manifest["mixture"]["sources"]] == [
        ("wiki", "wikipedia"), ("web", "jsonl")]
    tokens = collections.Counter(
        uncased_vocab.tokens[i] for record in read_examples(
            [s["path"] for s in manifest["shards"]], 64, 10)
        for i, mask in zip(record["input_ids"], record["input_mask"]) if mask)
    for markup in ("<", ">", "{", "}", "=", "|"):
        assert tokens[markup] < 3, (markup, tokens[markup])
    assert tokens["philosophy"] > 3  # the first article: "Anarchism is a political philosophy"
