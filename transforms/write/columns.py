"""A shard's rows as flat columns, the form the columnar writers take.

Parquet (transforms.write.parquet_rows) and MDS (transforms.write.mds_rows)
write the rows the TFRecord shard holds, in its order, unpadded: each
feature of the layout as one array of values, row after row, with the
offsets at which each row's values begin. Per-token and per-prediction
values come from the instances' bytes through one compiled pass, so both
formats hold exactly what the records hold.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
from numba import njit

from bert_pretraining_data.transforms.handoff.shuffle.entries import ENTRY_HEADER
from bert_pretraining_data.transforms.handoff.shuffle.instances import (instance_header,
                                                                        read_instance)
from bert_pretraining_data.transforms.write.rows import InstanceRows, PackedRows
from bert_pretraining_data.transforms.write.tf_example import Field

# The largest vocabulary whose ids the columnar formats store in 16 bits.
UINT16_LIMIT = 1 << 16
# Per-sequence fields: a list per packed row, one value per unpacked row.
PER_SEQUENCE = (Field.NEXT_SENTENCE_LABELS, Field.SOURCE, Field.NEXT_SENTENCE_POSITIONS)


@njit(cache=True)
def _sizes(entries, bounds, members):
    """Total tokens and predictions of the instances `members`."""
    tokens = 0
    predictions = 0
    for i in members:
        n, _, k, _ = instance_header(entries, bounds[i] + ENTRY_HEADER)
        tokens += n
        predictions += k
    return tokens, predictions


@njit(cache=True)
def _flatten(entries, bounds, members, member_bounds, tokens, boundary, segments, sequence_of,
             token_positions, positions, ids, labels, sources, starts, token_offsets,
             prediction_offsets):
    """Rows r (instances members[member_bounds[r]:member_bounds[r + 1]], side
    by side) as Arrow list layouts: each column's values one row after
    another, row r's tokens at token_offsets[r]:token_offsets[r + 1], its
    predictions at prediction_offsets[r]:..., its sequences at
    member_bounds[r]:... (labels, starts; sources where the layout writes
    them). Per token: the segment, and where the layout writes them (the
    arrays are not empty) the 1-based sequence index (packed rows'
    input_mask) and the position in its sequence; positions and starts are
    row positions, as the TFRecord holds them."""
    n_at = 0
    k_at = 0
    packed = len(sequence_of) > 0
    with_source = len(sources) > 0
    for r in range(len(member_bounds) - 1):
        token_offsets[r] = n_at
        prediction_offsets[r] = k_at
        row_start = n_at
        for j in range(member_bounds[r], member_bounds[r + 1]):
            n, b_start, k, label, source = read_instance(
                entries, bounds[members[j]] + ENTRY_HEADER, n_at, tokens, boundary,
                positions[k_at:], ids[k_at:], with_source)
            for c in range(k):  # row positions: read_instance gives flat ones
                positions[k_at + c] -= row_start
            segments[n_at:n_at + b_start] = 0
            segments[n_at + b_start:n_at + n] = 1
            if packed:
                sequence_of[n_at:n_at + n] = j - member_bounds[r] + 1
                for t in range(n):
                    token_positions[n_at + t] = t
            labels[j] = label
            if with_source:
                sources[j] = source
            starts[j] = n_at - row_start
            n_at += n
            k_at += k
    token_offsets[len(member_bounds) - 1] = n_at
    prediction_offsets[len(member_bounds) - 1] = k_at


class Column(NamedTuple):
    """One feature of rows [0, rows): row r's values are
    values[offsets[r]:offsets[r + 1]]; `scalar` when each row holds exactly
    one (an unpacked row's label and source)."""

    values: np.ndarray
    offsets: np.ndarray
    scalar: bool


def token_id_dtype(vocab_size: int, wide: type = np.int32) -> np.dtype:
    """Token ids' column type: uint16 up to UINT16_LIMIT ids, else `wide`."""
    return np.dtype(np.uint16 if vocab_size <= UINT16_LIMIT else wide)


def flat_columns(instances: InstanceRows | PackedRows, ids_dtype: np.dtype, entries: np.ndarray,
                 bounds: np.ndarray, members: np.ndarray, member_bounds: np.ndarray
                 ) -> dict[Field, Column]:
    """The layout's unpadded features of rows r (instances
    members[member_bounds[r]:member_bounds[r + 1]], side by side), member_bounds
    starting at 0. Token ids come as `ids_dtype`, the other per-token values
    narrow (a quarter of int64's fresh pages); per-prediction and
    per-sequence ones as int64. Packed rows' per-token columns are filled only
    for them."""
    n, k = _sizes(entries, bounds, members)
    layout = instances.layout
    per_token = n if layout.packed else 0
    tokens = np.empty(n, ids_dtype)
    token_positions, sequence_of = np.empty(per_token, np.uint16), np.empty(per_token, np.uint16)
    boundary, segments = np.zeros(n, np.uint8), np.empty(n, np.uint8)
    positions, ids = np.empty(k, np.int64), np.empty(k, np.int64)
    labels, starts = np.empty(len(members), np.int64), np.empty(len(members), np.int64)
    sources = np.empty(len(members) if layout.source else 0, np.int64)
    rows = len(member_bounds) - 1
    token_offsets, prediction_offsets = np.empty(rows + 1, np.int64), np.empty(rows + 1, np.int64)
    _flatten(entries, bounds, members, member_bounds, tokens, boundary, segments, sequence_of,
             token_positions, positions, ids, labels, sources, starts, token_offsets,
             prediction_offsets)
    sequence_offsets = member_bounds.astype(np.int64)
    data = {Field.INPUT_IDS: (tokens, token_offsets),
            Field.SEGMENT_IDS: (segments, token_offsets),
            Field.TOKEN_BOUNDARY: (boundary, token_offsets),
            Field.INPUT_MASK: (sequence_of, token_offsets),
            Field.POSITIONS: (token_positions, token_offsets),
            Field.MASKED_LM_POSITIONS: (positions, prediction_offsets),
            Field.MASKED_LM_IDS: (ids, prediction_offsets),
            Field.NEXT_SENTENCE_LABELS: (labels, sequence_offsets),
            Field.SOURCE: (sources, sequence_offsets),
            Field.NEXT_SENTENCE_POSITIONS: (starts, sequence_offsets)}
    return {field: Column(*data[field], scalar=field in PER_SEQUENCE and not layout.packed)
            for field in unpadded_features(instances).values()}


def unpadded_features(instances: InstanceRows | PackedRows) -> dict[str, Field]:
    """Column name -> what it holds, in name order: the layout's features
    written with --padding=none (input_mask and masked_lm_weights, implied
    by the lengths, left out; a packed row's input_mask kept)."""
    return dataclasses.replace(instances.layout, padded=False).features()
