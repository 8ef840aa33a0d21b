"""The tokenizer's compiled core: one call turns a line of text into WordPiece
ids, or a document's lines into its compact form.

transforms.tokenize.wordpiece writes what the original does to each character
into a per-code-point table; this module only reads it:
- `kinds[cp]`, low bits: UNKNOWN (not in the table yet: the caller adds it),
  DROP, SPACE, CJK, NORMAL, SIGMA (U+03A3 when lower-casing), COMPLEX (output
  computed per word, in Python); high bits: the Final_Sigma class.
- `outputs[cp]`: [count, c1, c2, c3], the characters it becomes in its word,
  each flagged PUNCT when the original splits it off.
WordPiece is the original's greedy longest-match-first over an
open-addressing hash table of the vocabulary (`slots`: [hash, id, key start,
key length * 2 + is-continuation] rows over the keys' code points `chars`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import njit
from numba.cpython.unicode import _get_code_point

from bert_pretraining_data.transforms.handoff.tokenized_documents import write_counted

UNKNOWN, DROP, SPACE, CJK, NORMAL, SIGMA, COMPLEX = range(7)
KIND_BITS = 0x7
# The Final_Sigma rule's classes of a character (Python's handle_capital_sigma).
CASE_IGNORABLE = 0x8
CASED = 0x10
PUNCT = 1 << 24  # on an output character: the original's punctuation, a piece of its own
CHAR_BITS = PUNCT - 1
MAX_OUTPUTS = 3  # characters an `outputs` row holds (Hangul syllables need 3)
SMALL_SIGMA, FINAL_SIGMA = 0x3C3, 0x3C2
MAX_INPUT_CHARS_PER_WORD = 200  # longer pieces are [UNK], as in the original
PIECE_CAPACITY = MAX_INPUT_CHARS_PER_WORD + 1
# `line_ids` results besides an id count; `missing` then holds [count, code points...].
MISSING, COMPLEX_LINE = -1, -2
# params: the vocabulary's longest key at a word start and after `##`, and [UNK]'s id.
MAX_HEAD, MAX_TAIL, UNK = range(3)
_FNV_BASIS = np.int64(-3750763034362895579)  # 14695981039346656037 as int64
_FNV_PRIME = np.int64(1099511628211)
_HASH, _ID, _START, _KEY = range(4)


@njit(cache=True, inline="always")
def _step(h, code):
    return (h ^ code) * _FNV_PRIME


@njit(cache=True, inline="always")
def _basis(continuation):
    return _FNV_BASIS ^ continuation


@njit(cache=True)
def build_slots(chars, starts, lengths, continuations, ids):
    """The hash table of vocabulary keys (key k: chars[starts[k]:][:lengths[k]],
    looked up after `##` if continuations[k]), twice as many slots as keys."""
    size = 1
    while size < 2 * len(ids):
        size *= 2
    slots = np.zeros((size, 4), dtype=np.int64)
    slots[:, _ID] = -1
    mask = size - 1
    for k in range(len(ids)):
        h = _basis(continuations[k])
        for i in range(starts[k], starts[k] + lengths[k]):
            h = _step(h, chars[i])
        slot = h & mask
        while slots[slot, _ID] != -1:
            slot = (slot + 1) & mask
        slots[slot, _HASH] = h
        slots[slot, _ID] = ids[k]
        slots[slot, _START] = starts[k]
        slots[slot, _KEY] = 2 * lengths[k] + continuations[k]
    return slots


@njit(cache=True, inline="always")
def _lookup(slots, chars, piece, start, stop, h, continuation):
    mask = len(slots) - 1
    key = 2 * (stop - start) + continuation
    slot = h & mask
    while slots[slot, _ID] != -1:
        if slots[slot, _HASH] == h and slots[slot, _KEY] == key:
            first = slots[slot, _START] - start
            same = True
            for i in range(start, stop):
                if chars[first + i] != piece[i]:
                    same = False
                    break
            if same:
                return slots[slot, _ID]
        slot = (slot + 1) & mask
    return -1


@njit(cache=True, inline="always")
def wordpiece(piece, length, slots, chars, params, hashes, out, n):
    """Appends the WordPiece ids of piece[:length] to out[n:]; returns the new n."""
    if length > MAX_INPUT_CHARS_PER_WORD:
        out[n] = params[UNK]
        return n + 1
    first = n
    start = 0
    while start < length:
        continuation = 1 if start > 0 else 0
        stop = min(length, start + (params[MAX_TAIL] if continuation else params[MAX_HEAD]))
        h = _basis(continuation)
        for i in range(start, stop):  # the hash of piece[start:i + 1] for every end
            h = _step(h, piece[i])
            hashes[i - start] = h
        found = -1
        end = stop
        while end > start:
            found = _lookup(slots, chars, piece, start, end, hashes[end - start - 1], continuation)
            if found >= 0:
                break
            end -= 1
        if found < 0:  # no piece matches here: the whole word is [UNK]
            out[first] = params[UNK]
            return first + 1
        out[n] = found
        n += 1
        start = end
    return n


@njit(cache=True, inline="always")
def _final_sigma(text, i, end, kinds, cased_before):
    """Python's Final_Sigma rule for the U+03A3 at text[i] of a line ending at
    text[end]: a cased character before it in its word (case-ignorables
    skipped) and none after it."""
    if not cased_before:
        return False
    for j in range(i + 1, end):
        kind = kinds[_get_code_point(text, j)]
        if kind & KIND_BITS == DROP:  # deleted before the original lower-cases
            continue
        if kind & KIND_BITS == SPACE or kind & KIND_BITS == CJK:  # the word ends
            return True
        if not kind & CASE_IGNORABLE:
            return not kind & CASED
    return True


@njit(cache=True)
def line_ids(text, kinds, outputs, slots, chars, params, piece, hashes, out, missing):
    """The ids of one line into out[:n]; returns n (out holds MAX_OUTPUTS ids
    per character). MISSING: characters not in the table yet are listed in
    missing ([count, code points...]); COMPLEX_LINE: the line holds a
    character whose output depends on its whole word."""
    missing[0] = 0
    n = _span_ids(text, 0, len(text), kinds, outputs, slots, chars, params, piece, hashes, out,
                  missing, 0)
    return MISSING if n >= 0 and missing[0] else n


@njit(cache=True)
def lines_compact(text, ends, kinds, outputs, slots, chars, params, piece, hashes, out, missing,
                  bounds, compact, counts):
    """A document's lines (line l is text[ends[l - 1]:ends[l]], the first from
    0) as one compact document (transforms.handoff.tokenized_documents) in
    compact, with its counts (`write_counted`), in one call: Tokenize's path
    for WordPiece, where a call a line and Python lists cost more than the
    tokenizing. Lines without tokens are left out. Returns 0, or MISSING /
    COMPLEX_LINE as `line_ids` does for any line; `bounds` (room for a bound
    a line and one more) is scratch."""
    missing[0] = 0
    n = start = 0
    bounds[0] = 0
    for line in range(len(ends)):
        end = _span_ids(text, start, ends[line], kinds, outputs, slots, chars, params, piece,
                        hashes, out, missing, n)
        if end == COMPLEX_LINE:
            return end
        bounds[line + 1] = n = end
        start = ends[line]
    if missing[0]:
        return MISSING
    write_counted(out[:n], bounds[:len(ends) + 1], params[UNK], compact, counts)
    return 0


@njit(cache=True, inline="always")
def _span_ids(text, begin, end, kinds, outputs, slots, chars, params, piece, hashes, out,
              missing, n):
    """The ids of the line text[begin:end] appended to out[n:]; returns the new
    n, or COMPLEX_LINE. Characters not in the table yet are added to
    `missing`; once it lists any, lines are only read for more (the caller
    returns MISSING)."""
    length = 0  # of the piece being read (it may run past its buffer)
    cased_before = False  # Final_Sigma: the word so far ends in a cased character
    for i in range(begin, end):
        cp = _get_code_point(text, i)
        kind = kinds[cp]
        base = kind & KIND_BITS
        if base == DROP:
            continue
        if base == UNKNOWN:
            if missing[0] < len(missing) - 1:
                missing[0] += 1
                missing[missing[0]] = cp
            continue
        if base == COMPLEX:
            return COMPLEX_LINE
        if missing[0]:  # only the rest of the table is filled in this pass
            continue
        if base == SPACE or base == CJK:
            if length:
                n = wordpiece(piece, length, slots, chars, params, hashes, out, n)
                length = 0
            cased_before = False
            if base == SPACE:
                continue
        if base == SIGMA:
            final = _final_sigma(text, i, end, kinds, cased_before)
            piece_char = FINAL_SIGMA if final else SMALL_SIGMA
            if length < PIECE_CAPACITY:
                piece[length] = piece_char
            length += 1
        else:
            for j in range(outputs[cp, 0]):
                char = outputs[cp, 1 + j]
                if char & PUNCT:
                    if length:
                        n = wordpiece(piece, length, slots, chars, params, hashes, out, n)
                        length = 0
                    piece[0] = char & CHAR_BITS
                    n = wordpiece(piece, 1, slots, chars, params, hashes, out, n)
                else:
                    if length < PIECE_CAPACITY:
                        piece[length] = char
                    length += 1
        if not kind & CASE_IGNORABLE:
            cased_before = (kind & CASED) != 0
        if base == CJK:
            if length:
                n = wordpiece(piece, length, slots, chars, params, hashes, out, n)
                length = 0
            cased_before = False
    if length and not missing[0]:
        n = wordpiece(piece, length, slots, chars, params, hashes, out, n)
    return n


def flat_keys(keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(code points, starts, lengths) of strings laid end to end: key k is
    chars[starts[k]:starts[k] + lengths[k]]."""
    chars = np.frombuffer("".join(keys).encode("utf-32-le"), dtype=np.uint32).astype(np.int32)
    lengths = np.array(list(map(len, keys)), dtype=np.int64)
    starts = np.zeros(len(keys), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return chars, starts, lengths
