"""Bytes and lists that travel zstd-compressed through a runner's shuffle.

Dataflow Shuffle bills per byte, and a collection read by a later stage (the
document batches that wait for the dedup decisions, SpreadDocuments' batches)
passes through the service whole. At zstd level 3, text seen once shrinks to
~0.37 of what Beam's coder writes for it and tokenized documents to ~0.57
(less where copies repeat), compressed at ~200-340 MB/s a core
(bench/document_shuffle_bytes.py). CompressedList compresses only when it is
encoded: Beam's coder pickles a type it does not know (FastPrimitivesCoder's
fallback, in every Python SDK harness), and pickling it compresses, so a
batch that stays within a fused stage costs nothing, and its consumers get a
list either way. Only runs through the runner's shuffle (--shuffle=runner)
make them: the DirectRunner encodes between all its stages, and there they
cost 5-8% of a dupe-1 run's CPU for nothing billed.
"""

from __future__ import annotations

import pickle
import threading
from typing import Any

import zstandard

ZSTD_LEVEL = 3
# What a step that makes batches (lists, or CompressedLists through the
# runner's shuffle) says it yields: Any, whose coder pickles a CompressedList
# whole, compressing it. Beam picks a PCollection's coder from the step's
# annotations (from Beam 2.78), and for list[...] it would pick a ListCoder,
# which encodes the items one by one, uncompressed.
Batch = Any
# zstandard's contexts are not thread-safe, and an SDK harness runs bundles
# in threads: one compressor and decompressor per thread, reused.
_contexts = threading.local()


def compress(data: bytes) -> bytes:
    """`data` as one zstd frame (level ZSTD_LEVEL, its size in the header)."""
    if not hasattr(_contexts, "compressor"):
        _contexts.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return _contexts.compressor.compress(data)


def decompress(frame: bytes) -> bytes:
    """The bytes that `compress` made `frame` of."""
    if not hasattr(_contexts, "decompressor"):
        _contexts.decompressor = zstandard.ZstdDecompressor()
    return _contexts.decompressor.decompress(frame)


class CompressedList(list):
    """A list that pickles as one zstd frame of its items' pickle, and
    unpickles as a CompressedList again."""

    __slots__ = ()

    def __reduce__(self) -> tuple:
        return _unpickled, (compress(pickle.dumps(list(self), protocol=pickle.HIGHEST_PROTOCOL)),)


def _unpickled(frame: bytes) -> CompressedList:
    return CompressedList(pickle.loads(decompress(frame)))
