"""Tokenized documents in flight: one compact bytes value instead of nested lists.

Runners that hold shuffled data or side inputs in memory (the DirectRunner,
in several copies) would hold every document as Python ints; compacted, a
token costs 2 bytes (4 when an id needs more than 16 bits), and documents
are expanded only where an algorithm walks them (docs/design-notes.md,
transforms.handoff.tokenized_documents). Layout:
one typecode byte ("H" or "i", the array module's), then int32 sentence count
and lengths (a document may hold more than 65,535 sentences), then every
token id at the typecode's width.
"""

from __future__ import annotations

import sys
from array import array
from itertools import accumulate, chain
from typing import Iterator, NamedTuple, Sequence

import numpy as np
from numba import njit

CompactDocument = bytes

_NARROW, _WIDE = "H", "i"
_HEADER = "i"
_HEADER_SIZE = array(_HEADER).itemsize
_NARROW_CODE, _WIDE_CODE = ord(_NARROW), ord(_WIDE)
_ITEM_SIZES = {ord(code): array(code).itemsize for code in (_NARROW, _WIDE)}  # by typecode byte


class TokenizedDocument(NamedTuple):
    """What Tokenize makes of a document: its compact form (None: no sentence
    has a token, and the document is dropped) and its counts."""

    compact: CompactDocument | None
    sentences: int
    tokens: int
    unk_tokens: int
    without_tokens: int  # sentences with no token, left out


def compact_document(sentences: Sequence[Sequence[int]]) -> CompactDocument:
    """A document's sentences of token ids in the compact layout: 2 bytes an
    id when every id fits in 16 bits, else 4."""
    return compact_ids(list(chain.from_iterable(sentences)), list(map(len, sentences)))


def compact_ids(ids: list[int], lengths: list[int]) -> CompactDocument:
    """compact_document of the sentences of `lengths` laid end to end in `ids`
    (one flat list: an array is made of it in one step, and a caller counts
    in it without walking the sentences)."""
    header = array(_HEADER, [len(lengths), *lengths])
    try:
        tokens = array(_NARROW, ids)
    except OverflowError:  # an id of 65,536 or more
        tokens = array(_WIDE, ids)
    return b"".join((tokens.typecode.encode(), header.tobytes(), tokens.tobytes()))


@njit(cache=True)
def write_compact(ids: np.ndarray, bounds: np.ndarray, out: np.ndarray) -> tuple[int, int]:
    """compact_document of the sentences ids[bounds[s]:bounds[s + 1]] (those
    without ids left out), compiled, into out (uint8, room for compact_size's
    bytes); returns its size and its sentence count. For kernels that tokenize
    a document in one call (transforms.tokenize.wordpiece_kernel.lines_compact)."""
    wide = False
    for t in range(len(ids)):
        if ids[t] < 0 or ids[t] > 0xFFFF:
            wide = True
    out[0] = _WIDE_CODE if wide else _NARROW_CODE
    count = 0
    for s in range(len(bounds) - 1):
        if bounds[s + 1] > bounds[s]:
            count += 1
            _put(out, 1 + _HEADER_SIZE * count, np.int64(bounds[s + 1] - bounds[s]), 4)
    _put(out, 1, count, 4)
    pos = 1 + _HEADER_SIZE * (1 + count)
    width = 4 if wide else 2
    for t in range(len(ids)):
        _put(out, pos, ids[t], width)
        pos += width
    return pos, count


# write_counted's counts: the compact document's bytes, its ids, its
# sentences and its ids of the unknown token.
COMPACT_SIZE, ID_COUNT, SENTENCE_COUNT, UNK_COUNT = range(4)


@njit(cache=True)
def write_counted(ids: np.ndarray, bounds: np.ndarray, unk: int, out: np.ndarray,
                  counts: np.ndarray) -> None:
    """write_compact, and what Tokenize counts of the document into `counts`
    (COMPACT_SIZE, ID_COUNT, ...; `unk` is the unknown token's id, -1 for a
    vocabulary without one), so that no list is made to count in."""
    counts[COMPACT_SIZE], counts[SENTENCE_COUNT] = write_compact(ids, bounds, out)
    counts[ID_COUNT] = len(ids)
    unknown = 0
    for t in range(len(ids)):
        unknown += ids[t] == unk
    counts[UNK_COUNT] = unknown


