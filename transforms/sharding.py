"""Deterministic global shuffle of serialized records into N TFRecord shards.

The output is about twenty times the corpus, and the DirectRunner keeps every
GroupByKey's input in memory, so records never go through a GroupByKey here.
Instead each bundle appends its records to temporary *bucket files*, one per
shard it touched; only the tiny (shard, bucket path) pairs are grouped. Each
shard is then written by one worker, which reads its buckets and sorts the
records by (shuffle key, record). The shard's content and order therefore
depend only on the set of (key, record) pairs: not on bundles, workers, element
order or retries. Memory is bounded by one bundle's buffer (flushed at a byte
budget) while bucketing and by one shard while writing, so choose the number of
shards so that a shard fits in a worker's memory.

Retries: a failed bucketing bundle's files are never emitted, so they are only
garbage; each shard's bucket directory is swept after the shard is written. The
sweep runs after a Reshuffle (a checkpoint), so a retried shard write still
finds its buckets.

Layout under `staging_dir`:
  buckets/shard-00003/<uuid>.bucket   temporary, deleted by WriteShards
  <shard_name>                        one TFRecord file per shard
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows

from transforms.counters import counter
from transforms.tfrecord import frame_record

_BUCKETS = "buckets"
_BUCKET_SUFFIX = ".bucket"
_DEFAULT_MAX_BUFFER_BYTES = 64 << 20
_WRITE_CHUNK_BYTES = 1 << 20
# Bucket file entry: shuffle key (uint64), record length (uint64), record bytes.
_BUCKET_ENTRY = struct.Struct("<QQ")
_COMPRESSION = {None: CompressionTypes.UNCOMPRESSED, "gzip": CompressionTypes.GZIP}


# --- Functional core -------------------------------------------------------------


def shard_of(key: int, num_shards: int) -> int:
    """The shard a key's record goes to."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    return key % num_shards


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


def encode_bucket_entry(key: int, record: bytes) -> bytes:
    """One (key, record) pair as stored in a bucket file."""
    return _BUCKET_ENTRY.pack(key, len(record)) + record


def decode_bucket(data: bytes, *, source: str = "bucket") -> list[tuple[int, bytes]]:
    """All (key, record) pairs of a bucket file's bytes.

    Raises:
      ValueError: the data ends inside an entry (a truncated file).
    """
    pairs = []
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        if offset + _BUCKET_ENTRY.size > len(data):
            raise ValueError(f"{source}: truncated bucket entry header at byte {offset}")
        key, length = _BUCKET_ENTRY.unpack_from(view, offset)
        start = offset + _BUCKET_ENTRY.size
        end = start + length
        if end > len(data):
            raise ValueError(f"{source}: truncated bucket entry at byte {offset}")
        pairs.append((key, bytes(view[start:end])))
        offset = end
    return pairs


