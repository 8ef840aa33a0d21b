"""MDSShardWriter: MDS shard sets written a sample at a time, in Python.

The tests' reference for the format (transforms.write.mds): the library's
own MDSWriter, given the same samples, writes the same bytes
(tests/test_mds_format.py), and the pipeline's compiled writer
(transforms.write.mds_rows) is checked against both through the library's
reader.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from numbers import Integral
from typing import Any, BinaryIO, Callable

import numpy as np

from bert_pretraining_data.transforms.write.mds import (FORMAT, INDEX_NAME, VERSION,
                                                        encode_index, zstd_level)

DEFAULT_SIZE_LIMIT = 1 << 26  # the library's default
# The value dtypes an `ndarray` column may have (the library's table).
_ARRAY_DTYPES = ("uint8", "int8", "uint16", "int16", "float16", "uint32", "int32", "float32",
                 "uint64", "int64", "float64")
_SHAPE_DTYPES = ("<u1", "<u2", "<u4", "<u8")
_UINT32 = np.dtype("<u4")
_INT64 = np.dtype("<i8")


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
        level = zstd_level(compression)
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
