"""The disk-space estimate (pipeline/disk_space.py) against what runs write,
on every corpus shape, in both formats, at 128 and 512 tokens.

Not a test: it prints a table. Each row is one pipeline run (the original's
flags, --dedup=none, 1 worker) on N MB of the shape, its output directory's
size polled every 50 ms while it runs: the published shards (from the
manifest) and the peak of everything under the directory (staging, bucket
files, shards), beside the estimate the run would print, made from the
input's first MB.

    python bench/disk_estimate.py --size 20
    python bench/disk_estimate.py --size 2 --shapes tiny --lengths 128
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import SHAPES, corpus_path  # noqa: E402
from bench.pipeline import FLAGS, VOCAB, length_flags  # noqa: E402
from bert_pretraining_data.pipeline.disk_space import estimate_space  # noqa: E402
from bert_pretraining_data.pipeline.options import parse_args  # noqa: E402
from bert_pretraining_data.pipeline.prepare import prepare  # noqa: E402

FORMATS = {"tfrecord": (), "parquet": ("--output_format=parquet",),
           "tfrecord packed": ("--pack_sequences",)}


def _tree_bytes(path: pathlib.Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:  # deleted between the listing and the stat
                pass
    return total


def measured(flags: list[str], out: pathlib.Path) -> tuple[int, int]:
    """(published shard bytes, peak bytes under the output directory) of one run."""
    peak = [0]
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], _tree_bytes(out))

    watcher = threading.Thread(target=poll)
    watcher.start()
    try:
        subprocess.run([sys.executable, "-m", "bert_pretraining_data.pipeline", *flags],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        done.set()
        watcher.join()
    manifest = json.loads((out / "manifest.json").read_text())
    return sum(shard["bytes"] for shard in manifest["shards"]), peak[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=20, help="MB of each shape")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--lengths", default="128,512")
    args = parser.parse_args(argv)
    print(f"{'shape':<10}{'length':>7}  {'format':<16}{'output MB':>10}{'estimate':>10}"
          f"{'error':>8}{'peak MB':>9}{'estimate':>10}{'error':>8}")
    for shape in args.shapes.split(","):
        corpus = corpus_path(args.size, shape=shape, seed=0)
        for length in (int(n) for n in args.lengths.split(",")):
            for name, extra in FORMATS.items():
                with tempfile.TemporaryDirectory(prefix="bert-disk-") as tmp:
                    out = pathlib.Path(tmp) / "out"
                    flags = [f"--input_file={corpus}", f"--output_dir={out}",
                             f"--vocab_file={VOCAB}", *FLAGS, *length_flags(length), *extra,
                             "--dedup=none", "--progress=none",
                             "--direct_running_mode=in_memory", "--direct_num_workers=1"]
                    estimate = estimate_space(prepare(*parse_args(flags)))
                    output, peak = measured(flags, out)
                print(f"{shape:<10}{length:>7}  {name:<16}{output / 1e6:>10.1f}"
                      f"{estimate.output_bytes / 1e6:>10.1f}"
                      f"{estimate.output_bytes / output - 1:>+8.1%}{peak / 1e6:>9.1f}"
                      f"{estimate.peak_bytes / 1e6:>10.1f}{estimate.peak_bytes / peak - 1:>+8.1%}",
                      flush=True)


if __name__ == "__main__":
    main()
