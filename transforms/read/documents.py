"""Text files as documents: BERT's format, one sentence a line, blank lines between documents.

A line empty after `str.strip()` (spaces, NBSP, U+3000, a CRLF's CR ...) or a
file's end ends a document; lines are split on b"\\n" only and decoded as
UTF-8, undecodable bytes dropped (as the original's errors="ignore") and
counted. doc_key is f"{name}:{offset:012d}", name relative to the directory
the patterns share (key_root): a pure function of input bytes and names, so
every draw and output byte is the same on every runner and after the corpus
moves. Offsets in compressed files (read whole) are in the decompressed stream.
"""

from __future__ import annotations

import dataclasses
import os
from typing import BinaryIO, Callable, Iterable, Iterator, Sequence


_BOM = b"\xef\xbb\xbf"
_BACKWARD_CHUNK = 8192
MAX_SENTENCE_CHARS = 1 << 16

# A document as read: (doc_key, its stripped non-blank lines); a text file's
# documents are first (offset, lines), keyed by their file and offset.
Document = tuple[str, list[str]]
OffsetDocument = tuple[int, list[str]]


class InputError(ValueError):
    """A bad --input_file; the message is one line saying what to fix."""


@dataclasses.dataclass(frozen=True)
class InputProblem:
    """A file that could not be read to its end; reported in the manifest."""

    path: str
    message: str


@dataclasses.dataclass(frozen=True)
class ReadCounts:
    """What a reader counted over its range (documents, lines, repairs,
    unreadable files), as the range's last element: a source can give data,
    not figures."""

    counts: dict[str, int]


@dataclasses.dataclass
class DecodeStats:
    """What decoding repaired, so that it can be reported instead of hidden.

    Everything is counted on lines inside emitted documents only: each such
    line belongs to exactly one document, so totals do not depend on how a
    file was split. (Lines that are blank once decoded carry no text.)
    """
    undecodable_bytes: int = 0
    bom_removed: int = 0
    lone_cr_breaks: int = 0  # sentences that began after a lone CR
    long_lines_cut: int = 0


def _decode(raw: bytes) -> tuple[str, int]:
    """(text, number of bytes dropped); strict decoding is the fast path."""
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "ignore")
        return text, len(raw) - len(text.encode("utf-8"))


def split_documents(lines: Iterable[tuple[int, bytes]], *,
                    stats: DecodeStats | None = None,
                    after_blank: bool = True,
                    claim: Callable[[int], bool] | None = None,
                    ) -> Iterator[OffsetDocument]:
    """Groups the lines of ONE file into (offset of first line, [lines]).

    `lines` are (byte offset, raw bytes; a trailing b"\\n" is allowed). A
    document starts at a non-blank line that is the file's first line or
    follows a blank line. `after_blank=False` says the line before the first
    given one is non-blank: leading lines then continue a document that is
    not ours and are skipped. `claim(offset)` is asked before each document
    starts; the first refusal ends the iteration (a range tracker's
    try_claim). Pure: no Beam, no I/O.

    Every line of a corpus passes through here (one-line documents make it
    most of reading), so the common line (no lone CR, valid UTF-8, short)
    takes an inline path and the repairs are counted in locals.
    """
    stats = stats if stats is not None else DecodeStats()
    doc: list[str] | None = None
    doc_offset = 0
    claimed_line = -1
    continuing = not after_blank
    undecodable = lone_cr = 0
    try:
        for line_offset, raw in lines:
            if line_offset == 0 and raw[:3] == _BOM:
                raw = raw[3:]
                stats.bom_removed += 1
            if raw[-1:] == b"\n":
                raw = raw[:-1]
            if raw[-1:] == b"\r":
                raw = raw[:-1]
            pieces = (((line_offset, raw, False),) if b"\r" not in raw
                      else _logical_lines(line_offset, raw))
            for offset, piece, after_cr in pieces:
                try:
                    text, dropped = piece.decode("utf-8").strip(), 0
                except UnicodeDecodeError:
                    text, dropped = _decode(piece)
                    text = text.strip()
                if not text:
                    if doc is not None:
                        yield doc_offset, doc
                        doc = None
                    continuing = False
                    continue
                if doc is None:
                    if continuing:
                        continue
                    # Claims are physical line starts: the split points a reader
                    # starting mid-file can find.
                    if claim is not None and line_offset != claimed_line:
                        if not claim(line_offset):
                            return
                        claimed_line = line_offset
                    doc, doc_offset = [], offset
                if len(text) > MAX_SENTENCE_CHARS:
                    doc.extend(_cut_long_line(text, stats))
                else:
                    doc.append(text)
                undecodable += dropped
                lone_cr += after_cr
        if doc is not None:
            yield doc_offset, doc
    finally:
        stats.undecodable_bytes += undecodable
        stats.lone_cr_breaks += lone_cr


