"""ReadDocuments: raw text files -> (doc_key, [sentence lines]).

The input format is BERT's: one sentence per line, and a line that is empty
after `str.strip()` (so also spaces, tabs, NBSP, U+3000, the CR of CRLF ...)
ends a document, as does the end of a file. Lines are split on b"\\n" only,
decoded as UTF-8 (undecodable bytes dropped, like the original's
errors="ignore", and counted), then stripped.

Why a splittable FileBasedSource of our own:
- `ReadFromText(delimiter=b"\\n\\n")` is not an option: Beam rejects a
  self-overlapping delimiter, and a byte delimiter could not see
  whitespace-only (or CRLF) separator lines anyway.
- `fileio` whole-file reading would make one file one unit of work, so a
  single huge file (a Wikipedia dump) would not parallelize.
- Here a document belongs to the bundle whose byte range holds the offset of
  its first line; a reader starting mid-file looks backwards just far enough
  to know whether the line before its first line is blank. So bundles split
  anywhere (initially and dynamically) and no document is ever cut.

doc_key is f"{name}:{offset:012d}", where name is the file's path relative to
the directory the input patterns share (key_root): a pure function of the
input bytes and names, the same on every runner, worker count and bundle size,
and the same after the corpus moves (local to gs://, one checkout to another),
so every draw and every output byte is too. Keys sort in file order.
Compressed files (.gz, .bz2) are read whole; their offsets are positions in
the decompressed stream.
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from typing import BinaryIO, Callable, Iterable, Iterator, Sequence

import apache_beam as beam
from apache_beam.io.filebasedsource import FileBasedSource
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.range_trackers import OffsetRangeTracker

from bert_pretraining_data.transforms.counters import counter
_BOM = b"\xef\xbb\xbf"
_BACKWARD_CHUNK = 8192
MAX_SENTENCE_CHARS = 1 << 16

Document = tuple[int, list[str]]


class InputError(ValueError):
    """A bad --input_file; the message is one line saying what to fix."""


@dataclasses.dataclass(frozen=True)
class InputProblem:
    """A file that could not be read to its end; reported in the manifest."""

    path: str
    message: str


# What zlib, gzip and bz2 raise on damaged data, and our own truncation check.
_DECOMPRESSION_ERRORS = (zlib.error, OSError, EOFError, ValueError)


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
                    ) -> Iterator[Document]:
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


class DocumentSource(FileBasedSource):
    """A splittable source whose records are (doc_key, [lines]) documents.

    A document belongs to the reader whose range holds the offset of its
    first line; the reader finishes its last document past the range end.
    """

    def __init__(self, file_pattern: str, *, min_bundle_size: int = 0,
                 split_bytes: int | None = None, root: str | None = None) -> None:
        # validate=False: match_inputs reports unmatched patterns in one line.
        super().__init__(file_pattern, min_bundle_size=min_bundle_size,
                         compression_type=CompressionTypes.AUTO,
                         splittable=True, validate=False)
        if split_bytes is not None and split_bytes < 1:
            raise ValueError(f"split_bytes must be >= 1, got {split_bytes}")
        self._split_bytes = split_bytes
        self._root = key_root([file_pattern]) if root is None else root
        self._documents = counter("documents")
        self._lines = counter("lines")
        self._repairs = {f.name: counter(f.name) for f in dataclasses.fields(DecodeStats)}
        self._problems = counter("unreadable_files")

    def split(self, desired_bundle_size: int | None = None,
              start_position=None, stop_position=None):
        """Caps bundles at `split_bytes` so tests can force many tiny splits."""
        if self._split_bytes is not None:
            desired_bundle_size = min(desired_bundle_size or self._split_bytes,
                                      self._split_bytes)
        return super().split(desired_bundle_size, start_position, stop_position)

    def read_records(self, file_name: str, range_tracker: OffsetRangeTracker
                     ) -> Iterator[tuple[str, list[str]]]:
        """Claims and yields the documents that start in the tracker's range.

        A compressed file that is corrupt or truncated ends in an InputProblem
        (after the documents read before the damage): the run goes on, and
        the manifest names the file. Beam's reader does not notice a truncated
        stream by itself, so the decompressor's end-of-stream flag is checked.
        """
        compressed = CompressionTypes.detect_compression_type(file_name) != \
            CompressionTypes.UNCOMPRESSED
        stats = DecodeStats()
        documents = lines_read = 0
        try:
            with self.open_file(file_name) as f:
                for key, lines in self._documents_in_range(f, file_name, range_tracker, stats):
                    documents += 1
                    lines_read += len(lines)
                    yield key, lines
                if compressed and not getattr(getattr(f, "_decompressor", None), "eof", True):
                    raise EOFError("compressed stream ends early (truncated file)")
        except _DECOMPRESSION_ERRORS as err:
            if not compressed:
                raise
            self._problems.inc()
            yield InputProblem(path=file_name, message=(
                f"{type(err).__name__}: {err}; read {documents} document(s), skipped "
                "the rest; re-create the file or remove it from --input_file"))
        # Counted once per range: a counter update costs more than a short document.
        counts = [(self._documents, documents), (self._lines, lines_read)] + [
            (self._repairs[f.name], getattr(stats, f.name)) for f in dataclasses.fields(stats)]
        for counted, value in counts:
            if value:
                counted.inc(value)

    def _documents_in_range(self, f: BinaryIO, file_name: str,
                            range_tracker: OffsetRangeTracker, stats: DecodeStats) -> Iterator[tuple[str, list[str]]]:
        start = range_tracker.start_position()
        if start > 0:
            # The first line that starts at or after `start`.
            f.seek(start - 1)
            head = f.readline()
            if not head.endswith(b"\n"):
                return  # no line starts in [start, end of file)
            first = start - 1 + len(head)
            if first >= range_tracker.stop_position():
                return  # every document here starts past our range
            after_blank = _line_before_is_blank(f, first)
            f.seek(first)
        else:
            f.seek(0)
            first, after_blank = 0, True
        for offset, lines in split_documents(
                _read_lines(f, first), stats=stats,
                after_blank=after_blank, claim=range_tracker.try_claim):
            yield document_key(file_name, offset, self._root), lines


def _no_match(pattern: str) -> InputError:
    return InputError(
        f"--input_file pattern {pattern!r} matches no files; check the path "
        "(local paths and gs:// globs are supported)")


def comma_separated(text: str | None) -> list[str]:
    """The items of a comma-separated flag (`--input_file` patterns, the
    `--output_file` list), stripped, empty ones dropped."""
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def match_inputs(input_file: str) -> list[tuple[str, int]]:
    """Expands the comma-separated --input_file into sorted, unique
    (path, size_bytes), failing before any work starts if a pattern matches
    nothing. Uses FileSystems, so local paths and gs:// work alike."""
    patterns = comma_separated(input_file)
    if not patterns:
        raise InputError("--input_file is empty; give one or more paths or "
                         "globs, separated by commas")
    files: dict[str, int] = {}
    for pattern in patterns:
        # One pattern per call: FileSystems.match picks the filesystem of
        # its first pattern for the whole list.
        metadata_list = FileSystems.match([pattern])[0].metadata_list
        if not metadata_list:
            raise _no_match(pattern)
        for metadata in metadata_list:
            files[metadata.path] = metadata.size_in_bytes
    return sorted(files.items())


