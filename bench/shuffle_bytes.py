"""Bytes the instances put through the shuffle, per instance, on every bench
shape at 128 and 512 tokens: in the layout before issue 45 (masked ids,
positions and labels, 2 bytes each, unframed: computed from each entry's
header), in today's layout (transforms.instances.instance_bytes) and after
its zstd frame (transforms.write.beam.ENTRY_ZSTD_LEVEL); and the frames' CPU.

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
from bert_pretraining_data.transforms.handoff.shuffle_entries import (  # noqa: E402
    ENTRY_HEADER, scan_entries)
from bert_pretraining_data.transforms.instances.instance_bytes import (  # noqa: E402
    HEADER_SIZE, SOURCE_SIZE, instance_header)
from bert_pretraining_data.transforms.write import beam as write_beam  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
VOCAB = ROOT / "tests" / "data" / "bert-base-uncased-vocab.txt"
SHAPES = ("wikitext", "web", "short", "tiny")
_SETUP = write_beam._ShardBuffersFn.setup  # the shard buffers', before main() wraps it


def _old_layout_bytes(data: bytes) -> int:
    """What these entries took in the layout before issue 45: entry header,
    instance header, [source], masked ids, positions and labels, [boundary]."""
    buffer, _, bounds = scan_entries(data, source="a blob")
    total = 0
    for start in bounds[:-1]:
        at = int(start) + ENTRY_HEADER
        n, _, k, _ = instance_header(buffer, at)
        flags = int(buffer[at])
        width = 4 if flags & 1 else 2
        total += (ENTRY_HEADER + HEADER_SIZE + width * (n + 2 * k) + (n if flags & 2 else 0)
                  + (SOURCE_SIZE if flags & 4 else 0))
    return total


class _Counted:
    """zstandard's compressor, counting bytes in and out, the old layout's
    bytes of what goes in, and its CPU."""

    totals = {"old": 0, "in": 0, "out": 0, "cpu": 0.0}

    def __init__(self, compressor: zstandard.ZstdCompressor) -> None:
        self._compressor = compressor

    def compress(self, data: bytes) -> bytes:
        start = time.process_time()
        packed = self._compressor.compress(data)
        self.totals["cpu"] += time.process_time() - start
        self.totals["in"] += len(data)
        self.totals["out"] += len(packed)
        self.totals["old"] += _old_layout_bytes(data)
        return packed


def _counted_setup(self) -> None:
    """The shard buffers' setup, their compressor counted."""
    _SETUP(self)
    self._compressor = _Counted(self._compressor)


def measure(corpus: pathlib.Path, length: int) -> dict[str, float]:
    _Counted.totals.update({"old": 0, "in": 0, "out": 0, "cpu": 0.0})
    with tempfile.TemporaryDirectory() as out:
        manifest = run([f"--input_file={corpus}", f"--vocab_file={VOCAB}", f"--output_dir={out}",
                        f"--max_seq_length={length}",
                        f"--max_predictions_per_seq={round(length * 0.15)}",
                        "--num_shards=64", "--direct_running_mode=in_memory", "--shuffle=runner",
                        "--progress=none"])
    instances = manifest["total_instances"]
    assert manifest["counters"]["shuffle_entry_bytes"] == _Counted.totals["out"]
    return {"instances": instances, "old": _Counted.totals["old"] / instances,
            "before": _Counted.totals["in"] / instances,
            "after": _Counted.totals["out"] / instances,
            "mb_s": _Counted.totals["in"] / 1e6 / max(_Counted.totals["cpu"], 1e-9)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=5)
    parser.add_argument("--shapes", type=lambda text: text.split(","), default=list(SHAPES))
    args = parser.parse_args()
    write_beam._ShardBuffersFn.setup = _counted_setup  # while this runs
    print(f"{'shape':<10}{'length':>7}{'instances':>11}{'old layout':>12}{'today':>7}"
          f"{'zstd':>6}{'zstd / old':>12}{'zstd MB/s':>11}")
    for shape in args.shapes:
        corpus = corpus_path(args.size, shape=shape, seed=0)
        for length in (128, 512):
            found = measure(corpus, length)
            print(f"{shape:<10}{length:>7}{found['instances']:>11,}{found['old']:>12.0f}"
                  f"{found['before']:>7.0f}{found['after']:>6.0f}"
                  f"{found['after'] / found['old']:>12.3f}{found['mb_s']:>11.0f}", flush=True)


if __name__ == "__main__":
    main()
