"""Deterministic global shuffle of records into N TFRecord shards.

Records arrive as shuffle *entries* (`RecordBatch`): a 63-bit shuffle key
then the record already framed as TFRecord bytes (transforms.tfrecord), one
batch per unit of work. Record r goes to shard `key % N`; within a shard, records
are sorted by (key, record). A shard's content and order therefore depend
only on the set of (key, record) pairs: not on bundles, workers, element
order or retries, nor on the path the entries took to their shard.

Each bundle collects its entries per shard (`_ShardBuffersFn`, flushed at a
byte budget), and the collected blobs reach their shard one of two ways
(`--shuffle`):

- `runner`: through the runner's GroupByKey, keyed by shard (the TFDS
  writer's pattern). On Dataflow this is the Shuffle service, built for
  exactly this data; storage sees only the shard files. The default on every
  runner but the DirectRunner.
- `files`: each blob goes to a temporary *bucket file* and only the small
  (shard, path) pairs are grouped. The DirectRunner keeps a GroupByKey's
  input in memory (20 times the corpus here), so it takes this path by
  default. On a distributed runner it would create a storage object per
  bundle and shard: millions for a Wikipedia-size job.

Either way one worker then writes each shard: it concatenates the shard's
blobs, sorts the entries by key (ties by record bytes) and writes the framed
records in that order. Memory: one bundle's buffer while collecting; about
twice one shard while writing (its entries plus the 1 MB chunks written), so
choose the number of shards so that a shard fits a worker twice.

Retries (`files`): a failed bundle's bucket files are never emitted, so they
are only garbage; each shard's bucket directory is swept after the shard is
written. The sweep runs after a Reshuffle (a checkpoint), so a retried shard
write still finds its buckets.

Layout under `staging_dir`:
  buckets/shard-00003/<uuid>.bucket   temporary (`files`), deleted by WriteShards
  <shard_name>                        one TFRecord file per shard
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows
from numba import njit
import numpy as np

from bert_pretraining_data.transforms.counters import counter
from bert_pretraining_data.transforms.tfrecord import FOOTER_SIZE, HEADER_SIZE, frame

_BUCKETS = "buckets"
_BUCKET_SUFFIX = ".bucket"
# Bytes a bundle collects before it flushes: each flush is one bucket file per
# shard (`files`), or one GroupByKey value per shard (`runner`, where only
# memory and the number of values count).
FILES_BUFFER_BYTES = 64 << 20
RUNNER_BUFFER_BYTES = 16 << 20
_WRITE_CHUNK_BYTES = 1 << 20
ENTRY_KEY_SIZE = 8  # an entry: shuffle key (uint64, little-endian), then the framed record
ENTRY_HEADER = ENTRY_KEY_SIZE + HEADER_SIZE  # an entry's bytes before its record's data
ENTRY_OVERHEAD = ENTRY_HEADER + FOOTER_SIZE  # an entry's bytes besides its record's data
_COMPRESSION = {None: CompressionTypes.UNCOMPRESSED, "gzip": CompressionTypes.GZIP}
SHUFFLES = ("runner", "files")


# --- Functional core -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RecordBatch:
    """Shuffle entries: entry i is entries[bounds[i]:bounds[i + 1]], its
    shuffle key (also keys[i]) followed by its framed TFRecord record."""

    keys: np.ndarray  # int64, below 2**63
    entries: np.ndarray  # uint8
    bounds: np.ndarray  # int64

    @classmethod
    def of(cls, pairs: Sequence[tuple[int, bytes]]) -> "RecordBatch":
        """Entries of (shuffle key, serialized record) pairs (the Python paths)."""
        keys = np.array([key for key, _ in pairs], dtype=np.int64)
        sizes = [len(record) for _, record in pairs]
        records = np.frombuffer(b"".join(record for _, record in pairs), dtype=np.uint8)
        record_bounds = np.zeros(len(pairs) + 1, dtype=np.int64)
        np.cumsum(sizes, out=record_bounds[1:])
        entries, bounds = _entries_of(keys, records, record_bounds)
        return cls(keys=keys, entries=entries, bounds=bounds)

    def __len__(self) -> int:
        return len(self.keys)


@njit(cache=True)
def close_entry(out, pos, key, length):
    """Completes the entry at out[pos:] whose record (`length` bytes) is
    already at out[pos + ENTRY_HEADER:]: writes the key before it and frames
    it; returns the entry's end. The record kernels write entries this way."""
    for b in range(ENTRY_KEY_SIZE):
        out[pos + b] = (key >> (8 * b)) & 0xFF
    return frame(out, pos + ENTRY_KEY_SIZE, length)


