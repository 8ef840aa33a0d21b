"""A shard as a Parquet file (`--output_format=parquet`): the rows the TFRecord
shard holds, in its order, unpadded, one Arrow list column per feature.

The columns are the features of the same layout written with
`--padding=none` (named as the TFRecord's: `input_ids`, or the Model
Garden's `input_word_ids`, ...), so `input_mask` and `masked_lm_weights`,
implied by the lengths, are left out. Each column takes the smallest integer
type its values fit: token ids uint16 below 65,536 ids, else int32;
positions uint16; segment ids, labels and token boundaries uint8. A file is
zstd-compressed (`--parquet_compression`) in row groups of ROW_GROUP_ROWS
rows. Its bytes depend only on the rows and the pyarrow version: no
timestamps, the same writer settings everywhere.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import numpy as np
from numba import njit

from bert_pretraining_data.transforms.instances.instance_bytes import instance_header, read_instance
from bert_pretraining_data.transforms.write.rows import InstanceRows, ShardRows
from bert_pretraining_data.transforms.write.shuffle_entries import ENTRY_HEADER
from bert_pretraining_data.transforms.write.tf_example import Field

# Rows per row group: the unit a streaming reader (HF datasets' streaming,
# pyarrow's iter_batches) decodes at once: 10,000 instances at 512 tokens are
# ~10 MB of ids in memory, and enough values for zstd to compress well.
ROW_GROUP_ROWS = 10_000
COMPRESSIONS = ("zstd", "snappy", "gzip", "none")
UINT16_LIMIT = 1 << 16


@njit(cache=True)
def _sizes(entries, bounds, order):
    """Total tokens and predictions of the instances `order`."""
    tokens = 0
    predictions = 0
    for i in order:
        n, _, k, _ = instance_header(entries, bounds[i] + ENTRY_HEADER)
        tokens += n
        predictions += k
    return tokens, predictions


@njit(cache=True)
def _flatten(entries, bounds, order, tokens, boundary, segments, positions, ids,
             token_offsets, prediction_offsets, labels):
    """The instances `order` as Arrow list layouts: each column's values one
    after another, with row i's tokens at token_offsets[i]:token_offsets[i + 1]
    and its predictions at prediction_offsets[i]:prediction_offsets[i + 1]."""
    n_at = 0
    k_at = 0
    for r in range(len(order)):
        token_offsets[r] = n_at
        prediction_offsets[r] = k_at
        n, b_start, k, label = read_instance(entries, bounds[order[r]] + ENTRY_HEADER, n_at,
                                             tokens, boundary, positions[k_at:], ids[k_at:])
        for c in range(k):  # read_instance gives row positions: the row is the instance
            positions[k_at + c] -= n_at
        segments[n_at:n_at + b_start] = 0
        segments[n_at + b_start:n_at + n] = 1
        labels[r] = label
        n_at += n
        k_at += k
    token_offsets[len(order)] = n_at
    prediction_offsets[len(order)] = k_at


@dataclasses.dataclass(frozen=True)
class ParquetRows:
    """The row writer of `--output_format=parquet`: the rows `instances` would
    write as TFRecords, in its order, as one Parquet file (its layout is
    unpadded: parquet runs take --padding=none)."""

    instances: InstanceRows
    vocab_size: int
    compression: str = "zstd"

    @property
    def max_predictions(self) -> int:
        return self.instances.max_predictions

    def columns(self) -> dict[str, Field]:
        """Column name -> what it holds, in the file's order (the layout's
        unpadded features)."""
        return dataclasses.replace(self.instances.layout, padded=False).features()

    def schema(self):
        import pyarrow as pa

        def list_of(kind):  # named as Parquet's nested lists are, so read back alike
            return pa.list_(pa.field("element", kind))
        ids = pa.uint16() if self.vocab_size <= UINT16_LIMIT else pa.int32()
        types = {Field.INPUT_IDS: list_of(ids), Field.SEGMENT_IDS: list_of(pa.uint8()),
                 Field.MASKED_LM_POSITIONS: list_of(pa.uint16()),
                 Field.MASKED_LM_IDS: list_of(ids), Field.NEXT_SENTENCE_LABELS: pa.uint8(),
                 Field.TOKEN_BOUNDARY: list_of(pa.uint8())}
        return pa.schema([pa.field(name, types[field], nullable=False)
                          for name, field in self.columns().items()])

    def _table(self, entries: np.ndarray, bounds: np.ndarray, order: np.ndarray):
        import pyarrow as pa

        n, k = _sizes(entries, bounds, order)
        tokens, ids, positions = (np.empty(n, np.int64), np.empty(k, np.int64),
                                  np.empty(k, np.int64))
        boundary, segments = np.zeros(n, np.uint8), np.empty(n, np.uint8)
        token_offsets = np.empty(len(order) + 1, np.int32)
        prediction_offsets = np.empty(len(order) + 1, np.int32)
        labels = np.empty(len(order), np.uint8)
        _flatten(entries, bounds, order, tokens, boundary, segments, positions, ids,
                 token_offsets, prediction_offsets, labels)
        schema = self.schema()

        def column(field: Field, values: np.ndarray, offsets: np.ndarray):
            kind = schema.field(self._name(field)).type
            if not pa.types.is_list(kind):
                return pa.array(values.astype(kind.to_pandas_dtype()), type=kind)
            flat = pa.array(values.astype(kind.value_type.to_pandas_dtype()),
                            type=kind.value_type)
            return pa.ListArray.from_arrays(pa.array(offsets), flat, type=kind)
        data = {Field.INPUT_IDS: (tokens, token_offsets),
                Field.SEGMENT_IDS: (segments, token_offsets),
                Field.TOKEN_BOUNDARY: (boundary, token_offsets),
                Field.MASKED_LM_POSITIONS: (positions, prediction_offsets),
                Field.MASKED_LM_IDS: (ids, prediction_offsets),
                Field.NEXT_SENTENCE_LABELS: (labels, None)}
        return pa.Table.from_arrays([column(field, *data[field])
                                     for field in self.columns().values()], schema=schema)

    def _name(self, field: Field) -> str:
        return next(name for name, f in self.columns().items() if f == field)

    def file_bytes(self, entries: np.ndarray, bounds: np.ndarray, order: np.ndarray) -> bytes:
        """The Parquet file of the instances `order`, in that order."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        codec = None if self.compression == "none" else self.compression
        with pq.ParquetWriter(sink, self.schema(), compression=codec,
                              use_dictionary=False, write_statistics=False) as writer:
            for start in range(0, len(order), ROW_GROUP_ROWS):
                writer.write_table(self._table(entries, bounds,
                                               order[start:start + ROW_GROUP_ROWS]),
                                   row_group_size=ROW_GROUP_ROWS)
        return sink.getvalue().to_pybytes()

    def rows(self, entries: np.ndarray, keys: np.ndarray, bounds: np.ndarray) -> ShardRows:
        order = self.instances.order(entries, keys, bounds)
        columns = {field.name: str(field.type) for field in self.schema()}
        return ShardRows(len(order), _one_chunk(self.file_bytes(entries, bounds, order)),
                         {"columns": columns})


def _one_chunk(data: bytes) -> Iterator[memoryview]:
    yield memoryview(data)
