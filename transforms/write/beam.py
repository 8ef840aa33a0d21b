"""WriteShards: a deterministic global shuffle of entries into N shard files.

Entries go to shard `key % N`, and each bundle collects them per shard and
flushes at a byte budget. The blobs reach their shard through the runner's
GroupByKey (`--shuffle=runner`, the TFDS writer's pattern; Dataflow's Shuffle
service, billed by the byte: each blob a checksummed zstd frame,
transforms.handoff.shuffle.frames) or, on the DirectRunner, which holds a
GroupByKey's input in memory, through temporary bucket files with only
(shard, path) grouped (`--shuffle=files`). One worker writes each shard,
holding its entries, so a shard's entries should fit a worker twice. A
failed bundle's bucket files are never emitted; each shard's are swept after
a Reshuffle (a checkpoint), so a retried shard write still finds them. Under
`staging_dir`:
`buckets/shard-00003/<uuid>.bucket` (temporary) and one TFRecord file per shard.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows

from bert_pretraining_data.transforms.counters import FIGURES, BundleCounters, CountingDoFn
from bert_pretraining_data.transforms.handoff.shuffle.entries import (SHUFFLES, EntryBatch,
                                                                      scan_entries, split_by_shard)
from bert_pretraining_data.transforms.handoff.shuffle.frames import EntryCodebook, EntryFrames
from bert_pretraining_data.transforms.handoff.tokenized_documents import compact_arrays
from bert_pretraining_data.transforms.tokenize.chinese_words import MARK
from bert_pretraining_data.transforms.write.megatron import IndexedDatasetWriter
from bert_pretraining_data.transforms.write.rows import RawRecords, RowWriter
from bert_pretraining_data.transforms.write.shard_record import ShardRecord
from bert_pretraining_data.transforms.write.tfrecord import read_records



_BUCKETS = "buckets"


_BUCKET_SUFFIX = ".bucket"


# Bytes a bundle collects before it flushes: each flush is one bucket file per
# shard (`files`), or one GroupByKey value, a zstd frame, per shard (`runner`,
# where memory and the frames' sizes count: at 64 MiB a 750 GB job's 55,880
# shards get frames of ~1.2 KB, two to twelve instances; transforms.handoff.shuffle.frames).
BUFFER_BYTES = 64 << 20
# The writers' outputs: a dict per shard written, and their counts.
SHARDS = "shards"


_COMPRESSION = {None: CompressionTypes.UNCOMPRESSED, "gzip": CompressionTypes.GZIP}


def bucket_root(staging_dir: str) -> str:
    """The directory of all temporary bucket files of a run."""
    return FileSystems.join(staging_dir, _BUCKETS)


def bucket_dir(staging_dir: str, shard_index: int) -> str:
    """The directory of one shard's temporary bucket files."""
    return FileSystems.join(bucket_root(staging_dir), f"shard-{shard_index:05d}")


def bucket_path(staging_dir: str, shard_index: int, token: str) -> str:
    """One bucket file; `token` (a uuid hex) makes every bundle's file unique."""
    return FileSystems.join(bucket_dir(staging_dir, shard_index), token + _BUCKET_SUFFIX)


def bucket_glob(staging_dir: str, shard_index: int) -> str:
    """Matches every bucket file of a shard, including those of failed bundles."""
    return FileSystems.join(bucket_dir(staging_dir, shard_index), "*" + _BUCKET_SUFFIX)


def shard_path(staging_dir: str, shard_name: str) -> str:
    """Where WriteShards writes the shard named `shard_name`."""
    return FileSystems.join(staging_dir, shard_name)


def read_file(path: str) -> bytes:
    """A file's stored bytes."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return handle.read()


def read_tfrecord_file(path: str) -> list[bytes]:
    """All records of one file on any Beam filesystem; `.gz` etc. by extension."""
    with FileSystems.open(path) as handle:
        return list(read_records(handle))


def write_shard_file(path: str, chunks: Iterable[bytes | memoryview], *, records: int,
                     compression: str | None = None) -> dict[str, Any]:
    """Writes framed records (in chunks) as a TFRecord file; returns its record
    count, size and sha256.

    Beam's gzip writer (zlib with a gzip wrapper) puts no timestamp or file
    name in the header, so equal records give equal file bytes. The size and
    digest are of the bytes in the file: computed while writing when
    uncompressed, read back from the (much smaller) file when gzipped.
    """
    with shard_file(path, compression) as handle:
        for chunk in chunks:
            handle.write(chunk)
    if compression is None:
        return {"records": records, **handle.stats()}
    size, sha256 = file_digest(path)
    return {"records": records, "bytes": size, "sha256": sha256}


class ShardWriteError(OSError):
    """A shard file the storage did not take, named."""


# How much of a shard is written between two releases of its pages (_DigestingFile).
RELEASE_BYTES = 64 << 20


def _local_descriptor(handle) -> int | None:
    """The OS file descriptor of a local file being written, where page-cache
    advice exists; None for an object store's upload or a compressed stream."""
    if not hasattr(os, "posix_fadvise"):
        return None
    try:
        return handle.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None


