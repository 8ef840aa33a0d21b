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
hash probe a character (`build_trie`: edges (node, code point) -> node), the
first character's edge from a table indexed by code point (every start takes
that step: a third of them on English text).

A word's ids depend on the word alone, so the kernel keeps the ids of the
words it has seen (up to WORD_CACHE_CHARACTERS characters), as the library
does: running text repeats its words, and a hit copies the ids for a hash
and a compare of the characters in place of a trie walk per start
(bench/README.md, "Tokenizer engines": the kernel's speed with and
without it). The cache is emptied whole when its table is half full or its
pool full.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unicode import _get_code_point

# params: the unknown id (-1: none), the replacement character, whether
# words split before it; the word cache's pool entries and words in use.
UNK, REPLACEMENT, SPLIT, POOL_USED, WORDS_CACHED = range(5)
UNENCODABLE = -1  # a character no piece covers and the model has no unknown id
UNK_PENALTY = 10.0  # SentencePiece's kUnkPenalty
_CODE_BITS = 21  # a code point's bits: an edge's key is node << 21 | code point
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier
_ROOT_CODES = 0x10000  # first characters in the Basic Multilingual Plane take the root table
WORD_CACHE_CHARACTERS = 32  # longer words are not cached
_WORD_CACHE_BITS = 16
WORD_CACHE_SLOTS = 1 << _WORD_CACHE_BITS  # the cache's rows: hash, pool start, characters, ids
WORD_CACHE_POOL = 1 << 19  # int32 entries holding the cached words' characters then ids
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@njit(cache=True, inline="always")
def _slot(key, shift):
    return np.int64((np.uint64(key) * _GOLDEN) >> np.uint64(shift))


@njit(cache=True)
def _edges(pieces_chars, starts, lengths):
    """Every edge's key and child node, and each node's piece id or -1, of the
    trie of the pieces (piece p: pieces_chars[starts[p]:][:lengths[p]])."""
    bits = 1
    while (1 << bits) < 2 * (lengths.sum() + 1):
        bits += 1
    keys = np.full(1 << bits, -1, dtype=np.int64)
    children = np.zeros(1 << bits, dtype=np.int64)
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
    used = keys != -1
    return keys[used], children[used], piece_of[:nodes]


@njit(cache=True)
def build_trie(pieces_chars, starts, lengths):
    """(the edge table, each node's piece id or -1, the table's shift, the
    root's child per code point below _ROOT_CODES or 0) of the pieces (piece
    p: pieces_chars[starts[p]:][:lengths[p]]). A table row is an edge's key
    and child, side by side so that a probe reads one cache line; the table
    is at most half full."""
    keys, children, piece_of = _edges(pieces_chars, starts, lengths)
    bits = 1
    while (1 << bits) < 2 * len(keys) + 2:
        bits += 1
    table = np.full((1 << bits, 2), -1, dtype=np.int64)
    shift = 64 - bits
    roots = np.zeros(_ROOT_CODES, dtype=np.int32)
    for edge in range(len(keys)):
        slot = _slot(keys[edge], shift)
        while table[slot, 0] != -1:
            slot = (slot + 1) & ((1 << bits) - 1)
        table[slot, 0] = keys[edge]
        table[slot, 1] = children[edge]
        if keys[edge] < _ROOT_CODES:  # an edge from the root
            roots[keys[edge]] = children[edge]
    return table, piece_of, shift, roots


@njit(cache=True)
def _viterbi(codes, lo, hi, table, piece_of, shift, roots, scores, params, unk_score,
             best, starts, ids, out, n):
    """Appends the ids of codes[lo:hi] to out[n:]; returns the new n."""
    size = hi - lo
    mask = len(table) - 1
    for i in range(size + 1):
        starts[i] = -1
    best[0] = 0.0
    unk = params[UNK]
    for s in range(size):
        till_here = best[s]
        single = False
        node = 0
        for e in range(s, size):
            code = codes[lo + e]
            if node == 0 and code < _ROOT_CODES:
                node = roots[code]
                if node == 0:  # no piece begins with codes[lo + s]
                    break
            else:
                key = (node << _CODE_BITS) | code
                slot = _slot(key, shift)
                while table[slot, 0] != key and table[slot, 0] != -1:
                    slot = (slot + 1) & mask
                if table[slot, 0] == -1:  # no piece begins with codes[lo + s:lo + e + 1]
                    break
                node = table[slot, 1]
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


