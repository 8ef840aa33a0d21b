"""A shard's records, made from its instances when the shard is written.

The worker that writes a shard hands its entries to a row writer, which
orders them and writes each row as a `tf.train.Example` framed as a TFRecord
record: `InstanceRows`, a row per instance in shuffle-key order (the
original's records), or `PackedRows` (`--pack_sequences`), up to
`max_sequences` whole instances a row (transforms.pack.plan). Both write rows
with the same compiled loop, so a packed row holds exactly the instances the
unpacked run writes, unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Iterator, NamedTuple, Protocol

import numpy as np
from numba import njit

from bert_pretraining_data.transforms.handoff.borrowed import borrowed
from bert_pretraining_data.transforms.handoff.shuffle.entries import (ENTRY_HEADER, grow, key_order,
                                                                      payload)
from bert_pretraining_data.transforms.handoff.shuffle.instances import (instance_header,
                                                                        read_instance)
from bert_pretraining_data.transforms.pack.plan import plan_rows
from bert_pretraining_data.transforms.write.tf_example import (RecordLayout, encode, layout_arrays,
                                                               scratch_size)
from bert_pretraining_data.transforms.write.tfrecord import FOOTER_SIZE, HEADER_SIZE, frame


class RowSettings(NamedTuple):
    """What the compiled row loop needs of a layout."""

    names: np.ndarray
    name_bounds: np.ndarray
    fields: np.ndarray
    padded: bool
    max_seq_length: int
    max_predictions: int
    max_sequences: int
    pad_id: int
    source: bool


class RowWorkspace(NamedTuple):
    """One row's arrays and the writer's scratch, allocated once per writer."""

    tokens: np.ndarray
    boundary: np.ndarray
    starts: np.ndarray
    b_starts: np.ndarray
    labels: np.ndarray
    sources: np.ndarray
    positions: np.ndarray
    ids: np.ndarray
    scratch: np.ndarray
    field_starts: np.ndarray


@njit(cache=True)
def _lengths(entries, bounds, order):
    """The token count of each instance in `order`."""
    lengths = np.empty(len(order), dtype=np.int64)
    for j in range(len(order)):
        lengths[j] = instance_header(entries, bounds[order[j]] + ENTRY_HEADER)[0]
    return lengths


@njit(cache=True)
def _write_rows(entries, bounds, members, member_bounds, s, w):
    """Rows r (instances members[member_bounds[r]:member_bounds[r + 1]], side
    by side) as framed TFRecord records, concatenated."""
    entries, bounds, members, member_bounds = borrowed((entries, bounds, members, member_bounds))
    s, w = borrowed(s), borrowed(w)
    out = np.empty(max(1024, 3 * (bounds[-1] // max(1, len(bounds) - 1))
                       * (member_bounds[-1] - member_bounds[0])), dtype=np.uint8)
    pos = 0
    for r in range(len(member_bounds) - 1):
        n = 0
        k = 0
        m = 0
        for j in range(member_bounds[r], member_bounds[r + 1]):
            length, b_start, predictions, label, source = read_instance(
                entries, bounds[members[j]] + ENTRY_HEADER, n, w.tokens, w.boundary,
                w.positions[k:], w.ids[k:], s.source)
            w.starts[m] = n
            w.b_starts[m] = n + b_start
            w.labels[m] = label
            w.sources[m] = source
            n += length
            k += predictions
            m += 1
        out = grow(out, pos + HEADER_SIZE + len(w.scratch) + FOOTER_SIZE)
        record = borrowed(out)  # grown, then written through without counts
        end = encode(record, pos + HEADER_SIZE, s.names, s.name_bounds, s.fields, s.padded,
                     w.tokens[:n], w.boundary, w.starts[:m], w.b_starts[:m], w.labels[:m],
                     w.positions[:k], w.ids[:k], s.max_seq_length, s.max_predictions,
                     s.max_sequences, s.pad_id, w.scratch, w.field_starts, w.sources[:m])
        pos = frame(record, pos, end - pos - HEADER_SIZE)
    return out[:pos]


class RowPlan(NamedTuple):
    """A shard's rows: row r holds entries members[member_bounds[r]:member_bounds[r + 1]],
    side by side; `stats` go to the shard's manifest entry."""

    members: np.ndarray
    member_bounds: np.ndarray
    stats: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class _Rows:
    """A row layout and its limits; the compiled settings and workspace are
    built on first use in each process (never pickled)."""

    layout: RecordLayout
    max_seq_length: int
    max_predictions: int
    max_sequences: int = 1

    @functools.cached_property
    def _compiled(self) -> tuple[RowSettings, RowWorkspace]:
        names, name_bounds, fields = layout_arrays(self.layout.features())
        settings = RowSettings(names, name_bounds, fields, self.layout.padded,
                               self.max_seq_length, self.max_predictions, self.max_sequences,
                               self.layout.pad_id, self.layout.source)
        length, predictions, sequences = (self.max_seq_length, self.max_predictions,
                                          self.max_sequences)
        workspace = RowWorkspace(
            tokens=np.empty(length, dtype=np.int64), boundary=np.zeros(length, dtype=np.uint8),
            starts=np.empty(sequences, dtype=np.int64),
            b_starts=np.empty(sequences, dtype=np.int64),
            labels=np.empty(sequences, dtype=np.int64),
            sources=np.empty(sequences, dtype=np.int64),
            positions=np.empty(predictions, dtype=np.int64),
            ids=np.empty(predictions, dtype=np.int64),
            scratch=np.empty(scratch_size(length, predictions, sequences), dtype=np.uint8),
            field_starts=np.empty(len(fields) + 1, dtype=np.int64))
        return settings, workspace

    def rows(self, entries: np.ndarray, keys: np.ndarray, bounds: np.ndarray) -> ShardRows:
        """The shard's records, as the subclass's `plan` lays out its rows."""
        plan = self.plan(entries, keys, bounds)
        return ShardRows(len(plan.member_bounds) - 1,
                         self.chunks(entries, bounds, plan.members, plan.member_bounds),
                         plan.stats)

    def write(self, entries: np.ndarray, bounds: np.ndarray, members: np.ndarray,
              member_bounds: np.ndarray) -> np.ndarray:
        """Rows as framed records (see `_write_rows`)."""
        return _write_rows(entries, bounds, members, member_bounds, *self._compiled)

    def chunks(self, entries: np.ndarray, bounds: np.ndarray, members: np.ndarray,
               member_bounds: np.ndarray) -> Iterator[memoryview]:
        """The rows' records in chunks of about WRITE_CHUNK_BYTES."""
        rows = len(member_bounds) - 1
        per_row = 3 * int(bounds[-1]) // max(1, len(bounds) - 1) * len(members) // max(1, rows)
        return chunked(rows, WRITE_CHUNK_BYTES // max(1, per_row), lambda start, stop: self.write(
            entries, bounds, members, member_bounds[start:stop + 1]))


