"""Bytes the instances put through the runner's shuffle, per instance, on
every bench shape at 128 and 512 tokens: in the layout before issue 45
(masked ids, positions and labels, 2 bytes each, unframed: computed from each
entry's header), in today's layout (transforms.handoff.shuffle.instances), and
in the zstd frames that cross the shuffle (transforms.handoff.shuffle.frames),
with the run's codebook and without; and the frames' CPU.

Not a test: it prints figures. Table 1: each shape's run is the pipeline in
this process (the DirectRunner, in memory, through the runner's shuffle as
on Dataflow), over 5 MB of a shape (bench/corpus.py) with the original's
flags but --num_shards=64; its own frames are the first row. A frame's size
decides how well it compresses, and on Dataflow it is a bundle's buffer
(transforms.write.beam.BUFFER_BYTES) spread over the job's shards: a 16 GB
job at dupe 10 has 1,193 shards, 750 GB 55,880
(pipeline.options.output.default_num_shards), so their frames hold a few
instances, of unrelated documents. For those rows the run's instances are
framed again as such a job frames them: in random groups of
BUFFER_BYTES / shards bytes (one instance at least).

The shapes repeat their sources' text, so a codebook learned from a sample
of one has seen the documents it compresses. Table 2 is the honest figure:
real text read once (WikiText-2 valid's articles, the English Web Treebank's
documents, and its sentences each a document), the codebook learned from the
first half of the documents, the frames made of the second half's instances
(three copies each), as the jobs above frame them.

Table 4: what the frames' format version and checksum cost. The run's
instances framed as each job frames them, each frame written and read back
(EntryFrames.compress and decompress): that round trip's CPU per instance,
and that of its crc32c (the frames' checksums computed again, as written
and as read), each against the whole run's CPU per instance (table 1's run,
in this process).

With --baseline DIR (another checkout, e.g. `git worktree add /tmp/old <commit>`),
table 3: the whole run's CPU on the runner's shuffle, with --dedup=exact (both
shuffles of this issue), this checkout beside that one, in turns.

    python bench/shuffle_bytes.py [--size 5] [--shapes wikitext,web,short,tiny]
    python bench/shuffle_bytes.py --baseline /tmp/old --repeat 3
"""

from __future__ import annotations

import argparse
import pathlib
import random
import statistics
import sys
import tempfile
import time

import google_crc32c

sys.path[:0] = [str(pathlib.Path(__file__).resolve().parents[1])]  # for bench.*
from bench.corpus import corpus_path  # noqa: E402
from bench.pipeline import run_ours  # noqa: E402
from bert_pretraining_data.pipeline import prepare as prepare_module  # noqa: E402
from bert_pretraining_data.pipeline.input_sample import (sample_documents,  # noqa: E402
                                                         sample_entries)
from bert_pretraining_data.pipeline.main import run  # noqa: E402
from bert_pretraining_data.pipeline.options import parse_args  # noqa: E402
from bert_pretraining_data.transforms.handoff.shuffle.entries import (  # noqa: E402
    ENTRY_HEADER, scan_entries)
from bert_pretraining_data.transforms.handoff.shuffle.frames import (EntryCodebook,  # noqa: E402
                                                                     EntryFrames, entry_codebook)
from bert_pretraining_data.transforms.handoff.shuffle.instances import (  # noqa: E402
    HEADER_SIZE, SOURCE_SIZE, instance_header)
from bert_pretraining_data.transforms.write.beam import BUFFER_BYTES  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
VOCAB = ROOT / "tests" / "data" / "bert-base-uncased-vocab.txt"
SHAPES = ("wikitext", "web", "short", "tiny")
SHARDS = 64
_COMPRESS = EntryFrames.compress  # the frames', before main() wraps it
_CODEBOOK = prepare_module.entry_codebook_of
DATA = ROOT / "tests" / "data"
# Real text read once: (name, files, each line a document)
UNSEEN = (("WikiText-2 articles", (DATA / "wikitext2_valid.txt",), False),
          ("EWT documents", (DATA / "en_ewt-ud-dev.sentences.txt",
                             DATA / "en_ewt-ud-test.paragraphs.txt"), False),
          ("EWT sentences", (DATA / "en_ewt-ud-dev.sentences.txt",
                             DATA / "en_ewt-ud-test.sentences.txt"), True))


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


