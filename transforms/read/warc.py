"""Common Crawl's WET files (`--input_format=warc`): each conversion record is
a document, its text the page's as Common Crawl extracted it, its key the
record's URL (WARC-Target-URI), so a page keeps its instances wherever the
crawl's files put it.

Parsed with FastWARC (Resiliparse's WARC library, a compiled parser); the
caller decompresses (Beam, by the file's name, noticing a file cut short).
Other records (a WET file's warcinfo; a WARC's requests,
responses and metadata, whose HTML this does not extract) are counted, not
read. Beam-free: the caller opens the file.
"""

from __future__ import annotations

from typing import BinaryIO, Iterator

from fastwarc import ArchiveIterator, WarcRecordType

from bert_pretraining_data.transforms.read.documents import Document
from bert_pretraining_data.transforms.read.tables import text_lines

# The counters of a WET file's records (the manifest's names).
WARC_COUNTERS = ("warc_text_records", "warc_other_records", "warc_records_without_url",
                 "warc_records_with_blank_text", "warc_records_with_invalid_utf8")


def wet_documents(stream: BinaryIO, counts: dict[str, int]) -> Iterator[Document]:
    """The (url, [paragraphs]) of a WARC stream's conversion records, each
    record that gives none counted in `counts` (WARC_COUNTERS) by why.
    FastWARC raises OSError where a record's header is malformed; where the
    headers' lines end in LF alone it reads the rest of the file as one
    record of no known type, a ValueError here (nothing after it is read)."""
    for record in ArchiveIterator(stream, parse_http=False):
        if record.record_type == WarcRecordType.unknown:
            raise ValueError(f"no WARC record FastWARC can read at byte {record.stream_pos} "
                             "(a WARC header's lines end in CRLF); the rest of the file is skipped")
        if record.record_type != WarcRecordType.conversion:
            counts["warc_other_records"] += 1
            continue
        counts["warc_text_records"] += 1
        url = record.headers.get("WARC-Target-URI")
        if not url:
            counts["warc_records_without_url"] += 1
            continue
        data = record.reader.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            counts["warc_records_with_invalid_utf8"] += 1
            text = data.decode("utf-8", errors="replace")
        lines = text_lines(text)
        if not lines:
            counts["warc_records_with_blank_text"] += 1
            continue
        yield url, lines
