"""Megatron-LM / NeMo indexed datasets: a `.bin` of token ids and its `.idx`.

Megatron's BERT dataset draws its sentence pairs and masks at training time
from one sequence per sentence and the documents' boundaries, which is what
`tools/preprocess_data.py --split-sentences` writes and what this writes. The
`.bin` is every sequence's ids back to back; the `.idx`, all little-endian, is
the magic `MMIDIDX\\0\\0`, version (uint64 1), the ids' dtype code (uint8),
the sequence count and the document-index count (uint64 each), the sequence
lengths (int32), their byte offsets in the `.bin` (int64), and the document
indices (int64): 0, then after each document the count of sequences so far.

The writer streams the ids to any binary handle (Beam's FileSystems, gs://)
and keeps only the index, 4 bytes a sentence and 8 a document, in memory.
"""

from __future__ import annotations

import array
import struct
from collections.abc import Sequence
from typing import BinaryIO

import numpy as np

BIN_SUFFIX = ".bin"
IDX_SUFFIX = ".idx"
_MAGIC = b"MMIDIDX\x00\x00"
_VERSION = 1
_COUNTS = struct.Struct("<QBQQ")  # version, dtype code, sequences, document indices
# The dtype codes of megatron.core.datasets.indexed_dataset.DType.
DTYPE_CODES: dict[np.dtype, int] = {
    np.dtype(name): code for code, name in enumerate(
        ("uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"), start=1)}
# Megatron stores ids as uint16 only below this vocabulary size (DType.optimal_dtype).
_UINT16_VOCABULARY_LIMIT = 65500


def megatron_dtype(vocab_size: int) -> np.dtype:
    """The dtype Megatron's preprocess_data.py picks for this vocabulary, so
    that our files match what its users expect to find."""
    if vocab_size > 1 << 31:
        raise ValueError(f"a vocabulary of {vocab_size:,} ids does not fit int32, the widest "
                         "id type Megatron's preprocess_data.py writes; use a smaller vocabulary")
    return np.dtype(np.uint16 if vocab_size < _UINT16_VOCABULARY_LIMIT else np.int32)


class IndexedDatasetWriter:
    """Writes documents of sentences to `bin_handle` as they come; `index_bytes`
    is then the whole `.idx`. The caller opens and closes both files, and
    writes neither when `sequences` is 0: megatron-core cannot map an empty
    `.bin`, so a dataset of no sentence does not open."""

    def __init__(self, bin_handle: BinaryIO, dtype: np.dtype | type) -> None:
        dtype = np.dtype(dtype)
        if dtype not in DTYPE_CODES or dtype.kind not in "iu":
            raise ValueError("token ids are stored as one of Megatron's integer dtypes, "
                             f"not {dtype.name}")
        self._handle = bin_handle
        self.dtype = dtype
        self._stored = dtype.newbyteorder("<")
        self._limits = np.iinfo(dtype)
        self._lengths = array.array("i")
        self._document_ends = array.array("q", [0])
        self.tokens = 0

    @property
    def sequences(self) -> int:
        return len(self._lengths)

    @property
    def documents(self) -> int:
        return len(self._document_ends) - 1

    def add_document(self, sentences: Sequence[np.ndarray | Sequence[int]]) -> None:
        """One sequence a sentence. Sentences of no token are left out, as
        preprocess_data.py leaves them, so a document of none adds nothing.
        A bad id raises before anything of the document is written."""
        arrays = [np.asarray(sentence) for sentence in sentences if len(sentence)]
        if not arrays:
            return
        for ids in arrays:
            if ids.ndim != 1 or ids.dtype.kind not in "iu":
                raise ValueError("a sentence is a flat sequence of integer ids, "
                                 f"not {ids.dtype.name} of shape {ids.shape}")
            low, high = int(ids.min()), int(ids.max())
            if low < self._limits.min or high > self._limits.max:
                bad = low if low < self._limits.min else high
                raise ValueError(f"token id {bad} does not fit {self.dtype.name} "
                                 f"({self._limits.min}..{self._limits.max})")
        self._handle.write(np.concatenate(arrays).astype(self._stored).tobytes())
        self._lengths.extend(len(ids) for ids in arrays)
        self.tokens += sum(len(ids) for ids in arrays)
        self._document_ends.append(len(self._lengths))

    def index_bytes(self) -> bytes:
        """The `.idx` of everything added so far."""
        lengths = np.asarray(self._lengths, dtype="<i4")
        pointers = np.zeros(len(lengths), dtype="<i8")
        np.cumsum(lengths[:-1], dtype=np.int64, out=pointers[1:])
        pointers *= self.dtype.itemsize
        return b"".join((
            _MAGIC,
            _COUNTS.pack(_VERSION, DTYPE_CODES[self.dtype], len(lengths),
                         len(self._document_ends)),
            lengths.tobytes(), pointers.tobytes(),
            np.asarray(self._document_ends, dtype="<i8").tobytes()))
