"""The instance layout in flight (transforms.handoff.shuffle.instances): what
the kernels write is what the shard writer reads back, for every outcome of
the 80/10/10 rule, wide ids, token boundaries and source ids."""

from __future__ import annotations

import numpy as np
import pytest

from bert_pretraining_data.transforms.handoff.shuffle.entries import ENTRY_HEADER, EntryBatch
from bert_pretraining_data.transforms.handoff.shuffle.instances import (max_instance_size,
                                                                       put_instance, read_instance,
                                                                       stamp_source)

MASK_ID = 103


def _instance(rng: np.random.Generator, n: int, k: int, vocab: int):
    """(masked tokens, positions, labels): each prediction masked, kept or
    replaced by a random id (which may be the mask id or the label itself),
    and some original tokens the mask id."""
    original = rng.integers(0, vocab, n).astype(np.int64)
    original[rng.random(n) < 0.02] = MASK_ID
    positions = np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64)
    labels = original[positions]
    masked = original.copy()
    for p in positions:
        draw = rng.random()
        masked[p] = (MASK_ID if draw < 0.6 else masked[p] if draw < 0.7 else MASK_ID
                     if draw < 0.75 else rng.integers(0, vocab))
    return masked, positions, labels


@pytest.mark.parametrize("vocab", [30522, 250_002])  # 2-byte and 4-byte ids
@pytest.mark.parametrize("with_boundary", [False, True])
def test_what_is_written_reads_back_exactly(vocab, with_boundary):
    rng = np.random.default_rng(vocab + with_boundary)
    pairs, expected = [], []
    for i, (n, k) in enumerate([(3, 0), (3, 1), (128, 20), (512, 77), (512, 512), (40, 0)]):
        masked, positions, labels = _instance(rng, n, k, vocab)
        boundary = rng.integers(0, 2, n).astype(np.uint8)
        out = np.zeros(max_instance_size(n, k), dtype=np.uint8)
        end = put_instance(out, 0, masked, n // 2, i % 2, positions, labels, boundary,
                           with_boundary, MASK_ID)
        pairs.append((i, out[:end].tobytes()))
        expected.append((masked, positions, labels, boundary, n // 2, i % 2))
    for stamped in (False, True):
        batch = EntryBatch.of(pairs)
        if stamped:
            batch = stamp_source(batch, 7)
        for i, (masked, positions, labels, boundary, b_start, label) in enumerate(expected):
            n, k, offset = len(masked), len(positions), 5
            tokens = np.zeros(offset + n, dtype=np.int64)
            read_boundary = np.zeros(offset + n, dtype=np.uint8)
            read_positions = np.zeros(k, dtype=np.int64)
            ids = np.zeros(k, dtype=np.int64)
            got = read_instance(batch.entries, batch.bounds[i] + ENTRY_HEADER, offset, tokens,
                                read_boundary, read_positions, ids, stamped)
            assert got == (n, b_start, k, label, 7 if stamped else -1)
            assert tokens[offset:].tolist() == masked.tolist()
            assert (read_positions - offset).tolist() == positions.tolist()
            assert ids.tolist() == labels.tolist()
            if with_boundary:
                assert read_boundary[offset:].tolist() == boundary.tolist()


def test_predictions_out_of_order_are_refused():
    out = np.zeros(max_instance_size(8, 2), dtype=np.uint8)
    tokens = np.arange(8, dtype=np.int64)
    with pytest.raises(ValueError, match="not strictly increasing"):
        put_instance(out, 0, tokens, 8, 0, np.array([5, 2]), np.array([5, 2]),
                     np.zeros(8, np.uint8), False, MASK_ID)
