"""MosaicML Streaming's MDS format, written without mosaicml-streaming.

ModernBERT, mmBERT, Ettin and EuroBERT train from MDS shard sets through
Composer's `StreamingDataset`; the library itself pins numpy and pulls torch,
so it cannot be in the pipeline's install, and this writes what it reads
(streaming 0.13, index version 2). All integers are little-endian.

A shard set is a folder of `shard.NNNNN.mds` files (`shard.NNNNN.mds.zstd`
when compressed) and its `index.json`. A shard is: the sample count (uint32),
the n + 1 offsets from the file's start at which each sample begins and the
last ends (uint32), the shard's settings as sorted-key JSON, then the samples.
A sample is its columns in name order: first the byte size (uint32) of each
column whose size varies, then each column's bytes. Encodings:

- `bytes`: the bytes as they are;
- `int`: an int64, fixed size 8;
- `ndarray:<dtype>`: one byte `ndim << 2 | k`, the shape as uint8/16/32/64
  (k = 0..3, the smallest that holds every dimension), then the values;
  with the dtype in the name no dtype byte is stored.

A shard's uncompressed size stays within `size_limit` (the library's count,
which is exactly the file's size); a single sample larger than that is a
shard on its own. The index lists every shard with its settings, sample
count and files (`raw_data`; `zip_data` when compressed, else null). A
dataset of several shard sets in subfolders has a top-level index of all
their shards, basenames prefixed with the subfolder (the library's
`merge_index`), which `StreamingDataset(local=...)` reads in that order.

The same samples give the same bytes: sorted keys everywhere, no timestamps,
single-threaded zstd (the `zstandard` package, which Apache Beam installs).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any, BinaryIO, Callable

import numpy as np

INDEX_NAME = "index.json"
VERSION = 2
FORMAT = "mds"
LAYOUTS = ("modernbert", "compact")
DEFAULT_SIZE_LIMIT = 1 << 26  # the library's default
_ZSTD_LEVELS = range(1, 23)
_ZSTD_DEFAULT_LEVEL = 3
# The value dtypes an `ndarray` column may have (the library's table).
_ARRAY_DTYPES = ("uint8", "int8", "uint16", "int16", "float16", "uint32", "int32", "float32",
                 "uint64", "int64", "float64")
_SHAPE_DTYPES = ("<u1", "<u2", "<u4", "<u8")
_UINT32 = np.dtype("<u4")
_INT64 = np.dtype("<i8")
# The largest vocabulary whose ids `compact` stores as uint16.
_UINT16_VOCABULARY = 1 << 16


def _check_encoding(encoding: str) -> int | None:
    """The fixed byte size of `encoding` (None when it varies); raises for
    one this writer does not write."""
    if encoding == "bytes":
        return None
    if encoding == "int":
        return _INT64.itemsize
    kind, _, dtype = encoding.partition(":")
    if kind == "ndarray" and dtype in _ARRAY_DTYPES:
        return None
    raise ValueError(f"unsupported MDS encoding {encoding!r}: bytes, int or "
                     f"ndarray:<dtype> with a dtype of {', '.join(_ARRAY_DTYPES)}")


def encode_value(encoding: str, value: Any) -> bytes:
    """One column's bytes in a sample."""
    if encoding == "bytes":
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"a bytes column takes bytes, not {type(value).__name__}")
        return bytes(value)
    if encoding == "int":
        if not isinstance(value, Integral) or isinstance(value, bool):
            raise TypeError(f"an int column takes an integer, not {type(value).__name__}")
        if not -(1 << 63) <= value < 1 << 63:
            raise OverflowError(f"{value} does not fit an MDS int (int64)")
        return int(value).to_bytes(8, "little", signed=True)
    dtype = encoding.partition(":")[2]
    if not isinstance(value, np.ndarray) or value.dtype.name != dtype:
        got = value.dtype.name if isinstance(value, np.ndarray) else type(value).__name__
        raise TypeError(f"an {encoding} column takes a numpy array of {dtype}, not {got}")
    if value.ndim == 0 or value.ndim >= 64 or value.size == 0:
        raise ValueError(f"an {encoding} column takes 1 to 63 axes and some values, "
                         f"not shape {value.shape}")
    code = next(k for k, limit in enumerate((8, 16, 32, 64)) if max(value.shape) < 1 << limit)
    shape = np.asarray(value.shape, _SHAPE_DTYPES[code]).tobytes()
    values = value.astype(np.dtype(dtype).newbyteorder("<"), copy=False).tobytes()
    return bytes([value.ndim << 2 | code]) + shape + values


