"""JSONL and Parquet corpora (--input_format, --text_field, --sentence_splitter):
end to end on real text, the same records from either format, bad records
counted, a wrong Parquet schema refused before any work."""

from __future__ import annotations

import hashlib
import json
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.transforms.read.documents import InputError
from conftest import DATA, UNCASED_VOCAB
from helpers.records import read_examples

# Real web text (UD English EWT test): a paragraph per line, a blank line
# between documents.
EWT = DATA / "en_ewt-ud-test.paragraphs.txt"


def ewt_documents() -> list[str]:
    blocks = EWT.read_text(encoding="utf-8").split("\n\n")
    return [block.strip("\n") for block in blocks if block.strip()]


def write_jsonl(path: pathlib.Path, records: list) -> pathlib.Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


def write_parquet(path: pathlib.Path, texts: list[str], field: str = "text") -> pathlib.Path:
    pq.write_table(pa.table({field: texts, "id": list(range(len(texts)))}), path)
    return path


def _run(tmp_path: pathlib.Path, name: str, input_file: pathlib.Path, *flags: str) -> dict:
    return run([f"--input_file={input_file}", f"--vocab_file={UNCASED_VOCAB}",
                f"--output_dir={tmp_path / name}", "--dupe_factor=2", "--num_shards=2",
                "--max_seq_length=64", "--max_predictions_per_seq=10", *flags])


def _shards(manifest: dict) -> dict[str, str]:
    return {pathlib.Path(s["path"]).name: hashlib.sha256(
        pathlib.Path(s["path"]).read_bytes()).hexdigest() for s in manifest["shards"]}


@pytest.fixture(scope="module")
def jsonl_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jsonl")
    texts = ewt_documents()
    corpus = write_jsonl(tmp / "ewt.jsonl", [{"text": t, "id": i} for i, t in enumerate(texts)])
    return tmp, texts, _run(tmp, "out", corpus, "--input_format=jsonl")


@pytest.mark.slow
def test_jsonl_documents_become_records_run_pretraining_reads(jsonl_run):
    tmp, texts, manifest = jsonl_run
    counters = manifest["counters"]
    assert (counters["records"] == counters["documents"] == counters["tokenized_documents"]
            == len(texts) == 316)
    # Paragraphs were split into sentences: more sentences than lines of text.
    lines = sum(len([l for l in t.split("\n") if l.strip()]) for t in texts)
    assert counters["sentences"] > 1.5 * lines
    records = read_examples([s["path"] for s in manifest["shards"]], 64, 10)
    assert len(records) == manifest["total_instances"] > 1000


@pytest.mark.slow
def test_parquet_gives_the_same_records_as_jsonl(jsonl_run):
    tmp, texts, manifest = jsonl_run
    corpus = write_parquet(tmp / "ewt.parquet", texts)
    parquet = _run(tmp, "parquet", corpus, "--input_format=parquet")
    assert _shards(parquet) == _shards(manifest)


@pytest.mark.slow
def test_keys_follow_the_text_not_the_file(jsonl_run):
    """Shuffled records in another file name and directory: the same shards."""
    tmp, texts, manifest = jsonl_run
    other = tmp / "elsewhere"
    other.mkdir()
    corpus = write_jsonl(other / "part-7.jsonl", [{"body": t} for t in reversed(texts)])
    moved = _run(tmp, "moved", corpus, "--input_format=jsonl", "--text_field=body")
    assert _shards(moved) == _shards(manifest)


@pytest.mark.slow
def test_bad_records_are_counted_and_skipped(tmp_path):
    good = ewt_documents()[:20]
    lines = [json.dumps({"text": t}) for t in good] + [
        "{not json", json.dumps(["a", "list"]), json.dumps({"title": "no text"}),
        json.dumps({"text": 42}), json.dumps({"text": "  \n \n"}), ""]
    corpus = tmp_path / "mixed.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = _run(tmp_path, "out", corpus, "--input_format=jsonl")
    counters = manifest["counters"]
    assert any("5 input record(s) held no document" in w for w in manifest["warnings"])
    assert counters["tokenized_documents"] == 20
    assert counters["invalid_json_records"] == 1
    assert counters["records_without_text"] == 3  # a list, no field, a number
    assert counters["records_with_blank_text"] == 1


def test_a_parquet_file_without_the_text_column_is_refused_before_any_work(tmp_path):
    corpus = write_parquet(tmp_path / "docs.parquet", ["Some text."], field="content")
    with pytest.raises(InputError, match="has no column 'text' .*content.*pass --text_field"):
        _run(tmp_path, "out", corpus, "--input_format=parquet")
    assert not (tmp_path / "out").exists()
    numbers = tmp_path / "numbers.parquet"
    pq.write_table(pa.table({"text": [1, 2]}), numbers)
    with pytest.raises(InputError, match="holds int64, not text"):
        _run(tmp_path, "out", numbers, "--input_format=parquet")


def test_a_text_file_given_as_parquet_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError, match="is not a Parquet file.*--input_format"):
        _run(tmp_path, "out", DATA / "sample_text.txt", "--input_format=parquet")


# --- Wikipedia dumps -----------------------------------------------------------------

DUMP = DATA / "enwiki-excerpt-small.xml.bz2"  # real pages of a 2016 enwiki dump


def dump_articles() -> list[str]:
    import bz2

    from bert_pretraining_data.transforms.read.wikipedia import dump_pages, plain_text

    with bz2.open(DUMP) as handle:
        return [plain_text(page.text) for page in dump_pages(handle)
                if page.namespace == "0" and not page.redirect]


