"""The fixed start-up of a run and of each DirectRunner worker, phase by phase.

Not a test: it prints figures. The job is the bundled sample corpus (4 KB),
so nearly all of its CPU is what every run pays whatever its size. Each
repetition is a fresh process of the checkout's own code (this one, and with
`--baseline DIR` another checkout, side by side, alternating); CPU seconds
(user + system, `resource.getrusage`) are given as the minimum over the
repetitions, the machine being shared.

Driver phases (one process, `--direct_running_mode=in_memory`, where the
driver also runs every DoFn): the interpreter, `import apache_beam`, numba,
the project's modules, flags and vocabulary, `build_pipeline`, the run
(Beam's runner set-up, stage fusion, DoFn set-up, the sample's work), and
publishing. Then the same job on 2 workers
(`--direct_running_mode=multi_processing`): the driver's and each worker
process's CPU seconds, a worker being timed by a launcher that Beam starts in
place of the Python executable.

    python bench/startup.py --repeat 5 --baseline /tmp/main-checkout
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.pipeline

from bench.pipeline import VOCAB, _entry  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "sample_text.txt"
PHASES = ("interpreter", "import apache_beam", "import numba", "import the project",
          "flags, vocabulary", "build_pipeline", "run", "publish")

# Run in a fresh interpreter from the checkout's directory: argv[1] is where
# the phases go (JSON), argv[2] a launcher to start workers with (or ""), the
# rest the job's flags. It does what the command line and `main.create_dataset`
# do, timing each step.
_DRIVER = r"""
import json, resource, sys
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
marks = [("interpreter", cpu())]
from bert_pretraining_data.pipeline.cli import pipeline_process
with pipeline_process():
    import apache_beam
    marks.append(("import apache_beam", cpu()))
    import numba
    marks.append(("import numba", cpu()))
    from bert_pretraining_data.pipeline import main
    from bert_pretraining_data.pipeline.build import build_pipeline
    from bert_pretraining_data.pipeline.options import parse_args
    from bert_pretraining_data.pipeline.prepare import prepare, run_to_completion
    from bert_pretraining_data.pipeline.publish import publish
    from bert_pretraining_data.pipeline.run_manifest import staged_manifest
marks.append(("import the project", cpu()))
out, launcher, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
if launcher:
    sys.executable = launcher
config, beam_args = parse_args(argv)
prepared = prepare(config, beam_args)
marks.append(("flags, vocabulary", cpu()))
pipeline = prepared.new_pipeline()
build_pipeline(pipeline, config=config, stages=prepared.stages, patterns=prepared.patterns,
               output=prepared.output)
marks.append(("build_pipeline", cpu()))
run_to_completion(pipeline)
marks.append(("run", cpu()))
publish(prepared.output, staged_manifest(prepared.publish_plan(None)),
        replaces=prepared.replaces)
marks.append(("publish", cpu()))
seconds, before = {}, 0.0
for name, at in marks:
    seconds[name], before = at - before, at
json.dump(seconds, open(out, "w"))
"""

# Started by Beam in place of `python -m apache_beam.runners.worker.sdk_worker_main`:
# runs the real worker, then records its CPU seconds in the directory argv[1].
_LAUNCHER = """#!{python}
import os, resource, subprocess, sys
code = subprocess.call([{python!r}, *sys.argv[1:]])
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(os.path.join({directory!r}, f"worker-{{os.getpid()}}.json"), "w") as out:
    out.write(str(usage.ru_utime + usage.ru_stime))
sys.exit(code)
"""


def _job(output: pathlib.Path, *flags: str) -> list[str]:
    return [f"--input_file={SAMPLE}", f"--vocab_file={VOCAB}", f"--output_dir={output}",
            "--overwrite", *flags]


def driver_phases(checkout: pathlib.Path) -> dict[str, float]:
    """CPU seconds per phase of one in-process run of the sample job."""
    entry, cwd = _entry(checkout)
    with tempfile.TemporaryDirectory(prefix="bert-startup-") as tmp:
        result = pathlib.Path(tmp) / "phases.json"
        subprocess.run([entry[0], "-c", _DRIVER, str(result), "",
                        *_job(pathlib.Path(tmp) / "out", "--direct_running_mode=in_memory")],
                       cwd=cwd, check=True, capture_output=True)
        return json.loads(result.read_text())


def two_workers(checkout: pathlib.Path) -> tuple[float, list[float]]:
    """(driver CPU seconds, each worker's) of the sample job on 2 worker processes."""
    entry, cwd = _entry(checkout)
    with tempfile.TemporaryDirectory(prefix="bert-startup-") as tmp:
        directory = pathlib.Path(tmp)
        launcher = directory / "python"
        launcher.write_text(_LAUNCHER.format(python=entry[0], directory=str(directory)))
        launcher.chmod(0o755)
        result = directory / "phases.json"
        subprocess.run([entry[0], "-c", _DRIVER, str(result), str(launcher),
                        *_job(directory / "out", "--direct_running_mode=multi_processing",
                              "--direct_num_workers=2")],
                       cwd=cwd, check=True, capture_output=True)
        driver = sum(json.loads(result.read_text()).values())
        workers = [float(path.read_text()) for path in sorted(directory.glob("worker-*.json"))]
    return driver, workers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh runs per checkout")
    parser.add_argument("--baseline", type=pathlib.Path,
                        help="another checkout of this project, measured alternately")
    args = parser.parse_args(argv)
    checkouts = {"ours": ROOT}
    if args.baseline:
        checkouts["baseline"] = args.baseline.resolve()
    phases = {label: [] for label in checkouts}
    pools = {label: [] for label in checkouts}
    for _ in range(args.repeat):
        for label, checkout in checkouts.items():
            phases[label].append(driver_phases(checkout))
            pools[label].append(two_workers(checkout))
    labels = list(checkouts)
    print(f"sample job ({SAMPLE.stat().st_size:,} bytes), CPU seconds, minimum of "
          f"{args.repeat} fresh runs each")
    print(f"{'phase (1 process)':<24}" + "".join(f"{label:>10}" for label in labels))
    for phase in PHASES:
        print(f"{phase:<24}" + "".join(
            f"{min(run[phase] for run in phases[label]):>10.2f}" for label in labels))
    totals = {label: min(sum(run.values()) for run in phases[label]) for label in labels}
    print(f"{'total':<24}" + "".join(f"{totals[label]:>10.2f}" for label in labels))
    print(f"{'2 workers: driver':<24}" + "".join(
        f"{min(driver for driver, _ in pools[label]):>10.2f}" for label in labels))
    print(f"{'2 workers: per worker':<24}" + "".join(
        f"{min(min(w) for _, w in pools[label] if w):>10.2f}" for label in labels))
    print(f"{'  (median of workers)':<24}" + "".join(
        f"{statistics.median(x for _, w in pools[label] for x in w):>10.2f}"
        for label in labels))
    if len(labels) == 2:
        print(f"ours / baseline, 1 process: {totals['ours'] / totals['baseline']:.2f}x")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