def _zstd_level(compression: str | None) -> int | None:
    """The zstd level of a compression named as the library names it
    (`zstd`, `zstd:<level>`), None for none."""
    if compression is None:
        return None
    name, _, level = compression.partition(":")
    if name == "zstd" and not level:
        return _ZSTD_DEFAULT_LEVEL
    if name == "zstd" and level.isdigit() and int(level) in _ZSTD_LEVELS:
        return int(level)
    raise ValueError(f"unsupported MDS compression {compression!r}: None, zstd or zstd:1..22")


def encode_index(index: Mapping[str, Any]) -> bytes:
    """An `index.json`'s bytes, keys sorted as the library writes them."""
    return json.dumps(index, sort_keys=True).encode()


class MDSShardWriter:
    """Writes one MDS shard set (its shards, then its `index.json`) into
    `folder` through `create(path)`, which opens a new file for writing
    (Beam's `FileSystems.create` in the pipeline), and `join(folder, name)`.

    `columns` maps names to encodings; `add` takes samples with exactly those
    keys. A shard is written when the next sample would take it past
    `size_limit` bytes; `finish` writes the last one and the index, and
    returns the index."""

    def __init__(self, folder: str, columns: Mapping[str, str], *,
                 create: Callable[[str], BinaryIO], join: Callable[[str, str], str],
                 compression: str | None = None,
                 size_limit: int = DEFAULT_SIZE_LIMIT) -> None:
        if not columns:
            raise ValueError("an MDS shard set has at least one column")
        if not 0 < size_limit < 1 << 32:
            raise ValueError(f"size_limit is 1 to 2**32 - 1 bytes (offsets are uint32), "
                             f"not {size_limit}")
        self._folder, self._create, self._join = folder, create, join
        self._names = sorted(columns)
        self._encodings = [columns[name] for name in self._names]
        self._sizes = [_check_encoding(encoding) for encoding in self._encodings]
        level = _zstd_level(compression)
        if level is not None:
            import zstandard  # only a compressed shard set needs it

            self._compressor = zstandard.ZstdCompressor(level=level)
        else:
            self._compressor = None
        self._settings = {
            "column_encodings": self._encodings, "column_names": self._names,
            "column_sizes": self._sizes, "compression": compression, "format": FORMAT,
            "hashes": [], "size_limit": size_limit, "version": VERSION}
        self._config = json.dumps(self._settings, sort_keys=True).encode()
        self._size_limit = size_limit
        self._samples: list[bytes] = []
        self._shard_size = 0
        self._shards: list[dict[str, Any]] = []
        self._finished = False

    def add(self, sample: Mapping[str, Any]) -> None:
        """Appends a sample, first writing the shard it would overflow."""
        if self._finished:
            raise RuntimeError("the shard set is finished")
        if set(sample) != set(self._names):
            raise KeyError(f"a sample has the columns {self._names}, not {sorted(sample)}")
        values = [encode_value(encoding, sample[name])
                  for name, encoding in zip(self._names, self._encodings)]
        sizes = [len(value) for value, size in zip(values, self._sizes) if size is None]
        encoded = np.asarray(sizes, _UINT32).tobytes() + b"".join(values)
        # Each sample costs its bytes and its offset; a shard its count,
        # its last offset and its settings.
        if self._samples and self._shard_size + len(encoded) + 4 > self._size_limit:
            self._write_shard()
        if not self._samples:
            self._shard_size = 8 + len(self._config)
        self._samples.append(encoded)
        self._shard_size += len(encoded) + 4

    def finish(self) -> dict[str, Any]:
        """Writes the last shard and `index.json`; returns the index."""
        if self._finished:
            raise RuntimeError("the shard set is finished")
        if self._samples:
            self._write_shard()
        self._finished = True
        index = {"shards": self._shards, "version": VERSION}
        self._write(INDEX_NAME, encode_index(index))
        return index

    def _write_shard(self) -> None:
        count = len(self._samples)
        header = 4 * (count + 2) + len(self._config)
        offsets = np.cumsum([header, *map(len, self._samples)], dtype=np.int64)
        raw = b"".join((np.asarray([count], _UINT32).tobytes(), offsets.astype(_UINT32).tobytes(),
                        self._config, *self._samples))
        raw_name = f"shard.{len(self._shards):05d}.{FORMAT}"
        shard = {**self._settings, "samples": count,
                 "raw_data": {"basename": raw_name, "bytes": len(raw), "hashes": {}},
                 "zip_data": None}
        if self._compressor is None:
            self._write(raw_name, raw)
        else:
            packed = self._compressor.compress(raw)
            zip_name = f"{raw_name}.zstd"
            shard["zip_data"] = {"basename": zip_name, "bytes": len(packed), "hashes": {}}
            self._write(zip_name, packed)
        self._shards.append(shard)
        self._samples = []

    def _write(self, name: str, data: bytes) -> None:
        with self._create(self._join(self._folder, name)) as handle:
            handle.write(data)