class _Captured:
    """What a run's frames took in and gave out, its codebook, and the
    frames' CPU."""

    entries: list[bytes] = []
    totals = {"old": 0, "in": 0, "out": 0, "frames": 0, "cpu": 0.0}
    codebook: EntryCodebook | None = None


def _counted_compress(self: EntryFrames, data: bytes) -> bytes:
    start = time.process_time()
    frame = _COMPRESS(self, data)
    _Captured.totals["cpu"] += time.process_time() - start
    _Captured.totals["in"] += len(data)
    _Captured.totals["out"] += len(frame)
    _Captured.totals["frames"] += 1
    _Captured.totals["old"] += _old_layout_bytes(data)
    buffer, _, bounds = scan_entries(data, source="a frame")
    _Captured.entries += [buffer[bounds[i]:bounds[i + 1]].tobytes()
                          for i in range(len(bounds) - 1)]
    return frame


def _captured_codebook(*args) -> EntryCodebook | None:
    _Captured.codebook = _CODEBOOK(*args)
    return _Captured.codebook


def capture() -> None:
    """From now on, runs' frames and codebooks are captured (_Captured)."""
    EntryFrames.compress = _counted_compress
    prepare_module.entry_codebook_of = _captured_codebook


def run_shape(corpus: pathlib.Path, length: int,
              tokenizer: tuple[str, ...] = (f"--vocab_file={VOCAB}",)) -> dict[str, float]:
    """The pipeline's run at 64 shards (`tokenizer`: its flags): its figures,
    its entries captured."""
    _Captured.entries = []
    _Captured.totals.update(dict.fromkeys(_Captured.totals, 0))
    start = time.process_time()
    with tempfile.TemporaryDirectory() as out:
        manifest = run([f"--input_file={corpus}", *tokenizer, f"--output_dir={out}",
                        f"--max_seq_length={length}",
                        f"--max_predictions_per_seq={round(length * 0.15)}",
                        f"--num_shards={SHARDS}", "--direct_running_mode=in_memory",
                        "--shuffle=runner", "--progress=none"])
    cpu = time.process_time() - start
    instances = manifest["total_instances"]
    totals = _Captured.totals
    assert manifest["counters"]["shuffle_entry_bytes"] == totals["out"]
    return {"instances": instances, "old": totals["old"] / instances,
            "today": totals["in"] / instances, "book": totals["out"] / instances,
            "per_frame": instances / totals["frames"],
            "mb_s": totals["in"] / 1e6 / max(totals["cpu"], 1e-9),
            "cpu_per_instance": cpu / instances}


def job_frame_instances(entries: list[bytes], job_shards: int) -> int:
    """Instances a frame holds in a job of `job_shards` shards (one at least)."""
    return max(1, round(BUFFER_BYTES / job_shards / (sum(map(len, entries)) / len(entries))))


def framed(entries: list[bytes], per_frame: int, codebook: EntryCodebook | None) -> float:
    """Frame bytes per instance of `entries` in random groups of `per_frame`."""
    order = random.Random(0).sample(range(len(entries)), len(entries))
    frames = EntryFrames(codebook)  # uncounted: not the run's own frames
    return sum(len(_COMPRESS(frames, b"".join(entries[i] for i in order[at:at + per_frame])))
               for at in range(0, len(order), per_frame)) / len(entries)