@njit(cache=True)
def write_counted_buffers(ids: bytes, bounds: bytes, unk: int, out: np.ndarray,
                          counts: np.ndarray) -> None:
    """write_counted of ids and bounds given as bytes of uint32 and uint64 in
    the machine's order (fastokens' encode_batch_flat), read in place."""
    write_counted(np.frombuffer(ids, np.uint32), np.frombuffer(bounds, np.uint64), unk, out,
                  counts)


def compact_size(lines: int, tokens: int) -> int:
    """Bytes a compact document of up to this many sentences and ids may take."""
    return 1 + _HEADER_SIZE * (1 + lines) + 4 * tokens


@njit(cache=True, inline="always")
def _put(out, pos, value, width):
    """value's `width` low bytes, little-endian, at out[pos:pos + width]."""
    for b in range(width):
        out[pos + b] = (value >> (8 * b)) & 0xFF


def _layout(compact: CompactDocument) -> tuple[int, int]:
    """(sentence count, offset of the first token id)."""
    count = int.from_bytes(compact[1:1 + _HEADER_SIZE], sys.byteorder, signed=True)
    return count, 1 + _HEADER_SIZE * (1 + count)


def _expanded(compact: CompactDocument) -> tuple[array, array]:
    """(sentence lengths, token ids) as arrays."""
    count, body = _layout(compact)
    lengths = array(_HEADER)
    lengths.frombytes(compact[1 + _HEADER_SIZE:body])
    tokens = array(compact[:1].decode())
    tokens.frombytes(compact[body:])
    return lengths, tokens


def compact_arrays(compact: CompactDocument) -> tuple[np.ndarray, np.ndarray]:
    """(int32 token ids, int64 sentence bounds) without Python lists:
    sentence s is tokens[bounds[s]:bounds[s + 1]]."""
    return read_compact(np.frombuffer(compact, dtype=np.uint8))


@njit(cache=True)
def read_compact(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """compact_arrays of a compact document's bytes (uint8), compiled: what the
    instance kernels call on every document."""
    wide = data[0] == _WIDE_CODE
    count = _int32_at(data, 1)
    bounds = np.zeros(count + 1, dtype=np.int64)
    for s in range(count):
        bounds[s + 1] = bounds[s] + _int32_at(data, 1 + _HEADER_SIZE * (1 + s))
    body = 1 + _HEADER_SIZE * (1 + count)
    tokens = np.empty(bounds[count], dtype=np.int32)
    for t in range(bounds[count]):
        if wide:
            tokens[t] = _int32_at(data, body + 4 * t)
        else:
            tokens[t] = data[body + 2 * t] | (np.int32(data[body + 2 * t + 1]) << 8)
    return tokens, bounds


@njit(cache=True)
def _int32_at(data: np.ndarray, pos: int) -> int:
    """The little-endian int32 at data[pos:pos + 4]."""
    value = (np.int64(data[pos]) | (np.int64(data[pos + 1]) << 8)
             | (np.int64(data[pos + 2]) << 16) | (np.int64(data[pos + 3]) << 24))
    return value - (1 << 32) if value >= (1 << 31) else value


def expand_document(compact: CompactDocument) -> list[list[int]]:
    lengths, tokens = _expanded(compact)
    sentences = []
    start = 0
    for length in lengths:
        sentences.append(tokens[start:start + length].tolist())
        start += length
    return sentences


def compact_token_count(compact: CompactDocument) -> int:
    """Tokens in a compact document, without expanding it."""
    _, body = _layout(compact)
    return (len(compact) - body) // _ITEM_SIZES[compact[0]]


class CompactView:
    """Sentences of a compact document, expanded only when read: a random-next
    segment reads a few sentences of a sampled document, not all of them."""

    __slots__ = ("_tokens", "_starts")

    def __init__(self, compact: CompactDocument) -> None:
        lengths, self._tokens = _expanded(compact)
        self._starts = list(accumulate(lengths, initial=0))

    def __len__(self) -> int:
        return len(self._starts) - 1

    def __getitem__(self, index: int | slice) -> list[int] | Iterator[list[int]]:
        """A sentence, or for a slice `[start:]` the sentences from there on, lazily."""
        if isinstance(index, slice):
            return (self[i] for i in range(*index.indices(len(self))))
        start, end = self._starts[index], self._starts[index + 1]
        return self._tokens[start:end].tolist()
