"""What a Dataflow job of this pipeline costs, from rates measured on this machine.

Not a test and not a measurement of Dataflow: a model. Its inputs are the
rates `bench/scale_rates.py` measured here (RATES below: per corpus shape,
CPU per MB of text, per instance and per output byte of each format, and
the runner's factor over them) and a description of the corpus and the job;
it prints, for both shuffle paths, what the job would create, move and
cost. Which figures are measured and which are modelled is said in each
line's comment and in docs/dataflow.md, "Sizing a Wikipedia-size corpus".

    python bench/scale_model.py --gigabytes 16 --mean-document-bytes 3000
    python bench/scale_model.py --gigabytes 750 --mean-document-bytes 2200 --output-format parquet
    python bench/scale_model.py --gigabytes 5000 --mean-document-bytes 3000 --dupe-factor 1 \
        --max-seq-length 512
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import sys
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from bert_pretraining_data.pipeline.options.output import default_num_shards  # noqa: E402

MiB = 1 << 20
FORMATS = ("tfrecord", "parquet")
LENGTHS = (128, 512)


@dataclasses.dataclass(frozen=True)
class ShapeRates:
    """One corpus shape's rates, measured by bench/scale_rates.py: the
    pipeline's stages in one process at 128 and 512 tokens (1 worker, the
    original's flags), and what the runner adds in full runs, each part by
    what it grows with."""

    mean_document_bytes: int
    input_us_per_mb: float  # read, tokenize, sample: CPU µs per MB of text
    runner_us_per_mb: float  # the runner's own CPU per MB of text (elements, reading)
    instances_per_mb: dict[int, float]  # instances per MB of text and copy, by length
    instance_us: dict[int, float]  # create and mask: CPU µs per instance, by length
    runner_ns_per_entry_byte: float  # the runner's per byte shuffled (shuffle, bucket files)
    output_us_per_row: dict[str, float]  # sort, encode, frame, write: per row, by format
    output_ns_per_byte: dict[str, float]  # ... and per output byte, by format
    entry_bytes: dict[int, float]  # the shuffle's bytes per instance, by length
    bytes_per_instance: dict[str, float]  # output bytes per instance, by "format length"


# Measured by `python bench/scale_rates.py --size 20 --check-size 50` (2026-12-04, 2 shared
# cores, after polars began to write the Parquet shards): the check's output is in
# bench/README.md.
RATES = (
    ShapeRates(mean_document_bytes=18315, input_us_per_mb=53146, runner_us_per_mb=7372,
               instances_per_mb={128: 2389, 512: 756}, instance_us={128: 4.11, 512: 10.3},
               runner_ns_per_entry_byte=7.57,
               output_us_per_row={'tfrecord': 2.379, 'parquet': 1.597},
               output_ns_per_byte={'tfrecord': 1.293, 'parquet': 11.961},
               entry_bytes={128: 337, 512: 1106},
               bytes_per_instance={'tfrecord 128': 823, 'tfrecord 512': 2691,
                                   'parquet 128': 228, 'parquet 512': 776}),
    ShapeRates(mean_document_bytes=3083, input_us_per_mb=62142, runner_us_per_mb=32203,
               instances_per_mb={128: 2727, 512: 1076}, instance_us={128: 4.31, 512: 9.12},
               runner_ns_per_entry_byte=4.37,
               output_us_per_row={'tfrecord': 2.401, 'parquet': 1.422},
               output_ns_per_byte={'tfrecord': 1.414, 'parquet': 11.741},
               entry_bytes={128: 321, 512: 859},
               bytes_per_instance={'tfrecord 128': 818, 'tfrecord 512': 2577,
                                   'parquet 128': 229, 'parquet 512': 633}),
    ShapeRates(mean_document_bytes=334, input_us_per_mb=70980, runner_us_per_mb=69674,
               instances_per_mb={128: 4837, 512: 4549}, instance_us={128: 4.17, 512: 4.36},
               runner_ns_per_entry_byte=8.58,
               output_us_per_row={'tfrecord': 3.018, 'parquet': 0.0},
               output_ns_per_byte={'tfrecord': 0.708, 'parquet': 18.914},
               entry_bytes={128: 230, 512: 255},
               bytes_per_instance={'tfrecord 128': 780, 'tfrecord 512': 2295,
                                   'parquet 128': 162, 'parquet 512': 181}),
    ShapeRates(mean_document_bytes=130, input_us_per_mb=106084, runner_us_per_mb=93823,
               instances_per_mb={128: 9612, 512: 9589}, instance_us={128: 3.85, 512: 3.86},
               runner_ns_per_entry_byte=23.06,
               output_us_per_row={'tfrecord': 2.689, 'parquet': 0.0},
               output_ns_per_byte={'tfrecord': 0.808, 'parquet': 21.159},
               entry_bytes={128: 149, 512: 150},
               bytes_per_instance={'tfrecord 128': 747, 'tfrecord 512': 2251,
                                   'parquet 128': 100, 'parquet 512': 101}),
)
# Dataflow list prices (us-central1, batch; check the pricing pages).
PRICE_VCPU_HOUR = 0.056
PRICE_GB_HOUR = 0.003557
PRICE_SHUFFLE_GB = 0.011
PRICE_PD_GB_HOUR = 0.000054
PRICE_CLASS_A = 0.005 / 1000  # object writes, copies, lists
PRICE_CLASS_B = 0.0004 / 1000  # object reads, metadata
PRICE_STORAGE_GB_MONTH = 0.020  # GCS Standard storage, a regional bucket
MACHINES = {"n2-standard-4": (4, 16), "n2-standard-8": (8, 32), "n2-highmem-4": (4, 32),
            "e2-standard-4": (4, 16)}
TARGET_SHARD_BYTES = 256 * MiB
UPLOAD_CHUNK = 16 * MiB  # Beam's GCS writer uploads in chunks of this size
SAMPLE_MAX_BYTES = 256 * MiB
WORKER_START_SECONDS = 180  # a Dataflow VM from request to running (modelled)
KERNEL_COMPILE_SECONDS = 12  # per worker process without the template image (measured here)
FLUSH_BYTES = 64 * MiB  # the bucket path's buffer (transforms/handoff/shuffle_entries.py)
OBJECT_WRITE_SECONDS = 0.05  # one small GCS object created, written and closed (modelled)


def _at_length(values: dict[int, float], length: int, *, per_instance: bool = True) -> float:
    """A measured quantity at any length: linear through the two lengths
    measured, in the length for costs and sizes, in 1 / (length - 3) for
    instances per MB (a long document's instances hold ~length - 3 tokens)."""
    (x0, y0), (x1, y1) = sorted(values.items())
    x = (lambda v: v) if per_instance else (lambda v: 1 / (v - 3))
    return y0 + (y1 - y0) * (x(length) - x(x0)) / (x(x1) - x(x0))


def instances(rates: ShapeRates, *, megabytes: float, dupe_factor: int,
              max_seq_length: int) -> float:
    return (_at_length(rates.instances_per_mb, max_seq_length, per_instance=False)
            * megabytes * dupe_factor)


def work_cpu_seconds(rates: ShapeRates, *, megabytes: float, dupe_factor: int,
                     max_seq_length: int, output_format: str) -> dict[str, float]:
    """A run's CPU seconds beyond its start-up, by what they grow with: input
    bytes, instances (and the bytes they shuffle), output rows and bytes
    (bench/scale_rates.py checks
    the sum against runs)."""
    count = instances(rates, megabytes=megabytes, dupe_factor=dupe_factor,
                      max_seq_length=max_seq_length)
    per_instance = _at_length({n: rates.bytes_per_instance[f"{output_format} {n}"]
                               for n in LENGTHS}, max_seq_length)
    return {"input": megabytes * (rates.input_us_per_mb + rates.runner_us_per_mb) / 1e6,
            "instances": count * (_at_length(rates.instance_us, max_seq_length) / 1e6
                                  + _at_length(rates.entry_bytes, max_seq_length)
                                  * rates.runner_ns_per_entry_byte / 1e9),
            "output": count * (rates.output_us_per_row[output_format] / 1e6 + per_instance
                               * rates.output_ns_per_byte[output_format] / 1e9)}


def _across_shapes(mean_bytes: float, value: Callable[[ShapeRates], float]) -> float:
    """a + b / mean document length through the measured shapes (least squares
    in 1 / length): per-document costs fade as documents grow."""
    xs = [1 / rates.mean_document_bytes for rates in RATES]
    ys = [value(rates) for rates in RATES]
    x_mean, y_mean = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, ys))
             / sum((x - x_mean) ** 2 for x in xs))
    return y_mean + slope * (1 / mean_bytes - x_mean)


