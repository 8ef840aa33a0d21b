"""Shuffle entries: what the shuffle carries from CreateInstances to a shard.

An entry is a 63-bit shuffle key, a payload length and the payload (an
instance, transforms.handoff.shuffle.instances, or a serialized record). Entry
e goes to shard `key % N`, and a shard's entries are ordered by key (ties by
the record each makes), so a shard's content and order depend only on the set
of entries: not on bundles, workers, element order or retries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from numba import njit


# An entry: shuffle key (uint64), payload length (uint32), payload; little-endian.
ENTRY_KEY_SIZE = 8
ENTRY_HEADER = ENTRY_KEY_SIZE + 4
SHUFFLES = ("runner", "files")


@dataclasses.dataclass(frozen=True)
class EntryBatch:
    """Shuffle entries: entry i is entries[bounds[i]:bounds[i + 1]], its
    shuffle key (also keys[i]) and length followed by its payload."""

    keys: np.ndarray  # int64, below 2**63
    entries: np.ndarray  # uint8
    bounds: np.ndarray  # int64

    @classmethod
    def of(cls, pairs: Sequence[tuple[int, bytes]]) -> "EntryBatch":
        """Entries of (shuffle key, payload) pairs (the Python paths)."""
        keys = np.array([key for key, _ in pairs], dtype=np.int64)
        sizes = [len(payload) for _, payload in pairs]
        payloads = np.frombuffer(b"".join(payload for _, payload in pairs), dtype=np.uint8)
        payload_bounds = np.zeros(len(pairs) + 1, dtype=np.int64)
        np.cumsum(sizes, out=payload_bounds[1:])
        entries, bounds = _entries_of(keys, payloads, payload_bounds)
        return cls(keys=keys, entries=entries, bounds=bounds)

    @classmethod
    def filled(cls, buffer: "EntryBuffer") -> "EntryBatch":
        """The entries the kernels appended to `buffer`."""
        return cls(keys=buffer.keys[:buffer.count], entries=buffer.data[:buffer.end],
                   bounds=buffer.bounds[:buffer.count + 1])

    def __len__(self) -> int:
        return len(self.keys)


class EntryBuffer(NamedTuple):
    """Shuffle entries as the instance kernels append them, one value through
    their calls: entry i < count is data[bounds[i]:bounds[i + 1]], its key
    keys[i]. The arrays grow as entries come, so each step returns the buffer
    (a new tuple: it is immutable, which numba's nopython mode needs)."""

    data: np.ndarray  # uint8, filled up to `end`
    bounds: np.ndarray  # int64, count + 1 of them filled, from 0
    keys: np.ndarray  # int64
    end: int
    count: int


@njit(cache=True)
def entry_buffer(entries: int) -> EntryBuffer:
    """An empty buffer with room for `entries` entries of 1 KiB (it grows past them)."""
    return EntryBuffer(np.empty(1024 * entries, dtype=np.uint8),
                       np.zeros(entries + 1, dtype=np.int64), np.empty(entries, dtype=np.int64),
                       0, 0)


@njit(cache=True)
def grow(values: np.ndarray, needed: int) -> np.ndarray:
    """`values`, or a copy at least twice as long when `needed` exceeds it."""
    if needed <= len(values):
        return values
    grown = np.empty(max(needed, 2 * len(values)), dtype=values.dtype)
    grown[:len(values)] = values
    return grown


# Inlined (numba IR), as the kernels call these once per instance.
@njit(cache=True, inline="always")
def reserve_entry(buffer: EntryBuffer, size: int) -> EntryBuffer:
    """The buffer with room for one more entry of up to `size` payload bytes,
    which go at data[end + ENTRY_HEADER:] before `commit_entry`."""
    data_end = buffer.end + ENTRY_HEADER + size
    bounds_end, keys_end = buffer.count + 2, buffer.count + 1
    if (data_end <= len(buffer.data) and bounds_end <= len(buffer.bounds)
            and keys_end <= len(buffer.keys)):
        return buffer  # mostly; a new tuple would count its arrays' references again (3% slower)
    return EntryBuffer(grow(buffer.data, data_end), grow(buffer.bounds, bounds_end),
                       grow(buffer.keys, keys_end), buffer.end, buffer.count)


@njit(cache=True, inline="always")
def commit_entry(buffer: EntryBuffer, key: int, length: int) -> EntryBuffer:
    """The buffer with the entry whose `length` payload bytes are written
    (`reserve_entry`) completed under `key`."""
    end = close_entry(buffer.data, buffer.end, key, length)
    buffer.bounds[buffer.count + 1] = end
    buffer.keys[buffer.count] = key
    return EntryBuffer(buffer.data, buffer.bounds, buffer.keys, end, buffer.count + 1)


@njit(cache=True)
def close_entry(out, pos, key, length):
    """Completes the entry at out[pos:] whose payload (`length` bytes) is
    already at out[pos + ENTRY_HEADER:]: writes the key and length before it;
    returns the entry's end. Entries are written this way (commit_entry)."""
    for b in range(ENTRY_KEY_SIZE):
        out[pos + b] = (key >> (8 * b)) & 0xFF
    return set_entry_length(out, pos, length)


@njit(cache=True)
def set_entry_length(out, pos, length):
    """Sets the payload length of the entry at out[pos:] (its payload
    re-encoded in place, transforms.handoff.shuffle.frames); returns its end."""
    for b in range(4):
        out[pos + ENTRY_KEY_SIZE + b] = (length >> (8 * b)) & 0xFF
    return pos + ENTRY_HEADER + length


@njit(cache=True)
def _entries_of(keys, payloads, payload_bounds):
    entries = np.empty(len(payloads) + ENTRY_HEADER * len(keys), dtype=np.uint8)
    bounds = np.zeros(len(keys) + 1, dtype=np.int64)
    pos = 0
    for i in range(len(keys)):
        length = payload_bounds[i + 1] - payload_bounds[i]
        data = pos + ENTRY_HEADER
        entries[data:data + length] = payloads[payload_bounds[i]:payload_bounds[i + 1]]
        pos = close_entry(entries, pos, keys[i], length)
        bounds[i + 1] = pos
    return entries, bounds


@njit(cache=True)
def gather(entries, bounds, order):
    """The segments entries[bounds[i]:bounds[i + 1]] for i in `order`, one
    after another, with their new bounds."""
    size = 0
    for i in order:
        size += bounds[i + 1] - bounds[i]
    out = np.empty(size, dtype=entries.dtype)
    out_bounds = np.zeros(len(order) + 1, dtype=np.int64)
    pos = 0
    for j in range(len(order)):
        i = order[j]
        length = bounds[i + 1] - bounds[i]
        out[pos:pos + length] = entries[bounds[i]:bounds[i + 1]]
        pos += length
        out_bounds[j + 1] = pos
    return out, out_bounds


@njit(cache=True)
def _scan_entries(data):
    """(keys, bounds) of concatenated entries; an entry that runs past the
    end is reported by bounds[-1] > len(data)."""
    count = 0
    pos = 0
    while pos < len(data):  # count them, then read them
        pos = entry_end(data, pos)
        count += 1
    keys = np.empty(count, dtype=np.int64)
    bounds = np.zeros(count + 1, dtype=np.int64)
    for i in range(count):
        keys[i] = _uint64_at(data, bounds[i]) if bounds[i] + ENTRY_KEY_SIZE <= len(data) else 0
        bounds[i + 1] = entry_end(data, bounds[i])
    return keys, bounds


@njit(cache=True)
def entry_end(data, pos):
    """Where the entry at `pos` ends, from its length field."""
    if pos + ENTRY_HEADER > len(data):
        return pos + ENTRY_HEADER  # a truncated header: past the end
    return pos + ENTRY_HEADER + (_uint64_at(data, pos + ENTRY_KEY_SIZE) & 0xFFFFFFFF)


@njit(cache=True)
def _uint64_at(data, pos):
    value = 0
    for b in range(8):
        value |= np.int64(data[pos + b]) << (8 * b)
    return value


def shard_of(key: int, num_shards: int) -> int:
    """The shard a key's entry goes to."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    return key % num_shards


def split_by_shard(batch: EntryBatch, num_shards: int) -> list[tuple[int, np.ndarray]]:
    """(shard, its entries of the batch) for every shard the batch touches."""
    if not len(batch):
        return []
    if num_shards == 1:  # every small run: no per-entry work at all
        return [(0, batch.entries)]
    shards = batch.keys % num_shards
    if (shards == shards[0]).all():
        return [(int(shards[0]), batch.entries)]
    order = np.argsort(shards, kind="stable")
    entries, bounds = gather(batch.entries, batch.bounds, order)
    in_order = shards[order]
    cuts = [0, *(np.flatnonzero(in_order[1:] != in_order[:-1]) + 1).tolist(), len(order)]
    return [(int(in_order[a]), entries[bounds[a]:bounds[b]]) for a, b in zip(cuts, cuts[1:])]


def scan_entries(data: bytes | bytearray | np.ndarray, *, source: str = "shard"
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(entries, keys, bounds) of a shard's concatenated entries (all its blobs).

    Raises:
      ValueError: the data ends inside an entry (a truncated bucket file).
    """
    entries = np.frombuffer(data, dtype=np.uint8)
    keys, bounds = _scan_entries(entries)
    if bounds[-1] != len(entries):
        raise ValueError(f"{source}: truncated shuffle entry at byte {int(bounds[-2])}")
    return entries, keys, bounds


def payload(entries: np.ndarray, bounds: np.ndarray, i: int) -> bytes:
    """Entry i's payload."""
    return entries[bounds[i] + ENTRY_HEADER:bounds[i + 1]].tobytes()


def key_order(keys: np.ndarray, tie_key: Callable[[int], bytes]) -> np.ndarray:
    """Entries in shard order: by shuffle key, entries of equal keys (63-bit
    keys collide only by chance) by `tie_key(i)`, the bytes of the record
    entry i makes."""
    order = np.argsort(keys, kind="stable")
    in_order = keys[order]
    ties = np.flatnonzero(in_order[1:] == in_order[:-1])
    start = 0
    for tie in ties.tolist():
        if tie < start:
            continue
        end = tie + 1
        while end < len(order) and in_order[end] == in_order[tie]:
            end += 1
        order[tie:end] = sorted(order[tie:end].tolist(), key=tie_key)
        start = end
    return order




