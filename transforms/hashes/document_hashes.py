"""Document hashes: what a corpus holds, 8 bytes a document, and how two corpora differ.

A refresh (pipeline.refresh) stores the hash of every document it read beside
each version and compares them with the version before's: hashes, never
texts. The hash (`document_hash`) is of the text *as read*, so it is the same
in every format and place, and a moved document is not "changed". Hash files
are sorted big-endian uint64s, file i of n holding the hashes whose first
byte b has b * n // 256 == i, so the files in order are one sorted list and a
file of two versions can be compared alone, whatever their numbers of files.
(Sizes, collision odds: docs/design-notes.md, transforms.hashes.document_hashes.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Sequence

import numpy as np

HASH_BYTES = 8
_STORED = np.dtype(">u8")  # as stored: big-endian, so byte order is numeric order
MAX_HASH_FILES = 256  # one per value of a hash's first byte
# Input bytes per hash file: a worker holds a few MB of hashes per file
# (the arithmetic: docs/design-notes.md, transforms.hashes.document_hashes).
INPUT_BYTES_PER_HASH_FILE = 256 << 20


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