def _logical_lines(offset: int, raw: bytes) -> Iterator[tuple[int, bytes, bool]]:
    """A physical line without its line ending, split at lone carriage
    returns: (offset, bytes, whether a lone CR came right before).

    CRLF ends a line like \\n; a lone CR (old Mac files, or a CR left inside a
    line) also ends one, rather than gluing two sentences together.
    """
    start = 0
    for index, part in enumerate(raw.split(b"\r")):
        yield offset + start, part, index > 0
        start += len(part) + 1


def _cut_long_line(text: str, stats: DecodeStats) -> list[str]:
    """A line over MAX_SENTENCE_CHARS becomes several sentences, cut at a space
    where there is one: a sentence that long is a dump, not a sentence, and
    tokenizing it whole would hold millions of tokens for one instance."""
    stats.long_lines_cut += 1
    pieces = []
    while len(text) > MAX_SENTENCE_CHARS:
        cut = text.rfind(" ", MAX_SENTENCE_CHARS // 2, MAX_SENTENCE_CHARS)
        cut = cut if cut > 0 else MAX_SENTENCE_CHARS
        pieces.append(text[:cut].strip())
        text = text[cut:].strip()
    pieces.append(text)
    return [p for p in pieces if p]


def key_root(patterns: Sequence[str]) -> str:
    """The directory all patterns share before their first wildcard
    ("/data/wiki/*.txt" and "gs://b/wiki/*.txt" both give their wiki/)."""
    fixed = [p[:min((p.find(c) for c in "*?[" if c in p), default=len(p))]
             for p in patterns]
    common = os.path.commonprefix(fixed)
    return common[:common.rfind("/") + 1]


def document_key(path: str, offset: int, root: str = "") -> str:
    """Stable key naming `path` relative to `root` (see key_root); zero
    padding makes string order equal file order."""
    name = path[len(root):] if path.startswith(root) else path
    return f"{name}:{offset:012d}"


def _has_text(chunk: bytes) -> bool:
    """True only if `chunk` holds a non-whitespace character of its line.

    Decoding a slice alone never invents a character: a character decoded
    here starts at a non-continuation byte, where decoding of the whole line
    is also in step; a sequence cut at either end is just dropped.
    """
    return bool(chunk.decode("utf-8", "ignore").strip())


def _line_before_is_blank(f: BinaryIO, line_start: int) -> bool:
    """Whether the logical line ending just before `line_start` (> 0) is blank.

    That is the text after the last lone CR of the previous physical line (see
    _logical_lines). Reads backwards in bounded chunks and stops at the first
    chunk that shows text, so the cost is one small read for ordinary text.
    """
    pos = line_start - 1  # the b"\n" that ends the previous line
    newer = b""
    while pos > 0:
        size = min(_BACKWARD_CHUNK, pos)
        end = pos
        pos -= size
        f.seek(pos)
        chunk = f.read(size)
        if end == line_start - 1 and chunk.endswith(b"\r"):
            chunk = chunk[:-1]  # the CR of a CRLF ending
        cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if cut >= 0:
            return not _decode(chunk[cut + 1:] + newer)[0].strip()
        newer = chunk + newer
        if pos > 0 and _has_text(chunk):
            return False
    if newer[:3] == _BOM:  # the line is the file's first
        newer = newer[3:]
    return not _decode(newer)[0].strip()


def _read_lines(f: BinaryIO, offset: int) -> Iterator[tuple[int, bytes]]:
    for line in iter(f.readline, b""):  # CompressedFile has readline, not __iter__
        yield offset, line
        offset += len(line)


def comma_separated(text: str | None) -> list[str]:
    """The items of a comma-separated flag (`--input_file` patterns, the
    `--output_file` list), stripped, empty ones dropped."""
    return [item.strip() for item in (text or "").split(",") if item.strip()]


DOCUMENTS = "documents"
PROBLEMS = "problems"


