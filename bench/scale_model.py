"""What a Dataflow job of this pipeline costs, from rates measured on this machine.

Not a test and not a measurement of Dataflow: a model. Its inputs are the
per-core rates `bench/pipeline.py` measured here (MEASURED below, one
DirectRunner worker, the original's default flags, start-up excluded) and a
description of the corpus and the job; it prints, for both shuffle paths,
what the job would create, move and cost. Which figures are measured and
which are modelled is said in each line's comment and in docs/dataflow.md, "Sizing a Wikipedia-size corpus".

    python bench/scale_model.py --gigabytes 16 --mean-document-bytes 3000
    python bench/scale_model.py --gigabytes 16 --mean-document-bytes 600 --workers 32
"""

from __future__ import annotations

import argparse
import dataclasses
import math

MiB = 1 << 20
# Measured here (bench/pipeline.py, 20 MB of each shape, dupe_factor 10,
# max_seq_length 128, max_predictions_per_seq 20, 1 worker): mean document
# bytes of the shape -> (instances per MB of text, CPU microseconds per
# instance less the run's 3.4 CPU-s of start-up, shuffle bytes per instance:
# the entry of a masked instance, transforms.instances.instance_bytes, on 1 MB).
MEASURED = {
    334: (48_368, 15.0, 240),  # short: 1-5 sentences
    3_145: (27_268, 15.2, 320),  # web-like: median 2 KB
    18_425: (23_895, 14.4, 335),  # WikiText-2 articles
}
# A padded record (max_seq_length 128, max_predictions_per_seq 20, BERT-Base
# uncased ids), measured on `make run`'s output: 827 bytes framed.
RECORD_BYTES_AT_128 = 811
# Dataflow list prices (us-central1, batch; check the pricing pages).
PRICE_VCPU_HOUR = 0.056
PRICE_GB_HOUR = 0.003557
PRICE_SHUFFLE_GB = 0.011
PRICE_PD_GB_HOUR = 0.000054
PRICE_CLASS_A = 0.005 / 1000  # object writes, copies, lists
PRICE_CLASS_B = 0.0004 / 1000  # object reads, metadata
MACHINES = {"n2-standard-4": (4, 16), "n2-standard-8": (8, 32), "n2-highmem-4": (4, 32),
            "e2-standard-4": (4, 16)}
TARGET_SHARD_BYTES = 256 * MiB
UPLOAD_CHUNK = 16 * MiB  # Beam's GCS writer uploads in chunks of this size
SAMPLE_MAX_BYTES = 256 * MiB
WORKER_START_SECONDS = 180  # a Dataflow VM from request to running (modelled)
KERNEL_COMPILE_SECONDS = 12  # per worker process without the template image (measured here)
FLUSH_BYTES = 64 * MiB  # the bucket path's buffer (transforms/write/shuffle_entries.py)
OBJECT_WRITE_SECONDS = 0.05  # one small GCS object created, written and closed (modelled)


def _interpolate(mean_bytes: float, column: int) -> float:
    """a + b / mean document length through the measured shapes (least squares
    in 1 / length): per-document costs fade as documents grow."""
    xs = [1 / length for length in MEASURED]
    ys = [row[column] for row in MEASURED.values()]
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
    workers: int = 16
    machine: str = "n2-standard-4"
    image: bool = True  # the Flex Template image (kernels precompiled)


def model(job: Job) -> dict[str, dict[str, float]]:
    vcpus, memory_gb = MACHINES[job.machine]
    text_mb = job.gigabytes * 1000
    # Instances scale with dupe_factor and, for long documents, inversely with
    # the instance length (measured at max_seq_length 128, dupe_factor 10).
    length_factor = 125 / (job.max_seq_length - 3)
    instances = (_interpolate(job.mean_document_bytes, 0) * text_mb * job.dupe_factor / 10
                 * length_factor)
    record_bytes = RECORD_BYTES_AT_128 * job.max_seq_length / 128 + 16  # padded, framed
    output = instances * record_bytes
    # The shuffle carries instances, the shard writer makes the records.
    entries = instances * _interpolate(job.mean_document_bytes, 2) * job.max_seq_length / 128
    shards = max(1, math.ceil(output / TARGET_SHARD_BYTES))
    cpu_seconds = instances * _interpolate(job.mean_document_bytes, 1) / 1e6
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
    bundle_output = output / max(1, tokens / (1 << 18))
    bundles = output / bundle_output
    bucket_objects = bundles * min(shards, bundle_output / record_bytes) + output / FLUSH_BYTES
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
            "instances": instances, "output GB": output / 1e9, "shards": shards,
            "GCS objects created": objects, "GCS requests": class_a + class_b,
            "Shuffle GB": shuffle / 1e9, "side input MB per process": sample_bytes / 1e6,
            "work vCPU-hours": cpu_seconds / 3600, "billed vCPU-hours": vcpu_hours,
            "wall minutes": path_wall / 60, "cost $": cost}
    return results


def render(job: Job) -> str:
    results = model(job)
    lines = [f"{job.gigabytes:g} GB of text, mean document {job.mean_document_bytes:,.0f} B, "
             f"dupe_factor {job.dupe_factor}, max_seq_length {job.max_seq_length}, "
             f"{job.workers} x {job.machine}"
             f"{'' if job.image else ', no template image (kernels compiled per process)'}",
             f"{'':<28}{'--shuffle=runner':>18}{'--shuffle=files':>18}"]
    for name in results["runner"]:
        runner, files = results["runner"][name], results["files"][name]
        digits = 2 if name in ("output GB", "Shuffle GB", "work vCPU-hours",
                               "billed vCPU-hours", "cost $", "wall minutes") else 0
        lines.append(f"{name:<28}{runner:>18,.{digits}f}{files:>18,.{digits}f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=16.0, help="text, GB")
    parser.add_argument("--mean-document-bytes", type=float, nargs="+", default=[3000, 600])
    parser.add_argument("--dupe-factor", type=int, default=10)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--machine", choices=sorted(MACHINES), default="n2-standard-4")
    parser.add_argument("--no-image", action="store_true",
                        help="workers install the package from --setup_file")
    args = parser.parse_args(argv)
    for mean in args.mean_document_bytes:
        print(render(Job(gigabytes=args.gigabytes, mean_document_bytes=mean,
                         dupe_factor=args.dupe_factor, max_seq_length=args.max_seq_length,
                         workers=args.workers, machine=args.machine,
                         image=not args.no_image)))
        print()


if __name__ == "__main__":
    main()
