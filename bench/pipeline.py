"""End-to-end throughput and memory of the pipeline, beside the original script.

Not a test: it prints figures. Each run is a subprocess on a corpus of N MB
of one shape (bench/corpus.py: long WikiText-2 articles, web-like ~2 KB
documents, short 1-5 sentence documents, tiny 1-2 sentence documents; cached
in /tmp/bert-bench-cache)
with the original's default flags. Measured
per run: wall seconds; the resource usage of the whole process tree from
wait4, which sums every descendant the run waited for (the DirectRunner's
worker processes included: Beam waits for them): user and system CPU seconds,
minor and major page faults, and bytes written to files (`ru_oublock`, see
`measure`); the peak of the summed RSS of the tree and of its largest process
(psutil, every 50 ms).

    python bench/pipeline.py --sizes 1,5,20 --workers 1,2 --stages
    python bench/pipeline.py --shapes short --sizes 5,20 --reference path/to/bert
    python bench/pipeline.py --sizes 1,5 --reference path/to/bert     # + ratios
    python bench/pipeline.py --sizes 20 --memory-size 200            # several minutes
    python bench/pipeline.py --sizes 20 --dedup none,exact,near --repeat 3   # dedup's cost
    python bench/pipeline.py --sizes 20 --packed                      # + --pack_sequences
    python bench/pipeline.py --sizes 20 --workers 1 --parquet --repeat 5
    python bench/pipeline.py --sizes 20 --spm_model m.model --reference path/to/bert
    python bench/pipeline.py --sizes 20 --tokenizer_json bpe.json,bert.json --stages

`--reference DIR` runs the original create_pretraining_data.py from a local
checkout of google-research/bert (under TF2 through tf.compat.v1) on the same
corpus with the same flags; `--reference-sizes` limits it (it holds every
instance in memory: 2.2 GB and 3 CPU-minutes at 20 MB). `--stages` times each
stage of the functional core in this process, without Beam, on the 1 MB corpus
of each shape, per document and per instance. `--spm_model M` adds a run
tokenizing with that SentencePiece model (`--spm_model_file`, ALBERT's text
handling) beside each WordPiece run, and its stage breakdown;
`--parquet` a run with `--output_format=parquet`;
`--tokenizer_json A.json,B.json` a run with each tokenizer.json
(`--tokenizer_file`, in place of the vocab.txt and --do_lower_case) likewise.

Runs are `--dedup=none` (the original removes no duplicates, and the bench
corpora repeat their sources) unless `--dedup` lists modes: then each mode
runs on each corpus beside `none` (its throughput over the same text, which
includes the duplicates' work it removes), and both run again on the
documents the mode keeps (written out in their order, chosen by the stage's
own functions): a corpus without duplicates, where the mode's extra CPU is
the stage's own cost. `--repeat N` runs every configuration of `--dedup` or
`--parquet` N times in turns and compares medians.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.corpus

from bench.corpus import MB, SHAPES, corpus_path, jsonl_path, read_documents  # noqa: E402
from bench.decontamination import WIKIPEDIA, benchmark_file  # noqa: E402
from bench.dedup_eval import deduplicate  # noqa: E402
from bench.dedup_rates import dump_documents  # noqa: E402
from bert_pretraining_data.pipeline.build import sample_settings  # noqa: E402
from bert_pretraining_data.pipeline.options import parse_args  # noqa: E402
from bert_pretraining_data.pipeline.prepare import tokenizer_engine  # noqa: E402
from bert_pretraining_data.pipeline.stages import StageSettings  # noqa: E402
from bert_pretraining_data.transforms.instances.sample import (  # noqa: E402
    SampleCandidates, bound_sample, smallest_candidates)
from bert_pretraining_data.transforms.handoff.shuffle.entries import (  # noqa: E402
    scan_entries, split_by_shard)
from bert_pretraining_data.transforms.instances.beam import BatchDocuments, CreateInstances
from bert_pretraining_data.transforms.read.beam import match_inputs  # noqa: E402
from bert_pretraining_data.transforms.tokenize.beam import TokenizeDocument
from bert_pretraining_data.transforms.instances.units import fan_out_batch

VOCAB = ROOT / "tests" / "data" / "bert-base-uncased-vocab.txt"
# The original's defaults, spelled out so that both tools surely get the same.
FLAGS = ["--do_lower_case=True", "--max_seq_length=128", "--max_predictions_per_seq=20",
         "--random_seed=12345", "--dupe_factor=10", "--masked_lm_prob=0.15",
         "--short_seq_prob=0.1"]
# "records" is BatchDocuments, FanOutDupes and CreateInstances: instance creation and
# masking (compiled); "write" is WriteShards' sort, encoding, framing and write.
STAGES = ("setup", "read", "tokenize", "sample", "records", "write")
_ORIGINAL = ("import runpy, sys, tensorflow; sys.modules['tensorflow'] = tensorflow.compat.v1; "
             "sys.path.insert(0, sys.argv[1]); script = sys.argv[1] + '/create_pretraining_data.py'; "
             "sys.argv = [script] + sys.argv[2:]; runpy.run_path(script, run_name='__main__')")


@dataclasses.dataclass(frozen=True)
class Usage:
    """What one command's process tree used, from wait4 and psutil."""

    wall: float
    user: float  # CPU seconds in user mode, the tree's
    system: float  # CPU seconds in the kernel (page faults, mmap, I/O), the tree's
    minor_faults: int  # page faults served without I/O (mostly fresh pages zeroed)
    major_faults: int  # page faults that read from disk
    written: int  # bytes of file pages the tree dirtied (ru_oublock * 512)
    rss_sum: int  # peak of the summed RSS of the process tree, bytes
    rss_max: int  # peak RSS of its largest process, bytes
    load: float  # 1-minute load average at the end: above the CPU count, the run shared them

    @property
    def cpu(self) -> float:
        return self.user + self.system


