"""A shard as a Parquet file (`--output_format=parquet`): the rows the TFRecord
shard holds, in its order, unpadded, one list column per feature.

The columns are the features of the same layout written with
`--padding=none` (named as the TFRecord's: `input_ids`, or the Model
Garden's `input_word_ids`, ...), so `input_mask` and `masked_lm_weights`,
implied by the lengths, are left out; packed rows keep their own features
(`input_mask` holding each token's 1-based sequence index, `positions`,
`next_sentence_positions`, and a label per sequence). Each column takes the
smallest integer type its values fit: token ids uint16 up to 65,536 ids,
else int32; positions and a mixture's source ids uint16; segment ids,
labels, sequence indexes (up to 255 sequences a row) and token boundaries
uint8. A file is
zstd-compressed (`--parquet_compression`) in row groups of ROW_GROUP_ROWS
rows, its integers PLAIN-encoded, which every Parquet reader reads.

Polars writes it, not pyarrow: the same file layout (PLAIN, zstd level 1, no
statistics) for less CPU, which keeps Parquet runs near TFRecord's throughput
on long documents, where pyarrow's writer left them behind (the figures and
their commands: docs/design-notes.md, transforms.write.parquet_rows). Its
sink streams the file out as written, a few row groups at a time. Its bytes
depend only on the rows and the polars version: no timestamps, the same
settings everywhere, the same bytes with any number of polars threads.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from typing import Callable, Iterator

import numpy as np

from bert_pretraining_data.transforms.write.columns import (UINT16_LIMIT, flat_columns,
                                                           token_id_dtype, unpadded_features)
from bert_pretraining_data.transforms.write.rows import (InstanceRows, PackedRows, RowPlan,
                                                        ShardRows)
from bert_pretraining_data.transforms.write.tf_example import Field

# Rows per row group: the unit a streaming reader (HF datasets' streaming,
# pyarrow's iter_batches) decodes at once: 10,000 instances at 512 tokens are
# ~10 MB of ids in memory, and enough values for zstd to compress well.
ROW_GROUP_ROWS = 10_000
COMPRESSIONS = ("zstd", "snappy", "gzip", "none")
# Pieces of file the writer may run ahead of the shard's file by (each about
# a column's pages of one row group, ~200 KB at 128 tokens).
PIECES_AHEAD = 8


def polars_installed() -> bool:
    """Whether the Parquet writer's library is there (the [pipeline] extra has it)."""
    from importlib.util import find_spec

    return find_spec("polars") is not None


@dataclasses.dataclass(frozen=True)
class ParquetRows:
    """The row writer of `--output_format=parquet`: the rows `instances` would
    write as TFRecords (a row per instance, or packed rows), in its order, as
    one Parquet file (its layout is unpadded: parquet runs take --padding=none)."""

    instances: InstanceRows | PackedRows
    vocab_size: int
    compression: str = "zstd"

    @property
    def max_predictions(self) -> int:
        return self.instances.max_predictions

    def columns(self) -> dict[str, Field]:
        """Column name -> what it holds, in the file's order."""
        return unpadded_features(self.instances)

    def schema(self):
        import pyarrow as pa

        def list_of(kind):  # named as Parquet's nested lists are, so read back alike; no
            # nulls, so no definition levels for them; large: polars' lists have 64-bit offsets
            return pa.large_list(pa.field("element", kind, nullable=False))
        ids = pa.uint16() if self.vocab_size <= UINT16_LIMIT else pa.int32()
        packed = self.instances.layout.packed  # per-sequence columns are lists
        types = {Field.INPUT_IDS: list_of(ids), Field.SEGMENT_IDS: list_of(pa.uint8()),
                 Field.MASKED_LM_POSITIONS: list_of(pa.uint16()),
                 Field.MASKED_LM_IDS: list_of(ids),
                 Field.NEXT_SENTENCE_LABELS: list_of(pa.uint8()) if packed else pa.uint8(),
                 Field.SOURCE: list_of(pa.uint16()) if packed else pa.uint16(),
                 Field.TOKEN_BOUNDARY: list_of(pa.uint8()),
                 Field.INPUT_MASK: list_of(pa.uint8() if self.instances.max_sequences < 256
                                           else pa.uint16()),
                 Field.POSITIONS: list_of(pa.uint16()),
                 Field.NEXT_SENTENCE_POSITIONS: list_of(pa.uint16())}
        return pa.schema([pa.field(name, types[field], nullable=False)
                          for name, field in self.columns().items()])

    def _table(self, schema, entries: np.ndarray, bounds: np.ndarray, members: np.ndarray,
               member_bounds: np.ndarray):
        import pyarrow as pa

        # Two kernel signatures, by the ids' type (pipeline.warm_up compiles both).
        data = flat_columns(self.instances, token_id_dtype(self.vocab_size), entries, bounds,
                            members, member_bounds)

        def column(name: str, field: Field):
            values, offsets, scalar = data[field]
            kind = schema.field(name).type
            if scalar:
                return pa.array(values.astype(kind.to_pandas_dtype(), copy=False), type=kind)
            flat = pa.array(values.astype(kind.value_type.to_pandas_dtype(), copy=False),
                            type=kind.value_type)
            return pa.LargeListArray.from_arrays(pa.array(offsets), flat, type=kind)
        return pa.Table.from_arrays([column(name, field)
                                     for name, field in self.columns().items()], schema=schema)

    def file_chunks(self, entries: np.ndarray, bounds: np.ndarray, plan: RowPlan
                    ) -> Iterator[memoryview]:
        """The Parquet file of the rows `plan` lays out, in its order; each row
        group's table is built when the writer asks for it."""
        schema = self.schema()
        rows = len(plan.member_bounds) - 1

        def row_groups() -> Iterator:
            for start in range(0, rows, ROW_GROUP_ROWS):
                member_bounds = plan.member_bounds[start:start + ROW_GROUP_ROWS + 1]
                members = plan.members[member_bounds[0]:member_bounds[-1]]
                yield self._table(schema, entries, bounds, members,
                                  member_bounds - member_bounds[0])
        return parquet_file(row_groups, schema, self.compression)

    def rows(self, entries: np.ndarray, keys: np.ndarray, bounds: np.ndarray) -> ShardRows:
        plan = self.instances.plan(entries, keys, bounds)
        columns = {field.name: str(field.type) for field in self.schema()}
        return ShardRows(len(plan.member_bounds) - 1, self.file_chunks(entries, bounds, plan),
                         {**plan.stats, "columns": columns})


