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
Pieces are found in wordpiece_kernel's hash table (every key a word start).
"""

from __future__ import annotations

from numba import njit
from numba.cpython.unicode import _get_code_point

from bert_pretraining_data.transforms.tokenize.wordpiece_kernel import key_basis, lookup, key_step

# params: the longest piece in characters, the unknown id (-1: none), the
# replacement character, whether words split before it.
MAX_PIECE, UNK, REPLACEMENT, SPLIT = range(4)
UNENCODABLE = -1  # a character no piece covers and the model has no unknown id
UNK_PENALTY = 10.0  # SentencePiece's kUnkPenalty


@njit(cache=True)
def _viterbi(codes, lo, hi, slots, chars, scores, params, unk_score, best, starts, ids, out, n):
    """Appends the ids of codes[lo:hi] to out[n:]; returns the new n."""
    size = hi - lo
    for i in range(size + 1):
        starts[i] = -1
    best[0] = 0.0
    unk = params[UNK]
    for s in range(size):
        till_here = best[s]
        single = False
        h = key_basis(0)
        for e in range(s, min(size, s + params[MAX_PIECE])):
            h = key_step(h, codes[lo + e])
            found = lookup(slots, chars, codes, lo + s, lo + e + 1, h, 0)
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
    out[first:n] = out[first:n][::-1].copy()
    return n


@njit(cache=True)
def line_ids(text, slots, chars, scores, params, unk_score, codes, best, starts, ids, out):
    """The ids of one prepared line into out[:n]; returns n, or UNENCODABLE.
    The buffers hold len(text) + 1 entries."""
    length = len(text)
    for i in range(length):
        codes[i] = _get_code_point(text, i)
    n = 0
    word = 0
    for i in range(1, length + 1):
        if i == length or (params[SPLIT] and codes[i] == params[REPLACEMENT]):
            n = _viterbi(codes, word, i, slots, chars, scores, params, unk_score,
                         best, starts, ids, out, n)
            if n < 0:
                return n
            word = i
    return n
