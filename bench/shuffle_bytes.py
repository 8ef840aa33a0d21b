"""Bytes the instances put through the shuffle, per instance, before and
after their zstd frame (transforms.write.beam.ENTRY_ZSTD_LEVEL), and the CPU
the frames cost, on every bench shape at 128 and 512 tokens.

Not a test: it prints figures. Each run is the pipeline in this process (the
DirectRunner, in memory, through the runner's shuffle as on Dataflow), over
5 MB of a shape (bench/corpus.py) with the
original's flags but --num_shards=64, so that the ten copies of a document
seldom share a shard's blob, as on Dataflow's hundreds of shards. The
compressor is wrapped to count what goes in and out.

    python bench/shuffle_bytes.py [--size 5] [--shapes wikitext,web,short,tiny]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

import zstandard

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from corpus import corpus_path  # noqa: E402
from bert_pretraining_data.pipeline.main import run  # noqa: E402
from bert_pretraining_data.transforms.write import beam as write_beam  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
VOCAB = ROOT / "tests" / "data" / "bert-base-uncased-vocab.txt"
SHAPES = ("wikitext", "web", "short", "tiny")
_COMPRESSOR = zstandard.ZstdCompressor  # the library's, before main() wraps it


class _Counted:
    """zstandard's compressor, counting bytes in and out and its CPU."""

    totals = {"in": 0, "out": 0, "cpu": 0.0}

    def __init__(self, **settings) -> None:
        self._compressor = _COMPRESSOR(**settings)

    def compress(self, data: bytes) -> bytes:
        start = time.process_time()
        packed = self._compressor.compress(data)
        self.totals["cpu"] += time.process_time() - start
        self.totals["in"] += len(data)
        self.totals["out"] += len(packed)
        return packed


def measure(corpus: pathlib.Path, length: int) -> dict[str, float]:
    _Counted.totals.update({"in": 0, "out": 0, "cpu": 0.0})
    with tempfile.TemporaryDirectory() as out:
        manifest = run([f"--input_file={corpus}", f"--vocab_file={VOCAB}", f"--output_dir={out}",
                        f"--max_seq_length={length}",
                        f"--max_predictions_per_seq={round(length * 0.15)}",
                        "--num_shards=64", "--direct_running_mode=in_memory", "--shuffle=runner",
                        "--progress=none"])
    instances = manifest["total_instances"]
    assert manifest["counters"]["shuffle_entry_bytes"] == _Counted.totals["out"]
    return {"instances": instances, "before": _Counted.totals["in"] / instances,
            "after": _Counted.totals["out"] / instances,
            "mb_s": _Counted.totals["in"] / 1e6 / max(_Counted.totals["cpu"], 1e-9)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=5)
    parser.add_argument("--shapes", type=lambda text: text.split(","), default=list(SHAPES))
    args = parser.parse_args()
    write_beam.zstandard.ZstdCompressor = _Counted  # the module's, while this runs
    print(f"{'shape':<10}{'length':>7}{'instances':>11}{'bytes before':>14}{'after':>8}"
          f"{'ratio':>7}{'zstd MB/s':>11}")
    for shape in args.shapes:
        corpus = corpus_path(args.size, shape=shape, seed=0)
        for length in (128, 512):
            found = measure(corpus, length)
            print(f"{shape:<10}{length:>7}{found['instances']:>11,}{found['before']:>14.0f}"
                  f"{found['after']:>8.0f}{found['after'] / found['before']:>7.3f}"
                  f"{found['mb_s']:>11.0f}", flush=True)


if __name__ == "__main__":
    main()
