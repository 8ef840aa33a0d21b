"""Parquet shards: the instances' unpadded rows as list columns
(transforms.write.parquet_rows), for Hugging Face datasets, Spark, DuckDB."""

from __future__ import annotations

from typing import Any, BinaryIO, Iterator

import numpy as np

from bert_pretraining_data.transforms.write.formats.output_format import (Features, Flags,
                                                                         ShardsNotReadHere,
                                                                         UnpaddedFormat,
                                                                         WriterNotInstalled)

BATCH_ROWS = 1024  # rows decoded from a Parquet file at a time


class ParquetFormat(UnpaddedFormat):
    def shard_suffix(self, flags: Flags) -> str:
        return ".parquet"

    def compressed(self, flags: Flags) -> bool:
        return True

    def row_writer(self, rows: Any, vocab_size: int, config: Any) -> Any:
        from bert_pretraining_data.transforms.write.parquet_rows import (ParquetRows,
                                                                          polars_installed)

        if not polars_installed():
            raise WriterNotInstalled(f"--output_format={self.name} writes with polars, which "
                                     "is not installed")
        return ParquetRows(rows, vocab_size, config.parquet_compression)

    def records(self, handle: BinaryIO, path: str, start: int
                ) -> Iterator[tuple[int, Features]]:
        """A shard's rows, streamed a batch at a time (never the whole file;
        batches wholly before `start` are skipped undecoded): each list
        column's values as int64 arrays, each scalar as a one-value array, as
        a record decodes."""
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ShardsNotReadHere("reading Parquet shards needs pyarrow: pip install "
                                    "'bert-pretraining-data[parquet]'") from None
        position = 0
        for batch in pq.ParquetFile(handle).iter_batches(batch_size=BATCH_ROWS):
            if position + batch.num_rows <= start:
                position += batch.num_rows
                continue
            columns = {}
            for name, column in zip(batch.schema.names, batch.columns):
                if hasattr(column, "offsets"):  # a list column
                    columns[name] = (column.values.to_numpy().astype(np.int64),
                                     column.offsets.to_numpy())
                else:
                    columns[name] = (column.to_numpy().astype(np.int64), None)
            for r in range(batch.num_rows):
                yield position + r, {name: values[r:r + 1] if offsets is None
                                     else values[offsets[r]:offsets[r + 1]]
                                     for name, (values, offsets) in columns.items()}
            position += batch.num_rows


PARQUET = ParquetFormat("parquet", unpadded=True, own_flags=("parquet_compression",),
                        label="Parquet")
