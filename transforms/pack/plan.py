"""A shard's rows: which of its instances share a row, and in what order.

The shard writer (transforms.write.rows) calls `plan_rows` with the lengths
and shuffle keys of a shard's instances in shard order; the rows' shapes come
from the length histogram (transforms.pack.histogram), and rows are written in
the order of a hash of their instances' keys, so a row's place says nothing
about its shape. All of it depends only on the shard's instances: the same
bytes on every runner, worker count and shuffle path.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bert_pretraining_data.transforms.handoff.shuffle.entries import gather
from bert_pretraining_data.transforms.instances.masking import MaskingConfig, num_to_predict
from bert_pretraining_data.transforms.pack.histogram import pack_histogram
from bert_pretraining_data.transforms.seeds import mix64


@njit(cache=True)
def _fill_rows(lengths, keys, shapes, counts):
    """Rows of the shapes' lengths, each length's instances taken in order;
    returns (members, bounds, row keys): row r is members[bounds[r]:bounds[r + 1]],
    its instances in shard order."""
    by_length = np.argsort(lengths, kind="mergesort")
    next_of = np.zeros(lengths.max() + 2, dtype=np.int64)
    for length in lengths:
        next_of[length + 1] += 1
    next_of = np.cumsum(next_of)  # next_of[l]: the next instance of length l in by_length
    rows = counts.sum()
    members = np.empty(len(lengths), dtype=np.int64)
    bounds = np.zeros(rows + 1, dtype=np.int64)
    row_keys = np.empty(rows, dtype=np.uint64)
    row = 0
    taken = 0
    for s in range(len(shapes)):
        for _ in range(counts[s]):
            mixed = np.uint64(0)
            start = taken
            for length in shapes[s]:
                if length == 0:
                    break
                member = by_length[next_of[length]]
                next_of[length] += 1
                mixed ^= np.uint64(keys[member])
                position = taken  # insertion sort: members in shard order
                while position > start and members[position - 1] > member:
                    members[position] = members[position - 1]
                    position -= 1
                members[position] = member
                taken += 1
            bounds[row + 1] = taken
            row_keys[row] = mix64(mixed)
            row += 1
    return members, bounds, row_keys


def plan_rows(lengths: np.ndarray, keys: np.ndarray, *, max_length: int, depth: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """Rows of at most `depth` instances and `max_length` tokens.

    `lengths` and `keys` are the instances' lengths and shuffle keys in shard
    order. Returns (members, bounds): row r holds instances
    members[bounds[r]:bounds[r + 1]] (indices into `lengths`, ascending), rows
    in their order in the shard.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if not len(lengths):
        return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    histogram = np.bincount(lengths, minlength=max_length + 1)
    shapes, counts = pack_histogram(histogram, max_length, depth)
    members, bounds, row_keys = _fill_rows(lengths, np.asarray(keys, dtype=np.int64),
                                           shapes, counts)
    # By the hash of the row's keys; equal hashes (chance) by the first instance.
    order = np.lexsort((members[bounds[:-1]], row_keys))
    return gather(members, bounds, order)


def prediction_budget(config: MaskingConfig, max_length: int, depth: int) -> int:
    """The most masked-LM predictions a row can need: the largest sum of the
    instances' budgets (num_to_predict of each length: 15%, rounded, at least
    1, at most max_predictions_per_seq) over up to `depth` instances that fit
    a row together. 22 at 128 and 79 at 512 (with 20 and 76 a sequence),
    MLPerf's `max_predictions_per_seq + max_sequences_per_pack` bound at 512."""
    budgets = np.array([num_to_predict(n, config) for n in range(max_length + 1)],
                       dtype=np.int64)
    budgets[0] = 0
    best = np.zeros(max_length + 1, dtype=np.int64)  # best[t]: rows of <= t tokens
    for _ in range(depth):
        grown = best.copy()
        for length in range(1, max_length + 1):
            np.maximum(grown[length:], best[:max_length + 1 - length] + budgets[length],
                       out=grown[length:])
        best = grown
    return int(best[max_length])
