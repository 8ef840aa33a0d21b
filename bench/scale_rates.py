"""The scale model's rates (bench/scale_model.py RATES), measured here, and
its prediction checked against measured runs where it was not calibrated.

Not a test: it prints tables and a RATES literal to paste. For each corpus
shape (N MB):
- the pipeline's stages in one process (bench/pipeline.py stage_breakdown)
  at 128 and 512 tokens, TFRecord and Parquet, split by what each grows
  with: read, tokenize and sample with the text (per MB); create and mask
  with the instances (per instance at each length); sort, encode, frame and
  write with the rows and the output bytes (solved from the two lengths,
  per format); and instances per MB and bytes per instance (output, and the
  shuffle's entries);
- full runs (bench/pipeline.py run_ours, one worker, TFRecord at 128): a
  near-empty run in each format is its start-up; a run at dupe 10 and one at dupe 1 give
  what the runner adds beyond the stages, solved into a part per MB of text
  (its elements, reading) and a part per byte of the instances' shuffle
  entries (shuffle, bucket files);
- the check: runs at --dupe_factor=1 --max_seq_length=512 in both formats on
  M MB of each shape (never a calibration run), beside the model's prediction.

    python bench/scale_rates.py --size 20 --check-size 50
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import SHAPES, corpus_path, read_documents  # noqa: E402
from bench.pipeline import length_flags, run_ours, stage_breakdown  # noqa: E402
from bench.scale_model import (FORMATS, LENGTHS, ShapeRates, instances,  # noqa: E402
                                work_cpu_seconds)

MB = 1e6
INPUT_STAGES = ("read", "tokenize", "sample")
CHECK = {"dupe_factor": 1, "max_seq_length": 512}


def _format_flags(output_format: str) -> tuple[str, ...]:
    return () if output_format == "tfrecord" else (f"--output_format={output_format}",)


def _split(total: dict, first: dict, second: dict) -> tuple[float, float]:
    """(a, b) with total[k] = a * first[k] + b * second[k] for both keys,
    neither negative (a part the noise makes negative is taken as none)."""
    (t0, t1), (f0, f1), (s0, s1) = (list(d.values()) for d in (total, first, second))
    determinant = f0 * s1 - f1 * s0
    a, b = (t0 * s1 - t1 * s0) / determinant, (f0 * t1 - f1 * t0) / determinant
    if a < 0:
        return 0.0, (t0 + t1) / (s0 + s1)
    if b < 0:
        return (t0 + t1) / (f0 + f1), 0.0
    return a, b


def stage_rates(corpus: pathlib.Path) -> ShapeRates:
    """The stages' rates, from one in-process run per length and format (the
    runner's parts left at zero: `runner_parts` measures them)."""
    megabytes = corpus.stat().st_size / MB
    documents = read_documents(corpus)
    runs = {(fmt, length): stage_breakdown(corpus, flags=(*length_flags(length),
                                                          *_format_flags(fmt)))
            for fmt in FORMATS for length in LENGTHS}
    dupe = 10  # bench/pipeline.py FLAGS
    output = {fmt: _split({n: runs[fmt, n].seconds["write"] for n in LENGTHS},
                          {n: runs[fmt, n].instances for n in LENGTHS},
                          {n: runs[fmt, n].output_bytes for n in LENGTHS}) for fmt in FORMATS}
    return ShapeRates(
        mean_document_bytes=round(corpus.stat().st_size / len(documents)),
        input_us_per_mb=round(statistics.mean(
            sum(run.seconds[s] for s in INPUT_STAGES) for run in runs.values())
            / megabytes * 1e6),
        runner_us_per_mb=0.0,
        instances_per_mb={length: round(runs["tfrecord", length].instances / megabytes / dupe)
                          for length in LENGTHS},
        instance_us={length: round(statistics.mean(
            runs[fmt, length].seconds["records"] / runs[fmt, length].instances * 1e6
            for fmt in FORMATS), 2) for length in LENGTHS},
        runner_ns_per_entry_byte=0.0,
        output_us_per_row={fmt: round(output[fmt][0] * 1e6, 3) for fmt in FORMATS},
        output_ns_per_byte={fmt: round(output[fmt][1] * 1e9, 3) for fmt in FORMATS},
        entry_bytes={length: round(runs["tfrecord", length].entry_bytes
                                   / runs["tfrecord", length].instances) for length in LENGTHS},
        bytes_per_instance={f"{fmt} {length}": round(
            runs[fmt, length].output_bytes / runs[fmt, length].instances)
            for fmt in FORMATS for length in LENGTHS})


