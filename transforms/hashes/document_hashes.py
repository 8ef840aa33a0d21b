"""Document hashes: what a corpus holds, 8 bytes a document, and how two corpora differ.

A scheduled refresh (pipeline/refresh.py) records, beside each new version's
shards, the hash of every document it read, and compares them with the hashes
of the version before: documents added, removed and unchanged. Hashes, never
texts, so a version's record of its corpus is 8 bytes a document (80 MB for
10M documents) and the comparison holds hashes only.

The hash (`document_hash`) is of a document's text *as read*: the lines the
reader of its format produced (transforms.read.documents for text files,
transforms.read.tables for JSONL and Parquet records, transforms.read.wikipedia for
dumps: stripped, non-blank), joined by "\\n", encoded as UTF-8; the first 8
bytes of its sha256, read big-endian. So the same text gives the same hash in
every format and wherever the corpus lives, and moving a document within a
file or to another file does not make it "changed". (Deduplication, if any,
comes after: this records the corpus as it is.) Two different documents
share a hash with probability 2^-64 per pair: for two versions of 10M
documents, about 1e-5 that any one is miscounted as unchanged.

Stored as hash files: sorted big-endian uint64s, range-partitioned by the
hash's first byte (file i of n holds the hashes whose first byte b has
b * n // 256 == i), so the files in order are one sorted list and a file's
hashes of two versions can be compared alone, even when the versions have
different numbers of files. `count_changes` treats documents as a multiset:
a text present twice before and three times now is 2 unchanged, 1 added.

Beam shell (`WriteDocumentHashes`): each bundle hashes its documents and
buffers the hashes per file; the buffers meet their file through one
GroupByKey (8 bytes a document are shuffled); one worker per file sorts its
hashes, writes the file and compares it with the previous version's hashes of
the same range, read from that version's files. What one worker holds: one
file's hashes of both versions (files are sized from the input: ~1M
documents each at most, ~8 MB a version).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Any, Iterable, Iterator, Sequence

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows
import numpy as np

HASH_BYTES = 8
_STORED = np.dtype(">u8")  # as stored: big-endian, so byte order is numeric order
MAX_HASH_FILES = 256  # one per value of a hash's first byte
# Input bytes per hash file: 256 MiB of text is 100K-500K documents (~1-4 MB of
# hashes), so a worker holds a few MB per file; 60 files for 16 GB.
INPUT_BYTES_PER_HASH_FILE = 256 << 20
# Hashes a bundle buffers before it flushes them (8 MB).
_BUFFER_HASHES = 1 << 20


# --- Functional core -------------------------------------------------------------


def document_hash(lines: Sequence[str]) -> int:
    """The hash of a document's text as read: the first 8 bytes, big-endian,
    of the sha256 of its lines joined by "\\n" (UTF-8; a lone surrogate from
    a JSON escape is encoded as is rather than failing)."""
    text = "\n".join(lines).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(text).digest()[:HASH_BYTES], "big")


def hash_files_for(input_bytes: int) -> int:
    """How many hash files a corpus of `input_bytes` gets (1 to 256)."""
    return min(MAX_HASH_FILES, max(1, math.ceil(input_bytes / INPUT_BYTES_PER_HASH_FILE)))


def file_of(hashes: np.ndarray, num_files: int) -> np.ndarray:
    """The hash file of each hash (uint64 array): by its first byte."""
    return ((hashes >> np.uint64(56)).astype(np.int64) * num_files) >> 8


def first_bytes(file_index: int, num_files: int) -> range:
    """The values of a hash's first byte that file `file_index` of `num_files` holds."""
    def start(i: int) -> int:
        return -(-i * 256 // num_files)  # the smallest b with b * num_files // 256 >= i
    return range(start(file_index), start(file_index + 1))


def files_covering(byte_range: range, num_files: int) -> list[int]:
    """The files, of a version with `num_files` files, holding hashes whose
    first byte is in `byte_range`."""
    return sorted({b * num_files >> 8 for b in byte_range})


def encode(hashes: np.ndarray) -> bytes:
    """A hash file's bytes: the hashes sorted, big-endian."""
    return np.sort(hashes).astype(_STORED).tobytes()


def decode(data: bytes, *, source: str = "hash file") -> np.ndarray:
    """A hash file's hashes (uint64, sorted as stored)."""
    if len(data) % HASH_BYTES:
        raise ValueError(f"{source}: {len(data)} bytes is not a whole number of "
                         f"{HASH_BYTES}-byte document hashes")
    return np.frombuffer(data, dtype=_STORED).astype(np.uint64)


@dataclasses.dataclass(frozen=True)
class DocumentChanges:
    """How the documents of a corpus differ from those of the one before,
    counted as multisets of document hashes."""

    added: int
    removed: int
    unchanged: int

    def __add__(self, other: "DocumentChanges") -> "DocumentChanges":
        return DocumentChanges(self.added + other.added, self.removed + other.removed,
                               self.unchanged + other.unchanged)


def count_changes(current: np.ndarray, previous: np.ndarray) -> DocumentChanges:
    """Added, removed and unchanged documents between two arrays of hashes
    (any order; a hash present m times before and n times now is min(m, n)
    unchanged)."""
    now, now_counts = np.unique(current, return_counts=True)
    before, before_counts = np.unique(previous, return_counts=True)
    _, in_now, in_before = np.intersect1d(now, before, assume_unique=True,
                                          return_indices=True)
    unchanged = int(np.minimum(now_counts[in_now], before_counts[in_before]).sum())
    return DocumentChanges(added=len(current) - unchanged, removed=len(previous) - unchanged,
                           unchanged=unchanged)


def read_hashes(paths: Sequence[str], byte_range: range) -> np.ndarray:
    """The hashes of these files (one version's, in file order) whose first
    byte is in `byte_range`, sorted."""
    found = []
    for path in paths:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            found.append(decode(handle.read(), source=path))
    hashes = np.concatenate(found) if found else np.zeros(0, dtype=np.uint64)
    first = hashes >> np.uint64(56)
    return hashes[(first >= byte_range.start) & (first < byte_range.stop)]


def write_hash_file(path: str, hashes: np.ndarray) -> dict[str, Any]:
    """Writes a hash file; returns its documents, size and sha256."""
    data = encode(hashes)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        handle.write(data)
    return {"documents": len(hashes), "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


# --- Beam shell ------------------------------------------------------------------


class _HashDocumentsFn(beam.DoFn):
    """Documents -> (hash file, hashes as uint64 bytes), one per file a
    bundle touches (and early when the buffer is full)."""

    def __init__(self, *, num_files: int):
        self._num_files = num_files

    def start_bundle(self) -> None:
        self._hashes: list[int] = []

    def process(self, document: tuple[str, list[str]]) -> Iterator[tuple[int, bytes]]:
        self._hashes.append(document_hash(document[1]))
        if len(self._hashes) >= _BUFFER_HASHES:
            yield from self._flush()

    def finish_bundle(self) -> Iterator[Any]:
        for file_and_hashes in self._flush():
            yield GlobalWindows.windowed_value(file_and_hashes)

    def _flush(self) -> Iterator[tuple[int, bytes]]:
        hashes = np.array(self._hashes, dtype=np.uint64)
        self._hashes = []
        files = file_of(hashes, self._num_files)
        for index in np.unique(files).tolist():
            yield index, hashes[files == index].tobytes()


class _WriteHashFileFn(beam.DoFn):
    """(file, [hash blobs and the None marker]) -> the file written to
    staging, described, and compared with the previous version's hashes."""

    def __init__(self, *, paths: Sequence[str], previous: Sequence[str] | None):
        self._paths = tuple(paths)
        self._previous = None if previous is None else tuple(previous)

    def process(self, element: tuple[int, Iterable[bytes | None]]
                ) -> Iterator[dict[str, Any]]:
        index, blobs = element
        hashes = np.frombuffer(b"".join(b for b in blobs if b is not None), dtype=np.uint64)
        written = {"file": index, **write_hash_file(self._paths[index], hashes)}
        if self._previous is not None:
            covered = first_bytes(index, len(self._paths))
            old = read_hashes([self._previous[i] for i in
                               files_covering(covered, len(self._previous))], covered)
            written.update(previous_documents=len(old),
                           **dataclasses.asdict(count_changes(hashes, old)))
        yield written


class WriteDocumentHashes(beam.PTransform):
    """Documents (key, [lines]) -> one hash file per path of `paths`, each
    described by a dict {"file", "documents", "bytes", "sha256"}, plus, when
    `previous` (the previous version's hash files, in order) is given,
    {"previous_documents", "added", "removed", "unchanged"} for its range.

    Every file is written, an empty one too, so a version's files are always
    complete. The files' bytes depend only on the documents, not on bundles
    or workers.
    """

    def __init__(self, *, paths: Sequence[str], previous: Sequence[str] | None = None):
        super().__init__()
        if not 1 <= len(paths) <= MAX_HASH_FILES:
            raise ValueError(f"1 to {MAX_HASH_FILES} hash files, got {len(paths)}")
        if previous is not None and not 1 <= len(previous) <= MAX_HASH_FILES:
            raise ValueError(f"the previous version has {len(previous)} hash files; "
                             f"expected 1 to {MAX_HASH_FILES}")
        self._paths = tuple(paths)
        self._previous = previous

    def expand(self, documents: beam.PCollection) -> beam.PCollection:
        by_file = documents | "Hash" >> beam.ParDo(_HashDocumentsFn(num_files=len(self._paths)))
        # One marker per file, so that a file without documents is written too.
        every_file = (documents.pipeline
                      | "HashFileIndices" >> beam.Create(range(len(self._paths)))
                      | "AsMarkers" >> beam.Map(lambda index: (index, None)))
        return ((by_file, every_file)
                | "Join" >> beam.Flatten()
                | "GroupByHashFile" >> beam.GroupByKey()
                | "WriteHashFile" >> beam.ParDo(_WriteHashFileFn(paths=self._paths,
                                                                previous=self._previous)))