@njit(cache=True, inline="always")
def _word_key(codes, lo, hi):
    digest = _FNV_OFFSET
    for i in range(lo, hi):
        digest = (digest ^ np.uint64(codes[i])) * _FNV_PRIME
    return np.int64(digest >> np.uint64(1))


@njit(cache=True)
def _cached_word(key, codes, lo, hi, words, pool, out, n):
    """Appends the cached ids of codes[lo:hi] to out[n:] and returns the new
    n, or returns -1 - the empty row the word would go in."""
    size = hi - lo
    row = _slot(key, 64 - _WORD_CACHE_BITS)
    while words[row, 0] != -1:
        if words[row, 0] == key and words[row, 2] == size:
            start = words[row, 1]
            same = True
            for i in range(size):
                if pool[start + i] != codes[lo + i]:
                    same = False
                    break
            if same:
                for i in range(words[row, 3]):
                    out[n + i] = pool[start + size + i]
                return n + words[row, 3]
        row = (row + 1) & (WORD_CACHE_SLOTS - 1)
    return -1 - row


@njit(cache=True)
def _cache_word(key, codes, lo, hi, row, words, pool, params, ids):
    """Keeps `ids`, those of codes[lo:hi], in the cache's empty `row`; first
    empties the cache if it is half full or its pool has no room."""
    size = hi - lo
    if (2 * (params[WORDS_CACHED] + 1) > WORD_CACHE_SLOTS
            or params[POOL_USED] + size + len(ids) > len(pool)):
        words[:, 0] = -1
        params[POOL_USED] = 0
        params[WORDS_CACHED] = 0
        row = _slot(key, 64 - _WORD_CACHE_BITS)
    start = params[POOL_USED]
    pool[start:start + size] = codes[lo:hi]
    pool[start + size:start + size + len(ids)] = ids
    words[row, 0] = key
    words[row, 1] = start
    words[row, 2] = size
    words[row, 3] = len(ids)
    params[POOL_USED] = start + size + len(ids)
    params[WORDS_CACHED] += 1


@njit(cache=True)
def lines_ids(text, ends, table, piece_of, shift, roots, scores, params, unk_score, words, pool,
              codes, best, starts, ids, out, bounds):
    """The ids of prepared lines (line l is text[ends[l - 1]:ends[l]], the
    first from 0) end to end into out[:n], line l's out[bounds[l]:bounds[l + 1]],
    in one call; returns n, or UNENCODABLE. The buffers from `codes` to `out`
    hold len(text) + 1 entries, `bounds` one more than the lines; `words` and
    `pool` are the word cache (`word_cache`). (A word's steps written out
    here, not called: a call taking the arrays made the kernel 2x slower.)"""
    for i in range(len(text)):
        codes[i] = _get_code_point(text, i)
    n = 0
    bounds[0] = 0
    begin = 0
    for line in range(len(ends)):
        end = ends[line]
        word = begin
        for i in range(begin + 1, end + 1):
            if i == end or (params[SPLIT] and codes[i] == params[REPLACEMENT]):
                cached = i - word <= WORD_CACHE_CHARACTERS
                key, found = np.int64(0), -1
                if cached:
                    key = _word_key(codes, word, i)
                    found = _cached_word(key, codes, word, i, words, pool, out, n)
                    if found >= 0:
                        n = found
                        word = i
                        continue
                first = n
                n = _viterbi(codes, word, i, table, piece_of, shift, roots, scores, params,
                             unk_score, best, starts, ids, out, n)
                if n < 0:
                    return n
                if cached:
                    _cache_word(key, codes, word, i, -1 - found, words, pool, params,
                                out[first:n])
                word = i
        bounds[line + 1] = n
        begin = end
    return n


def word_cache() -> tuple[np.ndarray, np.ndarray]:
    """An empty word cache: its table and its pool."""
    return (np.full((WORD_CACHE_SLOTS, 4), -1, dtype=np.int64),
            np.zeros(WORD_CACHE_POOL, dtype=np.int32))
