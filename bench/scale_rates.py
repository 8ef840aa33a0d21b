"""The scale model's rates (bench/scale_model.py RATES), measured here, and
its prediction checked against measured runs where it was not calibrated.

Not a test: it prints tables and a RATES literal to paste. For each corpus
shape (N MB):
- the pipeline's stages in one process (bench/pipeline.py stage_breakdown)
  at 128 and 512 tokens, TFRecord and Parquet, split three ways: CPU that
  grows with the input (read, tokenize, sample), per MB of text; with
  instances (create, mask), per instance at each length; with output bytes
  (sort, encode, frame), per byte of each format; and instances per MB and
  bytes per instance (output, and the shuffle's entries);
- full runs (bench/pipeline.py run_ours, one worker): a near-empty run's CPU
  is the start-up; a run at the original's flags (dupe 10, 128, TFRecord)
  gives the runner's factor (its CPU beyond start-up over the stages' sum,
  which the runner's elements, shuffle and files add);
- the check: runs at --dupe_factor=1 --max_seq_length=512 in both formats
  beside what the model predicts for them.

    python bench/scale_rates.py --size 5
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import SHAPES, corpus_path, read_documents  # noqa: E402
from bench.pipeline import run_ours, stage_breakdown  # noqa: E402
from bench.scale_model import FORMATS, LENGTHS, ShapeRates, work_cpu_seconds  # noqa: E402

MB = 1e6
INPUT_STAGES = ("read", "tokenize", "sample")
CHECK = {"dupe_factor": 1, "max_seq_length": 512}


def _length_flags(length: int) -> tuple[str, ...]:
    return (f"--max_seq_length={length}", f"--max_predictions_per_seq={round(length * 0.15)}")


def _format_flags(output_format: str) -> tuple[str, ...]:
    return () if output_format == "tfrecord" else (f"--output_format={output_format}",)


def shape_rates(corpus: pathlib.Path) -> ShapeRates:
    """The three CPU rates and the counts, from one in-process run per length and format."""
    megabytes = corpus.stat().st_size / MB
    documents = read_documents(corpus)
    runs = {(fmt, length): stage_breakdown(corpus, flags=(*_length_flags(length),
                                                          *_format_flags(fmt)))
            for fmt in FORMATS for length in LENGTHS}
    dupe = 10  # bench/pipeline.py FLAGS
    return ShapeRates(
        mean_document_bytes=round(corpus.stat().st_size / len(documents)),
        input_us_per_mb=round(statistics.mean(
            sum(run.seconds[s] for s in INPUT_STAGES) for run in runs.values())
            / megabytes * 1e6),
        instances_per_mb={length: round(runs["tfrecord", length].instances / megabytes / dupe)
                          for length in LENGTHS},
        instance_us={length: round(statistics.mean(
            runs[fmt, length].seconds["records"] / runs[fmt, length].instances * 1e6
            for fmt in FORMATS), 2) for length in LENGTHS},
        output_ns_per_byte={fmt: round(statistics.mean(
            runs[fmt, length].seconds["write"] / runs[fmt, length].output_bytes * 1e9
            for length in LENGTHS), 2) for fmt in FORMATS},
        entry_bytes={length: round(runs["tfrecord", length].entry_bytes
                                   / runs["tfrecord", length].instances) for length in LENGTHS},
        bytes_per_instance={f"{fmt} {length}": round(
            runs[fmt, length].output_bytes / runs[fmt, length].instances)
            for fmt in FORMATS for length in LENGTHS})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=5, help="MB of each shape")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    corpora = {shape: corpus_path(args.size, shape=shape, seed=0) for shape in shapes}
    rates = {shape: shape_rates(corpus) for shape, corpus in corpora.items()}
    start_up = statistics.median(
        run_ours(corpus_path(0.01, shape="web", seed=0), 1).usage.cpu for _ in range(3))
    print(f"start-up: {start_up:.2f} CPU s (median of 3 runs on 10 KB)")
    factors = {}
    for shape, corpus in corpora.items():
        measured = run_ours(corpus, 1).usage.cpu
        work = sum(work_cpu_seconds(rates[shape], megabytes=corpus.stat().st_size / MB,
                                    dupe_factor=10, max_seq_length=128,
                                    output_format="tfrecord").values())
        factors[shape] = (measured - start_up) / work
        print(f"{shape}: dupe 10, 128: {measured:.1f} CPU s measured, stages {work:.1f} s: "
              f"runner factor {factors[shape]:.3f}", flush=True)
    factor = statistics.mean(factors.values())
    print(f"\nrunner factor (mean): {factor:.3f}\n\nthe check, dupe 1, 512 (runner factor "
          "and rates as above, never calibrated on these runs):")
    print(f"{'shape':<10}{'format':<10}{'measured CPU s':>15}{'predicted':>11}{'error':>8}"
          f"{'  input / instances / output shares'}")
    for shape, corpus in corpora.items():
        for fmt in FORMATS:
            parts = work_cpu_seconds(rates[shape], megabytes=corpus.stat().st_size / MB,
                                     output_format=fmt, **CHECK)
            predicted = start_up + factor * sum(parts.values())
            measured = run_ours(corpus, 1, flags=(
                f"--dupe_factor={CHECK['dupe_factor']}",
                *_length_flags(CHECK["max_seq_length"]), *_format_flags(fmt))).usage.cpu
            shares = " / ".join(f"{value / sum(parts.values()):.0%}" for value in parts.values())
            print(f"{shape:<10}{fmt:<10}{measured:>15.1f}{predicted:>11.1f}"
                  f"{predicted / measured - 1:>+8.1%}  {shares}", flush=True)
    print("\nRATES = (")
    for rate in rates.values():
        print(f"    {rate!r},")
    print(f")\nRUNNER_FACTOR = {factor:.3f}")


if __name__ == "__main__":
    main()