class _DigestingFile:
    """A file being written, and the size and sha256 of what went in.

    A local file's pages are released from the page cache as it grows: every
    RELEASE_BYTES, POSIX_FADV_DONTNEED over what was written since the call
    before last, which starts the writeback of the newest pages and drops
    those the previous call started (written back by now). A run writes its
    output once and does not read it, and kept pages make every later write
    take fresh memory: on the bench machine a 200 MB short-document run spent
    17.1 system CPU-s writing 9.8 GB, 7.9 with the pages released
    (docs/design-notes.md, transforms.write.beam)."""

    def __init__(self, handle) -> None:
        self._handle, self.digest, self.size = handle, hashlib.sha256(), 0
        self._fd = _local_descriptor(handle)
        self._released = self._advised = 0

    def write(self, data: bytes | memoryview) -> None:
        self._handle.write(data)
        self.digest.update(data)
        self.size += len(data)
        if self._fd is not None and self.size - self._advised >= RELEASE_BYTES:
            self._release()

    def _release(self) -> None:
        self._handle.flush()
        try:
            os.posix_fadvise(self._fd, self._released, self.size - self._released,
                             os.POSIX_FADV_DONTNEED)
        except OSError:  # advice only: a file that takes none is written as before
            self._fd = None
        self._released, self._advised = self._advised, self.size

    def stats(self) -> dict[str, Any]:
        return {"bytes": self.size, "sha256": self.digest.hexdigest()}


@contextlib.contextmanager
def shard_file(path: str, compression: str | None = None) -> Iterator[_DigestingFile]:
    """A shard's file to write (compressed by `compression`), what goes in
    digested. Closing it finishes an object store's upload: where that fails
    though the file holds every byte written (a lost last response, below),
    the file is written; otherwise a ShardWriteError names it."""
    compression_type = _compression_type(compression)
    handle = FileSystems.create(path, compression_type=compression_type)
    written = _DigestingFile(handle)
    try:
        yield written
    except BaseException:
        handle.close()  # as a `with` would
        raise
    try:
        handle.close()
    except Exception as err:  # noqa: BLE001 - each filesystem's client has its own errors
        if not _stored(path, compression_type, written):
            raise ShardWriteError(f"writing {path}: {type(err).__name__}: {err}") from err


def _stored(path: str, compression_type: str, written: _DigestingFile) -> bool:
    """Whether `path` holds what was `written` (read through `compression_type`).
    An upload whose last response was lost is retried by the storage client,
    and a retried finished upload may be answered as an error (a GCS
    emulator's 404) though the object holds every byte: such a write is done."""
    try:
        return holds(path, written.size, written.digest.hexdigest(), compression_type)
    except Exception:  # noqa: BLE001 - unreadable: not done
        return False


def holds(path: str, size: int, sha256: str,
          compression_type: str = CompressionTypes.UNCOMPRESSED) -> bool:
    """Whether a file exists with exactly these bytes, read through
    `compression_type` (read only when its stored size can agree)."""
    found = FileSystems.match([path])[0].metadata_list
    if not found or (compression_type == CompressionTypes.UNCOMPRESSED
                     and found[0].size_in_bytes != size):
        return False
    return file_digest(path, compression_type) == (size, sha256)


def file_digest(path: str, compression_type: str = CompressionTypes.UNCOMPRESSED
                ) -> tuple[int, str]:
    """(size, sha256 hex) of a file's stored bytes (or, through
    `compression_type`, of what they hold)."""
    digest = hashlib.sha256()
    size = 0
    with FileSystems.open(path, compression_type=compression_type) as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def delete_files(paths: Iterable[str]) -> None:
    """Deletes files; ones already gone (an earlier attempt deleted them) are fine."""
    paths = sorted(set(paths))
    if not paths:
        return
    try:
        FileSystems.delete(paths)
    except BeamIOError as err:
        still_there = [p for p in err.exception_details if FileSystems.exists(p)]
        if still_there:
            raise