class InstanceRows(_Rows):
    """A record per instance, in shuffle-key order: the original's records."""

    def plan(self, entries: np.ndarray, keys: np.ndarray, bounds: np.ndarray) -> RowPlan:
        """A row per entry, in shard order: by shuffle key, ties by the record."""
        single = np.arange(2, dtype=np.int64)
        order = key_order(keys, lambda i: self.write(
            entries, bounds, np.array([i], dtype=np.int64), single).tobytes())
        return RowPlan(order, np.arange(len(order) + 1, dtype=np.int64), {})


class PackedRows(_Rows):
    """Rows of up to `max_sequences` whole instances (`--pack_sequences`);
    `max_predictions` is the row's masked-LM budget
    (transforms.pack.plan.prediction_budget). The shard's entry in the
    manifest gets its instances, tokens and rows by depth."""

    def plan(self, entries: np.ndarray, keys: np.ndarray, bounds: np.ndarray) -> RowPlan:
        """Rows of whole instances in key order (transforms.pack.plan)."""
        order = key_order(keys, lambda i: payload(entries, bounds, i))
        lengths = _lengths(entries, bounds, order)
        members, member_bounds = plan_rows(lengths, keys[order], max_length=self.max_seq_length,
                                           depth=self.max_sequences)
        depths = np.bincount(np.diff(member_bounds), minlength=self.max_sequences + 1)
        stats = {"instances": len(order), "tokens": int(lengths.sum()),
                 "rows_by_depth": depths[1:].tolist()}
        return RowPlan(order[members], member_bounds, stats)


@dataclasses.dataclass
class ShardRows:
    """What a row writer makes of a shard: its record count, its framed
    records in chunks (bytes-like, written and hashed without another copy),
    and statistics for the shard's manifest entry.

    A shard of several files (an MDS shard set) is a folder: `file_name`
    names the file the chunks make in it, and `after(written)`, given that
    file's {"bytes", "sha256"}, the files that follow it (name -> bytes)."""

    records: int
    chunks: Iterator[memoryview]
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    file_name: str | None = None
    after: Callable[[dict[str, Any]], dict[str, bytes]] | None = None


class RowWriter(Protocol):
    """Turns a shard's entries, in any order, into its records in shard
    order (transforms.write.rows: one record per entry, or packed rows)."""

    @property
    def max_predictions(self) -> int:
        """Masked-LM predictions a record has room for."""
        ...

    def rows(self, entries: np.ndarray, keys: np.ndarray, bounds: np.ndarray) -> ShardRows:
        ...


# Bytes of framed records a row writer hands to the file at a time.
WRITE_CHUNK_BYTES = 1 << 20


@njit(cache=True)
def _frame_payloads(entries, bounds, order):
    """The payloads of entries `order`, each framed as a TFRecord record."""
    size = 0
    for i in order:
        size += bounds[i + 1] - bounds[i] - ENTRY_HEADER + HEADER_SIZE + FOOTER_SIZE
    out = np.empty(size, dtype=np.uint8)
    pos = 0
    for i in order:
        length = bounds[i + 1] - bounds[i] - ENTRY_HEADER
        out[pos + HEADER_SIZE:pos + HEADER_SIZE + length] = entries[
            bounds[i] + ENTRY_HEADER:bounds[i + 1]]
        pos = frame(out, pos, length)
    return out


def chunked(count: int, per_chunk: int, chunk: Callable[[int, int], np.ndarray]
            ) -> Iterator[memoryview]:
    """chunk(start, stop) for consecutive ranges of about `per_chunk` of `count` items."""
    step = max(1, per_chunk)
    for start in range(0, count, step):
        yield memoryview(chunk(start, min(count, start + step)))


@dataclasses.dataclass(frozen=True)
class RawRecords:
    """The row writer of entries whose payloads are serialized records (the
    d2l recipe's, written in Python): each is framed as it is, in key order,
    ties by the record."""

    def rows(self, entries: np.ndarray, keys: np.ndarray, bounds: np.ndarray) -> ShardRows:
        order = key_order(keys, lambda i: payload(entries, bounds, i))
        per_record = int(bounds[-1]) // max(1, len(order)) + HEADER_SIZE + FOOTER_SIZE
        return ShardRows(len(order), chunked(
            len(order), WRITE_CHUNK_BYTES // per_record,
            lambda start, stop: _frame_payloads(entries, bounds, order[start:stop])))
