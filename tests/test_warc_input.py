"""--input_format=warc: Common Crawl WET files, written here with FastWARC's own
writer, read end to end: each conversion record is a document keyed by its
URL, the other records are counted, and a file that holds no text or breaks
off is named in the manifest while the run goes on."""

from __future__ import annotations

import gzip
import json

from fastwarc import GzipWriter, WarcRecord, WarcRecordType

from conftest import DATA, UNCASED_VOCAB
from helpers.corpora import write_wet
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.transforms.read.input_formats import format_of_head, format_of_name

BASE = [f"--vocab_file={UNCASED_VOCAB}", "--dupe_factor=1"]


def _paragraphs(count: int) -> list[str]:
    """Real web text: the Web Treebank's paragraphs, a page each."""
    text = (DATA / "en_ewt-ud-test.paragraphs.txt").read_text(encoding="utf-8")
    return [page for page in text.split("\n\n") if len(page.split()) > 40][:count]


def test_a_wet_file_is_read_end_to_end_a_page_per_url(tmp_path):
    pages = _paragraphs(12)
    wet = tmp_path / "CC-MAIN-20261201-00000.warc.wet.gz"
    write_wet(wet, [(f"https://example.org/{n}", page) for n, page in enumerate(pages)]
               + [("https://example.org/blank", "  \n\n"), (None, "a page without its URL")])
    assert format_of_name(str(wet)) == "warc"
    with gzip.open(wet) as handle:
        assert format_of_head(handle.read(1024)) == "warc"
    out = tmp_path / "out"
    manifest = run([*BASE, f"--input_file={wet}", f"--output_dir={out}"])  # the name says warc
    counters = manifest["counters"]
    assert manifest["flags"]["input_format"] == "warc"
    assert (counters["warc_text_records"], counters["warc_other_records"]) == (14, 1)
    assert (counters["warc_records_with_blank_text"], counters["warc_records_without_url"]) == (1, 1)
    assert counters["documents"] == len(pages)
    assert manifest["total_instances"] > 0 and manifest["input_problems"] == []

    # The URL is the key: the same pages in other files, in another order, make
    # the same instances.
    halves = [tmp_path / "b.warc.wet.gz", tmp_path / "a.warc.wet.gz"]
    write_wet(halves[0], [(f"https://example.org/{n}", pages[n]) for n in range(11, 5, -1)])
    write_wet(halves[1], [(f"https://example.org/{n}", pages[n]) for n in range(6)])
    moved = tmp_path / "moved"
    again = run([*BASE, f"--input_file={tmp_path}/[ab].warc.wet.gz", f"--output_dir={moved}"])
    assert again["total_instances"] == manifest["total_instances"]
    assert (sorted(p.read_bytes() for p in moved.glob("part-*"))
            == sorted(p.read_bytes() for p in out.glob("part-*")))

    # The sample of what --languages dropped names each page by its URL.
    german = tmp_path / "de.warc.wet.gz"
    write_wet(german, [("https://example.de/haus", "Das Haus steht am Ende der Straße, "
                         "und im Garten wachsen Äpfel und Birnen.\nWir wohnen seit zehn "
                         "Jahren dort und möchten nicht mehr umziehen.")])
    filtered = tmp_path / "filtered"
    run([*BASE, f"--input_file={wet},{german}", f"--output_dir={filtered}", "--languages=en"])
    [record] = [json.loads(line) for line in (filtered / "quality.jsonl").read_text().splitlines()]
    assert (record["key"], record["rule"], record["language"]) == (
        "https://example.de/haus", "language", "de")


def test_a_wet_file_without_text_or_cut_short_is_named_and_the_run_goes_on(tmp_path):
    good = tmp_path / "good.warc.wet.gz"
    pages = _paragraphs(4)
    write_wet(good, [(f"https://example.org/{n}", page) for n, page in enumerate(pages)])
    responses = tmp_path / "responses.warc.gz"  # a WARC of HTML responses: no text records
    writer = GzipWriter(str(responses))
    record = WarcRecord()
    record.init_headers(WarcRecordType.response)
    record.headers["WARC-Target-URI"] = "https://example.org/html"
    record.set_bytes_content(b"HTTP/1.1 200 OK\r\n\r\n<html></html>")
    record.write(writer)
    writer.close()
    cut = tmp_path / "cut.warc.wet.gz"
    write_wet(cut, [(f"https://example.org/cut/{n}", page) for n, page in enumerate(pages)])
    data = cut.read_bytes()
    cut.write_bytes(data[:len(data) * 2 // 3])
    # headers whose lines end in LF alone (cc_net's test sample is written so)
    bare = tmp_path / "bare.warc.wet"
    bare.write_bytes(gzip.decompress(good.read_bytes()).replace(b"\r\n", b"\n"))
    manifest = run([*BASE, "--input_format=warc", f"--input_file={good},{responses},{cut},{bare}",
                    f"--output_dir={tmp_path / 'out'}"])
    problems = {problem["path"].rsplit("/", 1)[-1]: problem["message"]
                for problem in manifest["input_problems"]}
    assert set(problems) == {"responses.warc.gz", "cut.warc.wet.gz", "bare.warc.wet"}, problems
    assert "no conversion (text) records" in problems["responses.warc.gz"]
    assert "no WARC record FastWARC can read at byte 0" in problems["bare.warc.wet"]
    assert manifest["counters"]["unreadable_files"] == 2
    # the good file's pages and the cut one's read before the break
    assert len(pages) < manifest["counters"]["documents"] < 2 * len(pages)
