"""Where a multi-worker DirectRunner run's wall time goes.

Not a test: it prints figures. Runs the pipeline on a bench corpus with N
DirectRunner workers (`multi_processing`) and reports
- the driver's and the workers' CPU (the run's own process and its children);
- each of the runner's stages that took a while: when it started, how long
  it took, and how many of the machine's cores were busy meanwhile (from
  /proc/stat, sampled every 0.5 s; every process on the machine
  counts, so run it on an otherwise idle machine);
- how long the runner took to stop its worker processes after the last stage;
- with `--ceiling`: the same corpus run with one worker alone, then as two
  independent one-worker runs at once: how much two processes slow each
  other on this machine whatever the pipeline does (the ceiling for two
  workers' speed-up).

    python bench/workers.py --shape web --size 200 --workers 2 --ceiling

The stages are timed by wrapping the FnApiRunner's `_execute_bundle` and its
worker handlers' `close` in the measured process (instrumentation only: the
pipeline and its output are unchanged).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import SHAPES, corpus_path  # noqa: E402
from bench.pipeline import FLAGS, VOCAB  # noqa: E402

# Runs the pipeline's command line with the runner's stages timed; the last
# line it prints (stderr) is a JSON summary.
_TIMED_RUN = r"""
import atexit, json, resource, sys, time
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers
start = time.time()
stages, stops = [], []
execute = fn_runner.FnApiRunner._execute_bundle
def timed_execute(self, context, bundle_manager, bundle_input):
    began = time.time()
    try:
        return execute(self, context, bundle_manager, bundle_input)
    finally:
        stages.append((bundle_manager.stage.name, began - start, time.time() - began))
fn_runner.FnApiRunner._execute_bundle = timed_execute
close = worker_handlers.GrpcWorkerHandler.close
def timed_close(self):
    began = time.time()
    close(self)
    stops.append((began - start, time.time() - began))
worker_handlers.GrpcWorkerHandler.close = timed_close
def report():
    own, children = (resource.getrusage(who) for who in
                     (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(json.dumps({"stages": stages, "stops": stops, "wall": time.time() - start,
                      "driver_cpu": own.ru_utime + own.ru_stime,
                      "workers_cpu": children.ru_utime + children.ru_stime}),
          file=sys.stderr, flush=True)
atexit.register(report)
sys.argv[0] = "create-pretraining-data"
from bert_pretraining_data.pipeline.cli import create_pretraining_data
create_pretraining_data()
"""


def _busy_cores() -> tuple[int, int]:
    """(busy jiffies, all jiffies) of the machine so far, summed over cores."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


class CoreSampler:
    """Samples the machine's busy cores every `interval` seconds in a thread."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.samples: list[tuple[float, float]] = []  # (seconds since start, busy cores)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._cores = len(pathlib.Path("/proc/stat").read_text().split("\ncpu")) - 1

    def __enter__(self) -> "CoreSampler":
        self.start = time.time()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        busy, total = _busy_cores()
        while not self._stop.wait(self.interval):
            now_busy, now_total = _busy_cores()
            cores = self._cores * (now_busy - busy) / max(1, now_total - total)
            self.samples.append((time.time() - self.start, cores))
            busy, total = now_busy, now_total

    def mean(self, begin: float, end: float) -> float:
        inside = [cores for at, cores in self.samples if begin < at <= end + self.interval]
        return statistics.fmean(inside) if inside else float("nan")


def _command(corpus: pathlib.Path, out: pathlib.Path, workers: int) -> list[str]:
    mode = "in_memory" if workers == 1 else "multi_processing"
    return [sys.executable, "-c", _TIMED_RUN, f"--input_file={corpus}",
            f"--output_dir={out}", f"--vocab_file={VOCAB}", *FLAGS, "--dedup=none",
            "--progress=none", f"--direct_running_mode={mode}",
            f"--direct_num_workers={workers}"]


def timed_runs(corpus: pathlib.Path, workers: int, copies: int = 1
               ) -> tuple[list[dict], CoreSampler]:
    """`copies` runs of the corpus at once, each with `workers` workers."""
    with tempfile.TemporaryDirectory(prefix="bert-workers-") as tmp, CoreSampler(0.5) as cores:
        runs = [subprocess.Popen(_command(corpus, pathlib.Path(tmp) / f"out{i}", workers),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for i in range(copies)]
        outputs = [run.communicate()[1] for run in runs]
    for run, output in zip(runs, outputs):
        if run.returncode:
            raise RuntimeError(f"run failed ({run.returncode}):\n{output[-2000:]}")
    return [json.loads(output.strip().splitlines()[-1]) for output in outputs], cores


def print_timeline(summary: dict, cores: CoreSampler, min_seconds: float) -> None:
    print(f"wall {summary['wall']:.1f} s; CPU: driver {summary['driver_cpu']:.1f} s, "
          f"workers {summary['workers_cpu']:.1f} s")
    print(f"{'start s':>8} {'took s':>7} {'busy cores':>10}  stage")
    for name, began, took in summary["stages"]:
        if took >= min_seconds:
            print(f"{began:8.1f} {took:7.1f} {cores.mean(began, began + took):10.2f}  "
                  f"{name[:110]}")
    last = max(began + took for _, began, took in summary["stages"])
    stops = summary["stops"]
    if stops:
        print(f"after the last stage ({last:.1f} s): the runner stopped {len(stops)} worker "
              f"handler(s) one after the other, {', '.join(f'{s:.2f}' for _, s in stops)} s "
              f"(until {max(a + s for a, s in stops):.1f} s)")
    print(f"busy cores, each {cores.interval:g} s: "
          + " ".join(f"{c:.1f}" for _, c in cores.samples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=SHAPES, default="web")
    parser.add_argument("--size", type=float, default=20, help="MB of the corpus")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--min-stage-seconds", type=float, default=0.3,
                        help="stages shorter than this are left out of the timeline")
    parser.add_argument("--ceiling", action="store_true",
                        help="also run one worker alone, then two one-worker runs at once")
    args = parser.parse_args()
    corpus = corpus_path(args.size, shape=args.shape)
    print(f"{args.shape} {args.size:g} MB ({corpus.name}), {args.workers} workers")
    (summary,), cores = timed_runs(corpus, args.workers)
    print_timeline(summary, cores, args.min_stage_seconds)
    if args.ceiling:
        (alone,), _ = timed_runs(corpus, 1)
        paired, _ = timed_runs(corpus, 1, copies=2)
        walls = [run["wall"] for run in paired]
        print(f"one worker alone: wall {alone['wall']:.1f} s, CPU {alone['driver_cpu']:.1f} s; "
              f"{args.workers} workers: {alone['wall'] / summary['wall']:.2f}x its wall")
        print(f"two one-worker runs at once: wall {walls[0]:.1f} and {walls[1]:.1f} s, CPU "
              f"{paired[0]['driver_cpu']:.1f} and {paired[1]['driver_cpu']:.1f} s: two "
              f"processes reach at most {2 * alone['wall'] / max(walls):.2f}x one on this "
              f"machine")


if __name__ == "__main__":
    main()