def read_bucket(path: str) -> list[tuple[int, bytes]]:
    """All (key, record) pairs of one bucket file."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return decode_bucket(handle.read(), source=path)


def write_shard_file(path: str, records: Iterable[bytes], *,
                     compression: str | None = None) -> dict[str, Any]:
    """Writes records as a TFRecord file; returns its record count, size and sha256.

    Beam's gzip writer (zlib with a gzip wrapper) puts no timestamp or file
    name in the header, so equal records give equal file bytes. The size and
    digest are of the bytes in the file: computed while writing when
    uncompressed, read back from the (much smaller) file when gzipped.
    """
    compression_type = _compression_type(compression)
    digest = hashlib.sha256()
    num_records = 0
    size = 0
    with FileSystems.create(path, compression_type=compression_type) as handle:
        for chunk in _chunks(map(frame_record, records), _WRITE_CHUNK_BYTES):
            handle.write(chunk.data)
            num_records += chunk.records
            if compression is None:
                digest.update(chunk.data)
                size += len(chunk.data)
    if compression is not None:
        size, sha256 = file_digest(path)
    else:
        sha256 = digest.hexdigest()
    return {"records": num_records, "bytes": size, "sha256": sha256}


@dataclasses.dataclass(frozen=True)
class _Chunk:
    data: bytes
    records: int


def _chunks(framed: Iterable[bytes], size: int) -> Iterator[_Chunk]:
    """Framed records joined into writes of about `size` bytes: one write
    call per record costs more than the framing itself."""
    pending: list[bytes] = []
    pending_bytes = 0
    for record in framed:
        pending.append(record)
        pending_bytes += len(record)
        if pending_bytes >= size:
            yield _Chunk(b"".join(pending), len(pending))
            pending, pending_bytes = [], 0
    if pending:
        yield _Chunk(b"".join(pending), len(pending))


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


class _WriteBucketsFn(beam.DoFn):
    """Buffers a bundle's records per shard and writes one bucket file per shard.

    Emits (shard_index, bucket_path) only for files that were written
    completely; the buffer is flushed early when it passes the byte budget.
    """

    def __init__(self, *, staging_dir: str, num_shards: int, max_buffer_bytes: int):
        self._staging_dir = staging_dir
        self._num_shards = num_shards
        self._max_buffer_bytes = max_buffer_bytes
        self._bucket_files = counter("bucket_files")

    def start_bundle(self) -> None:
        self._buffers: dict[int, list[bytes]] = {}
        self._buffered_bytes = 0

    def process(self, batch: Sequence[tuple[int, bytes]]) -> Iterator[tuple[int, str]]:
        for key, record in batch:
            entry = encode_bucket_entry(key, record)
            self._buffers.setdefault(shard_of(key, self._num_shards), []).append(entry)
            self._buffered_bytes += len(entry)
        if self._buffered_bytes >= self._max_buffer_bytes:
            yield from self._flush()

    def finish_bundle(self) -> Iterator[Any]:
        for shard_and_path in self._flush():
            yield GlobalWindows.windowed_value(shard_and_path)

    def _flush(self) -> Iterator[tuple[int, str]]:
        buffers, self._buffers, self._buffered_bytes = self._buffers, {}, 0
        for shard_index in sorted(buffers):
            path = bucket_path(self._staging_dir, shard_index, uuid.uuid4().hex)
            with FileSystems.create(
                    path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
                handle.write(b"".join(buffers[shard_index]))
            self._bucket_files.inc()
            yield shard_index, path


class _WriteShardFn(beam.DoFn):
    """Writes one shard from its bucket files, sorted by (key, record)."""

    def __init__(self, *, staging_dir: str, shard_names: Sequence[str],
                 compression: str | None):
        self._staging_dir = staging_dir
        self._shard_names = tuple(shard_names)
        self._compression = compression
        self._records_written = counter("records_written")

    def process(self, element: tuple[int, Iterable[str | None]]
                ) -> Iterator[tuple[dict[str, Any], list[str]]]:
        shard_index, paths = element
        bucket_paths = sorted(p for p in paths if p is not None)
        pairs = [pair for path in bucket_paths for pair in read_bucket(path)]
        pairs.sort()
        name = self._shard_names[shard_index]
        stats = write_shard_file(
            shard_path(self._staging_dir, name), (record for _, record in pairs),
            compression=self._compression)
        self._records_written.inc(stats["records"])
        yield {"shard": shard_index, "name": name, **stats}, bucket_paths


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
    """Batches of (shuffle key, serialized record) pairs -> one TFRecord file per
    shard name. Batches (e.g. one per document) only save per-element runner
    work: how records are batched never changes the output.

    Record r goes to shard `key % len(shard_names)`; within a shard, records are
    sorted by (key, record). Every shard is written, an empty one as an empty
    (or empty gzip) file. Outputs one dict per shard:
    {"shard", "name", "records", "bytes", "sha256"} describing the file as
    written under `staging_dir`.
    """

    def __init__(self, *, staging_dir: str, shard_names: Sequence[str],
                 compression: str | None = None,
                 max_buffer_bytes: int = _DEFAULT_MAX_BUFFER_BYTES):
        super().__init__()
        shard_names = tuple(shard_names)
        if not shard_names:
            raise ValueError("shard_names must name at least one shard")
        if len(set(shard_names)) != len(shard_names):
            raise ValueError("shard_names must be unique")
        _compression_type(compression)
        self._staging_dir = staging_dir
        self._shard_names = shard_names
        self._compression = compression
        self._max_buffer_bytes = max_buffer_bytes

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        num_shards = len(self._shard_names)
        # Each bundle writes its records to bucket files; only paths move on.
        bucket_paths = (
            records
            | "GlobalWindow" >> beam.WindowInto(GlobalWindows())
            | "WriteBuckets" >> beam.ParDo(_WriteBucketsFn(
                staging_dir=self._staging_dir, num_shards=num_shards,
                max_buffer_bytes=self._max_buffer_bytes)))
        # One marker per shard, so that a shard without records is written too.
        every_shard = (
            records.pipeline
            | "ShardIndices" >> beam.Create(range(num_shards))
            | "AsMarkers" >> beam.Map(lambda index: (index, None)))
        return (
            (bucket_paths, every_shard)
            | "Join" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShard" >> beam.ParDo(_WriteShardFn(
                staging_dir=self._staging_dir, shard_names=self._shard_names,
                compression=self._compression))
            # A checkpoint: a retried shard write must still find its buckets.
            | "CheckpointWritten" >> beam.Reshuffle()
            | "DeleteBuckets" >> beam.ParDo(_DeleteBucketsFn(staging_dir=self._staging_dir)))