def unseen(files: tuple[pathlib.Path, ...], lines_are_documents: bool, length: int,
           tokenizer: tuple[str, ...] = (f"--vocab_file={VOCAB}",)
           ) -> tuple[list[bytes], EntryCodebook | None]:
    """(the second half's instances, three copies of each document; the
    codebook learned from the first half's) of real text read once
    (`tokenizer`: the run's flags for it)."""
    with tempfile.TemporaryDirectory() as folder:
        corpus = pathlib.Path(folder) / "corpus.txt"
        text = "\n".join(path.read_text(encoding="utf-8") for path in files)
        if lines_are_documents:
            text = "\n\n".join(line for line in text.splitlines() if line.strip())
        corpus.write_text(text, encoding="utf-8")
        config, beam_args = parse_args([f"--input_file={corpus}", *tokenizer,
                                        f"--output_dir={folder}/out",
                                        f"--max_seq_length={length}",
                                        f"--max_predictions_per_seq={round(length * 0.15)}"])
        prepared = prepare_module.prepare(config, beam_args)
        documents, _ = sample_documents(config, prepared.stages, prepared.vocab,
                                        prepared.inputs, corpus.stat().st_size)
    half = len(documents) // 2
    codebook = entry_codebook(sample_entries(config, prepared.stages, documents[:half], 0, 1))
    measured = [batch.entries[batch.bounds[i]:batch.bounds[i + 1]].tobytes()
                for batch in sample_entries(config, prepared.stages, documents[half:], 0, 3)
                for i in range(len(batch))]
    return measured, codebook


def _job_rows(name: str, length: int, entries: list[bytes], codebook: EntryCodebook | None,
              jobs_shards: list[int], lone: bool = False) -> None:
    """Rows of `entries` framed as each job frames them (and `lone`, one a frame)."""
    old = _old_layout_bytes(b"".join(entries)) / len(entries)
    today = sum(map(len, entries)) / len(entries)
    frames = [("one a frame", 1)] if lone else []
    frames += [(f"a job of {n:,}", job_frame_instances(entries, n)) for n in jobs_shards]
    for label, per_frame in frames:
        plain, book = framed(entries, per_frame, None), framed(entries, per_frame, codebook)
        print(f"{name:<20}{length:>7}{label:>18}{len(entries):>11,}{per_frame:>9.1f}"
              f"{old:>12.0f}{today:>7.0f}{plain:>9.0f}{book:>6.0f}{book / old:>7.3f}", flush=True)


def round_trip(entries: list[bytes], per_frame: int,
               codebook: EntryCodebook | None) -> tuple[float, list[bytes]]:
    """(CPU seconds to write `entries` as frames of `per_frame` and read them
    back, the frames)."""
    order = random.Random(0).sample(range(len(entries)), len(entries))
    groups = [b"".join(entries[i] for i in order[at:at + per_frame])
              for at in range(0, len(order), per_frame)]
    frames, written = EntryFrames(codebook), []
    start = time.process_time()
    for group in groups:
        written.append(_COMPRESS(frames, group))
        frames.decompress(written[-1])
    return time.process_time() - start, written


def crc_cpu(frames: list[bytes]) -> float:
    """CPU seconds of the frames' crc32c: one over each frame's version and
    payload when it is written, one over the whole frame when it is read."""
    start = time.process_time()
    for frame in frames:
        google_crc32c.value(frame[:-4])
        google_crc32c.value(frame)
    return time.process_time() - start


def checksum_rows(shape: str, length: int, entries: list[bytes],
                  codebook: EntryCodebook | None, framings: list[tuple[str, int]],
                  run_cpu_per_instance: float) -> None:
    """Table 4's rows: for each (label, instances a frame), the frames' round
    trip and their checksums' part of it, per instance, beside the run's CPU
    per instance (the best of 3 timings)."""
    for label, per_frame in framings:
        per_frame = max(1, per_frame)
        timed, frames = min(round_trip(entries, per_frame, codebook) for _ in range(3))
        checked = min(crc_cpu(frames) for _ in range(3))
        trip, checks = timed / len(entries), checked / len(entries)
        print(f"{shape:<20}{length:>7}{label:>18}{per_frame:>9}{trip * 1e6:>11.2f}"
              f"{checks * 1e6:>10.3f}{run_cpu_per_instance * 1e6:>10.0f}"
              f"{100 * trip / run_cpu_per_instance:>8.2f}"
              f"{100 * checks / run_cpu_per_instance:>8.3f}", flush=True)


