"""Documents' copies to framed, keyed records, compiled: the engine of the
pipeline's default recipe (with or without static masking).

`transforms.instances`, `transforms.masking` and `transforms.encoding` define
the algorithm and stay its reference (and the engine of compat mode and the
d2l recipe). This module makes the same draws with the same generator
(transforms.jit_random) and writes the same bytes, several times faster,
because per-token work runs compiled instead of in the interpreter.
tests/test_fast_records.py checks byte equality with the Python core.

Data layout (numpy, flat):
- a document or sample: int32 token ids, int64 sentence bounds (sentence s
  is tokens[bounds[s]:bounds[s + 1]]); a sample adds int64 document bounds
  over its sentences;
- a unit of work: the packed bytes of its documents (transforms.packing's
  layout, read by its `read_packed`) with their bounds, 128-bit seeds
  (transforms.seeds) and dupe ranges;
- output: shuffle entries (uint64 key, then the TFRecord-framed record)
  with their bounds and keys (transforms.sharding.RecordBatch).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from transforms.jit_random import (N, SEED_WORDS, new_state, randint, random, sample_into,
                                   seed_states, shuffle)
from transforms.packing import read_packed
from transforms.seeds import INSTANCES, seed_key, shuffle_key
from transforms.sharding import ENTRY_HEADER, ENTRY_OVERHEAD, close_entry

_TAG_1 = 0x0A
_TAG_MAP_VALUE = 0x12
_TAG_FLOAT_LIST = 0x12
_TAG_INT64_LIST = 0x1A
_FLOAT_ONE = (0x00, 0x00, 0x80, 0x3F)
# Generators seeded together (jit_random.seed_states); 256 states take 1.3 MB.
_SEED_BATCH = 256
# Positions in the stats array.
_INSTANCES, _RANDOM_NEXT, _TRUNCATED, _UNAVAILABLE, _MASKED = range(5)


class Settings(NamedTuple):
    """Everything the kernels need besides the document and the sample."""

    max_seq_length: int
    short_seq_prob: float
    cls_id: int
    sep_id: int
    mask: bool  # false: --masking=none
    budgets: np.ndarray  # num_to_predict per instance length
    set_sizes: np.ndarray  # random.sample's threshold per number of picks
    mask_id: int
    vocab_size: int
    continuation: np.ndarray  # per id: a `##` piece (whole-word masking only)
    whole_word: bool
    names: np.ndarray
    name_bounds: np.ndarray
    padded: bool
    max_predictions: int


class Workspace(NamedTuple):
    """Scratch arrays, allocated once per worker (`workspace`)."""

    instance: np.ndarray
    output: np.ndarray
    labels: np.ndarray
    candidates: np.ndarray
    chosen: np.ndarray
    group_starts: np.ndarray
    order: np.ndarray
    work: np.ndarray
    scratch: np.ndarray
    starts: np.ndarray
    tags: np.ndarray
    keys: np.ndarray
    key_lengths: np.ndarray
    state: np.ndarray

# Feature names in the sorted order deterministic serialization writes them.
PADDED_FEATURES = ("input_ids", "input_mask", "masked_lm_ids", "masked_lm_positions",
                   "masked_lm_weights", "next_sentence_labels", "segment_ids")
UNPADDED_FEATURES = ("input_ids", "masked_lm_ids", "masked_lm_positions",
                     "next_sentence_labels", "segment_ids")


def feature_names(padded: bool) -> tuple[np.ndarray, np.ndarray]:
    """The feature names as one uint8 array and its int64 bounds."""
    names = [n.encode() for n in (PADDED_FEATURES if padded else UNPADDED_FEATURES)]
    bounds = np.cumsum([0] + [len(n) for n in names]).astype(np.int64)
    return np.frombuffer(b"".join(names), dtype=np.uint8).copy(), bounds


# --- instances ---------------------------------------------------------------------


@njit(cache=True)
def _grow(values: np.ndarray, needed: int) -> np.ndarray:
    if needed <= len(values):
        return values
    grown = np.empty(max(needed, 2 * len(values)), dtype=values.dtype)
    grown[:len(values)] = values
    return grown


@njit(cache=True)
def _random_document(mt, num_documents: int, own: int) -> int:
    """The sample chooser: 10 tries to avoid the own document, then uniform over
    the others; -1 when there is no other document."""
    if num_documents == 0:
        return -1
    for _ in range(10):
        index = randint(mt, 0, num_documents - 1)
        if index != own:
            return index
    if num_documents - 1 == 0:
        return -1
    index = randint(mt, 0, num_documents - 2)
    return index if index < own else index + 1


@njit(cache=True)
def _copy_entries(mt, tokens, bounds, sample_tokens, sample_bounds, sample_documents, own,
                  seed_lo, seed_hi, dupe, s, w, out, pos, entry_bounds, keys, count, stats):
    """transforms.instances.create_instances with the sample chooser, for one
    copy, drawing from the seeded generator `mt`; each instance is masked with
    the same generator as soon as it is built (where the original draws its
    masking randomness) and appended to the entries by `_emit`.

    Returns (out, pos, entry_bounds, keys, count): the output, grown as needed.
    """
    max_num_tokens = s.max_seq_length - 3
    target = max_num_tokens
    if random(mt) < s.short_seq_prob:
        target = randint(mt, 2, max_num_tokens)
    num_sentences = len(bounds) - 1
    num_documents = len(sample_documents) - 1
    instance = w.instance
    index = 0
    chunk_start = 0
    chunk_count = 0
    chunk_length = 0
    i = 0
    while i < num_sentences:
        if chunk_count == 0:
            chunk_start = i
        chunk_count += 1
        chunk_length += bounds[i + 1] - bounds[i]
        if i == num_sentences - 1 or chunk_length >= target:
            a_end = randint(mt, 1, chunk_count - 1) if chunk_count >= 2 else 1
            a_from, a_to = bounds[chunk_start], bounds[chunk_start + a_end]
            is_random = chunk_count == 1 or random(mt) < 0.5
            other = _random_document(mt, num_documents, own) if is_random else -1
            if is_random and other < 0:
                stats[_UNAVAILABLE] += 1
                is_random = False
            b_length = 0
            b_source = tokens
            b_from = 0
            if is_random:
                target_b = target - (a_to - a_from)
                first = sample_documents[other]
                last = sample_documents[other + 1]
                start = first + randint(mt, 0, last - first - 1)
                b_from = sample_bounds[start]
                end = start
                while end < last:
                    end += 1
                    b_length = sample_bounds[end] - b_from
                    if b_length >= target_b:
                        break
                b_source = sample_tokens
                i -= chunk_count - a_end
            else:
                b_from = bounds[chunk_start + a_end]
                b_length = bounds[chunk_start + chunk_count] - b_from
            if b_length > 0:
                # truncate_seq_pair: windows over A and B, one draw per token removed.
                a_lo, a_hi, b_lo, b_hi = a_from, a_to, b_from, b_from + b_length
                while (a_hi - a_lo) + (b_hi - b_lo) > max_num_tokens:
                    trim_a = (a_hi - a_lo) > (b_hi - b_lo)
                    front = random(mt) < 0.5
                    if trim_a:
                        if front:
                            a_lo += 1
                        else:
                            a_hi -= 1
                    elif front:
                        b_lo += 1
                    else:
                        b_hi -= 1
                    stats[_TRUNCATED] += 1
                n = 0
                instance[n] = s.cls_id
                n += 1
                for t in range(a_lo, a_hi):
                    instance[n] = tokens[t]
                    n += 1
                instance[n] = s.sep_id
                n += 1
                for t in range(b_lo, b_hi):
                    instance[n] = b_source[t]
                    n += 1
                instance[n] = s.sep_id
                n += 1
                key = shuffle_key(seed_lo, seed_hi, dupe, index)
                out, pos = _emit(mt, instance[:n], a_hi - a_lo, is_random, key, s, w, out,
                                 pos, stats)
                entry_bounds = _grow(entry_bounds, count + 2)
                keys = _grow(keys, count + 1)
                entry_bounds[count + 1] = pos
                keys[count] = key
                count += 1
                index += 1
                stats[_INSTANCES] += 1
                stats[_RANDOM_NEXT] += is_random
            chunk_count = 0
            chunk_length = 0
        i += 1
    return out, pos, entry_bounds, keys, count


# --- masking -------------------------------------------------------------------------


@njit(cache=True)
def _choose(mt, tokens, budget, set_sizes, cls_id, sep_id, continuation, whole_word,
            candidates, chosen, group_starts, order, work) -> int:
    """Fills chosen[:k] with the positions to predict, in the order their
    80/10/10 draws are made; returns k. The other arrays are scratch space."""
    count = 0
    for index in range(len(tokens)):
        if tokens[index] != cls_id and tokens[index] != sep_id:
            candidates[count] = index
            count += 1
    if not whole_word:
        k = min(budget, count)
        sample_into(mt, candidates[:count], k, set_sizes[k], chosen, work)
        return k
    # Whole words: a `##` piece joins the previous candidate's group.
    groups = 0
    for c in range(count):
        if groups == 0 or not continuation[tokens[candidates[c]]]:
            group_starts[groups] = c
            groups += 1
    group_starts[groups] = count
    order[:groups] = np.arange(groups)
    shuffle(mt, order[:groups])
    taken = 0
    for g in order[:groups]:
        if taken >= budget:
            break
        size = group_starts[g + 1] - group_starts[g]
        if taken + size <= budget:
            for c in range(group_starts[g], group_starts[g + 1]):
                chosen[taken] = candidates[c]
                taken += 1
    return taken


# --- encoding ------------------------------------------------------------------------


@njit(cache=True)
def _varint_size(value: int) -> int:
    size = 1
    while value > 0x7F:
        value >>= 7
        size += 1
    return size


@njit(cache=True)
def _put_varint(out, pos: int, value: int) -> int:
    while value > 0x7F:
        out[pos] = (value & 0x7F) | 0x80
        value >>= 7
        pos += 1
    out[pos] = value
    return pos + 1


@njit(cache=True)
def _entry_sizes(name_length: int, size: int):
    """(values field size, list size, feature size, entry body size) of one map entry."""
    values = 1 + _varint_size(size) + size if size else 0
    feature = 1 + _varint_size(values) + values
    entry = 1 + _varint_size(name_length) + name_length + 1 + _varint_size(feature) + feature
    return values, feature, entry


@njit(cache=True)
def _put_entry(out, pos, names, name_bounds, f, list_tag, packed, size):
    name_length = name_bounds[f + 1] - name_bounds[f]
    values, feature, entry = _entry_sizes(name_length, size)
    out[pos] = _TAG_1
    pos = _put_varint(out, pos + 1, entry)
    out[pos] = _TAG_1
    pos = _put_varint(out, pos + 1, name_length)
    out[pos:pos + name_length] = names[name_bounds[f]:name_bounds[f + 1]]
    pos += name_length
    out[pos] = _TAG_MAP_VALUE
    pos = _put_varint(out, pos + 1, feature)
    out[pos] = list_tag
    pos = _put_varint(out, pos + 1, values)
    if size:
        out[pos] = _TAG_1
        pos = _put_varint(out, pos + 1, size)
        out[pos:pos + size] = packed[:size]
        pos += size
    return pos


@njit(cache=True)
def _pack_varints(scratch, values, count, pad) -> int:
    pos = 0
    for k in range(count):
        pos = _put_varint(scratch, pos, values[k])
    scratch[pos:pos + pad] = 0
    return pos + pad


@njit(cache=True)
def _encode(out, pos, names, name_bounds, padded, tokens, a_length, random_next,
            positions, labels, max_seq_length, max_predictions, scratch, starts, tags):
    """One Example, as transforms.encoding writes it; returns the end position.
    `scratch`, `starts` (8) and `tags` (7) are scratch space."""
    n = len(tokens)
    k = len(positions)
    token_pad = max_seq_length - n if padded else 0
    prediction_pad = max_predictions - k if padded else 0
    # Pack each feature's values once, then write the entries in name order.
    starts[0] = 0
    tags[:] = _TAG_INT64_LIST
    f = 0
    pos_s = 0
    # input_ids
    pos_s += _pack_varints(scratch[pos_s:], tokens, n, token_pad)
    f += 1
    starts[f] = pos_s
    if padded:  # input_mask
        scratch[pos_s:pos_s + n] = 1
        scratch[pos_s + n:pos_s + n + token_pad] = 0
        pos_s += n + token_pad
        f += 1
        starts[f] = pos_s
    pos_s += _pack_varints(scratch[pos_s:], labels, k, prediction_pad)  # masked_lm_ids
    f += 1
    starts[f] = pos_s
    pos_s += _pack_varints(scratch[pos_s:], positions, k, prediction_pad)  # masked_lm_positions
    f += 1
    starts[f] = pos_s
    if padded:  # masked_lm_weights
        for _ in range(k):
            scratch[pos_s] = _FLOAT_ONE[0]
            scratch[pos_s + 1] = _FLOAT_ONE[1]
            scratch[pos_s + 2] = _FLOAT_ONE[2]
            scratch[pos_s + 3] = _FLOAT_ONE[3]
            pos_s += 4
        scratch[pos_s:pos_s + 4 * prediction_pad] = 0
        pos_s += 4 * prediction_pad
        tags[f] = _TAG_FLOAT_LIST
        f += 1
        starts[f] = pos_s
    scratch[pos_s] = 1 if random_next else 0  # next_sentence_labels
    pos_s += 1
    f += 1
    starts[f] = pos_s
    scratch[pos_s:pos_s + a_length + 2] = 0  # segment_ids
    scratch[pos_s + a_length + 2:pos_s + n] = 1
    scratch[pos_s + n:pos_s + n + token_pad] = 0
    pos_s += n + token_pad
    f += 1
    starts[f] = pos_s
    body = 0
    for g in range(f):
        _, _, entry = _entry_sizes(name_bounds[g + 1] - name_bounds[g], starts[g + 1] - starts[g])
        body += 1 + _varint_size(entry) + entry
    out[pos] = _TAG_1
    pos = _put_varint(out, pos + 1, body)
    for g in range(f):
        pos = _put_entry(out, pos, names, name_bounds, g, tags[g],
                         scratch[starts[g]:starts[g + 1]], starts[g + 1] - starts[g])
    return pos


@njit(cache=True)
def _emit(mt, original, a_length, random_next, key, s, w, out, pos, stats):
    """Masks one instance with `mt` (as transforms.masking.mask_tokens; not at
    all when masking is off), encodes it (as transforms.encoding) and appends
    its entry: the shuffle key (uint64, little-endian), then the framed
    record. Returns (out, pos), `out` grown as needed."""
    n = len(original)
    output = w.output
    output[:n] = original
    k = 0
    if s.mask:
        k = _choose(mt, original, s.budgets[n], s.set_sizes, s.cls_id, s.sep_id,
                    s.continuation, s.whole_word, w.candidates, w.chosen, w.group_starts,
                    w.order, w.work)
    for c in range(k):
        index = w.chosen[c]
        if random(mt) < 0.8:
            output[index] = s.mask_id
        elif random(mt) >= 0.5:
            output[index] = randint(mt, 0, s.vocab_size - 1)
    positions = w.chosen[:k]
    positions.sort()
    for c in range(k):
        w.labels[c] = original[positions[c]]
    stats[_MASKED] += k
    out = _grow(out, pos + len(w.scratch) + ENTRY_OVERHEAD)
    data = pos + ENTRY_HEADER
    end = _encode(out, data, s.names, s.name_bounds, s.padded, output[:n], a_length,
                  random_next, positions, w.labels[:k], s.max_seq_length, s.max_predictions,
                  w.scratch, w.starts, w.tags)
    return out, close_entry(out, pos, key, end - data)


@njit(cache=True)
def _seed_generators(seed_lo, seed_hi, dupes, states, keys, key_lengths):
    """Seeds states[:, c] for copy dupes[c] (position (INSTANCES, dupe, 0) of
    the document's draws, transforms.seeds), in lockstep."""
    for c in range(len(dupes)):
        key_lengths[c] = seed_key(seed_lo, seed_hi, INSTANCES, dupes[c], 0, keys[c])
    seed_states(keys[:len(dupes)], key_lengths[:len(dupes)], states)


def workspace(max_seq_length: int, max_predictions: int) -> Workspace:
    """Scratch arrays of `_emit` and `_copy_entries`, allocated once per worker."""
    return Workspace(
        instance=np.empty(max_seq_length, dtype=np.int32),
        output=np.empty(max_seq_length, dtype=np.int32),
        labels=np.empty(max_seq_length, dtype=np.int32),
        candidates=np.empty(max_seq_length, dtype=np.int64),
        chosen=np.empty(max_seq_length, dtype=np.int64),
        group_starts=np.empty(max_seq_length + 1, dtype=np.int64),
        order=np.empty(max_seq_length, dtype=np.int64),
        work=np.empty(max_seq_length, dtype=np.int64),
        # A record is at most ~11 bytes per token and prediction plus headers.
        scratch=np.empty(11 * (2 * max_seq_length + 2 * max_predictions) + 512, dtype=np.uint8),
        starts=np.empty(8, dtype=np.int64), tags=np.empty(7, dtype=np.int64),
        keys=np.empty((_SEED_BATCH, SEED_WORDS), dtype=np.int64),
        key_lengths=np.empty(_SEED_BATCH, dtype=np.int64),
        state=new_state())


@njit(cache=True)
def unit_entries(packed, packed_bounds, seeds, dupe_starts, dupe_ends, owns, sample_tokens,
                 sample_bounds, sample_documents, s, w):
    """A unit of work to shuffle entries: for each document u (packed bytes
    packed[packed_bounds[u]:packed_bounds[u + 1]], 128-bit seed seeds[u],
    position in the sample owns[u] or -1), copies dupe_starts[u] to
    dupe_ends[u] - 1, in that order.

    Copy d of a document creates and masks its instances with the generator
    of position (INSTANCES, d, 0) of the document's draws; its instance i
    gets the shuffle key of (d, i). `s` is the Settings, `w` a Workspace.

    Returns (entry bytes, entry bounds, shuffle keys, stats), stats being
    [instances, random-next instances, truncated tokens, random-next
    unavailable, masked tokens].
    """
    copies = max(1, (dupe_ends - dupe_starts).sum())
    stats = np.zeros(5, dtype=np.int64)
    out = np.empty(2048 * copies, dtype=np.uint8)
    entry_bounds = np.zeros(2 * copies + 1, dtype=np.int64)
    keys = np.empty(2 * copies, dtype=np.int64)
    pos = 0
    count = 0
    mt = w.state
    for u in range(len(owns)):
        tokens, bounds = read_packed(packed[packed_bounds[u]:packed_bounds[u + 1]])
        seed_lo, seed_hi = seeds[u, 0], seeds[u, 1]
        dupes = np.arange(dupe_starts[u], dupe_ends[u])
        for first in range(0, len(dupes), _SEED_BATCH):
            last = min(len(dupes), first + _SEED_BATCH)
            states = np.empty((N + 1, last - first), dtype=np.int64)  # columns side by side
            _seed_generators(seed_lo, seed_hi, dupes[first:last], states, w.keys, w.key_lengths)
            for c in range(first, last):
                mt[:] = states[:, c - first]
                out, pos, entry_bounds, keys, count = _copy_entries(
                    mt, tokens, bounds, sample_tokens, sample_bounds, sample_documents,
                    owns[u], seed_lo, seed_hi, dupes[c], s, w, out, pos, entry_bounds, keys,
                    count, stats)
    return out[:pos], entry_bounds[:count + 1], keys[:count], stats