def _predicted(rates: ShapeRates, corpus: pathlib.Path, **job) -> float:
    return sum(work_cpu_seconds(rates, megabytes=corpus.stat().st_size / MB, **job).values())


def runner_parts(rates: ShapeRates, corpus: pathlib.Path, start_up: float) -> ShapeRates:
    """`rates` with the runner's parts, from full runs at dupe 10 and dupe 1 (128, TFRecord):
    per MB of text, and per byte shuffled (at 512 an instance's entry is 3x
    128's, and instances a third as many)."""
    job = {"max_seq_length": 128, "output_format": "tfrecord"}
    beyond, counts = {}, {}
    for dupe in (10, 1):
        measured = run_ours(corpus, 1, flags=(f"--dupe_factor={dupe}",)).usage.cpu
        beyond[dupe] = measured - start_up - _predicted(rates, corpus, dupe_factor=dupe, **job)
        counts[dupe] = instances(rates, megabytes=corpus.stat().st_size / MB,
                                 dupe_factor=dupe, max_seq_length=128) * rates.entry_bytes[128]
        print(f"  {corpus.name}: dupe {dupe}, 128: {measured:.1f} CPU s, the runner's "
              f"{beyond[dupe]:.1f} s beyond start-up and stages", flush=True)
    per_mb, per_byte = _split(beyond, dict.fromkeys(beyond, corpus.stat().st_size / MB), counts)
    return dataclasses.replace(rates, runner_us_per_mb=round(per_mb * 1e6),
                               runner_ns_per_entry_byte=round(per_byte * 1e9, 2))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=20, help="MB of each shape for the rates")
    parser.add_argument("--check-size", type=float, default=50,
                        help="MB of each shape for the check runs")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    empty = corpus_path(0.01, shape="web", seed=0)
    start_up = {fmt: statistics.median(run_ours(empty, 1, flags=_format_flags(fmt)).usage.cpu
                                       for _ in range(3)) for fmt in FORMATS}
    print("start-up: " + ", ".join(f"{fmt} {cpu:.2f} CPU s" for fmt, cpu in start_up.items())
          + " (median of 3 runs on 10 KB; Parquet's imports pyarrow and polars)")
    rates = {}
    for shape in shapes:
        corpus = corpus_path(args.size, shape=shape, seed=0)
        rates[shape] = runner_parts(stage_rates(corpus), corpus, start_up["tfrecord"])
    print(f"\nthe check, dupe {CHECK['dupe_factor']}, {CHECK['max_seq_length']} tokens, "
          f"{args.check_size:g} MB (rates as above, never calibrated on these runs):")
    print(f"{'shape':<10}{'format':<10}{'measured CPU s':>15}{'predicted':>11}{'error':>8}"
          f"{'beyond start-up':>17}{'predicted':>11}{'error':>8}"
          "  input / instances / output shares")
    for shape in shapes:
        corpus = corpus_path(args.check_size, shape=shape, seed=0)
        for fmt in FORMATS:
            parts = work_cpu_seconds(rates[shape], megabytes=corpus.stat().st_size / MB,
                                     output_format=fmt, **CHECK)
            work = sum(parts.values())
            measured = run_ours(corpus, 1, flags=(
                f"--dupe_factor={CHECK['dupe_factor']}",
                *length_flags(CHECK["max_seq_length"]), *_format_flags(fmt))).usage.cpu
            shares = " / ".join(f"{value / work:.0%}" for value in parts.values())
            fixed = start_up[fmt]
            print(f"{shape:<10}{fmt:<10}{measured:>15.1f}{fixed + work:>11.1f}"
                  f"{(fixed + work) / measured - 1:>+8.1%}{measured - fixed:>17.1f}"
                  f"{work:>11.1f}{work / (measured - fixed) - 1:>+8.1%}  {shares}",
                  flush=True)
    print("\nRATES = (")
    for rate in rates.values():
        print(f"    {rate!r},")
    print(")")


if __name__ == "__main__":
    main()