def _compression_type(compression: str | None) -> str:
    if compression not in _COMPRESSION:
        raise ValueError(f"compression must be None or 'gzip', got {compression!r}")
    return _COMPRESSION[compression]


class _ShardBuffersFn(CountingDoFn):
    """Collects a bundle's entries per shard; emits (shard, entries) at the
    bundle's end, and early when the buffer passes the byte budget."""

    def __init__(self, *, num_shards: int, max_buffer_bytes: int, compress: bool,
                 codebook: EntryCodebook | None):
        self._num_shards = num_shards
        self._max_buffer_bytes = max_buffer_bytes
        self._compress = compress
        self._codebook = codebook
        # what the entries put through the shuffle (or the bucket files)
        self._count = BundleCounters("shuffle_entry_bytes")

    def start_bundle(self) -> None:
        super().start_bundle()
        self._buffers: dict[int, list[np.ndarray]] = {}
        self._buffered_bytes = 0

    def setup(self) -> None:
        self._frames = EntryFrames(self._codebook) if self._compress else None

    def process(self, batch: EntryBatch) -> Iterator[tuple[int, bytes]]:
        for shard_index, entries in split_by_shard(batch, self._num_shards):
            self._buffers.setdefault(shard_index, []).append(entries)
            self._buffered_bytes += len(entries)
        if self._buffered_bytes >= self._max_buffer_bytes:
            yield from self._flush()

    def finish_bundle(self) -> Iterator[Any]:
        for shard_and_entries in self._flush():
            yield GlobalWindows.windowed_value(shard_and_entries)
        yield from super().finish_bundle()

    def _flush(self) -> Iterator[tuple[int, bytes]]:
        buffers, self._buffers, self._buffered_bytes = self._buffers, {}, 0
        for shard_index in sorted(buffers):  # one copy (a zstd frame), into what moves on
            entries = b"".join(buffers[shard_index])
            if self._frames is not None:
                entries = self._frames.compress(entries)
            self._count.counts["shuffle_entry_bytes"] += len(entries)
            yield shard_index, entries


class _WriteBucketFn(CountingDoFn):
    """(shard, entries) -> (shard, path of the bucket file now holding them);
    emitted only once the file is complete."""

    def __init__(self, *, staging_dir: str):
        self._staging_dir = staging_dir
        self._count = BundleCounters("bucket_files")

    def process(self, element: tuple[int, bytes]) -> Iterator[tuple[int, str]]:
        shard_index, entries = element
        path = bucket_path(self._staging_dir, shard_index, uuid.uuid4().hex)
        with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            handle.write(entries)
        self._count.counts["bucket_files"] += 1
        yield shard_index, path


def _file_written(folder: str, name: str, chunks: Iterable[bytes | memoryview]
                  ) -> dict[str, Any]:
    """Writes one file of a shard set; returns its size and sha256. (Outside
    the DoFn: Beam warns of a `return` in a `process` that yields.)"""
    stats = write_shard_file(FileSystems.join(folder, name), chunks, records=0)
    return {"bytes": stats["bytes"], "sha256": stats["sha256"]}


class _WriteShardFn(CountingDoFn):
    """Writes one shard from its grouped values: entries (`runner`), bucket
    file paths (`files`), and the None marker every shard gets."""

    def __init__(self, *, staging_dir: str, shard_names: Sequence[str],
                 compression: str | None, rows: RowWriter, codebook: EntryCodebook | None):
        self._staging_dir = staging_dir
        self._shard_names = tuple(shard_names)
        self._compression = compression
        self._rows = rows
        self._codebook = codebook
        self._count = BundleCounters("records_written")

    def setup(self) -> None:
        self._frames = EntryFrames(self._codebook)

    def process(self, element: tuple[int, Iterable[bytes | str | None]]
                ) -> Iterator[tuple[ShardRecord, list[str]]]:
        shard_index, values = element
        bucket_paths = []
        name = self._shard_names[shard_index]
        data = bytearray()  # the shard's entries, one copy: a blob is dropped once appended
        frames = 0
        for value in values:
            if isinstance(value, str):
                bucket_paths.append(value)
                data += read_file(value)
            elif value is not None:  # through the runner's shuffle: a frame
                data += self._frames.decompress(value, f"shuffle frame {frames} of shard {name}")
                frames += 1
        rows = self._rows.rows(*scan_entries(data, source=f"shard {name}"))
        del data
        if rows.file_name is None:
            stats = write_shard_file(shard_path(self._staging_dir, name), rows.chunks,
                                     records=rows.records, compression=self._compression)
        else:  # a folder of files: the records' file, then those made after it
            folder = shard_path(self._staging_dir, name)
            files = {rows.file_name: _file_written(folder, rows.file_name, rows.chunks)}
            for file_name, content in rows.after(files[rows.file_name]).items():
                files[file_name] = _file_written(folder, file_name, [content])
            stats = {"records": rows.records, "files": files,
                     "bytes": sum(f["bytes"] for f in files.values())}
        self._count.counts["records_written"] += stats["records"]
        yield (ShardRecord.from_json({"shard": shard_index, "name": name, **stats, **rows.stats}),
               sorted(bucket_paths))


