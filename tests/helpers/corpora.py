"""Test corpora made from the real text in tests/data."""

from __future__ import annotations

import pathlib
from typing import Sequence

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"


def web_treebank_documents() -> list[list[str]]:
    """Short web documents: the English Web Treebank's dev and test sentences,
    two a document (~2,350 of them)."""
    sentences = [line.strip() for name in ("en_ewt-ud-dev.sentences.txt",
                                           "en_ewt-ud-test.sentences.txt")
                 for line in (DATA / name).read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    return [sentences[i:i + 2] for i in range(0, len(sentences) - 1, 2)]


def write_wet(path: pathlib.Path, pages: Sequence[tuple[str | None, str]], *,
              info: bool = True) -> pathlib.Path:
    """A WET file as Common Crawl writes one, made with FastWARC's own writer:
    a warcinfo record (with `info`), then a conversion record per (url, text)
    page, each its own gzip member (a page without a URL has no
    WARC-Target-URI)."""
    from fastwarc import GzipWriter, WarcRecord, WarcRecordType

    def record(record_type, content: bytes, url: str | None = None) -> WarcRecord:
        made = WarcRecord()
        made.init_headers(record_type)
        if url is not None:
            made.headers["WARC-Target-URI"] = url
        made.headers["Content-Type"] = "text/plain"
        made.set_bytes_content(content)
        return made

    writer = GzipWriter(str(path))
    if info:
        record(WarcRecordType.warcinfo, b"isPartOf: CC-MAIN-test\r\n").write(writer)
    for url, text in pages:
        record(WarcRecordType.conversion, text.encode("utf-8"), url).write(writer)
    writer.close()
    return path
