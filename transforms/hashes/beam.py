"""WriteDocumentHashes (the RecordDocuments step): a refresh's documents as
hash files (transforms.hashes.document_hashes), compared with the previous
version's.

Each bundle buffers its hashes per file; the buffers meet their file through
one GroupByKey (8 bytes a document shuffled), and one worker per file sorts,
writes and compares it with the previous version's hashes of the same range,
so a worker holds one file's hashes of both versions (docs/design-notes.md,
transforms.hashes.beam).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Iterable, Iterator, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows

from bert_pretraining_data.transforms.hashes.document_hashes import (MAX_HASH_FILES, count_changes,
                                                                     decode, document_hash, encode,
                                                                     file_of, files_covering,
                                                                     first_bytes)



# Hashes a bundle buffers before it flushes them (8 bytes each).
_BUFFER_HASHES = 1 << 20


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