def test_articles_become_plain_text_without_markup():
    texts = dump_articles()
    assert len(texts) == 12
    joined = "\n".join(texts)
    for markup in ("{{", "}}", "[[", "]]", "<ref", "{|", "|}", "==", "Category:", "&nbsp;"):
        assert markup not in joined, markup
    assert texts[0].startswith("Anarchism is a political philosophy that advocates "
                               "self-governed societies based on voluntary institutions.")
    # Sections of references and links are gone, the body stays.
    assert "External links" not in joined and "ISBN" not in joined
    assert min(len(t) for t in texts) > 500
    assert texts[2].startswith("Albedo or reflection coefficient")  # "Albedo () or" mended
    # A template that carries text is rendered: {{convert|1300|mi|km}}.
    assert "At 1300 mi, Alabama has one of the longest" in joined
    assert texts[5].startswith("In Greek mythology, Achilles (Akhilleus) was")


def test_markup_inside_a_rendered_template_is_rendered_too():
    """The enwiki excerpt's Anthropology and Algae write Greek and Chinese words
    as a {{linktext}} inside a {{lang}}: the words stay, no brace does."""
    from bert_pretraining_data.transforms.read.wikipedia import plain_text

    text = plain_text("''ánthrōpos'' ({{lang|grc|{{linktext|ἄνθρωπος}}}}, \"[[human]]\"), "
                      "the word {{linktext|藻}}, {{lang|fr|[[Paris|la ville]]}} and "
                      "{{nowrap|{{convert|3|km}} away}}.")
    assert text == ("ánthrōpos (ἄνθρωπος, \"human\"), the word 藻, la ville and 3 km away.")


@pytest.mark.slow
def test_a_dump_gives_the_records_of_its_articles_as_jsonl_and_parquet(tmp_path):
    manifest = _run(tmp_path, "dump", DUMP, "--input_format=wikipedia")
    counters = manifest["counters"]
    assert (counters["pages"], counters["articles"], counters["redirect_pages"],
            counters["non_article_pages"]) == (76, 12, 63, 1)
    assert counters["documents"] == counters["tokenized_documents"] == 12
    records = read_examples([s["path"] for s in manifest["shards"]], 64, 10)
    assert len(records) == manifest["total_instances"] > 1000
    texts = dump_articles()
    jsonl = _run(tmp_path, "jsonl", write_jsonl(tmp_path / "a.jsonl", [{"text": t} for t in texts]),
                 "--input_format=jsonl")
    parquet = _run(tmp_path, "parquet", write_parquet(tmp_path / "a.parquet", texts),
                   "--input_format=parquet")
    assert _shards(manifest) == _shards(jsonl) == _shards(parquet)


@pytest.mark.slow
def test_a_damaged_dump_keeps_the_articles_before_the_damage(tmp_path):
    import bz2

    xml = bz2.decompress(DUMP.read_bytes())
    cut = tmp_path / "cut.xml"
    cut.write_bytes(xml[:len(xml) // 2])  # ends mid-page: the XML breaks off
    manifest = _run(tmp_path, "out", cut, "--input_format=wikipedia")
    assert 0 < manifest["counters"]["articles"] < 12
    [problem] = manifest["input_problems"]
    assert problem["path"].endswith("cut.xml") and "ParseError" in problem["message"]


def write_multistream(directory: pathlib.Path, pages_per_stream: int = 10) -> pathlib.Path:
    """The excerpt as Wikimedia writes a multistream dump: a bz2 stream for the
    head, one per `pages_per_stream` pages, one for the tail, and the index of
    `offset:page_id:title` lines beside it."""
    import bz2
    import re

    xml = bz2.decompress(DUMP.read_bytes()).decode("utf-8")
    head, rest = xml.split("  <page>", 1)
    pages = ["  <page>" + page for page in rest.split("  <page>")]
    pages[-1], tail = pages[-1].split("</mediawiki>")
    dump = directory / "enwiki-test-pages-articles-multistream.xml.bz2"
    data, index = bz2.compress(head.encode()), []
    for start in range(0, len(pages), pages_per_stream):
        group = pages[start:start + pages_per_stream]
        for page in group:
            page_id = re.search(r"<id>(\d+)</id>", page).group(1)
            title = re.search(r"<title>(.*?)</title>", page).group(1)
            index.append(f"{len(data)}:{page_id}:{title}\n")
        data += bz2.compress("".join(group).encode())
    data += bz2.compress(("</mediawiki>" + tail).encode())
    dump.write_bytes(data)
    (directory / "enwiki-test-pages-articles-multistream-index.txt.bz2").write_bytes(
        bz2.compress("".join(index).encode()))
    assert bz2.decompress(data).decode("utf-8") == xml
    return dump


def test_a_multistream_dump_is_read_stream_by_stream(tmp_path):
    from apache_beam.io.filesystems import FileSystems

    from bert_pretraining_data.transforms.read.beam import read_units

    dump = write_multistream(tmp_path)
    [matched] = FileSystems.match([str(dump)])[0].metadata_list
    units = list(read_units(matched))
    assert len(units) == 8 and all(offset > 0 for _, offset in units)  # 76 pages, 10 a stream
    [index] = FileSystems.match([str(tmp_path / "*-index*")])[0].metadata_list
    assert list(read_units(index)) == []  # an index matched by a pattern is no dump


@pytest.mark.slow
def test_multistream_and_single_stream_dumps_give_the_same_records(tmp_path):
    write_multistream(tmp_path)
    split = _run(tmp_path, "split", tmp_path / "*multistream*.bz2", "--input_format=wikipedia")
    whole = _run(tmp_path, "whole", DUMP, "--input_format=wikipedia")
    assert split["counters"]["pages"] == whole["counters"]["pages"] == 76
    assert _shards(split) == _shards(whole)