@dataclasses.dataclass(frozen=True)
class Run:
    label: str
    shape: str
    megabytes: float
    instances: int
    usage: Usage
    output_bytes: int = 0  # the shards' bytes, from the manifest
    tokens: int = 0  # the tokenized corpus's tokens (the manifest's counter)
    counters: dict[str, int] = dataclasses.field(default_factory=dict)  # the manifest's
    engine: str | None = None  # a tokenizer.json run's engine, from the manifest

    @property
    def cpu(self) -> float:
        return self.usage.cpu


def _tree_rss(root: psutil.Process) -> tuple[int, int]:
    sizes = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            sizes.append(proc.memory_info().rss)
        except psutil.Error:  # exited between listing and reading
            pass
    return sum(sizes), max(sizes, default=0)


def measure(command: list[str], log: pathlib.Path, *, poll: float = 0.05,
            cwd: pathlib.Path = ROOT) -> Usage:
    """What one command's process tree used.

    Bytes written are `ru_oublock` * 512: Linux counts it as the bytes of
    file pages a process dirtied (its /proc/<pid>/io `write_bytes`, in 512-byte
    units), and wait4 sums it over every descendant waited for, which
    /proc/<pid>/io does not (a worker's counts vanish with it). It counts
    files written and later deleted (shuffle buckets), and no pipe or socket
    traffic (the runner's gRPC), so it is what a run writes to disk.
    """
    start = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    root = psutil.Process(proc.pid)
    rss_sum = rss_max = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        total, largest = _tree_rss(root)
        rss_sum, rss_max = max(rss_sum, total), max(rss_max, largest)
        time.sleep(poll)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise RuntimeError(f"{command[:4]} failed ({proc.returncode}):\n" + "\n".join(tail))
    return Usage(wall=wall, user=usage.ru_utime, system=usage.ru_stime,
                 minor_faults=usage.ru_minflt, major_faults=usage.ru_majflt,
                 written=usage.ru_oublock * 512, rss_sum=rss_sum, rss_max=rss_max,
                 load=os.getloadavg()[0])