class _DeleteBucketsFn(beam.DoFn):
    """Deletes a written shard's buckets, and any a failed bundle left behind."""

    def __init__(self, *, staging_dir: str):
        self._staging_dir = staging_dir

    def process(self, element: tuple[ShardRecord, list[str]]) -> Iterator[ShardRecord]:
        result, bucket_paths = element
        leftovers = FileSystems.match([bucket_glob(self._staging_dir, result.shard)])
        delete_files([*bucket_paths, *(m.path for m in leftovers[0].metadata_list)])
        yield result


class WriteShards(beam.PTransform):
    """EntryBatches -> one TFRecord file per shard name, through the runner's
    shuffle or through bucket files (`shuffle`, see the module docstring); both
    give the same bytes. How entries are batched never changes the output.

    Entry e goes to shard `key % len(shard_names)`; `rows` (default: the
    payloads are serialized records, `RawRecords`) sorts a shard's entries and
    makes its records. Every shard is written, an empty one as an empty (or
    empty gzip) file. Outputs SHARDS, a ShardRecord per shard (its records,
    bytes and sha256 as written under `staging_dir`, and the row writer's
    figures); and FIGURES, its counts.
    """

    def __init__(self, *, staging_dir: str, shard_names: Sequence[str],
                 compression: str | None = None, shuffle: str = "files",
                 max_buffer_bytes: int | None = None, rows: RowWriter | None = None,
                 codebook: EntryCodebook | None = None):
        super().__init__()
        shard_names = tuple(shard_names)
        if not shard_names:
            raise ValueError("shard_names must name at least one shard")
        if len(set(shard_names)) != len(shard_names):
            raise ValueError("shard_names must be unique")
        if shuffle not in SHUFFLES:
            raise ValueError(f"shuffle must be one of {', '.join(SHUFFLES)}, got {shuffle!r}")
        _compression_type(compression)
        self._staging_dir = staging_dir
        self._shard_names = shard_names
        self._compression = compression
        self._shuffle = shuffle
        self._rows = rows or RawRecords()
        self._codebook = codebook  # the runner's frames' (transforms.handoff.shuffle.frames)
        self._max_buffer_bytes = max_buffer_bytes or BUFFER_BYTES

    def expand(self, entries: beam.PCollection):
        num_shards = len(self._shard_names)
        buffered = (
            entries
            | "GlobalWindow" >> beam.WindowInto(GlobalWindows())
            | "BufferByShard" >> beam.ParDo(_ShardBuffersFn(
                num_shards=num_shards, max_buffer_bytes=self._max_buffer_bytes,
                compress=self._shuffle == "runner", codebook=self._codebook)
            ).with_outputs(FIGURES, main=SHARDS))
        by_shard, figures = buffered[SHARDS], [buffered[FIGURES]]
        if self._shuffle == "files":  # only paths go through the runner's shuffle
            buckets = by_shard | "WriteBuckets" >> beam.ParDo(
                _WriteBucketFn(staging_dir=self._staging_dir)).with_outputs(FIGURES, main=SHARDS)
            by_shard = buckets[SHARDS]
            figures.append(buckets[FIGURES])
        # One marker per shard, so that a shard without records is written too.
        every_shard = (
            entries.pipeline
            | "ShardIndices" >> beam.Create(range(num_shards))
            | "AsMarkers" >> beam.Map(lambda index: (index, None)))
        written = (
            (by_shard, every_shard)
            | "Join" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShard" >> beam.ParDo(_WriteShardFn(
                staging_dir=self._staging_dir, shard_names=self._shard_names,
                compression=self._compression, rows=self._rows,
                codebook=self._codebook)).with_outputs(FIGURES, main=SHARDS))
        figures = (*figures, written[FIGURES]) | "WriteFigures" >> beam.Flatten()
        if self._shuffle == "runner":
            return {SHARDS: written[SHARDS] | "Results" >> beam.Map(
                lambda written_shard: written_shard[0]), FIGURES: figures}
        return {SHARDS: (written[SHARDS]
                         # A checkpoint: a retried shard write must still find its buckets.
                         | "CheckpointWritten" >> beam.Reshuffle()
                         | "DeleteBuckets" >> beam.ParDo(
                             _DeleteBucketsFn(staging_dir=self._staging_dir))),
                FIGURES: figures}