@dataclasses.dataclass(frozen=True)
class Job:
    gigabytes: float
    mean_document_bytes: float
    dupe_factor: int = 10
    max_seq_length: int = 128
    output_format: str = "tfrecord"
    workers: int = 16
    machine: str = "n2-standard-4"
    image: bool = True  # the Flex Template image (kernels precompiled)


def model(job: Job) -> dict[str, dict[str, float]]:
    vcpus, memory_gb = MACHINES[job.machine]
    text_mb = job.gigabytes * 1000
    shape = dict(megabytes=text_mb, dupe_factor=job.dupe_factor,
                 max_seq_length=job.max_seq_length)

    def per_mb(value: Callable[[ShapeRates], float]) -> float:
        return _across_shapes(job.mean_document_bytes, value) * text_mb

    instance_count = per_mb(lambda r: instances(r, **shape) / text_mb)
    work = {part: per_mb(lambda r, part=part: work_cpu_seconds(
        r, **shape, output_format=job.output_format)[part] / text_mb)
        for part in ("input", "instances", "output")}
    output = per_mb(lambda r: instances(r, **shape) / text_mb * _at_length(
        {n: r.bytes_per_instance[f"{job.output_format} {n}"] for n in LENGTHS},
        job.max_seq_length))
    # The shuffle carries instances, the shard writer makes the records.
    entries = per_mb(lambda r: instances(r, **shape) / text_mb * _at_length(
        r.entry_bytes, job.max_seq_length))
    shards = default_num_shards(int(job.gigabytes * 1e9), job.dupe_factor)
    cpu_seconds = sum(work.values())
    processes = job.workers * vcpus
    start = WORKER_START_SECONDS + (0 if job.image else KERNEL_COMPILE_SECONDS)
    wall = start + cpu_seconds / processes
    documents = job.gigabytes * 1e9 / job.mean_document_bytes
    tokens = job.gigabytes * 1e9 / 4.2  # ~4.2 bytes of English text per WordPiece token
    packed_documents = tokens * 2 + documents * 20  # 2 bytes a token, keys and headers
    sample_bytes = min(SAMPLE_MAX_BYTES, 10_000 * min(job.mean_document_bytes / 4.2,
                                                      8 * job.max_seq_length) * 4)
    input_reads = job.gigabytes * 1e9 / UPLOAD_CHUNK
    shard_writes = shards * (1 + math.ceil(min(output / shards, TARGET_SHARD_BYTES)
                                           / UPLOAD_CHUNK))
    # A unit of work (~2^18 tokens x dupe_factor copies) is about one bundle
    # on Dataflow; the bucket path writes one object per bundle and shard it
    # touches, and one more at every 64 MiB flush.
    bundles = max(1, tokens / (1 << 18))
    bucket_objects = (bundles * min(shards, instance_count / bundles)
                      + entries / FLUSH_BYTES)
    results = {}
    for path in ("runner", "files"):
        buckets = bucket_objects if path == "files" else 0
        objects = 2 * shards + 5 + buckets  # + probe, 3 staging lists, vocab.txt, manifest
        # Each process writes its bucket objects one after another.
        path_wall = wall + buckets * OBJECT_WRITE_SECONDS / processes
        class_a = shard_writes + shards * 2 + buckets * 3  # uploads, copies + deletes, lists
        class_b = input_reads + shards * 4 + buckets * 2  # reads, metadata
        # --dedup=exact (the default): the documents' text once, ~60 bytes of rows each.
        dedup = job.gigabytes * 1e9 + documents * 60
        shuffle = packed_documents + dedup + (entries * 1.02 if path == "runner" else buckets * 200)
        vcpu_hours = processes * path_wall / 3600
        cost = (vcpu_hours * PRICE_VCPU_HOUR
                + job.workers * memory_gb * path_wall / 3600 * PRICE_GB_HOUR
                + shuffle / 1e9 * PRICE_SHUFFLE_GB
                + job.workers * 50 * path_wall / 3600 * PRICE_PD_GB_HOUR
                + class_a * PRICE_CLASS_A + class_b * PRICE_CLASS_B)
        results[path] = {
            "instances": instance_count, "output GB": output / 1e9, "shards": shards,
            "GCS objects created": objects, "GCS requests": class_a + class_b,
            "Shuffle GB": shuffle / 1e9, "side input MB per process": sample_bytes / 1e6,
            "work vCPU-hours": cpu_seconds / 3600,
            **{f"  of which {part}": seconds / 3600
               for part, seconds in work.items()},
            "billed vCPU-hours": vcpu_hours,
            "wall minutes": path_wall / 60, "cost $": cost,
            "output storage $ a month": output / 1e9 * PRICE_STORAGE_GB_MONTH}
    return results


