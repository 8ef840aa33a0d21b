"""What a mixture costs beside one run over the same sources concatenated.

Not a test: it prints figures. Three sources of three shapes (bench/corpus.py:
wikitext's long articles, web-like documents, tiny ones), `--size` MB each,
every weight 1, so both runs make the same documents' instances; run in turns
(`--repeat`), 1 worker, the default flags of bench/pipeline.py and
`--dedup=exact` (the cross-source dedup is part of what a mixture does).
What differs: a reader per source, keys by source, batches per source, the
source stamped on every instance and written as a feature, and the sources'
figures counted for the manifest.

    python bench/mixture.py --size 5 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import corpus_path  # noqa: E402
from bench.pipeline import FLAGS, VOCAB, Usage, _entry, measure  # noqa: E402

SHAPES = ("wikitext", "web", "tiny")


def run(inputs: list[str], tmp: pathlib.Path, label: str) -> tuple[Usage, int]:
    """One run over the sources, as a mixture or concatenated; (usage, instances)."""
    out = tmp / f"out-{label}"
    if label == "mixture":
        mixture = tmp / "mixture.json"
        mixture.write_text(json.dumps({"sources": [
            {"name": shape, "input_file": path} for shape, path in zip(SHAPES, inputs)]}))
        source = [f"--mixture={mixture}"]
    else:
        source = [f"--input_file={','.join(inputs)}", "--dupe_factor=1"]
    entry, cwd = _entry(ROOT)
    flags = [flag for flag in FLAGS if not flag.startswith("--dupe_factor")]
    command = [*entry, *source, f"--output_dir={out}", f"--vocab_file={VOCAB}", *flags,
               "--dedup=exact",
               "--progress=none", "--direct_running_mode=in_memory", "--overwrite"]
    usage = measure(command, tmp / f"{label}.log", cwd=cwd)
    return usage, json.loads((out / "manifest.json").read_text())["total_instances"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=5, help="MB per source")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, in turns")
    args = parser.parse_args(argv)
    inputs = [str(corpus_path(args.size, shape=shape)) for shape in SHAPES]
    runs: dict[str, list[tuple[Usage, int]]] = {"concatenated": [], "mixture": []}
    with tempfile.TemporaryDirectory(prefix="bert-bench-") as tmp:
        for _ in range(args.repeat):
            for label in runs:
                runs[label].append(run(inputs, pathlib.Path(tmp), label))
    print(f"three sources of {args.size:g} MB ({', '.join(SHAPES)}), weight 1, dupe 1, "
          f"1 worker, {args.repeat} runs of each in turns (medians)")
    print(f"{'run':<14}{'instances':>11}{'CPU s':>8}{'wall s':>8}{'peak RSS MiB':>14}")
    medians = {}
    for label, measured in runs.items():
        cpu = statistics.median(usage.cpu for usage, _ in measured)
        wall = statistics.median(usage.wall for usage, _ in measured)
        rss = statistics.median(usage.rss_sum for usage, _ in measured) / 2**20
        medians[label] = (cpu, wall)
        print(f"{label:<14}{measured[0][1]:>11,}{cpu:>8.2f}{wall:>8.2f}{rss:>14.0f}")
    (cpu, wall), (base_cpu, base_wall) = medians["mixture"], medians["concatenated"]
    print(f"mixture / concatenated: CPU {cpu / base_cpu:.3f}x, wall {wall / base_wall:.3f}x")


if __name__ == "__main__":
    main()