@njit(cache=True)
def _entries_of(keys, records, record_bounds):
    entries = np.empty(len(records) + ENTRY_OVERHEAD * len(keys), dtype=np.uint8)
    bounds = np.zeros(len(keys) + 1, dtype=np.int64)
    pos = 0
    for i in range(len(keys)):
        length = record_bounds[i + 1] - record_bounds[i]
        data = pos + ENTRY_HEADER
        entries[data:data + length] = records[record_bounds[i]:record_bounds[i + 1]]
        pos = close_entry(entries, pos, keys[i], length)
        bounds[i + 1] = pos
    return entries, bounds


@njit(cache=True)
def _gather(entries, bounds, order, skip):
    """The entries in `order`, each without its first `skip` bytes."""
    size = 0
    for i in order:
        size += bounds[i + 1] - bounds[i] - skip
    out = np.empty(size, dtype=np.uint8)
    out_bounds = np.zeros(len(order) + 1, dtype=np.int64)
    pos = 0
    for j in range(len(order)):
        i = order[j]
        length = bounds[i + 1] - bounds[i] - skip
        out[pos:pos + length] = entries[bounds[i] + skip:bounds[i + 1]]
        pos += length
        out_bounds[j + 1] = pos
    return out, out_bounds


@njit(cache=True)
def _scan_entries(data):
    """(keys, bounds) of concatenated entries; an entry that runs past the
    end is reported by bounds[-1] > len(data)."""
    count = 0
    pos = 0
    while pos < len(data):  # count them, then read them
        pos = _next_entry(data, pos)
        count += 1
    keys = np.empty(count, dtype=np.int64)
    bounds = np.zeros(count + 1, dtype=np.int64)
    for i in range(count):
        keys[i] = _uint64_at(data, bounds[i]) if bounds[i] + ENTRY_KEY_SIZE <= len(data) else 0
        bounds[i + 1] = _next_entry(data, bounds[i])
    return keys, bounds


@njit(cache=True)
def _next_entry(data, pos):
    """Where the entry at `pos` ends, from its record's TFRecord length field."""
    if pos + ENTRY_KEY_SIZE + 8 > len(data):
        return pos + ENTRY_OVERHEAD  # a truncated header: past the end
    return pos + ENTRY_OVERHEAD + _uint64_at(data, pos + ENTRY_KEY_SIZE)


@njit(cache=True)
def _uint64_at(data, pos):
    value = 0
    for b in range(8):
        value |= np.int64(data[pos + b]) << (8 * b)
    return value


def shard_of(key: int, num_shards: int) -> int:
    """The shard a key's record goes to."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    return key % num_shards


def split_by_shard(batch: RecordBatch, num_shards: int) -> list[tuple[int, np.ndarray]]:
    """(shard, its entries of the batch) for every shard the batch touches."""
    if not len(batch):
        return []
    if num_shards == 1:  # every small run: no per-record work at all
        return [(0, batch.entries)]
    shards = batch.keys % num_shards
    if (shards == shards[0]).all():
        return [(int(shards[0]), batch.entries)]
    order = np.argsort(shards, kind="stable")
    entries, bounds = _gather(batch.entries, batch.bounds, order, 0)
    in_order = shards[order]
    cuts = [0, *(np.flatnonzero(in_order[1:] != in_order[:-1]) + 1).tolist(), len(order)]
    return [(int(in_order[a]), entries[bounds[a]:bounds[b]]) for a, b in zip(cuts, cuts[1:])]


def sorted_records(data: bytes | bytearray, *, source: str = "shard"
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A shard's entries (all its blobs, concatenated) in shard order.

    Returns (entries, bounds, order): entry order[j] is the j-th record of the
    shard. Sorted by key, and records of equal keys by their bytes.

    Raises:
      ValueError: the data ends inside an entry (a truncated bucket file).
    """
    entries = np.frombuffer(data, dtype=np.uint8)
    keys, bounds = _scan_entries(entries)
    if bounds[-1] != len(entries):
        raise ValueError(f"{source}: truncated shuffle entry at byte {int(bounds[-2])}")
    order = np.argsort(keys, kind="stable")
    in_order = keys[order]
    ties = np.flatnonzero(in_order[1:] == in_order[:-1])
    start = 0
    for tie in ties.tolist():  # rare: 63-bit keys collide only by chance
        if tie < start:
            continue
        end = tie + 1
        while end < len(order) and in_order[end] == in_order[tie]:
            end += 1
        order[tie:end] = sorted(order[tie:end].tolist(), key=lambda i: _record_bytes(
            entries, bounds, i))
        start = end
    return entries, bounds, order