def render(job: Job) -> str:
    results = model(job)
    lines = [f"{job.gigabytes:g} GB of text, mean document {job.mean_document_bytes:,.0f} B, "
             f"dupe_factor {job.dupe_factor}, max_seq_length {job.max_seq_length}, "
             f"{job.output_format}, "
             f"{job.workers} x {job.machine}"
             f"{'' if job.image else ', no template image (kernels compiled per process)'}",
             f"{'':<28}{'--shuffle=runner':>18}{'--shuffle=files':>18}"]
    for name in results["runner"]:
        runner, files = results["runner"][name], results["files"][name]
        digits = 2 if name in ("output GB", "Shuffle GB", "work vCPU-hours",
                               "billed vCPU-hours", "cost $", "wall minutes",
                               "output storage $ a month") or name.startswith(
                                   "  of which") else 0
        lines.append(f"{name:<28}{runner:>18,.{digits}f}{files:>18,.{digits}f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=16.0, help="text, GB")
    parser.add_argument("--mean-document-bytes", type=float, nargs="+", default=[3000, 600])
    parser.add_argument("--dupe-factor", type=int, default=10)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--output-format", choices=FORMATS, nargs="+", default=list(FORMATS))
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--machine", choices=sorted(MACHINES), default="n2-standard-4")
    parser.add_argument("--no-image", action="store_true",
                        help="workers install the package from --setup_file")
    args = parser.parse_args(argv)
    for mean in args.mean_document_bytes:
        for output_format in args.output_format:
            print(render(Job(gigabytes=args.gigabytes, mean_document_bytes=mean,
                             dupe_factor=args.dupe_factor, max_seq_length=args.max_seq_length,
                             output_format=output_format, workers=args.workers,
                             machine=args.machine, image=not args.no_image)))
            print()


if __name__ == "__main__":
    main()