def parquet_file(row_groups: Callable[[], Iterator], schema, compression: str = "zstd"
                 ) -> Iterator[memoryview]:
    """The Parquet file of the Arrow tables `row_groups()` yields (of
    ROW_GROUP_ROWS rows, the last fewer), as polars' streaming writer writes
    it: PLAIN integers, `compression` (zstd at level 1), no statistics, and
    `schema` as the file's Arrow schema. It pulls a table when it needs one
    and hands the file on as it goes, so a few row groups are held, not the
    file."""
    import polars as pl
    from polars.io.plugins import register_io_source

    def frames(with_columns, predicate, n_rows, batch_size):  # all of them, in order
        for table in row_groups():
            yield pl.from_arrow(table)
    source = register_io_source(frames, schema=pl.from_arrow(schema.empty_table()).schema)
    codec = "uncompressed" if compression == "none" else compression
    return _streamed(lambda sink: source.sink_parquet(
        sink, compression=codec, compression_level=1 if codec == "zstd" else None,
        statistics=False, row_group_size=ROW_GROUP_ROWS, arrow_schema=schema))


def _streamed(write: Callable[[_Pieces], None]) -> Iterator[memoryview]:
    """What `write` writes into a sink, piece by piece as it writes it.

    Polars' writer runs to its end in one call, pulling row groups and
    pushing pieces of file, so it runs in a thread that hands each piece over
    (at most PIECES_AHEAD waiting). Its error is raised here; when the
    consumer stops (the shard's file failed), the sink refuses further
    pieces, which ends the writer, and the thread is waited for."""
    pieces: queue.Queue = queue.Queue(maxsize=PIECES_AHEAD)
    sink = _Pieces(pieces)

    def run() -> None:
        try:
            write(sink)
        except BaseException as err:  # noqa: B036 - raised in the consumer's thread
            pieces.put(err)
        else:
            pieces.put(None)
    thread = threading.Thread(target=run, name="parquet-writer", daemon=True)
    thread.start()
    try:
        while (piece := pieces.get()) is not None:
            if isinstance(piece, BaseException):
                raise piece
            yield piece
    finally:
        sink.stopped = True
        while thread.is_alive():  # take what it still hands over until it ends
            try:
                pieces.get(timeout=0.05)
            except queue.Empty:
                pass
        thread.join()


class _Pieces:
    """The file-like object polars writes a Parquet file into: each write is
    handed on, as its own bytes, through `pieces`."""

    closed = False

    def __init__(self, pieces: queue.Queue) -> None:
        self.pieces = pieces
        self.position = 0
        self.stopped = False

    def write(self, data: bytes) -> int:
        if self.stopped:
            raise OSError("the shard's file stopped taking the Parquet file's bytes")
        self.pieces.put(memoryview(bytes(data)))
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True