def _entry(checkout: pathlib.Path) -> tuple[list[str], pathlib.Path]:
    """How to run a checkout's create-pretraining-data: (command, working directory).

    This checkout is installed (editable). A checkout from before the
    `bert_pretraining_data` namespace runs as `python -m pipeline` from its root;
    a later one through a directory that maps the namespace onto its folders,
    made once per checkout so that numba's cache stays warm between runs.
    """
    module = [sys.executable, "-m", "bert_pretraining_data.pipeline"]
    if checkout == ROOT:
        return module, ROOT
    if not (checkout / "pipeline" / "cli.py").exists():
        return [sys.executable, "-m", "pipeline"], checkout
    digest = hashlib.sha256(str(checkout).encode()).hexdigest()[:12]
    site = pathlib.Path(tempfile.gettempdir()) / f"bert-bench-site-{digest}"
    (site / "bert_pretraining_data").mkdir(parents=True, exist_ok=True)
    for folder in ("pipeline", "transforms", "loaders"):
        link = site / "bert_pretraining_data" / folder
        if not link.exists():
            link.symlink_to(checkout / folder)
    return module, site


def _flags_of(checkout: pathlib.Path) -> set[str]:
    """The flags a checkout's pipeline lists in its --help."""
    entry, cwd = _entry(checkout)
    listed = subprocess.run([*entry, "--help"], cwd=cwd, capture_output=True, text=True,
                            check=True).stdout
    return set(re.findall(r"--[a-z_]+", listed))


def length_flags(length: int) -> tuple[str, ...]:
    """--max_seq_length and the original's 15% of it as --max_predictions_per_seq."""
    return (f"--max_seq_length={length}", f"--max_predictions_per_seq={round(length * 0.15)}")


def _tokenizer_flags(flags: tuple[str, ...]) -> list[str]:
    """The vocabulary and the original's flags, or, where `flags` give a
    tokenizer.json, the original's flags without what it decides itself."""
    if any(flag.startswith("--tokenizer_file=") for flag in flags):
        return [flag for flag in FLAGS if not flag.startswith("--do_lower_case")]
    return [f"--vocab_file={VOCAB}", *FLAGS]


def run_ours(corpus: pathlib.Path, workers: int, *, checkout: pathlib.Path = ROOT,
             label: str = "ours", flags: tuple[str, ...] = ()) -> Run:
    mode = ("--direct_running_mode=in_memory" if workers == 1
            else "--direct_running_mode=multi_processing")
    with tempfile.TemporaryDirectory(prefix="bert-bench-") as tmp:
        out = pathlib.Path(tmp) / "out"
        entry, cwd = _entry(checkout)
        command = [*entry, f"--input_file={corpus}", f"--output_dir={out}",
                   *_tokenizer_flags(flags), mode, f"--direct_num_workers={workers}", *flags]
        known = _flags_of(checkout)  # an older checkout (--baseline) may lack them
        if "--progress" in known:
            command.append("--progress=none")
        if "--dedup" in known and not any(flag.startswith("--dedup=") for flag in flags):
            command.append("--dedup=none")
        usage = measure(command, pathlib.Path(tmp) / "log", cwd=cwd)
        manifest = json.loads((out / "manifest.json").read_text())
    return Run(f"{label}, {workers} worker{'s' * (workers > 1)}", _shape(corpus),
               corpus.stat().st_size / MB, manifest["total_instances"], usage,
               sum(shard["bytes"] for shard in manifest["shards"]),
               manifest["counters"].get("tokens", 0), manifest["counters"],
               manifest.get("tokenizer_engine"))


def kept_corpus(corpus: pathlib.Path, mode: str) -> tuple[pathlib.Path, int, int]:
    """(a corpus of the documents `--dedup=mode` keeps, in their order;
    documents before; documents kept), cached beside the corpus."""
    documents = read_documents(corpus)
    kept = deduplicate(documents, mode=mode).kept
    path = corpus.with_name(f"{corpus.stem}-kept-{mode}.txt")
    if not path.exists():
        text = "\n".join("\n".join(lines) + "\n" for key, lines in documents if key in kept)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    return path, len(documents), len(kept)


def _cpu_seconds(runs: list[Run]) -> str:
    return ", ".join(f"{run.cpu:.1f}" for run in runs)


