"""The Parquet writer's CPU: polars' (the pipeline's, transforms.write.
parquet_rows.parquet_file) beside pyarrow's with the same file layout (PLAIN
integers, zstd level 1, no statistics, no dictionary, the same row groups),
on the row groups of a pipeline run of each corpus shape.

Not a test: it prints figures. Each shape's corpus (bench/corpus.py, N MB)
runs once with the original's flags and `--output_format=parquet --num_shards=1`;
its row groups, read back, are written again by each writer in turns,
`--repeat` times, to memory: CPU seconds of this process (both writers' threads
included), median of the turns, and bytes per row. Both files must read back
as the same rows.

    python bench/parquet_writers.py --size 20 --repeat 3
    python bench/parquet_writers.py --size 5 --shapes wikitext --lengths 512
"""

from __future__ import annotations

import argparse
import io
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.corpus import SHAPES, corpus_path  # noqa: E402
from bench.pipeline import FLAGS, VOCAB, length_flags  # noqa: E402
from bert_pretraining_data.pipeline.main import run  # noqa: E402
from bert_pretraining_data.transforms.write.parquet_rows import (ROW_GROUP_ROWS,  # noqa: E402
                                                                parquet_file)


def with_pyarrow(tables: list[pa.Table]) -> bytes:
    """The file pyarrow's ParquetWriter makes of `tables` with the pipeline's layout."""
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, tables[0].schema, compression="zstd", use_dictionary=False,
                          column_encoding="PLAIN", write_statistics=False) as writer:
        for table in tables:
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
    return sink.getvalue()


def with_polars(tables: list[pa.Table]) -> bytes:
    """The file the pipeline's writer makes of `tables`."""
    return b"".join(parquet_file(lambda: iter(tables), tables[0].schema))


def row_groups(corpus: pathlib.Path, flags: tuple[str, ...]) -> list[pa.Table]:
    """The row groups of a one-shard Parquet run of `corpus` (`flags` after the
    original's, so that they override them), as the writer was given them."""
    with tempfile.TemporaryDirectory(prefix="bert-bench-") as tmp:
        run([f"--input_file={corpus}", f"--output_dir={tmp}/out", f"--vocab_file={VOCAB}",
             *FLAGS, *flags, "--output_format=parquet", "--num_shards=1",
             "--dedup=none", "--progress=none"])
        shard = pq.ParquetFile(next(pathlib.Path(tmp, "out").glob("part-*.parquet")))
        return [shard.read_row_group(g) for g in range(shard.num_row_groups)]


def timed(write: Callable[[list[pa.Table]], bytes], tables: list[pa.Table]
          ) -> tuple[float, bytes]:
    start = time.process_time()
    data = write(tables)
    return time.process_time() - start, data


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=20, help="MB of each shape")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--lengths", default="128")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    writers = {"pyarrow": with_pyarrow, "polars": with_polars}
    print(f"{'shape':<10}{'length':>7}{'rows':>11}" + "".join(
        f"{name + ' CPU s':>15}{'B/row':>8}" for name in writers) + f"{'polars/pyarrow':>16}")
    for shape in args.shapes.split(","):
        corpus = corpus_path(args.size, shape=shape, seed=0)
        for length in (int(n) for n in args.lengths.split(",")):
            tables = row_groups(corpus, length_flags(length))
            rows = sum(table.num_rows for table in tables)
            seconds: dict[str, list[float]] = {name: [] for name in writers}
            files: dict[str, bytes] = {}
            for _ in range(args.repeat):
                for name, write in writers.items():
                    spent, files[name] = timed(write, tables)
                    seconds[name].append(spent)
            whole = pa.concat_tables(tables)
            for name, data in files.items():
                assert pq.read_table(io.BytesIO(data)).equals(whole), name
            median = {name: statistics.median(s) for name, s in seconds.items()}
            print(f"{shape:<10}{length:>7}{rows:>11,}" + "".join(
                f"{median[name]:>15.3f}{len(files[name]) / rows:>8.1f}" for name in writers)
                + f"{median['polars'] / median['pyarrow']:>15.2f}x", flush=True)


if __name__ == "__main__":
    main()
