"""Output bytes per instance by format: TFRecord (padded, as the original),
TFRecord with --padding=none, packed TFRecord rows, Parquet and packed
Parquet rows, on every corpus shape at 128 and 512 tokens.

Not a test: it prints a table. Each cell is one pipeline run (bench/pipeline.py's
run_ours: the original's flags, --dedup=none, 1 worker) on N MB of the
shape; bytes are the shards' as the manifest lists them, over the run's
instances (a packed row counts its instances).

    python bench/output_bytes.py --size 5
    python bench/output_bytes.py --size 1 --shapes tiny,web --lengths 128
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import SHAPES, corpus_path  # noqa: E402
from bench.pipeline import length_flags, run_ours  # noqa: E402

FORMATS = {
    "tfrecord": (),
    "tfrecord unpadded": ("--padding=none",),
    "tfrecord packed": ("--pack_sequences",),
    "parquet": ("--output_format=parquet",),
    "parquet packed": ("--output_format=parquet", "--pack_sequences"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=5, help="MB of each shape")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--lengths", default="128,512")
    args = parser.parse_args(argv)
    print(f"{'shape':<10}{'length':>7}" + "".join(f"{name:>19}" for name in FORMATS)
          + f"{'parquet/tfrecord':>18}   (bytes per instance)")
    for shape in args.shapes.split(","):
        corpus = corpus_path(args.size, shape=shape, seed=0)
        for length in (int(n) for n in args.lengths.split(",")):
            per_instance = {}
            for name, flags in FORMATS.items():
                run = run_ours(corpus, 1, label=name, flags=(*length_flags(length), *flags))
                per_instance[name] = run.output_bytes / run.instances
            print(f"{shape:<10}{length:>7}"
                  + "".join(f"{per_instance[name]:>19,.0f}" for name in FORMATS)
                  + f"{per_instance['parquet'] / per_instance['tfrecord']:>18.3f}", flush=True)


if __name__ == "__main__":
    main()