def _record_bytes(entries: np.ndarray, bounds: np.ndarray, i: int) -> bytes:
    return entries[bounds[i] + ENTRY_HEADER:bounds[i + 1] - FOOTER_SIZE].tobytes()


def framed_chunks(entries: np.ndarray, bounds: np.ndarray, order: np.ndarray, *,
                  size: int = _WRITE_CHUNK_BYTES) -> Iterator[memoryview]:
    """The framed records of entries `order`, in chunks of about `size` bytes
    (bytes-like views, written and hashed without another copy)."""
    if not len(order):
        return
    per_record = max(1, int(bounds[-1]) // len(order))
    step = max(1, size // per_record)
    for start in range(0, len(order), step):
        chunk, _ = _gather(entries, bounds, order[start:start + step], ENTRY_KEY_SIZE)
        yield memoryview(chunk)


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


def write_shard_file(path: str, chunks: Iterable[bytes | memoryview], *, records: int,
                     compression: str | None = None) -> dict[str, Any]:
    """Writes framed records (in chunks) as a TFRecord file; returns its record
    count, size and sha256.

    Beam's gzip writer (zlib with a gzip wrapper) puts no timestamp or file
    name in the header, so equal records give equal file bytes. The size and
    digest are of the bytes in the file: computed while writing when
    uncompressed, read back from the (much smaller) file when gzipped.
    """
    compression_type = _compression_type(compression)
    digest = hashlib.sha256()
    size = 0
    with FileSystems.create(path, compression_type=compression_type) as handle:
        for chunk in chunks:
            handle.write(chunk)
            if compression is None:
                digest.update(chunk)
                size += len(chunk)
    if compression is not None:
        size, sha256 = file_digest(path)
    else:
        sha256 = digest.hexdigest()
    return {"records": records, "bytes": size, "sha256": sha256}


def file_digest(path: str) -> tuple[int, str]:
    """(size, sha256 hex) of a file's stored bytes, without decompressing."""
    digest = hashlib.sha256()
    size = 0
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
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


# --- Beam shell ------------------------------------------------------------------


class _ShardBuffersFn(beam.DoFn):
    """Collects a bundle's entries per shard; emits (shard, entries) at the
    bundle's end, and early when the buffer passes the byte budget."""

    def __init__(self, *, num_shards: int, max_buffer_bytes: int):
        self._num_shards = num_shards
        self._max_buffer_bytes = max_buffer_bytes

    def start_bundle(self) -> None:
        self._buffers: dict[int, list[np.ndarray]] = {}
        self._buffered_bytes = 0

    def process(self, batch: RecordBatch) -> Iterator[tuple[int, bytes]]:
        for shard_index, entries in split_by_shard(batch, self._num_shards):
            self._buffers.setdefault(shard_index, []).append(entries)
            self._buffered_bytes += len(entries)
        if self._buffered_bytes >= self._max_buffer_bytes:
            yield from self._flush()

    def finish_bundle(self) -> Iterator[Any]:
        for shard_and_entries in self._flush():
            yield GlobalWindows.windowed_value(shard_and_entries)

    def _flush(self) -> Iterator[tuple[int, bytes]]:
        buffers, self._buffers, self._buffered_bytes = self._buffers, {}, 0
        for shard_index in sorted(buffers):  # one copy, into the bytes that move on
            yield shard_index, b"".join(buffers[shard_index])


class _WriteBucketFn(beam.DoFn):
    """(shard, entries) -> (shard, path of the bucket file now holding them);
    emitted only once the file is complete."""

    def __init__(self, *, staging_dir: str):
        self._staging_dir = staging_dir
        self._bucket_files = counter("bucket_files")

    def process(self, element: tuple[int, bytes]) -> Iterator[tuple[int, str]]:
        shard_index, entries = element
        path = bucket_path(self._staging_dir, shard_index, uuid.uuid4().hex)
        with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            handle.write(entries)
        self._bucket_files.inc()
        yield shard_index, path


class _WriteShardFn(beam.DoFn):
    """Writes one shard from its grouped values: entries (`runner`), bucket
    file paths (`files`), and the None marker every shard gets."""

    def __init__(self, *, staging_dir: str, shard_names: Sequence[str],
                 compression: str | None):
        self._staging_dir = staging_dir
        self._shard_names = tuple(shard_names)
        self._compression = compression
        self._records_written = counter("records_written")

    def process(self, element: tuple[int, Iterable[bytes | str | None]]
                ) -> Iterator[tuple[dict[str, Any], list[str]]]:
        shard_index, values = element
        bucket_paths = []
        data = bytearray()  # the shard's entries, one copy: a blob is dropped once appended
        for value in values:
            if isinstance(value, str):
                bucket_paths.append(value)
                data += read_file(value)
            elif value is not None:
                data += value
        name = self._shard_names[shard_index]
        entries, bounds, order = sorted_records(data, source=f"shard {name}")
        stats = write_shard_file(
            shard_path(self._staging_dir, name), framed_chunks(entries, bounds, order),
            records=len(order), compression=self._compression)
        self._records_written.inc(stats["records"])
        yield {"shard": shard_index, "name": name, **stats}, sorted(bucket_paths)


class _DeleteBucketsFn(beam.DoFn):
    """Deletes a written shard's buckets, and any a failed bundle left behind."""

    def __init__(self, *, staging_dir: str):
        self._staging_dir = staging_dir

    def process(self, element: tuple[dict[str, Any], list[str]]) -> Iterator[dict[str, Any]]:
        result, bucket_paths = element
        leftovers = FileSystems.match([bucket_glob(self._staging_dir, result["shard"])])
        delete_files([*bucket_paths, *(m.path for m in leftovers[0].metadata_list)])
        yield result


class WriteShards(beam.PTransform):
    """RecordBatches -> one TFRecord file per shard name, through the runner's
    shuffle or through bucket files (`shuffle`, see the module docstring); both
    give the same bytes. How records are batched never changes the output.

    Record r goes to shard `key % len(shard_names)`; within a shard, records are
    sorted by (key, record). Every shard is written, an empty one as an empty
    (or empty gzip) file. Outputs one dict per shard:
    {"shard", "name", "records", "bytes", "sha256"} describing the file as
    written under `staging_dir`.
    """

    def __init__(self, *, staging_dir: str, shard_names: Sequence[str],
                 compression: str | None = None, shuffle: str = "files",
                 max_buffer_bytes: int | None = None):
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
        self._max_buffer_bytes = max_buffer_bytes or (
            FILES_BUFFER_BYTES if shuffle == "files" else RUNNER_BUFFER_BYTES)

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        num_shards = len(self._shard_names)
        by_shard = (
            records
            | "GlobalWindow" >> beam.WindowInto(GlobalWindows())
            | "BufferByShard" >> beam.ParDo(_ShardBuffersFn(
                num_shards=num_shards, max_buffer_bytes=self._max_buffer_bytes)))
        if self._shuffle == "files":  # only paths go through the runner's shuffle
            by_shard = by_shard | "WriteBuckets" >> beam.ParDo(
                _WriteBucketFn(staging_dir=self._staging_dir))
        # One marker per shard, so that a shard without records is written too.
        every_shard = (
            records.pipeline
            | "ShardIndices" >> beam.Create(range(num_shards))
            | "AsMarkers" >> beam.Map(lambda index: (index, None)))
        written = (
            (by_shard, every_shard)
            | "Join" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShard" >> beam.ParDo(_WriteShardFn(
                staging_dir=self._staging_dir, shard_names=self._shard_names,
                compression=self._compression)))
        if self._shuffle == "runner":
            return written | "Results" >> beam.Map(lambda written_shard: written_shard[0])
        return (written
                # A checkpoint: a retried shard write must still find its buckets.
                | "CheckpointWritten" >> beam.Reshuffle()
                | "DeleteBuckets" >> beam.ParDo(_DeleteBucketsFn(staging_dir=self._staging_dir)))
