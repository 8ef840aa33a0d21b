"""Gopher's n-gram repetition figures of a document, compiled: the most
frequent 2-, 3- and 4-gram's characters and the repeated 5- to 10-grams'
characters, as datatrove computes them with Python strings (transforms.quality
.rules), from the words laid end to end as code points.

An n-gram is found again through a hash table of 64-bit polynomial hashes,
each hit checked character by character, so the figures are exact. The top
n-grams are word sequences (their words joined by spaces: two are the same
when their words are); the repeated ones are their words joined without
spaces (two are the same when those strings are, whatever their words).
"""

from __future__ import annotations

import numpy as np
from numba import njit

TOP = (2, 3, 4)
REPEATED = (5, 6, 7, 8, 9, 10)
_BASE = np.uint64(0x100000001B3)


@njit(cache=True)
def _prefix_hashes(codes):
    hashes = np.zeros(len(codes) + 1, dtype=np.uint64)
    powers = np.ones(len(codes) + 1, dtype=np.uint64)
    for k in range(len(codes)):
        hashes[k + 1] = hashes[k] * _BASE + np.uint64(codes[k]) + np.uint64(1)
        powers[k + 1] = powers[k] * _BASE
    return hashes, powers


@njit(cache=True, inline="always")
def _span_hash(hashes, powers, start, stop):
    return hashes[stop] - hashes[start] * powers[stop - start]


@njit(cache=True)
def _same_text(codes, a, b, length):
    for k in range(length):
        if codes[a + k] != codes[b + k]:
            return False
    return True


@njit(cache=True)
def _same_words(codes, offsets, i, j, n):
    for k in range(n):
        if offsets[i + k + 1] - offsets[i + k] != offsets[j + k + 1] - offsets[j + k]:
            return False
    return _same_text(codes, offsets[i], offsets[j], offsets[i + n] - offsets[i])


@njit(cache=True)
def _find(table, keys, codes, offsets, i, n, key, words):
    """The slot of n-gram i in `table` (entries: first position, or -1),
    an empty one if it is not there."""
    mask = len(table) - 1
    slot = np.int64(key & np.uint64(mask))
    while table[slot] >= 0:
        j = table[slot]
        if keys[slot] == key:
            length = offsets[i + n] - offsets[i]
            if words:
                if _same_words(codes, offsets, i, j, n):
                    return slot
            elif offsets[j + n] - offsets[j] == length and _same_text(
                    codes, offsets[i], offsets[j], length):
                return slot
        slot = (slot + 1) & mask
    return slot


@njit(cache=True)
def _top_characters(codes, offsets, hashes, powers, n, table, keys, counts):
    """The most frequent n-gram's characters (words joined by spaces) times
    its count, the earliest first seen among equals; 0 without n-grams."""
    grams = len(offsets) - n
    if grams <= 0:
        return 0
    table[:] = -1
    best_count, best_first = 0, 0
    for i in range(grams):
        key = _span_hash(hashes, powers, offsets[i], offsets[i + n])
        slot = _find(table, keys, codes, offsets, i, n, key, True)
        if table[slot] < 0:
            table[slot], keys[slot], counts[slot] = i, key, 0
        counts[slot] += 1
        first = table[slot]
        if counts[slot] > best_count or counts[slot] == best_count and first < best_first:
            best_count, best_first = counts[slot], first
    length = offsets[best_first + n] - offsets[best_first] + n - 1
    return length * best_count


@njit(cache=True)
def _repeated_characters(codes, offsets, hashes, powers, n, table, keys):
    """Characters of the n-grams (words joined without spaces) seen before,
    reading on after a repeat's last word (its n-grams never seen)."""
    grams = len(offsets) - n
    table[:] = -1
    repeated = 0
    i = 0
    while i < grams:
        key = _span_hash(hashes, powers, offsets[i], offsets[i + n])
        slot = _find(table, keys, codes, offsets, i, n, key, False)
        if table[slot] >= 0:
            repeated += offsets[i + n] - offsets[i]
            i += n
        else:
            table[slot], keys[slot] = i, key
            i += 1
    return repeated


@njit(cache=True)
def ngram_characters(codes, offsets):
    """[top 2-, 3-, 4-gram characters, repeated 5- ... 10-gram characters] of
    the words codes[offsets[k]:offsets[k + 1]]."""
    hashes, powers = _prefix_hashes(codes)
    size = 1
    while size < 2 * len(offsets):
        size *= 2
    table = np.empty(size, dtype=np.int64)
    keys = np.empty(size, dtype=np.uint64)
    counts = np.empty(size, dtype=np.int64)
    out = np.zeros(len(TOP) + len(REPEATED), dtype=np.int64)
    for k in range(len(TOP)):
        out[k] = _top_characters(codes, offsets, hashes, powers, TOP[k], table, keys, counts)
    for k in range(len(REPEATED)):
        out[len(TOP) + k] = _repeated_characters(codes, offsets, hashes, powers, REPEATED[k],
                                                 table, keys)
    return out
