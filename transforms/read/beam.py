"""The Beam sources of every input format, each giving outputs `documents`
((doc_key, [lines])), `problems` (a dict per file not read to its end) and
`figures` (their counts: transforms.counters).

Text files get a splittable FileBasedSource of our own: ReadFromText cannot
split on a blank line (a self-overlapping delimiter, and whitespace-only or
CRLF separators), and whole-file reading would not parallelize one huge file.
A document belongs to the bundle whose byte range holds its first line, and a
reader starting mid-file looks back just far enough to know whether the line
before is blank, so bundles split anywhere and no document is cut.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import zlib
from typing import BinaryIO, Iterator, Sequence

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filebasedsource import FileBasedSource
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.range_trackers import OffsetRangeTracker
from apache_beam.pvalue import TaggedOutput

from bert_pretraining_data.transforms.counters import FIGURES, BundleCounters, CountingDoFn
from bert_pretraining_data.transforms.read.documents import (DOCUMENTS, PROBLEMS, DecodeStats,
                                                             Document, InputError, InputProblem,
                                                             ReadCounts, _line_before_is_blank,
                                                             _read_lines, comma_separated,
                                                             document_key, key_root,
                                                             split_documents)
from bert_pretraining_data.transforms.read.input_formats import (DESCRIPTIONS, HEAD_BYTES,
                                                                 format_of_head, format_of_name)
from bert_pretraining_data.transforms.read.tables import (ROW_COUNTERS, row_document,
                                                         text_document)
from bert_pretraining_data.transforms.read.warc import WARC_COUNTERS, wet_documents
from bert_pretraining_data.transforms.read.wikipedia import (ARTICLE_COUNTERS, ARTICLE_NAMESPACE,
                                                             article_document, dump_pages,
                                                             index_path, is_index, stream_offsets,
                                                             stream_pages)



class DocumentSource(FileBasedSource):
    """A splittable source whose elements are (doc_key, [lines]) documents,
    an InputProblem for a file not read to its end, and with `counts` (as
    ReadDocuments reads it) a ReadCounts last in each range.

    A document belongs to the reader whose range holds the offset of its
    first line; the reader finishes its last document past the range end.
    """

    def __init__(self, file_pattern: str, *, min_bundle_size: int = 0,
                 split_bytes: int | None = None, root: str | None = None,
                 counts: bool = False) -> None:
        # validate=False: match_inputs reports unmatched patterns in one line.
        super().__init__(file_pattern, min_bundle_size=min_bundle_size,
                         compression_type=CompressionTypes.AUTO,
                         splittable=True, validate=False)
        if split_bytes is not None and split_bytes < 1:
            raise ValueError(f"split_bytes must be >= 1, got {split_bytes}")
        self._split_bytes = split_bytes
        self._root = key_root([file_pattern]) if root is None else root
        self._counts = counts

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
        documents = lines_read = unreadable = 0
        try:
            with self.open_file(file_name) as f:
                for key, lines in self._documents_in_range(f, file_name, range_tracker, stats):
                    documents += 1
                    lines_read += len(lines)
                    yield key, lines
                if compressed:
                    _check_stream_ended(f)
        except _DECOMPRESSION_ERRORS as err:
            if not compressed:
                raise
            unreadable = 1
            yield InputProblem(path=file_name, message=(
                f"{type(err).__name__}: {err}; read {documents} document(s), skipped "
                "the rest; re-create the file or remove it from --input_file"))
        if self._counts:  # once per range: a count per document costs more than its reading
            yield ReadCounts({"documents": documents, "lines": lines_read,
                              **dataclasses.asdict(stats), "unreadable_files": unreadable})

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
    `documents`: (doc_key, [stripped non-blank lines]), `problems`: a dict
    (path, message) per file that could not be read to its end, and `figures`.

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
                DocumentSource(pattern, split_bytes=self._split_bytes, root=root, counts=True))
            for i, pattern in enumerate(self._patterns)
        ]
        return (tuple(reads)
                | "Flatten" >> beam.Flatten()
                | "SeparateProblems" >> beam.ParDo(_SeparateProblems()).with_outputs(
                    PROBLEMS, FIGURES, main=DOCUMENTS))


class _SeparateProblems(CountingDoFn):
    """The sources' elements -> documents; problems (PROBLEMS); their ranges'
    counts, summed (FIGURES and Beam's counters)."""

    def __init__(self) -> None:
        self._count = BundleCounters("documents", "lines", "unreadable_files",
                                     *(f.name for f in dataclasses.fields(DecodeStats)))

    def process(self, record):
        if isinstance(record, InputProblem):
            yield TaggedOutput(PROBLEMS, dataclasses.asdict(record))
        elif isinstance(record, ReadCounts):
            for name, value in record.counts.items():
                self._count.counts[name] += value
        else:
            yield record


class _ParseRows(CountingDoFn):
    """An input row (a JSON line, or a Parquet row as a dict) -> (key, [paragraphs]),
    or a count of why it gave none (transforms.read.tables.row_document); the
    documents are counted as every reader counts them."""

    def __init__(self, *, text_field: str, json_lines: bool) -> None:
        self._field = text_field
        self._json = json_lines
        self._count = BundleCounters(*ROW_COUNTERS, "documents")

    def process(self, row) -> Iterator[Document]:
        document = row_document(row, text_field=self._field, json_lines=self._json,
                                counts=self._count.counts)
        if document is not None:
            self._count.counts["documents"] += 1
            yield document


def check_input_format(input_format: str, paths: Sequence[str], setting: str) -> None:
    """Before the job: the files hold what the run reads them as. The first
    file of each suffix among `paths` is sniffed (transforms.read.input_formats);
    files of two formats, or of a format other than `input_format`, are a
    one-line InputError whose fix is `setting` with the format filled in (how
    the caller's user sets it: a flag, a mixture source's key)."""
    firsts: dict[str | None, str] = {}
    for path in paths:
        if not is_index(path):  # a multistream dump's index is read with its dump
            firsts.setdefault(format_of_name(path), path)
    found = {}
    for path in firsts.values():
        try:
            with FileSystems.open(path) as handle:
                head = handle.read(HEAD_BYTES)
        except Exception:  # noqa: BLE001 - the reader reports a file it cannot read
            continue
        held = format_of_head(head)
        if held is not None:
            found.setdefault(held, path)
    if len(found) > 1:
        (one, first), (other, second) = sorted(found.items())[:2]
        raise InputError(f"{first} holds {DESCRIPTIONS[one]} and {second} "
                         f"{DESCRIPTIONS[other]}: read each as a source of a --mixture "
                         "(docs/mixtures.md)")
    for held, path in found.items():
        # A JSONL file's lines that are not JSON objects are counted as it is read.
        if held != input_format and (held, input_format) != ("text", "jsonl"):
            raise InputError(f"{path} holds {DESCRIPTIONS[held]}, which the run would read "
                             f"as {DESCRIPTIONS[input_format]}: {setting.format(held)}")


def check_input_schema(input_format: str, paths: Sequence[str], text_field: str) -> None:
    """Before the job: a Parquet input's every file has a string `text_field`
    column (the other formats' records are checked one by one as they are
    read); else a one-line InputError."""
    if input_format != "parquet":
        return
    import pyarrow
    import pyarrow.parquet as pq

    for path in paths:
        with FileSystems.open(path) as handle:
            try:
                schema = pq.read_schema(handle)
            except (pyarrow.ArrowException, OSError) as err:
                raise InputError(f"{path} is not a Parquet file ({err}); check "
                                 "--input_format") from None
        if text_field not in schema.names:
            raise InputError(f"{path} has no column {text_field!r} (its columns: "
                             f"{', '.join(schema.names)}); pass --text_field")
        kind = schema.field(text_field).type
        if not (pyarrow.types.is_string(kind) or pyarrow.types.is_large_string(kind)):
            raise InputError(f"{path}: column {text_field!r} holds {kind}, not text; "
                             "pass the text column as --text_field")


class ReadTables(beam.PTransform):
    """JSONL or Parquet files -> outputs `documents` (key, [paragraphs]) and
    `problems` (none: a file that cannot be read fails the run), as
    ReadDocuments gives for text files."""

    def __init__(self, *, patterns: Sequence[str], input_format: str, text_field: str) -> None:
        super().__init__()
        self._patterns = tuple(patterns)
        self._format = input_format
        self._field = text_field

    def expand(self, pbegin):
        if self._format == "jsonl":  # splittable, .gz/.bz2 by extension, as text
            reads = [pbegin | f"ReadPattern{i}" >> beam.io.ReadFromText(pattern)
                     for i, pattern in enumerate(self._patterns)]
        else:
            reads = [pbegin | f"ReadPattern{i}" >> beam.io.ReadFromParquet(
                         pattern, columns=[self._field])
                     for i, pattern in enumerate(self._patterns)]
        documents = (tuple(reads) | "Flatten" >> beam.Flatten()
                     | "ParseRows" >> beam.ParDo(_ParseRows(
                         text_field=self._field, json_lines=self._format == "jsonl")
                     ).with_outputs(FIGURES, main=DOCUMENTS))
        problems = pbegin | "NoProblems" >> beam.Create([])
        return {DOCUMENTS: documents[DOCUMENTS], PROBLEMS: problems,
                FIGURES: documents[FIGURES]}


class _Articles(CountingDoFn):
    """A dump file -> (title, wikitext) of its articles; other pages counted.
    A file that breaks off (damaged compression, cut XML) keeps the articles
    read so far and is reported as a problem."""

    def __init__(self) -> None:
        self._count = BundleCounters("pages", "redirect_pages", "non_article_pages",
                                     "pages_without_text", "unreadable_files")

    def process(self, unit: tuple[str, int]):
        """`unit`: (path, offset of one bz2 stream of a multistream dump), or
        (path, -1): the whole file (decompressed by its extension)."""
        count = self._count.counts
        path, offset = unit
        try:
            if offset < 0:
                handle = FileSystems.open(path)
            else:
                handle = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
            with handle:
                pages = dump_pages(handle) if offset < 0 else stream_pages(handle, offset)
                for page in pages:
                    count["pages"] += 1
                    if page.namespace != ARTICLE_NAMESPACE:
                        count["non_article_pages"] += 1
                    elif page.redirect:
                        count["redirect_pages"] += 1
                    elif not (page.text or "").strip():
                        count["pages_without_text"] += 1
                    else:
                        yield page.title, page.text
        except (OSError, EOFError, ValueError, SyntaxError) as err:  # ParseError is a SyntaxError
            count["unreadable_files"] += 1
            yield TaggedOutput(PROBLEMS, {
                "path": path, "message": f"{type(err).__name__}: {err}"})


class _ToDocument(CountingDoFn):
    """(title, wikitext) -> (key, [paragraphs]) of its plain text
    (transforms.read.wikipedia.article_document); the documents are counted
    as every reader counts them."""

    def __init__(self) -> None:
        self._count = BundleCounters(*ARTICLE_COUNTERS, "documents")

    def process(self, article: tuple[str, str]) -> Iterator[Document]:
        document = article_document(article[1], counts=self._count.counts)
        if document is not None:
            self._count.counts["documents"] += 1
            yield document


def read_units(metadata) -> Iterator[tuple[str, int]]:
    """A matched dump file's units of work: one per bz2 stream when its
    multistream index is beside it, else the whole file. Index files
    matched by the patterns themselves are not dumps."""
    path = metadata.path
    if is_index(path):
        return
    index = index_path(path)
    if index != path and FileSystems.exists(index):
        with FileSystems.open(index) as handle:
            for offset in stream_offsets(handle.read()):
                yield path, offset
    else:
        yield path, -1


class ReadDump(beam.PTransform):
    """MediaWiki XML dump files -> outputs `documents` (key, [paragraphs]) and
    `problems`, as ReadDocuments gives for text files."""

    def __init__(self, *, patterns) -> None:
        super().__init__()
        self._patterns = tuple(patterns)

    def expand(self, pbegin):
        streams, files = (pbegin
                          | "Patterns" >> beam.Create(self._patterns)
                          | "Match" >> fileio.MatchAll()
                          | "Units" >> beam.FlatMap(read_units)
                          | "SpreadUnits" >> beam.Reshuffle()
                          | "StreamsOrFiles" >> beam.Partition(
                              lambda unit, _: 0 if unit[1] >= 0 else 1, 2))
        # A stream's 100 pages are converted where they are read; a whole
        # file's articles are spread first (shuffling the wikitext of a
        # multistream dump again would only cost its bytes).
        from_streams = streams | "StreamArticles" >> beam.ParDo(_Articles()).with_outputs(
            PROBLEMS, FIGURES, main="articles")
        from_files = files | "FileArticles" >> beam.ParDo(_Articles()).with_outputs(
            PROBLEMS, FIGURES, main="articles")
        documents = ((from_streams["articles"],
                      from_files["articles"] | "SpreadArticles" >> beam.Reshuffle())
                     | "AllArticles" >> beam.Flatten()
                     | "PlainText" >> beam.ParDo(_ToDocument()).with_outputs(
                         FIGURES, main=DOCUMENTS))
        problems = ((from_streams[PROBLEMS], from_files[PROBLEMS])
                    | "AllProblems" >> beam.Flatten())
        figures = ((from_streams[FIGURES], from_files[FIGURES], documents[FIGURES])
                   | "ReadFigures" >> beam.Flatten())
        return {DOCUMENTS: documents[DOCUMENTS], PROBLEMS: problems, FIGURES: figures}


def _check_stream_ended(handle) -> None:
    """Raises EOFError where a compressed file Beam opened stopped before its
    stream's end: Beam's reader does not notice a truncated stream itself."""
    if not getattr(getattr(handle, "_decompressor", None), "eof", True):
        raise EOFError("compressed stream ends early (truncated file)")


class _WetRecords(CountingDoFn):
    """A WARC file -> its conversion records' documents (transforms.read.warc);
    a file that breaks off keeps the documents read so far and is reported
    as a problem, and so is one without text records (a WARC of HTML)."""

    def __init__(self) -> None:
        self._count = BundleCounters(*WARC_COUNTERS, "documents", "unreadable_files")

    def process(self, path: str):
        count = self._count.counts
        texts = count["warc_text_records"]
        try:  # decompressed by Beam, by its name, which notices a file cut short
            with FileSystems.open(path) as handle:
                for document in wet_documents(handle, count):
                    count["documents"] += 1
                    yield document
                if CompressionTypes.detect_compression_type(path) != CompressionTypes.UNCOMPRESSED:
                    _check_stream_ended(handle)
        except _DECOMPRESSION_ERRORS as err:
            count["unreadable_files"] += 1
            yield TaggedOutput(PROBLEMS, {"path": path, "message": f"{type(err).__name__}: {err}"})
            return
        if count["warc_text_records"] == texts:
            yield TaggedOutput(PROBLEMS, {"path": path, "message": (
                "no conversion (text) records: --input_format=warc reads Common Crawl's WET "
                "files (.warc.wet.gz); extract a WARC's text first")})


class ReadWarc(beam.PTransform):
    """WARC files (Common Crawl WET) -> outputs `documents` (url, [paragraphs])
    and `problems`, as ReadDocuments gives for text files. A file is read
    whole (gzip members hold no index of their offsets) and its documents
    spread over the workers, as a dump's without an index."""

    def __init__(self, *, patterns) -> None:
        super().__init__()
        self._patterns = tuple(patterns)

    def expand(self, pbegin):
        read = (pbegin
                | "Patterns" >> beam.Create(self._patterns)
                | "Match" >> fileio.MatchAll()
                | "Paths" >> beam.Map(lambda metadata: metadata.path)
                | "SpreadFiles" >> beam.Reshuffle()
                | "Records" >> beam.ParDo(_WetRecords()).with_outputs(
                    PROBLEMS, FIGURES, main=DOCUMENTS))
        return {DOCUMENTS: read[DOCUMENTS] | "SpreadDocuments" >> beam.Reshuffle(),
                PROBLEMS: read[PROBLEMS], FIGURES: read[FIGURES]}


# What zlib, gzip and bz2 raise on damaged data, and our own truncation check.
_DECOMPRESSION_ERRORS = (zlib.error, OSError, EOFError, ValueError)


# Windows a sample of the input is read in (sample_lines).
SAMPLE_WINDOWS = 16


def windows_cut_from(inputs: Sequence[tuple[str, int]]) -> bool:
    """Whether sample_lines can cut windows from these (path, size) files:
    none is compressed (a compressed file is read from its start)."""
    return all(CompressionTypes.detect_compression_type(path) == CompressionTypes.UNCOMPRESSED
               for path, _ in inputs)


def sample_lines(inputs: Sequence[tuple[str, int]], budget: int
                 ) -> tuple[list[tuple[int, bytes]], int]:
    """(offset, line) of the whole input when it is at most `budget` bytes,
    else of SAMPLE_WINDOWS windows spread evenly over it (a corpus sorted by source
    or length is sampled across its sorts), each from a line start and ended
    as a document; and the bytes they hold."""
    total = sum(size for _, size in inputs)
    if total <= budget:
        windows = [(path, 0, size) for path, size in inputs]
    else:
        width, windows, file_start = budget // SAMPLE_WINDOWS, [], 0
        starts = iter(int(w * total / SAMPLE_WINDOWS) for w in range(SAMPLE_WINDOWS))
        start = next(starts)
        for path, size in inputs:
            while start is not None and start < file_start + size:
                local = start - file_start
                windows.append((path, local, min(width, size - local)))
                start = next(starts, None)
            file_start += size
    lines: list[tuple[int, bytes]] = []
    sampled = 0
    for path, start, length in windows:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            handle.seek(start)
            data = handle.read(length)
        if start > 0:  # from the first line that starts in the window
            data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
        offset = start
        for line in data.splitlines(keepends=True) + [b"\n"]:
            lines.append((offset, line))
            offset += len(line)
        sampled += len(data)
    return lines, sampled


def _file_head(input_format: str, path: str, budget: int, text_field: str
               ) -> list[list[str]]:
    """A file's first documents (their paragraphs), about `budget` bytes of
    text, read as `input_format` reads them (see head_documents)."""
    counts: collections.Counter = collections.Counter()  # the readers count; none kept
    if input_format == "parquet":
        import pyarrow.parquet as pq

        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            texts = (text for batch in pq.ParquetFile(handle).iter_batches(
                batch_size=64, columns=[text_field]) for text in batch.column(0).to_pylist())
            documents = (text_document(text) for text in texts if isinstance(text, str))
            return _take((lines for _, lines in filter(None, documents)), budget)
    with FileSystems.open(path) as handle:  # decompressed by its name
        if input_format == "wikipedia":
            documents = (article_document(page.text, counts=counts)
                         for page in dump_pages(handle)
                         if page.namespace == ARTICLE_NAMESPACE and not page.redirect
                         and (page.text or "").strip())
            return _take((lines for _, lines in filter(None, documents)), budget)
        if input_format == "warc":
            return _take((lines for _, lines in wet_documents(handle, counts)), budget)
        data = handle.read(budget + 1)
    cut = len(data) > budget  # the last line, and a text file's last document, cut short
    raw = data.splitlines(keepends=True)[:-1 if cut else None]
    if input_format == "jsonl":
        documents = (row_document(line.decode("utf-8", "replace"), text_field=text_field,
                                  json_lines=True, counts=counts) for line in raw)
        return [lines for _, lines in filter(None, documents)]
    offsets = itertools.accumulate(map(len, raw), initial=0)
    return [lines for _, lines in split_documents(zip(offsets, raw))][:-1 if cut else None]


def _take(documents: Iterator[list[str]], budget: int) -> list[list[str]]:
    """Documents until they hold `budget` characters."""
    taken: list[list[str]] = []
    size = 0
    for lines in documents:
        taken.append(lines)
        size += sum(map(len, lines))
        if size >= budget:
            break
    return taken


def head_documents(input_format: str, paths: Sequence[str], budget: int,
                   text_field: str) -> list[list[str]]:
    """The first documents (their paragraphs) of up to SAMPLE_WINDOWS of
    `paths` (spread over them), read as `input_format` reads them, about
    `budget` bytes of text in all: a sample of an input that windows
    (sample_lines) cannot be cut from: compressed files, Parquet, dumps, WET
    files. A file that cannot be read gives none (the run reports it)."""
    paths = [path for path in paths if not is_index(path)]
    chosen = paths[::max(1, len(paths) // SAMPLE_WINDOWS)][:SAMPLE_WINDOWS]
    documents: list[list[str]] = []
    for path in chosen:
        try:
            documents += _file_head(input_format, path, budget // len(chosen), text_field)
        except Exception:  # noqa: BLE001 - the run reads the file and reports what it finds
            continue
    return documents
