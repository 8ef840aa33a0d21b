"""Which lengths share a row: bin packing on the length histogram.

A shard holds hundreds of thousands of instances but at most max_seq_length
distinct lengths, so packing is solved on the histogram, at a cost
independent of the shard's size, like Krell et al.'s packers (arXiv
2107.02027). Their SPFHP, at 3 a row, spends rows on short sequences while
long ones still need partners; this packer keeps longest-first but fills a
row's *last two* slots together with the pair of lengths that fills it best,
so short sequences spread one per row. The same counts give the same shapes
on every worker. (How full: docs/design-notes.md, transforms.pack.histogram.)
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.typed import List


# Row limits a deeper limit also tries (a plan works on the histogram: cheap).
_SHALLOWER = (4, 6, 8, 12, 16, 24, 32, 48, 64)


@njit(cache=True)
def _longest_up_to(h, x):
    """The longest length <= x still available (0: none)."""
    while x >= 1 and h[x] == 0:
        x -= 1
    return x


@njit(cache=True)
def _best_pair(h, room, shortest):
    """(a, b), a <= b, both available, a + b <= room and as large as
    possible; among such pairs the one with the smallest a. (0, 0): none."""
    best = 0
    best_a = 0
    best_b = 0
    for a in range(shortest, room // 2 + 1):
        if h[a] == 0:
            continue
        b = room - a
        while b >= a and (h[b] == 0 or (b == a and h[a] < 2)):
            b -= 1
        if b >= a and a + b > best:
            best, best_a, best_b = a + b, a, b
            if best == room:
                break
    return best_a, best_b


@njit(cache=True)
def _grow_rows(values, needed):
    if needed <= len(values):
        return values
    grown = np.zeros((max(needed, 2 * len(values)),) + values.shape[1:], dtype=values.dtype)
    grown[:len(values)] = values
    return grown


@njit(cache=True)
def _solve(histogram, max_length, depth, shortest_first):
    """(shapes, counts): counts[i] rows of the lengths shapes[i] (0-padded)."""
    h = histogram.copy()
    groups = np.zeros((16, depth), dtype=np.int64)  # the lengths of each group of rows
    num_groups = 0
    shapes = np.zeros((16, depth), dtype=np.int64)
    counts = np.zeros(16, dtype=np.int64)
    num_shapes = 0
    shortest = 1
    for length in range(max_length, 0, -1):
        if h[length] == 0:
            continue
        # Every row opened by this length: one group of identical rows, split
        # as the lengths that fill them run out. A group: (room, rows, free slots, lengths).
        groups = _grow_rows(groups, num_groups + 1)
        groups[num_groups, :] = 0
        groups[num_groups, 0] = length
        stack = List()
        stack.append((max_length - length, h[length], depth - 1, num_groups))
        num_groups += 1
        h[length] = 0
        while len(stack):
            room, rows, free, g = stack.pop()
            while shortest <= max_length and h[shortest] == 0:
                shortest += 1
            if free == 0 or room < shortest:  # the group is complete
                shapes = _grow_rows(shapes, num_shapes + 1)
                counts = _grow_rows(counts, num_shapes + 1)
                shapes[num_shapes] = groups[g]
                counts[num_shapes] = rows
                num_shapes += 1
                continue
            a, b = 0, 0
            if free == 2:
                a, b = _best_pair(h, room, shortest)
            if a == 0:
                a = shortest if free >= 3 and shortest_first else _longest_up_to(h, room)
            if b == 0:
                taken = min(rows, h[a])
            elif a == b:
                taken = min(rows, h[a] // 2)
            else:
                taken = min(rows, h[a], h[b])
            h[a] -= taken
            filled = depth - free
            groups = _grow_rows(groups, num_groups + 1)
            groups[num_groups] = groups[g]
            groups[num_groups, filled] = a
            if b:
                h[b] -= taken
                groups[num_groups, filled + 1] = b
            stack.append((room - a - b, taken, free - (2 if b else 1), num_groups))
            num_groups += 1
            if rows > taken:
                stack.append((room, rows - taken, free, g))
    return shapes[:num_shapes], counts[:num_shapes]


@njit(cache=True)
def _merge(shapes, counts, max_length, depth):
    """Rows that could share a row, merged: the longest row with room takes
    the longest row that fits beside it (sum and depth), until none does.
    The greedy leaves such rows where its lengths ran out of partners (the
    last lengths, many of one length)."""
    totals = shapes.sum(axis=1)
    sizes = (shapes > 0).sum(axis=1)
    merged = True
    while merged:
        merged = False
        for i in np.argsort(-totals, kind="mergesort"):
            if counts[i] == 0 or sizes[i] >= depth or totals[i] >= max_length:
                continue
            best = -1
            for j in range(len(counts)):
                enough = counts[j] >= (2 if j == i else 1)
                if (enough and totals[i] + totals[j] <= max_length
                        and sizes[i] + sizes[j] <= depth
                        and (best < 0 or totals[j] > totals[best])):
                    best = j
            if best < 0:
                continue
            taken = counts[i] // 2 if best == i else min(counts[i], counts[best])
            shape = np.zeros(depth, dtype=np.int64)
            shape[:sizes[i]] = shapes[i, :sizes[i]]
            shape[sizes[i]:sizes[i] + sizes[best]] = shapes[best, :sizes[best]]
            counts[i] -= taken
            counts[best] -= taken
            shapes = _grow_rows(shapes, len(counts) + 1)[:len(counts) + 1]
            shapes[len(counts)] = shape
            counts = np.append(counts, taken)
            totals = np.append(totals, shape.sum())
            sizes = np.append(sizes, sizes[i] + sizes[best])
            merged = True
            break
    keep = counts > 0
    return shapes[keep], counts[keep]


def pack_histogram(histogram: np.ndarray, max_length: int, depth: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Rows for the lengths counted in `histogram` (histogram[l]: sequences
    of length l, 1 <= l <= max_length), at most `depth` sequences a row.

    Returns (shapes, counts): counts[i] rows hold sequences of the lengths
    shapes[i] (0 = no sequence); every sequence is in exactly one row and no
    row holds more than max_length tokens.
    """
    histogram = np.asarray(histogram, dtype=np.int64)
    if len(histogram) != max_length + 1 or histogram[0]:
        raise ValueError("histogram must count lengths 1..max_length at indices 1..max_length")
    # Deeper rows: slots before the last two take the shortest length or the
    # longest that fits; and a plan of fewer a row is a plan of more too.
    limits = sorted({min(depth, 3), depth, *(d for d in _SHALLOWER if d < depth)})
    plans = []
    for limit in limits:
        for shortest_first in (True, False) if limit > 3 else (True,):
            shapes, counts = _solve(histogram, max_length, limit, shortest_first)
            padded = np.zeros((len(shapes), depth), dtype=np.int64)
            padded[:, :limit] = shapes
            plans.append(_merge(padded, counts, max_length, depth))
    return min(plans, key=lambda plan: int(plan[1].sum()))
