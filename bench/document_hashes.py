"""What recording a version's documents costs a refresh (transforms/hashes/document_hashes.py).

Not a test: it prints figures, on a corpus of each shape (bench/corpus.py).

1. The stage's own work, in this process without a runner, per document:
   hashing (sha256 of the text), the per-bundle buffers, sorting a file and
   comparing it with a previous version's (the same corpus with 1% of its
   documents replaced), beside the whole functional core's work on the same
   corpus (bench/pipeline.py's stage breakdown).
2. The stage with the runner's handling: a pipeline that only reads the
   corpus (and counts its documents), without and with the stage, in this
   process on the DirectRunner, alternated --repeat times.
3. End to end, side by side in one invocation: the pipeline (1 worker)
   without and with the documents recorded (as a refresh's run), alternated
   --repeat times; CPU seconds of the process tree.

    python bench/document_hashes.py --size 20 --repeat 3
"""

from __future__ import annotations

import argparse
import pathlib
import resource
import sys
import tempfile
import time

import apache_beam as beam
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import MB, SHAPES, corpus_path, read_documents  # noqa: E402
from bench.pipeline import FLAGS, VOCAB, measure, stage_breakdown  # noqa: E402
from bert_pretraining_data.transforms.hashes.document_hashes import count_changes, decode, document_hash, encode, file_of, hash_files_for
from bert_pretraining_data.transforms.hashes.beam import WriteDocumentHashes
from bert_pretraining_data.transforms.hashes.beam import _HashDocumentsFn
from bert_pretraining_data.transforms.read.documents import DOCUMENTS
from bert_pretraining_data.transforms.read.beam import ReadDocuments


def stage_costs(corpus: pathlib.Path) -> dict[str, float]:
    """CPU seconds of each step of the stage on this corpus."""
    documents = read_documents(corpus)
    clock = time.process_time
    num_files = max(4, hash_files_for(corpus.stat().st_size))  # several files, as at scale
    start = clock()
    hashing = _HashDocumentsFn(num_files=num_files)
    hashing.start_bundle()
    blobs = [out for document in documents for out in hashing.process(document)]
    blobs += [last.value for last in hashing.finish_bundle()]
    hashed = clock() - start

    start = clock()
    files = [encode(np.frombuffer(b"".join(blob for index, blob in blobs if index == i),
                                  dtype=np.uint64)) for i in range(num_files)]
    written = clock() - start

    current = [decode(data) for data in files]
    replaced = np.array([document_hash([f"replaced {i}"]) for i in range(len(documents) // 100)],
                        dtype=np.uint64)
    previous_all = np.concatenate([*current, replaced])[len(replaced):]  # 1% swapped
    previous = [previous_all[file_of(previous_all, num_files) == i] for i in range(num_files)]
    start = clock()
    changes = [count_changes(now, before) for now, before in zip(current, previous)]
    compared = clock() - start
    assert sum(c.added + c.unchanged for c in changes) == len(documents)
    return {"documents": len(documents), "hash": hashed, "sort+encode": written,
            "compare": compared}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def with_runner(corpus: pathlib.Path, repeat: int) -> dict[str, list[float]]:
    """CPU seconds of reading (and counting) the corpus on the DirectRunner,
    without and with the stage after the read."""
    figures = {"read": [], "read + stage": []}
    for _ in range(repeat):
        for mode in figures:
            with tempfile.TemporaryDirectory(prefix="bert-bench-") as tmp:
                start = _cpu()
                with beam.Pipeline() as p:
                    documents = (p | ReadDocuments(patterns=[str(corpus)]))[DOCUMENTS]
                    _ = documents | beam.combiners.Count.Globally()
                    if mode != "read":
                        _ = documents | WriteDocumentHashes(
                            paths=[f"{tmp}/hashes-{i}" for i in range(4)])
                figures[mode].append(_cpu() - start)
    return figures


# A run with the documents recorded, as a refresh asks for them (no comparison:
# a first version), or without (sys.argv[1]: "with" or "without").
_RUN = ("import sys; from bert_pretraining_data.pipeline.main import run; "
        "from bert_pretraining_data.pipeline.changes import DocumentHistory; "
        "run(sys.argv[2:], history=DocumentHistory() if sys.argv[1] == 'with' else None)")


def end_to_end(corpus: pathlib.Path, repeat: int) -> dict[str, list[float]]:
    """CPU seconds of the pipeline without and with the documents recorded,
    alternated `repeat` times (the machine is shared: look at the spread)."""
    figures = {"without": [], "with": []}
    with tempfile.TemporaryDirectory(prefix="bert-bench-") as tmp:
        for attempt in range(repeat):
            for mode in figures:
                command = [sys.executable, "-c", _RUN, mode, f"--input_file={corpus}",
                           f"--vocab_file={VOCAB}", *FLAGS, "--direct_running_mode=in_memory",
                           "--direct_num_workers=1", "--progress=none",
                           f"--output_dir={tmp}/{mode}-{attempt}"]
                figures[mode].append(measure(command, pathlib.Path(tmp) / "log")[1])
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=20.0, help="MB of each shape")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeat", type=int, default=3,
                        help="end-to-end runs of each kind (0: none)")
    args = parser.parse_args(argv)
    for shape in args.shapes.split(","):
        corpus = corpus_path(args.size, shape=shape)
        costs = stage_costs(corpus)
        count = costs.pop("documents")
        core = sum(stage_breakdown(corpus).seconds.values())
        stage = sum(costs.values())
        print(f"\n{shape}, {corpus.stat().st_size / MB:.1f} MB, {count:,} documents: "
              f"the stage's work {stage:.2f} CPU s ({stage / count * 1e6:.2f} µs/document, "
              f"{corpus.stat().st_size / MB / costs['hash']:.0f} MB/s hashed), "
              f"{stage / core:.1%} of the functional core's {core:.1f} CPU s")
        print("  " + ", ".join(f"{step} {spent / count * 1e6:.2f} µs/document"
                               for step, spent in costs.items()))
        if args.repeat:
            runner = with_runner(corpus, args.repeat)
            extra = min(runner["read + stage"]) - min(runner["read"])
            print("  with the runner, CPU s: " + "; ".join(
                f"{mode} " + ", ".join(f"{cpu:.2f}" for cpu in cpus)
                for mode, cpus in runner.items())
                + f"; the stage, best of each: +{extra:.2f} ({extra / count * 1e6:.1f} "
                "µs/document)")
            figures = end_to_end(corpus, args.repeat)
            low = {mode: min(cpus) for mode, cpus in figures.items()}
            print("  end to end, CPU s: " + "; ".join(
                f"{mode} documents recorded " + ", ".join(f"{cpu:.1f}" for cpu in cpus)
                for mode, cpus in figures.items())
                + f"; best of each: {low['with'] / low['without']:.3f}x")


if __name__ == "__main__":
    main()
