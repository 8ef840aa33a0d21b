"""Instances in flight between the instance kernels and the shard writer.

The shuffle carries the instance itself, not its record, which is written
only with its shard (transforms.write.rows): no padding, no feature names,
2 bytes a token id, and a shard's instances can be packed into rows without
parsing an Example. Its masking travels as what it decided, not what it
made: the unmasked ids, each prediction's gap from the one before and one
byte of what replaced it ([MASK], itself, or a random id, which follows).
In the shuffle's frames, with the run's codebook (transforms.handoff.shuffle.frames),
that is 0.45-0.59x the bytes of the masked ids with positions and labels on
text the codebook never saw (bench/shuffle_bytes.py), and the same records.

Layout of one instance (little-endian):
  flags    uint8   bit 0: ids are 4 bytes (else 2);
                   bit 1: a token_boundary byte per token follows;
                   bit 2: a source id follows the header (`stamp_source`)
  label    uint8   the sentence-pair label (1 = random next or swapped)
  n        uint32  tokens, [CLS] and [SEP]s included
  b_start  uint32  where segment B starts (n when there is none)
  k        uint32  masked-LM predictions
  [source  uint16  the instance's source in a mixture, with bit 2]
  [mask_id]        the [MASK] id, when k > 0
  ids[n]           the unmasked ids
  gaps[k]  varint  positions[c] - positions[c - 1] - 1 (positions[-1] = -1)
  actions[k] uint8 MASKED, KEPT or REPLACED
  replaced[r]      the random id of each REPLACED prediction, in order
  boundary[n]      bytes, with bit 1
Ids are 2 or 4 bytes each as bit 0 says. In a frame the unmasked ids are
varints instead (`with_varint_ids`, `with_fixed_ids`: a frequent id's rank
takes one byte), the rest unchanged; the frames walk an instance only
through this module's functions, so a layout change is made here alone.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bert_pretraining_data.transforms.handoff.shuffle.entries import (ENTRY_HEADER,
                                                                      ENTRY_KEY_SIZE, EntryBatch,
                                                                      grow)
from bert_pretraining_data.transforms.handoff.varints import get_varint, put_varint

HEADER_SIZE = 14
SOURCE_SIZE = 2
_WIDE = 1
_BOUNDARY = 2
_SOURCE = 4


# What replaced a prediction's token (the 80/10/10 rule's three outcomes).
MASKED, KEPT, REPLACED = 0, 1, 2


@njit(cache=True)
def max_instance_size(tokens: int, predictions: int) -> int:
    """Bytes an instance of this many tokens and predictions can take: ids of
    4 bytes, 5-byte gaps, every prediction replaced."""
    return HEADER_SIZE + 4 + 5 * tokens + 10 * predictions


@njit(cache=True, inline="always")
def put_le(out, pos, value, width):
    """Writes `value` as `width` little-endian bytes at out[pos:]; returns the end."""
    for b in range(width):
        out[pos + b] = (value >> (8 * b)) & 0xFF
    return pos + width


@njit(cache=True, inline="always")
def get_le(data, pos, width):
    """The `width` little-endian bytes at data[pos:] as an int64."""
    value = 0
    for b in range(width):
        value |= np.int64(data[pos + b]) << (8 * b)
    return value


@njit(cache=True)
def put_instance(out, pos, tokens, b_start, label, positions, labels, boundary,
                 with_boundary, mask_id) -> int:
    """Writes an instance at out[pos:] (`max_instance_size` bytes must fit);
    returns its end. `tokens` are the masked ids, `labels` the original ids at
    `positions` (strictly increasing, as the masking sorts them); `boundary`
    is read only `with_boundary`.

    Raises:
      ValueError: the positions are not strictly increasing.
    """
    n = len(tokens)
    k = len(positions)
    wide = n > 0xFFFF or (k > 0 and mask_id > 0xFFFF)
    for t in range(n):
        if tokens[t] > 0xFFFF:
            wide = True
    for c in range(k):
        if labels[c] > 0xFFFF:
            wide = True
        if c and positions[c] <= positions[c - 1]:
            raise ValueError("an instance's masked positions are not strictly increasing")
    width = 4 if wide else 2
    out[pos] = (_WIDE if wide else 0) | (_BOUNDARY if with_boundary else 0)
    out[pos + 1] = label
    pos = put_le(out, pos + 2, n, 4)
    pos = put_le(out, pos, b_start, 4)
    pos = put_le(out, pos, k, 4)
    if k:
        pos = put_le(out, pos, mask_id, width)
    ids = pos
    for t in range(n):
        pos = put_le(out, pos, tokens[t], width)
    previous = -1
    for c in range(k):  # the unmasked id in place, and the gap
        put_le(out, ids + width * positions[c], labels[c], width)
        pos = put_varint(out, pos, positions[c] - previous - 1)
        previous = positions[c]
    for c in range(k):
        made = tokens[positions[c]]
        out[pos + c] = MASKED if made == mask_id else KEPT if made == labels[c] else REPLACED
    actions = pos
    pos += k
    for c in range(k):
        if out[actions + c] == REPLACED:
            pos = put_le(out, pos, tokens[positions[c]], width)
    if with_boundary:
        out[pos:pos + n] = boundary[:n]
        pos += n
    return pos


@njit(cache=True)
def instance_header(data, pos):
    """(n, b_start, k, label) of the instance at data[pos:], without reading it."""
    return (get_le(data, pos + 2, 4), get_le(data, pos + 6, 4), get_le(data, pos + 10, 4),
            np.int64(data[pos + 1]))


@njit(cache=True)
def ids_span(data, pos):
    """(start, n, width) of the unmasked ids of the instance at data[pos:]:
    ids[t] is the `width`-byte value at data[start + width * t]."""
    n, _, k, _ = instance_header(data, pos)
    width = 4 if data[pos] & _WIDE else 2
    start = pos + HEADER_SIZE + (SOURCE_SIZE if data[pos] & _SOURCE else 0)
    return start + (width if k else 0), n, width


@njit(cache=True, inline="always")
def unmasked_ids(data, pos, out, at):
    """Copies the unmasked ids of the instance at data[pos:] to out[at:];
    returns where they end in data."""
    start, n, width = ids_span(data, pos)
    for t in range(n):
        out[at + t] = get_le(data, start + width * t, width)
    return start + width * n


@njit(cache=True)
def with_varint_ids(data, pos, end, out, o, table, offset):
    """Copies the instance at data[pos:end] to out[o:] (grown when short) with
    each unmasked id v as the varint of table[v] (v + offset past the table's
    end); returns (out, the copy's end). A varint takes at most one byte more
    than its id."""
    start, n, width = ids_span(data, pos)
    out = grow(out, o + end - pos + n)
    at = o + (start - pos)
    out[o:at] = data[pos:start]
    for t in range(n):
        value = get_le(data, start + width * t, width)
        at = put_varint(out, at, table[value] if value < len(table) else value + offset)
    tail = end - (start + width * n)
    out[at:at + tail] = data[end - tail:end]
    return out, at + tail


@njit(cache=True)
def with_fixed_ids(data, pos, end, out, o, table, offset):
    """The instance `with_varint_ids` made at data[pos:end], copied to out[o:]
    (grown when short) with each varint v back as the id table[v] (v + offset
    past the table's end); returns (out, the copy's end)."""
    start, n, width = ids_span(data, pos)  # the header is the same in either form
    out = grow(out, o + end - pos + (width - 1) * n)
    write = o + (start - pos)
    out[o:write] = data[pos:start]
    at = start
    for _ in range(n):
        value, at = get_varint(data, at)
        write = put_le(out, write, table[value] if value < len(table) else value + offset, width)
    out[write:write + end - at] = data[at:end]
    return out, write + end - at


@njit(cache=True)
def read_instance(data, pos, offset, tokens, boundary, positions, ids, with_source):
    """Copies the instance at data[pos:] into a row whose first `offset`
    tokens are taken: its masked tokens (and token_boundary) to
    tokens[offset:] (boundary[offset:]), its predictions to positions/ids[:k]
    as row positions and original ids. Returns (n, b_start, k, label,
    source), b_start relative to it, source -1 when it carries none: a
    ValueError `with_source` (for records that have the feature)."""
    n, b_start, k, label = instance_header(data, pos)
    at, _, width = ids_span(data, pos)
    source = -1
    if data[pos] & _SOURCE:
        source = get_le(data, pos + HEADER_SIZE, SOURCE_SIZE)
    elif with_source:
        raise ValueError("an instance without a source id (stamp_source) in records with one")
    mask_id = get_le(data, at - width, width) if k else 0
    at = unmasked_ids(data, pos, tokens, offset)
    previous = -1
    for c in range(k):
        gap, at = get_varint(data, at)
        previous += gap + 1
        positions[c] = offset + previous
        ids[c] = tokens[offset + previous]
    replaced = at + k
    for c in range(k):
        action = data[at + c]
        if action == MASKED:
            tokens[positions[c]] = mask_id
        elif action == REPLACED:
            tokens[positions[c]] = get_le(data, replaced, width)
            replaced += width
    at = replaced
    if data[pos] & _BOUNDARY:
        boundary[offset:offset + n] = data[at:at + n]
    return n, b_start, k, label, source


def stamp_source(batch: EntryBatch, source: int) -> EntryBatch:
    """The batch's instances, each carrying `source` (its corpus's index in a
    mixture) for the records' `source` feature: SOURCE_SIZE bytes inserted
    after each header, its flag set, its entry's length grown; keys and order
    unchanged. Stamped after the kernels, so a run without a mixture makes
    and writes exactly the bytes it did.

    Raises:
      ValueError: `source` does not fit a uint16, or an instance has one already.
    """
    if not 0 <= source <= 0xFFFF:
        raise ValueError(f"a source id is in [0, 65535], got {source}")
    count = len(batch)
    headers = batch.bounds[:-1] + ENTRY_HEADER
    if (batch.entries[headers] & _SOURCE).any():
        raise ValueError("these instances carry a source id already")
    value = np.array([source & 0xFF, source >> 8], dtype=np.uint8)
    entries = np.insert(batch.entries, np.repeat(headers + HEADER_SIZE, SOURCE_SIZE),
                        np.tile(value, count))
    bounds = batch.bounds + SOURCE_SIZE * np.arange(count + 1, dtype=np.int64)
    starts = bounds[:-1]
    entries[starts + ENTRY_HEADER] |= _SOURCE
    lengths = (np.diff(bounds) - ENTRY_HEADER).astype("<u4").view(np.uint8).reshape(count, 4)
    entries[(starts + ENTRY_KEY_SIZE)[:, None] + np.arange(4)] = lengths
    return EntryBatch(keys=batch.keys, entries=entries, bounds=bounds)


def _header_values(batch: EntryBatch, offset: int, width: int) -> np.ndarray:
    """The little-endian value of `width` bytes at `offset` of each instance, vectorized."""
    at = batch.bounds[:-1] + ENTRY_HEADER + offset
    return batch.entries[at[:, None] + np.arange(width)].view(f"<u{width}").reshape(-1)


def entry_tokens(batch: EntryBatch) -> int:
    """The tokens of the batch's instances, read from their headers (a
    mixture's figures per source, without parsing an instance)."""
    return int(_header_values(batch, 2, 4).sum())


def entry_source(batch: EntryBatch) -> int:
    """The source of a batch of stamped instances, all of one source (a batch
    is one unit of work, whose documents are one source's).

    Raises:
      ValueError: the batch is empty, not stamped, or of several sources.
    """
    if not len(batch) or not (batch.entries[batch.bounds[:-1] + ENTRY_HEADER] & _SOURCE).all():
        raise ValueError("a batch without source ids (stamp_source)")
    sources = _header_values(batch, HEADER_SIZE, SOURCE_SIZE)
    if (sources != sources[0]).any():
        raise ValueError(f"a batch of several sources: {sorted(set(sources.tolist()))}")
    return int(sources[0])