def dedup_summary(mode: str, whole: dict[str, list[Run]], on_kept: dict[str, list[Run]],
                  documents: int, kept: int) -> str:
    """One line: `--dedup=mode` against `--dedup=none`, the median CPU of each
    one's repeated runs, on the whole corpus (its throughput over the same
    text: dedup also removes the duplicates' work) and on the documents the
    mode keeps (a corpus without duplicates: what the stage itself costs)."""
    none, run = (statistics.median(r.cpu for r in whole[m]) for m in ("none", mode))
    base, again = (statistics.median(r.cpu for r in on_kept[m]) for m in ("none", mode))
    sample = whole[mode][0]
    return (f"  {sample.shape} {sample.megabytes:.3g} MB --dedup={mode}: kept {kept:,} of "
            f"{documents:,} documents ({1 - kept / documents:.1%} removed); median CPU of "
            f"{len(whole[mode])}: {run:.1f} s vs {none:.1f} s without dedup "
            f"[{_cpu_seconds(whole[mode])} vs {_cpu_seconds(whole['none'])}], throughput "
            f"{none / run:.2f}x --dedup=none's; on the kept documents, which hold no "
            f"duplicates: {again:.1f} s vs {base:.1f} s [{_cpu_seconds(on_kept[mode])} vs "
            f"{_cpu_seconds(on_kept['none'])}], the stage's cost {again / base - 1:+.1%}")


def print_dedup_costs(corpus: pathlib.Path, modes: list[str], repeat: int) -> None:
    """Each mode beside --dedup=none on the same corpus and on the documents the
    mode keeps, every configuration `repeat` times in turns (a shared machine's
    speed drifts by more than the differences measured)."""
    modes = ["none", *[m for m in modes if m != "none"]]
    kept = {mode: kept_corpus(corpus, mode) for mode in modes[1:]}
    whole: dict[str, list[Run]] = {mode: [] for mode in modes}
    on_kept = {mode: {"none": [], mode: []} for mode in modes[1:]}
    for _ in range(repeat):
        for mode in modes:
            whole[mode].append(run_ours(corpus, 1, label=mode, flags=(f"--dedup={mode}",)))
            print(_row(whole[mode][-1]), flush=True)
        for mode, (path, _, _) in kept.items():
            for run_mode in on_kept[mode]:
                on_kept[mode][run_mode].append(run_ours(
                    path, 1, label=f"{run_mode}, {mode}-kept", flags=(f"--dedup={run_mode}",)))
                print(_row(on_kept[mode][run_mode][-1]), flush=True)
    for mode, (_, documents, kept_documents) in kept.items():
        print(dedup_summary(mode, whole, on_kept[mode], documents, kept_documents), flush=True)


def print_in_turns(corpus: pathlib.Path, plain: Run, variants: dict[str, tuple[str, ...]],
                   repeat: int) -> None:
    """A run of each variant's flags beside `plain` (the same corpus, 1
    worker, no flags), then, with `repeat` > 1, all again in turns until each
    has run `repeat` times, and the medians of their instances per CPU-second
    compared (a shared machine's speed drifts by more than a few per cent)."""
    runs: dict[str, list[Run]] = {"ours": [plain], **{label: [] for label in variants}}
    for turn in range(repeat):
        if turn:
            runs["ours"].append(run_ours(corpus, 1))
            print(_row(runs["ours"][-1]), flush=True)
        for label, flags in variants.items():
            runs[label].append(run_ours(corpus, 1, label=label, flags=flags))
            print(_row(runs[label][-1]), flush=True)
    base = statistics.median(r.instances / r.cpu for r in runs["ours"])
    for label in variants:
        print_ratios(runs[label][0], plain)
        if repeat > 1:
            rate = statistics.median(r.instances / r.cpu for r in runs[label])
            print(f"  {plain.shape} {plain.megabytes:.3g} MB, {label} / ours: median "
                  f"instances/CPU-s of {repeat} in turns {rate:,.0f} / {base:,.0f} = "
                  f"{rate / base:.2f}x [CPU s {_cpu_seconds(runs[label])} vs "
                  f"{_cpu_seconds(runs['ours'])}]", flush=True)


