"""Tokenized documents in flight: one compact bytes value instead of nested lists.

A list of lists of Python ints costs ~36 bytes per token once decoded (a
pointer plus an int object); runners that hold shuffled data or side inputs
in memory (the DirectRunner) hold every document that way. Packed, a token
costs 4 bytes, decoded or not. Documents are unpacked only where an
algorithm walks them, one document at a time.
"""

from __future__ import annotations

from array import array
from itertools import accumulate
from typing import Iterator, Sequence

PackedDocument = bytes


def pack_document(sentences: Sequence[Sequence[int]]) -> PackedDocument:
    """[sentence count, each sentence's length..., every token id...] as int32."""
    packed = array("i", [len(sentences)])
    packed.extend(len(s) for s in sentences)
    for sentence in sentences:
        packed.extend(sentence)
    return packed.tobytes()


def unpack_document(packed: PackedDocument) -> list[list[int]]:
    values = array("i")
    values.frombytes(packed)
    count = values[0]
    sentences = []
    start = 1 + count
    for length in values[1:1 + count]:
        sentences.append(values[start:start + length].tolist())
        start += length
    return sentences


def packed_token_count(packed: PackedDocument) -> int:
    """Tokens in a packed document, without unpacking it."""
    count = array("i", packed[:4])[0]
    return len(packed) // 4 - 1 - count


class PackedView:
    """Sentences of a packed document, unpacked only when read: a random-next
    segment reads a few sentences of a sampled document, not all of them."""

    __slots__ = ("_values", "_starts")

    def __init__(self, packed: PackedDocument) -> None:
        self._values = array("i")
        self._values.frombytes(packed)
        count = self._values[0]
        self._starts = list(accumulate(self._values[1:1 + count], initial=1 + count))

    def __len__(self) -> int:
        return len(self._starts) - 1

    def __getitem__(self, index: int | slice) -> list[int] | Iterator[list[int]]:
        """A sentence, or for a slice `[start:]` the sentences from there on, lazily."""
        if isinstance(index, slice):
            return (self[i] for i in range(*index.indices(len(self))))
        start, end = self._starts[index], self._starts[index + 1]
        return self._values[start:end].tolist()