class ReadDocuments(beam.PTransform):
    """Patterns (already split, e.g. by match_inputs' caller) -> outputs
    `documents`: (doc_key, [stripped non-blank lines]) and `problems`: a dict
    (path, message) per file that could not be read to its end.

    Overlapping patterns would read a shared file twice: pass disjoint ones.
    """

    def __init__(self, *, patterns: Sequence[str],
                 split_bytes: int | None = None) -> None:
        super().__init__()
        if isinstance(patterns, str):
            raise TypeError("patterns must be a sequence of patterns, not one "
                            "string (split a comma list first)")
        if not patterns:
            raise InputError("ReadDocuments needs at least one input pattern")
        self._patterns = tuple(patterns)
        self._split_bytes = split_bytes

    def expand(self, pbegin):
        for pattern in self._patterns:  # fail at construction, in one line
            if not FileSystems.match([pattern], limits=[1])[0].metadata_list:
                raise _no_match(pattern)
        root = key_root(self._patterns)
        reads = [
            pbegin | f"ReadPattern{i}" >> beam.io.Read(
                DocumentSource(pattern, split_bytes=self._split_bytes, root=root))
            for i, pattern in enumerate(self._patterns)
        ]
        return (tuple(reads)
                | "Flatten" >> beam.Flatten()
                | "SeparateProblems" >> beam.ParDo(_SeparateProblems()).with_outputs(
                    PROBLEMS, main=DOCUMENTS))


DOCUMENTS = "documents"
PROBLEMS = "problems"


class _SeparateProblems(beam.DoFn):
    def process(self, record):
        if isinstance(record, InputProblem):
            yield beam.pvalue.TaggedOutput(PROBLEMS, dataclasses.asdict(record))
        else:
            yield record