def evaluation_benchmark() -> pathlib.Path:
    """10 MB of benchmark items, one a line: bench/decontamination.py's set."""
    return benchmark_file([line for _, lines in dump_documents(WIKIPEDIA) for line in lines], 10)


def run_original(corpus: pathlib.Path, reference: pathlib.Path) -> Run:
    with tempfile.TemporaryDirectory(prefix="bert-bench-") as tmp:
        log = pathlib.Path(tmp) / "log"
        command = [sys.executable, "-c", _ORIGINAL, str(reference.resolve()),
                   f"--input_file={corpus}", f"--output_file={tmp}/out.tfrecord",
                   f"--vocab_file={VOCAB}", *FLAGS]
        usage = measure(command, log)
        wrote = [line for line in log.read_text(errors="replace").splitlines()
                 if "total instances" in line]
    instances = int(wrote[-1].split("Wrote ")[1].split()[0])
    return Run("original", _shape(corpus), corpus.stat().st_size / MB, instances, usage)


def _shape(corpus: pathlib.Path) -> str:
    return corpus.name.split("-")[0]


# room for a --tokenizer_json file's name ("bert-base-uncased-tokenizer, 1 worker"); a
# longer label keeps a space after it
LABEL_WIDTH = 37


def _row(run: Run) -> str:
    use = run.usage
    return (f"{run.label:<{LABEL_WIDTH - 1}} {run.shape:<9}{run.megabytes:>6.1f}"
            f"{run.instances:>12,}"
            f"{use.wall:>8.1f}{use.user:>8.1f}{use.system:>7.1f}{use.system / use.cpu:>6.0%}"
            f"{run.instances / use.cpu:>11,.0f}{run.megabytes / use.cpu:>9.3f}"
            f"{use.minor_faults / 1e6:>9.2f}{use.major_faults:>7,}{use.written / 1e9:>9.2f}"
            f"{use.rss_sum / 2**20:>9,.0f}{use.rss_max / 2**20:>9,.0f}{use.load:>6.1f}")


HEADER = (f"{'run':<{LABEL_WIDTH}}{'shape':<9}{'MB':>6}{'instances':>12}{'wall s':>8}"
          f"{'user s':>8}{'sys s':>7}{'sys':>6}{'inst/CPU-s':>11}{'MB/CPU-s':>9}{'minflt M':>9}"
          f"{'majflt':>7}{'wrote GB':>9}{'RSS sum':>9}{'RSS max':>9}{'load':>6}  (RSS in MiB)")


@dataclasses.dataclass(frozen=True)
class Breakdown:
    seconds: dict[str, float]  # CPU seconds per stage
    documents: int
    instances: int
    output_bytes: int  # the shard's, as the row writer made it
    entry_bytes: int  # the shuffle entries' (what the shuffle carries)


