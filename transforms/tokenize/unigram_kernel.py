"""A Unigram model's compiled core: one call turns a line, normalized and
with its spaces made the Metaspace replacement, into the model's ids, as the
`tokenizers` library's Unigram computes them (SentencePiece's Viterbi, as
its `encode_optimized` runs it).

The line is split before every replacement character (Metaspace's
MergedWithNext) unless `params[SPLIT]` is 0, and each word takes the
best-scoring path: at each start, in order, every vocabulary piece that
begins there (shortest first) offers `score + best score so far` to the
position it ends at, which keeps the first offer unless a later one scores
strictly higher; a character no single-character piece covers offers the
unknown id at the lowest score minus 10. Runs of unknown ids fuse into one.
The pieces that begin at a start are found by walking a trie of them, one
hash probe a character (`build_trie`: edges (node, code point) -> node).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unicode import _get_code_point

# params: the unknown id (-1: none), the replacement character, whether
# words split before it.
UNK, REPLACEMENT, SPLIT = range(3)
UNENCODABLE = -1  # a character no piece covers and the model has no unknown id
UNK_PENALTY = 10.0  # SentencePiece's kUnkPenalty
_CODE_BITS = 21  # a code point's bits: an edge's key is node << 21 | code point
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier


@njit(cache=True, inline="always")
def _slot(key, shift):
    return np.int64((np.uint64(key) * _GOLDEN) >> np.uint64(shift))


@njit(cache=True)
def build_trie(pieces_chars, starts, lengths):
    """(edge keys, edge children, each node's piece id or -1, the table's
    shift) of the pieces (piece p: pieces_chars[starts[p]:][:lengths[p]])."""
    bits = 1
    while (1 << bits) < 4 * (lengths.sum() + 1):
        bits += 1
    keys = np.full(1 << bits, -1, dtype=np.int64)
    children = np.zeros(1 << bits, dtype=np.int32)
    piece_of = np.full(lengths.sum() + 1, -1, dtype=np.int64)
    shift = 64 - bits
    nodes = 1
    for p in range(len(lengths)):
        node = 0
        for i in range(starts[p], starts[p] + lengths[p]):
            key = (node << _CODE_BITS) | np.int64(pieces_chars[i])
            slot = _slot(key, shift)
            while keys[slot] != -1 and keys[slot] != key:
                slot = (slot + 1) & ((1 << bits) - 1)
            if keys[slot] == -1:
                keys[slot] = key
                children[slot] = nodes
                nodes += 1
            node = children[slot]
        piece_of[node] = p
    return keys, children, piece_of[:nodes], shift


@njit(cache=True)
def _viterbi(codes, lo, hi, keys, children, piece_of, shift, scores, params, unk_score,
             best, starts, ids, out, n):
    """Appends the ids of codes[lo:hi] to out[n:]; returns the new n."""
    size = hi - lo
    mask = len(keys) - 1
    for i in range(size + 1):
        starts[i] = -1
    best[0] = 0.0
    unk = params[UNK]
    for s in range(size):
        till_here = best[s]
        single = False
        node = 0
        for e in range(s, size):
            key = (node << _CODE_BITS) | codes[lo + e]
            slot = _slot(key, shift)
            while keys[slot] != key and keys[slot] != -1:
                slot = (slot + 1) & mask
            if keys[slot] == -1:  # no piece begins with codes[lo + s:lo + e + 1]
                break
            node = children[slot]
            found = piece_of[node]
            if found < 0:
                continue
            candidate = scores[found] + till_here
            if starts[e + 1] < 0 or candidate > best[e + 1]:
                best[e + 1] = candidate
                starts[e + 1] = s
                ids[e + 1] = found
            if e == s:
                single = True
        if not single:
            if unk < 0:
                return UNENCODABLE
            candidate = unk_score + till_here
            if starts[s + 1] < 0 or candidate > best[s + 1]:
                best[s + 1] = candidate
                starts[s + 1] = s
                ids[s + 1] = unk
    first = n
    end = size
    while end > 0:  # the path backwards, a run of unknown ids as one
        if not (ids[end] == unk and n > first and out[n - 1] == unk):
            out[n] = ids[end]
            n += 1
        end = starts[end]
    i, j = first, n - 1
    while i < j:  # into reading order, in place
        out[i], out[j] = out[j], out[i]
        i += 1
        j -= 1
    return n


@njit(cache=True)
def line_ids(text, keys, children, piece_of, shift, scores, params, unk_score, codes, best,
             starts, ids, out):
    """The ids of one prepared line into out[:n]; returns n, or UNENCODABLE.
    The buffers hold len(text) + 1 entries."""
    length = len(text)
    for i in range(length):
        codes[i] = _get_code_point(text, i)
    n = 0
    word = 0
    for i in range(1, length + 1):
        if i == length or (params[SPLIT] and codes[i] == params[REPLACEMENT]):
            n = _viterbi(codes, word, i, keys, children, piece_of, shift, scores, params,
                         unk_score, best, starts, ids, out, n)
            if n < 0:
                return n
            word = i
    return n
