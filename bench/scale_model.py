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
        --max-seq-length 512 --output-format parquet --tokenizer byte-level-bpe --workers 256
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
    original's flags), and what the runner adds in full runs on its shuffle
    (`--shuffle=runner`, Dataflow's path), each part by what it grows with."""

    mean_document_bytes: int
    input_us_per_mb: float  # read, tokenize, sample: CPU µs per MB of text
    dedup_us_per_mb: float  # --dedup=exact (the default): CPU µs per MB of text
    runner_us_per_mb: float  # the runner's own CPU per MB of text (elements, reading)
    instances_per_mb: dict[int, float]  # instances per MB of text and copy, by length
    instance_us: dict[int, float]  # create and mask: CPU µs per instance, by length
    runner_ns_per_entry_byte: float  # the runner's per entry byte (zstd frames, shuffle)
    output_us_per_row: dict[str, float]  # sort, encode, frame, write: per row, by format
    output_ns_per_byte: dict[str, float]  # ... and per output byte, by format
    entry_bytes: dict[int, float]  # an instance's shuffle entry, by length
    shuffled_entry_bytes: dict[int, float]  # ... in its shard's zstd frame: what is billed
    document_shuffle_bytes_per_mb: float  # SpreadDocuments' tokenized batches, compressed
    dedup_shuffle_bytes_per_mb: float  # the text waiting for the dedup decisions, and the rows
    bytes_per_instance: dict[str, float]  # output bytes per instance, by "format length"


# Measured by `python bench/scale_rates.py --size 20 --check-size 50` (2026-12-05, 2 shared
# cores, the two runs side by side; issue 45: instances' masking as decisions, frames with the
# run's codebook, documents compressed through the shuffle, dedup's CPU): the check's output
# is in bench/README.md.
RATES = (
    ShapeRates(mean_document_bytes=18315, input_us_per_mb=52637, dedup_us_per_mb=45931,
               runner_us_per_mb=21428, instances_per_mb={128: 2389, 512: 756},
               instance_us={128: 3.05, 512: 7.96}, runner_ns_per_entry_byte=13.73,
               output_us_per_row={'tfrecord': 1.471, 'parquet': 1.152},
               output_ns_per_byte={'tfrecord': 1.344, 'parquet': 12.044},
               entry_bytes={128: 307, 512: 996}, shuffled_entry_bytes={128: 182, 512: 582},
               document_shuffle_bytes_per_mb=281496, dedup_shuffle_bytes_per_mb=373055,
               bytes_per_instance={'tfrecord 128': 823,
                                   'tfrecord 512': 2691, 'parquet 128': 228, 'parquet 512': 776}),
    ShapeRates(mean_document_bytes=3083, input_us_per_mb=61104, dedup_us_per_mb=33084,
               runner_us_per_mb=72735, instances_per_mb={128: 2727, 512: 1076},
               instance_us={128: 3.26, 512: 7.18}, runner_ns_per_entry_byte=8.19,
               output_us_per_row={'tfrecord': 1.172, 'parquet': 0.935},
               output_ns_per_byte={'tfrecord': 1.668, 'parquet': 12.247},
               entry_bytes={128: 293, 512: 774}, shuffled_entry_bytes={128: 186, 512: 494},
               document_shuffle_bytes_per_mb=303664, dedup_shuffle_bytes_per_mb=398163,
               bytes_per_instance={'tfrecord 128': 818,
                                   'tfrecord 512': 2577, 'parquet 128': 229, 'parquet 512': 633}),
    ShapeRates(mean_document_bytes=334, input_us_per_mb=76059, dedup_us_per_mb=63651,
               runner_us_per_mb=85216, instances_per_mb={128: 4837, 512: 4549},
               instance_us={128: 3.29, 512: 3.45}, runner_ns_per_entry_byte=10.19,
               output_us_per_row={'tfrecord': 1.755, 'parquet': 0.0},
               output_ns_per_byte={'tfrecord': 0.997, 'parquet': 18.186},
               entry_bytes={128: 211, 512: 233}, shuffled_entry_bytes={128: 134, 512: 149},
               document_shuffle_bytes_per_mb=378611, dedup_shuffle_bytes_per_mb=531864,
               bytes_per_instance={'tfrecord 128': 780,
                                   'tfrecord 512': 2295, 'parquet 128': 162, 'parquet 512': 181}),
    ShapeRates(mean_document_bytes=130, input_us_per_mb=121197, dedup_us_per_mb=171353,
               runner_us_per_mb=173375, instances_per_mb={128: 9612, 512: 9589},
               instance_us={128: 2.93, 512: 2.96}, runner_ns_per_entry_byte=11.58,
               output_us_per_row={'tfrecord': 1.516, 'parquet': 0.0},
               output_ns_per_byte={'tfrecord': 1.132, 'parquet': 22.202},
               entry_bytes={128: 138, 512: 139}, shuffled_entry_bytes={128: 86, 512: 86},
               document_shuffle_bytes_per_mb=527245, dedup_shuffle_bytes_per_mb=663055,
               bytes_per_instance={'tfrecord 128': 747,
                                   'tfrecord 512': 2251, 'parquet 128': 100, 'parquet 512': 101}),
)
# ... and with `--tokenizer-json` a byte-level BPE tokenizer.json (fastokens), the same day.
BPE_RATES = (
    ShapeRates(mean_document_bytes=18315, input_us_per_mb=40220, dedup_us_per_mb=56683,
               runner_us_per_mb=38910, instances_per_mb={128: 2247, 512: 708},
               instance_us={128: 2.97, 512: 7.69}, runner_ns_per_entry_byte=11.91,
               output_us_per_row={'tfrecord': 1.484, 'parquet': 0.986},
               output_ns_per_byte={'tfrecord': 1.419, 'parquet': 12.049},
               entry_bytes={128: 305, 512: 986}, shuffled_entry_bytes={128: 189, 512: 613},
               document_shuffle_bytes_per_mb=279049, dedup_shuffle_bytes_per_mb=373055,
               bytes_per_instance={'tfrecord 128': 816,
                                   'tfrecord 512': 2664, 'parquet 128': 234, 'parquet 512': 795}),
    ShapeRates(mean_document_bytes=3083, input_us_per_mb=47826, dedup_us_per_mb=38905,
               runner_us_per_mb=55082, instances_per_mb={128: 2541, 512: 1017},
               instance_us={128: 3.23, 512: 6.84}, runner_ns_per_entry_byte=12.02,
               output_us_per_row={'tfrecord': 1.141, 'parquet': 0.84},
               output_ns_per_byte={'tfrecord': 1.866, 'parquet': 11.741},
               entry_bytes={128: 289, 512: 747}, shuffled_entry_bytes={128: 197, 512: 523},
               document_shuffle_bytes_per_mb=297782, dedup_shuffle_bytes_per_mb=398163,
               bytes_per_instance={'tfrecord 128': 807,
                                   'tfrecord 512': 2536, 'parquet 128': 234, 'parquet 512': 631}),
    ShapeRates(mean_document_bytes=334, input_us_per_mb=62528, dedup_us_per_mb=86591,
               runner_us_per_mb=154817, instances_per_mb={128: 4774, 512: 4545},
               instance_us={128: 3.12, 512: 3.31}, runner_ns_per_entry_byte=9.59,
               output_us_per_row={'tfrecord': 1.744, 'parquet': 0.0},
               output_ns_per_byte={'tfrecord': 0.906, 'parquet': 17.745},
               entry_bytes={128: 200, 512: 217}, shuffled_entry_bytes={128: 136, 512: 152},
               document_shuffle_bytes_per_mb=380506, dedup_shuffle_bytes_per_mb=531864,
               bytes_per_instance={'tfrecord 128': 770,
                                   'tfrecord 512': 2282, 'parquet 128': 158, 'parquet 512': 173}),
    ShapeRates(mean_document_bytes=130, input_us_per_mb=107212, dedup_us_per_mb=140960,
               runner_us_per_mb=166572, instances_per_mb={128: 9609, 512: 9588},
               instance_us={128: 2.79, 512: 2.81}, runner_ns_per_entry_byte=14.6,
               output_us_per_row={'tfrecord': 1.715, 'parquet': 0.0},
               output_ns_per_byte={'tfrecord': 0.912, 'parquet': 20.798},
               entry_bytes={128: 129, 512: 129}, shuffled_entry_bytes={128: 84, 512: 84},
               document_shuffle_bytes_per_mb=535942, dedup_shuffle_bytes_per_mb=663055,
               bytes_per_instance={'tfrecord 128': 739,
                                   'tfrecord 512': 2243, 'parquet 128': 94, 'parquet 512': 95}),
)
RATES_BY_TOKENIZER = {"wordpiece": RATES, "byte-level-bpe": BPE_RATES}
# Dataflow list prices (us-central1, batch; check the pricing pages).
PRICE_VCPU_HOUR = 0.056
PRICE_GB_HOUR = 0.003557
PRICE_SHUFFLE_GB = 0.011
# Dataflow Shuffle's volume tiers, per job (https://cloud.google.com/dataflow/pricing,
# "Dataflow Shuffle pricing details"): the first 250 GB billed at 25%, the next 4,870 GB
# (to 5 TB) at 50%, the rest in full. Google's Dataflow training demo shows it on a job:
# 3.91 GB processed, 1,001 MB billed (GoogleCloudPlatform/training-data-analyst,
# courses/dataflow/demos/shuffle_service/README.md).
SHUFFLE_TIERS = ((250.0, 0.25), (4870.0, 0.5), (math.inf, 1.0))
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
FLUSH_BYTES = 64 * MiB  # a bundle's buffer (transforms/write/beam.py BUFFER_BYTES)
OBJECT_WRITE_SECONDS = 0.05  # one small GCS object created, written and closed (modelled)


def _at_length(values: dict[int, float], length: int, *, per_instance: bool = True) -> float:
    """A measured quantity at any length: linear through the two lengths
    measured, in the length for costs and sizes, in 1 / (length - 3) for
    instances per MB (a long document's instances hold ~length - 3 tokens)."""
    (x0, y0), (x1, y1) = sorted(values.items())
    x = (lambda v: v) if per_instance else (lambda v: 1 / (v - 3))
    return y0 + (y1 - y0) * (x(length) - x(x0)) / (x(x1) - x(x0))


def shuffle_cost(gigabytes: float) -> float:
    """Dollars for a job's Shuffle data processed, through SHUFFLE_TIERS."""
    cost, left = 0.0, gigabytes
    for size, share in SHUFFLE_TIERS:
        billed = min(left, size)
        cost += billed * share * PRICE_SHUFFLE_GB
        left -= billed
    return cost


def instances(rates: ShapeRates, *, megabytes: float, dupe_factor: int,
              max_seq_length: int) -> float:
    return (_at_length(rates.instances_per_mb, max_seq_length, per_instance=False)
            * megabytes * dupe_factor)


def work_cpu_seconds(rates: ShapeRates, *, megabytes: float, dupe_factor: int,
                     max_seq_length: int, output_format: str, dedup: bool = True
                     ) -> dict[str, float]:
    """A run's CPU seconds beyond its start-up, by what they grow with: input
    bytes (with --dedup=exact's, the default, unless not `dedup`), instances
    (and the bytes they shuffle), output rows and bytes (bench/scale_rates.py
    checks the sum against runs)."""
    count = instances(rates, megabytes=megabytes, dupe_factor=dupe_factor,
                      max_seq_length=max_seq_length)
    per_instance = _at_length({n: rates.bytes_per_instance[f"{output_format} {n}"]
                               for n in LENGTHS}, max_seq_length)
    return {"input": megabytes * (rates.input_us_per_mb + rates.dedup_us_per_mb * dedup
                                  + rates.runner_us_per_mb) / 1e6,
            "instances": count * (_at_length(rates.instance_us, max_seq_length) / 1e6
                                  + _at_length(rates.entry_bytes, max_seq_length)
                                  * rates.runner_ns_per_entry_byte / 1e9),
            "output": count * (rates.output_us_per_row[output_format] / 1e6 + per_instance
                               * rates.output_ns_per_byte[output_format] / 1e9)}


def _across_shapes(shapes: tuple[ShapeRates, ...], mean_bytes: float,
                   value: Callable[[ShapeRates], float]) -> float:
    """a + b / mean document length through the measured shapes (least squares
    in 1 / length): per-document costs fade as documents grow."""
    xs = [1 / rates.mean_document_bytes for rates in shapes]
    ys = [value(rates) for rates in shapes]
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
    tokenizer: str = "wordpiece"  # a key of RATES_BY_TOKENIZER


def model(job: Job) -> dict[str, dict[str, float]]:
    vcpus, memory_gb = MACHINES[job.machine]
    text_mb = job.gigabytes * 1000
    shape = dict(megabytes=text_mb, dupe_factor=job.dupe_factor,
                 max_seq_length=job.max_seq_length)

    def per_mb(value: Callable[[ShapeRates], float]) -> float:
        return _across_shapes(RATES_BY_TOKENIZER[job.tokenizer], job.mean_document_bytes,
                              value) * text_mb

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
    shuffled_entries = per_mb(lambda r: instances(r, **shape) / text_mb * _at_length(
        r.shuffled_entry_bytes, job.max_seq_length))
    spread_documents = per_mb(lambda r: r.document_shuffle_bytes_per_mb)
    dedup = per_mb(lambda r: r.dedup_shuffle_bytes_per_mb)
    shards = default_num_shards(int(job.gigabytes * 1e9), job.dupe_factor)
    cpu_seconds = sum(work.values())
    processes = job.workers * vcpus
    start = WORKER_START_SECONDS + (0 if job.image else KERNEL_COMPILE_SECONDS)
    wall = start + cpu_seconds / processes
    tokens = job.gigabytes * 1e9 / 4.2  # ~4.2 bytes of English text per WordPiece token
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
        objects = 2 * shards + 6 + buckets  # + 4 staging lists, vocab.txt, manifest
        # Each process writes its bucket objects one after another.
        path_wall = wall + buckets * OBJECT_WRITE_SECONDS / processes
        class_a = shard_writes + shards * 2 + buckets * 3  # uploads, copies + deletes, lists
        class_b = input_reads + shards * 4 + buckets * 2  # reads, metadata
        # --dedup=exact (the default): the text that waits for its decisions and the rows,
        # and on the runner's path the tokenized documents and the instances' frames.
        shuffle = dedup + (spread_documents + shuffled_entries if path == "runner"
                           else buckets * 200)
        vcpu_hours = processes * path_wall / 3600
        cost = (vcpu_hours * PRICE_VCPU_HOUR
                + job.workers * memory_gb * path_wall / 3600 * PRICE_GB_HOUR
                + shuffle_cost(shuffle / 1e9)
                + job.workers * 50 * path_wall / 3600 * PRICE_PD_GB_HOUR
                + class_a * PRICE_CLASS_A + class_b * PRICE_CLASS_B)
        results[path] = {
            "instances": instance_count, "output GB": output / 1e9, "shards": shards,
            "GCS objects created": objects, "GCS requests": class_a + class_b,
            "Shuffle GB": shuffle / 1e9,
            "  dedup's GB": dedup / 1e9,
            "  documents' GB": spread_documents / 1e9 if path == "runner" else 0.0,
            "  instances' GB": (shuffled_entries if path == "runner" else buckets * 200) / 1e9,
            "Shuffle $": shuffle_cost(shuffle / 1e9),
            "side input MB per process": sample_bytes / 1e6,
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
             f"{job.output_format}, {job.tokenizer}, "
             f"{job.workers} x {job.machine}"
             f"{'' if job.image else ', no template image (kernels compiled per process)'}",
             f"{'':<28}{'--shuffle=runner':>18}{'--shuffle=files':>18}"]
    for name in results["runner"]:
        runner, files = results["runner"][name], results["files"][name]
        digits = 2 if name in ("output GB", "Shuffle GB", "  dedup's GB", "  documents' GB",
                               "  instances' GB", "Shuffle $", "work vCPU-hours",
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
    parser.add_argument("--tokenizer", choices=sorted(RATES_BY_TOKENIZER), default="wordpiece")
    parser.add_argument("--no-image", action="store_true",
                        help="workers install the package from --setup_file")
    args = parser.parse_args(argv)
    for mean in args.mean_document_bytes:
        for output_format in args.output_format:
            print(render(Job(gigabytes=args.gigabytes, mean_document_bytes=mean,
                             dupe_factor=args.dupe_factor, max_seq_length=args.max_seq_length,
                             output_format=output_format, workers=args.workers,
                             machine=args.machine, image=not args.no_image,
                             tokenizer=args.tokenizer)))
            print()


if __name__ == "__main__":
    main()
