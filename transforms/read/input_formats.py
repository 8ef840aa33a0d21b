"""Which input format a file holds: from its name, and from its first bytes.

A run reads each file as one format (`--input_format`, or a mixture source's
`input_format`). When none is given, the files' names decide it, as Hugging
Face `datasets` decides a data file's builder from its extension; the first
bytes of each pattern's first file then confirm it before any work starts
(`transforms.read.beam.check_input_formats`), so a dump or a JSONL file is
never read as lines of text. Beam-free: the caller opens the files.
"""

from __future__ import annotations

import json
from typing import Iterable

# Suffixes that name a format, after a compression suffix Beam opens by name.
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
             ".parquet": "parquet", ".txt": "text", ".text": "text",
             ".wet": "warc", ".warc": "warc"}
_COMPRESSED = (".gz", ".bz2", ".zst", ".zstd", ".deflate", ".lzma", ".xz")
# How much of a file's (decompressed) beginning the sniff reads.
HEAD_BYTES = 64 * 1024
# Each of INPUT_FORMATS in words.
DESCRIPTIONS = {"text": "text", "jsonl": "JSON Lines", "parquet": "Parquet",
                "wikipedia": "a MediaWiki XML dump", "warc": "WARC (Common Crawl WET)"}


def format_of_name(pattern: str) -> str | None:
    """The format a path's or glob's suffix names (`.xml.bz2`: a dump,
    `.jsonl.gz`: JSONL, `.warc.wet.gz`: WARC, `.parquet`, `.txt`), or None
    where it names none."""
    name = pattern.rsplit("/", 1)[-1].lower()
    for suffix in _COMPRESSED:
        if name.endswith(suffix):
            name = name[:-len(suffix)]
            break
    dot = name.rfind(".")
    if dot <= 0:
        return None
    # A dump's parts are named pages-articles1.xml-p10p30302.bz2.
    return "wikipedia" if name[dot:].startswith(".xml") else _SUFFIXES.get(name[dot:])


def format_of_names(patterns: Iterable[str]) -> str | None:
    """The format the patterns' suffixes name, when those that name one agree;
    None otherwise (the files' first bytes then say what they hold)."""
    named = {format_of_name(pattern) for pattern in patterns} - {None}
    return named.pop() if len(named) == 1 else None


def format_of_head(head: bytes) -> str | None:
    """The format a file's first bytes (up to HEAD_BYTES, decompressed) show:
    Parquet's magic number, a WARC record's version line, a MediaWiki export
    element, a first line that is a JSON object, else text; None for an empty
    file."""
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"WARC/"):
        return "warc"
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not start:
        return None
    if start.startswith(b"<mediawiki") or (start.startswith(b"<?xml")
                                          and b"<mediawiki" in start[:1024]):
        return "wikipedia"
    line, newline, _ = start.partition(b"\n")
    if not newline:  # a first line longer than the head: JSON if it opens as an object
        return "jsonl" if line.startswith(b'{"') else "text"
    try:
        return "jsonl" if isinstance(json.loads(line), dict) else "text"
    except ValueError:
        return "text"