def document_order(seed: int, doc_key: str) -> int:
    """A document's place among the indexed datasets' (its shard is this
    modulo their count, its place in the shard this order): a seeded hash of
    its key, so the order does not depend on reading, bundles or workers."""
    keyed = hashlib.blake2b(f"{seed}/{doc_key}".encode("utf-8", "surrogatepass"),
                            digest_size=8, person=b"indexed").digest()
    return int.from_bytes(keyed, "big") >> 1


class _WriteIndexedDataset(CountingDoFn):
    """(shard, [(order, doc_key, compact document) or None]) -> the shard's
    `.bin` and `.idx`, staged, and its entry for the manifest."""

    def __init__(self, *, staging_dir: str, shard_names: Sequence[str], dtype: str) -> None:
        self._staging_dir, self._shard_names, self._dtype = staging_dir, shard_names, dtype
        self._count = BundleCounters("indexed_sequences")

    def process(self, element: tuple[int, Iterable[tuple[int, str, bytes] | None]]
                ) -> Iterator[ShardRecord]:
        shard, documents = element
        name = self._shard_names[shard]
        files = {}
        with shard_file(FileSystems.join(self._staging_dir, f"{name}.bin")) as data:
            writer = IndexedDatasetWriter(data, np.dtype(self._dtype))
            for _, _, document in sorted(d for d in documents if d is not None):
                tokens, bounds = compact_arrays(document)
                tokens = tokens & (MARK - 1)  # a continuation's mark is not an id
                writer.add_document([tokens[bounds[s]:bounds[s + 1]]
                                     for s in range(len(bounds) - 1)])
            files["bin"] = data.stats()
        index = writer.index_bytes()
        with shard_file(FileSystems.join(self._staging_dir, f"{name}.idx")) as handle:
            handle.write(index)
        files["idx"] = handle.stats()
        self._count.counts["indexed_sequences"] += writer.sequences
        yield ShardRecord(shard=shard, name=name, records=writer.sequences,
                          bytes=files["bin"]["bytes"] + files["idx"]["bytes"], files=files,
                          figures={"documents": writer.documents, "tokens": writer.tokens})


class WriteIndexedDatasets(beam.PTransform):
    """(doc_key, compact document) -> Megatron-LM's indexed datasets, one
    `.bin` and `.idx` pair per shard name, one sequence per sentence
    (transforms.write.megatron): each document in the shard and place its
    seeded hash gives, every shard written (an empty one too). Outputs
    SHARDS, a ShardRecord per shard: its sequences, documents, tokens and
    files' sizes and sha256; and FIGURES, its counts."""

    def __init__(self, *, staging_dir: str, shard_names: Sequence[str], dtype: str,
                 seed: int) -> None:
        super().__init__()
        self._staging_dir, self._shard_names = staging_dir, tuple(shard_names)
        self._dtype, self._seed = dtype, seed

    def expand(self, documents):
        count, seed = len(self._shard_names), self._seed

        def placed(element: tuple[str, bytes]) -> tuple[int, tuple[int, str, bytes]]:
            order = document_order(seed, element[0])
            return order % count, (order, element[0], element[1])

        every_shard = (documents.pipeline
                       | "EveryShard" >> beam.Create([(shard, None) for shard in range(count)]))
        written = ((documents | "PlaceDocuments" >> beam.Map(placed), every_shard)
                   | "AllShards" >> beam.Flatten()
                   | "GroupShards" >> beam.GroupByKey()
                   | "WriteIndexed" >> beam.ParDo(_WriteIndexedDataset(
                       staging_dir=self._staging_dir, shard_names=self._shard_names,
                       dtype=self._dtype)).with_outputs(FIGURES, main=SHARDS))
        return {SHARDS: written[SHARDS], FIGURES: written[FIGURES]}
