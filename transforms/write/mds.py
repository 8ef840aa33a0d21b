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
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

INDEX_NAME = "index.json"
VERSION = 2
FORMAT = "mds"
LENGTH = "len"  # a row's token count, which ModernBERT's reader takes beside its ids
_ZSTD_LEVELS = range(1, 23)
_ZSTD_DEFAULT_LEVEL = 3


def zstd_level(compression: str | None) -> int | None:
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


def shard_file_name(compression: str) -> str:
    """The file of the pipeline's shard sets, one per output shard
    (compression `none` or `zstd`)."""
    return f"shard.00000.{FORMAT}" + (".zstd" if compression == "zstd" else "")


def read_samples(data: bytes) -> Iterator[dict[str, Any]]:
    """The samples of one shard (its uncompressed bytes), each column as the
    library decodes it: `bytes`, an `int`, or a numpy array."""
    count = int.from_bytes(data[:4], "little")
    offsets = np.frombuffer(data, "<u4", count + 1, 4).tolist()
    settings = json.loads(data[4 * (count + 2):offsets[0]])
    columns = list(zip(settings["column_names"], settings["column_encodings"],
                       settings["column_sizes"]))
    variable = sum(size is None for _, _, size in columns)
    for begin in offsets[:-1]:
        sizes = iter(np.frombuffer(data, "<u4", variable, begin).tolist())
        at = begin + 4 * variable
        sample = {}
        for name, encoding, size in columns:
            size = next(sizes) if size is None else size
            sample[name] = _decode(encoding, data[at:at + size])
            at += size
        yield sample


def _decode(encoding: str, data: bytes) -> Any:
    if encoding == "bytes":
        return data
    if encoding == "int":
        return int.from_bytes(data, "little", signed=True)
    dtype = np.dtype(encoding.partition(":")[2]).newbyteorder("<")
    ndim, code = data[0] >> 2, data[0] & 3
    shape = np.frombuffer(data, f"<u{1 << code}", ndim, 1)
    return np.frombuffer(data, dtype, offset=1 + ndim * (1 << code)).reshape(shape)


def encode_index(index: Mapping[str, Any]) -> bytes:
    """An `index.json`'s bytes, keys sorted as the library writes them."""
    return json.dumps(index, sort_keys=True).encode()


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