def stage_breakdown(corpus: pathlib.Path, *, flags: tuple[str, ...] = ()) -> Breakdown:
    """CPU seconds per stage, and the documents and instances made (`flags`:
    more of the pipeline's, e.g. a SentencePiece model or a tokenizer.json).

    The pipeline's per-element work without the runner, in one process: its
    own DoFns and functions (counters included) with its own seeds, so the
    instances are the pipeline's. What the pipeline costs beyond this total is
    the runner, its shuffles, file I/O and start-up.
    """
    seconds = dict.fromkeys(STAGES, 0.0)
    clock = time.process_time
    start = clock()
    config, _ = parse_args([f"--input_file={corpus}", "--output_dir=unused",
                            *_tokenizer_flags(flags), *flags])
    vocab = config.tokenizer.load_vocabulary()
    engine, _ = tokenizer_engine(config, [(config, match_inputs(config.input_file))], vocab)
    # the tokenizer engine a run chooses (a tokenizer.json's)
    stages = StageSettings.of(config, vocab, engine)
    tokenize = TokenizeDocument(tokenizer=stages.tokenizer)
    tokenize.setup()
    records_fn = CreateInstances(
        instances=stages.instances, masking=stages.instance_masking, seed=config.random_seed)
    records_fn.setup()
    seconds["setup"] = clock() - start

    start = clock()
    documents = read_documents(corpus)
    seconds["read"] = clock() - start

    start = clock()
    tokenized = [out for document in documents for out in tokenize.process(document)]
    seconds["tokenize"] = clock() - start

    start = clock()  # the sample's steps: BatchDocuments' candidates, SampleDocuments' merge
    settings = sample_settings(config, config.random_seed)
    candidates = SampleCandidates(settings)
    for key, doc in tokenized:
        candidates.add(key, doc)
    sample = bound_sample(smallest_candidates([candidates.take()], settings.size),
                          settings.max_bytes)
    seconds["sample"] = clock() - start

    start = clock()  # BatchDocuments, FanOutDupes and CreateInstances
    batcher = BatchDocuments()
    batcher.start_bundle()
    document_batches = [batch for doc in tokenized for batch in batcher.process(doc)]
    document_batches += [last.value for last in batcher.finish_bundle()]
    batches = [batch for documents in document_batches
               for unit in fan_out_batch(documents, config.dupe_factor)
               for batch in records_fn.process(unit, sample)]
    seconds["records"] = clock() - start

    start = clock()  # WriteShards' work on one shard: collect, sort, encode, frame, write
    data = bytearray()
    for batch in batches:
        for _, blob in split_by_shard(batch, 1):
            data += memoryview(blob)
    rows = stages.rows.rows(*scan_entries(data))
    written = 0
    with open(os.devnull, "wb") as sink:
        for chunk in rows.chunks:
            written += sink.write(chunk)
    seconds["write"] = clock() - start
    return Breakdown(seconds=seconds, documents=len(documents), instances=rows.records,
                     output_bytes=written, entry_bytes=len(data))


def print_stages(corpus: pathlib.Path, flags: tuple[str, ...] = (), label: str = "") -> None:
    breakdown = stage_breakdown(corpus, flags=flags)
    seconds, count = breakdown.seconds, breakdown.instances
    total = sum(seconds.values())
    print(f"\nstages{label}, one process, no runner: {_shape(corpus)}, "
          f"{corpus.stat().st_size / MB:.2f} MB, {breakdown.documents:,} documents, "
          f"{count:,} instances, {total:.2f} CPU s")
    print(f"{'stage':<12}{'CPU s':>8}{'share':>8}{'µs/document':>13}{'µs/instance':>13}")
    for stage, spent in [*seconds.items(), ("total", total)]:
        print(f"{stage:<12}{spent:>8.2f}{spent / total:>8.1%}"
              f"{spent / breakdown.documents * 1e6:>13.1f}{spent / count * 1e6:>13.1f}")


def print_ratios(ours: Run, other: Run) -> None:
    mine, theirs = ours.usage, other.usage
    print(f"  {ours.shape} {ours.megabytes:.3g} MB, {ours.label} / {other.label}: instances/CPU-s "
          f"{ours.instances / mine.cpu / (other.instances / theirs.cpu):.2f}x, "
          f"wall {mine.wall / theirs.wall:.3f}x, system s {mine.system / theirs.system:.3f}x, "
          f"minor faults {mine.minor_faults / theirs.minor_faults:.3f}x, written "
          f"{mine.written / max(theirs.written, 1):.3f}x, peak RSS (sum) "
          f"{mine.rss_sum / theirs.rss_sum:.3f}x, instances "
          f"{ours.instances / other.instances:.3f}x, output bytes/instance "
          f"{ours.output_bytes / ours.instances:.0f} / {other.output_bytes / other.instances:.0f}")


def _sizes(text: str) -> list[float]:
    return [float(s) for s in text.split(",") if s.strip()]