def cpu_beside(baseline: pathlib.Path, shapes: list[str], size: float, repeat: int) -> None:
    """Table 3: a whole run's CPU, this checkout and `baseline`, in turns."""
    print(f"\n3. a run's CPU seconds on the runner's shuffle, --dedup=exact, dupe 10, 128, "
          f"1 worker, median of {repeat}, this checkout beside {baseline}")
    print(f"{'shape':<10}{'MB':>5}{'this':>8}{'baseline':>10}{'ratio':>8}")
    flags = ("--shuffle=runner", "--dedup=exact")
    for shape in shapes:
        corpus = corpus_path(size, shape=shape, seed=0)
        runs: dict[str, list[float]] = {"this": [], "baseline": []}
        for _ in range(repeat):
            runs["this"].append(run_ours(corpus, 1, flags=flags).cpu)
            runs["baseline"].append(run_ours(corpus, 1, checkout=baseline, flags=flags).cpu)
        this, base = (statistics.median(runs[name]) for name in ("this", "baseline"))
        print(f"{shape:<10}{size:>5g}{this:>8.1f}{base:>10.1f}{this / base:>8.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=5)
    parser.add_argument("--shapes", type=lambda text: text.split(","), default=list(SHAPES))
    parser.add_argument("--jobs-shards", type=lambda text: [int(n) for n in text.split(",")],
                        default=[1193, 55880])
    parser.add_argument("--baseline", type=pathlib.Path,
                        help="another checkout: table 3 only, its CPU beside this one's")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.baseline:
        cpu_beside(args.baseline, args.shapes, args.size, args.repeat)
        return
    header = (f"{'length':>7}{'frames of':>18}{'instances':>11}{'a frame':>9}{'old layout':>12}"
              f"{'today':>7}{'none':>9}{'book':>6}{'/ old':>7}")
    print("1. the bench shapes (each run's codebook learned from a sample of its own corpus)")
    print(f"{'shape':<20}{header}{'zstd MB/s':>11}")
    capture()
    checked = []
    for shape in args.shapes:
        corpus = corpus_path(args.size, shape=shape, seed=0)
        for length in (128, 512):
            found = run_shape(corpus, length)
            checked.append((shape, length, _Captured.entries, _Captured.codebook,
                            found["cpu_per_instance"], round(found["per_frame"])))
            print(f"{shape:<20}{length:>7}{'this run, 64':>18}{found['instances']:>11,}"
                  f"{found['per_frame']:>9.1f}{found['old']:>12.0f}{found['today']:>7.0f}"
                  f"{'':>9}{found['book']:>6.0f}{found['book'] / found['old']:>7.3f}"
                  f"{found['mb_s']:>11.0f}", flush=True)
            _job_rows(shape, length, _Captured.entries, _Captured.codebook, args.jobs_shards)
    print("\n2. real text read once, the codebook learned from other documents than those framed")
    print(f"{'text':<20}{header}")
    for name, files, lines_are_documents in UNSEEN:
        for length in (128, 512):
            entries, codebook = unseen(files, lines_are_documents, length)
            _job_rows(name, length, entries, codebook, args.jobs_shards, lone=True)
    print("\n4. the frames' round trip (write, read back) and its crc32c, per instance, beside "
          "the run's CPU per instance")
    print(f"{'shape':<20}{'length':>7}{'frames of':>18}{'a frame':>9}{'trip µs':>11}"
          f"{'crc µs':>10}{'run µs':>10}{'trip %':>8}{'crc %':>8}")
    for shape, length, entries, codebook, run_cpu, per_frame in checked:
        checksum_rows(shape, length, entries, codebook, [("this run, 64", per_frame)] + [
            (f"a job of {n:,}", job_frame_instances(entries, n)) for n in args.jobs_shards],
                      run_cpu)


if __name__ == "__main__":
    main()