def merge_indexes(subfolder_indexes: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The top-level index of a dataset whose shard sets are in subfolders
    (relative, `/`-separated), their shards in the order given, as the
    library's `merge_index` makes it."""
    shards = []
    for subfolder, index in subfolder_indexes:
        if index.get("version") != VERSION:
            raise ValueError(f"{subfolder}: index version {index.get('version')}, not {VERSION}")
        for shard in index["shards"]:
            merged = dict(shard)
            for key in ("raw_data", "zip_data"):
                if shard[key]:
                    basename = posixpath.join(subfolder, shard[key]["basename"])
                    merged[key] = {**shard[key], "basename": basename}
            shards.append(merged)
    return {"shards": shards, "version": VERSION}


def layout_columns(layout: str, vocab_size: int) -> dict[str, str]:
    """A layout's columns. `modernbert`: what ModernBERT's tokenized reader
    takes (`input_ids` and `attention_mask` as raw int64 bytes, `len` their
    length); `compact`: `input_ids` alone as an array of the smallest
    unsigned dtype that holds every id (as Ettin stores them)."""
    if layout == "modernbert":
        return {"input_ids": "bytes", "attention_mask": "bytes", "len": "int"}
    if layout == "compact":
        return {"input_ids": "ndarray:uint16" if vocab_size <= _UINT16_VOCABULARY
                else "ndarray:uint32"}
    raise ValueError(f"unknown MDS layout {layout!r}: one of {', '.join(LAYOUTS)}")


def layout_sample(layout: str, vocab_size: int, input_ids: Sequence[int] | np.ndarray
                  ) -> dict[str, Any]:
    """The sample of `layout_columns`' columns for one sequence of ids."""
    columns = layout_columns(layout, vocab_size)
    ids = np.asarray(input_ids, np.int64)
    if layout == "modernbert":
        return {"input_ids": ids.astype(_INT64).tobytes(),
                "attention_mask": np.ones(len(ids), _INT64).tobytes(), "len": len(ids)}
    dtype = np.dtype(columns["input_ids"].partition(":")[2])
    if len(ids) and (ids.min() < 0 or ids.max() > np.iinfo(dtype).max):
        raise ValueError(f"token ids {ids.min()}..{ids.max()} do not fit {dtype.name}")
    return {"input_ids": ids.astype(dtype)}