def _shapes(text: str) -> list[str]:
    shapes = [s.strip() for s in text.split(",") if s.strip()]
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown shape(s) {', '.join(unknown)}: choose from {', '.join(SHAPES)}")
    return shapes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=_sizes, default=[1.0, 5.0, 20.0], help="MB, e.g. 1,5,20")
    parser.add_argument("--shapes", type=_shapes, default=list(SHAPES),
                        help="corpus shapes, e.g. short,web (default: all)")
    parser.add_argument("--workers", type=lambda t: [int(w) for w in t.split(",")],
                        default=[1], help="DirectRunner worker counts, e.g. 1,2")
    parser.add_argument("--reference", type=pathlib.Path,
                        help="checkout of google-research/bert: run the original too")
    parser.add_argument("--baseline", type=pathlib.Path,
                        help="another checkout of this project (e.g. a git worktree of an "
                             "older commit): its pipeline runs beside, 1 worker, for ratios")
    parser.add_argument("--reference-sizes", type=_sizes, default=[1.0, 5.0],
                        help="sizes the original runs on (default 1,5)")
    parser.add_argument("--memory-size", type=float,
                        help="one more run of this many MB on 1 worker (200: minutes)")
    parser.add_argument("--jsonl", action="store_true",
                        help="also the same documents as JSONL, split into sentences "
                             "(--input_format=jsonl, the default splitter), 1 worker")
    parser.add_argument("--tokenizer_engines", action="store_true",
                        help="with --tokenizer_json: each file also with "
                             "--tokenizer_engine=tokenizers, beside the default auto")
    parser.add_argument("--packed", action="store_true",
                        help="also the same corpus with --pack_sequences, 1 worker")
    parser.add_argument("--parquet", action="store_true",
                        help="also the same corpus with --output_format=parquet, 1 worker")
    parser.add_argument("--formats", action="store_true",
                        help="also the same corpus as Parquet, as MDS in each layout (and "
                             "compact with zstd) and as Megatron-LM's indexed datasets (the "
                             "tokenized corpus once), 1 worker: output bytes per corpus token, "
                             "CPU per MB and instances per CPU-second of each format")
    parser.add_argument("--evaluation", action="store_true",
                        help="also the same corpus with a 1%% validation split "
                             "(--validation_fraction=0.01, the near-copy guard included) and "
                             "with --decontaminate against 10 MB of benchmark text, 1 worker, "
                             "in turns (--repeat)")
    parser.add_argument("--stages", action="store_true",
                        help="per-stage CPU time of the pipeline's work, no runner, on 1 MB")
    parser.add_argument("--spm_model", type=pathlib.Path,
                        help="a SentencePiece model: each corpus also runs with "
                             "--spm_model_file (1 worker), beside WordPiece")
    parser.add_argument("--tokenizer_json", type=lambda text: [pathlib.Path(p) for p in
                                                           text.split(",") if p],
                        default=[], help="comma-separated tokenizer.json files: each corpus "
                        "also runs with each as --tokenizer_file (1 worker), beside WordPiece")
    parser.add_argument("--seed", type=int, default=0, help="corpus shuffle seed")
    parser.add_argument("--dedup", type=lambda text: [m.strip() for m in text.split(",")],
                        help="dedup modes to compare with none on each corpus, e.g. "
                             "none,exact,near (1 worker)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --dedup or --parquet: each configuration this many "
                             "times in turns, medians compared")
    args = parser.parse_args(argv)

    print(f"{os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB; flags: "
          + " ".join(FLAGS))
    print(HEADER, flush=True)
    originals: dict[str, Run] = {}  # per shape, the original's latest run (sizes ascend)
    for shape, size in ((shape, size) for shape in args.shapes for size in args.sizes):
        corpus = corpus_path(size, shape=shape, seed=args.seed)
        if args.dedup:
            print_dedup_costs(corpus, args.dedup, args.repeat)
            continue
        runs = [run_ours(corpus, workers) for workers in args.workers]
        for run in runs:
            print(_row(run), flush=True)
        if args.spm_model:
            pieces = run_ours(corpus, 1, label="spm",
                              flags=(f"--spm_model_file={args.spm_model.resolve()}",))
            print(_row(pieces), flush=True)
            print_ratios(pieces, runs[0])
        for path in args.tokenizer_json:
            engines = ("auto", "tokenizers") if args.tokenizer_engines else ("auto",)
            for engine in engines:
                encoded = run_ours(corpus, 1, label=path.stem + (
                    f" {engine}" if args.tokenizer_engines else ""), flags=(
                    f"--tokenizer_file={path.resolve()}", f"--tokenizer_engine={engine}"))
                print(_row(encoded), flush=True)
                print_ratios(encoded, runs[0])
        if args.jsonl:
            jsonl = run_ours(jsonl_path(corpus), 1, label="jsonl",
                             flags=("--input_format=jsonl",))
            print(_row(jsonl), flush=True)
            print_ratios(jsonl, runs[0])
        if args.packed:
            packed = run_ours(corpus, 1, label="packed", flags=("--pack_sequences",))
            print(_row(packed), flush=True)
            print_ratios(packed, runs[0])
        if args.parquet:
            print_in_turns(corpus, runs[0], {"parquet": ("--output_format=parquet",)},
                           args.repeat)
        if args.formats:  # Megatron: the tokenized corpus once, beside the instances (dupe 10)
            formats = [runs[0], *(run_ours(corpus, 1, label=label, flags=flags) for label, flags in [
                ("parquet", ("--output_format=parquet",)),
                ("mds modernbert", ("--output_format=mds",)),
                ("mds compact", ("--output_format=mds", "--mds_layout=compact")),
                ("mds compact zstd", ("--output_format=mds", "--mds_layout=compact",
                                      "--mds_compression=zstd")),
                ("megatron", ("--output_format=megatron", "--dupe_factor=1"))])]
            for run in formats[1:]:
                print(_row(run), flush=True)
            name = {id(runs[0]): "tfrecord"}
            print(f"  {shape} {size:g} MB, output bytes per corpus token: " + ", ".join(
                f"{name.get(id(run), run.label.split(',')[0])} "
                f"{run.output_bytes / max(1, run.tokens):.2f}" for run in formats)
                + "; CPU s per MB: " + ", ".join(
                f"{name.get(id(run), run.label.split(',')[0])} {run.cpu / run.megabytes:.3f}"
                for run in formats))
        if args.evaluation:
            print_in_turns(corpus, runs[0], {
                "validation 1%": ("--validation_fraction=0.01",),
                "decontaminate 10 MB": (f"--decontaminate={evaluation_benchmark()}",)},
                args.repeat)
        if args.baseline:
            baseline = run_ours(corpus, 1, checkout=args.baseline.resolve(), label="baseline")
            print(_row(baseline), flush=True)
            print_ratios(runs[0], baseline)
        if args.reference and size in args.reference_sizes:
            originals[shape] = original = run_original(corpus, args.reference)
            print(_row(original), flush=True)
            for run in runs:
                print_ratios(run, original)
        elif shape in originals:  # a size the original did not run: its rate per core
            original = originals[shape]
            for run in runs:
                print(f"  {shape} {size:g} MB, {run.label}: instances/CPU-s "
                      f"{run.instances / run.cpu / (original.instances / original.cpu):.2f}x"
                      f" the original's at {original.megabytes:.3g} MB")
        if 1 in args.workers and len(runs) > 1:
            one = runs[args.workers.index(1)]
            print(f"  {shape} {size:g} MB, wall speed-up over 1 worker: " + ", ".join(
                f"{run.label}: {one.usage.wall / run.usage.wall:.2f}x" for run in runs if run is not one))
    if args.memory_size:
        for shape in args.shapes:
            corpus = corpus_path(args.memory_size, shape=shape, seed=args.seed)
            print(_row(run_ours(corpus, 1)), flush=True)
    if args.stages:
        for shape in args.shapes:
            print_stages(corpus_path(1, shape=shape, seed=args.seed))
            if args.spm_model:
                print_stages(corpus_path(1, shape=shape, seed=args.seed), label=" (sentencepiece)",
                             flags=(f"--spm_model_file={args.spm_model.resolve()}",))
            for path in args.tokenizer_json:
                print_stages(corpus_path(1, shape=shape, seed=args.seed), label=f" ({path.stem})",
                             flags=(f"--tokenizer_file={path.resolve()}",))


if __name__ == "__main__":
    main()
