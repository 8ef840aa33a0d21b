"""NVIDIA LDDL's BERT pre-training preprocessor beside this pipeline, in turns.

    python bench/lddl.py --shapes short,tiny --size 20 --repeat 3

Each shape's corpus (bench/corpus.py) is run by ours (1 worker, bench/pipeline.py's
`run_ours`) and by LDDL's `preprocess_bert_pretrain`, A B A B A B, each a child
process measured by bench/pipeline.py's `measure` (wait4: the user+sys CPU of the
whole process tree, the same figure as a getrusage(RUSAGE_CHILDREN) delta, so
dask's worker process counts); then the medians of instances per CPU-second.

The venv (LDDL 0.1.0 pins 2021 dask and MPI, so it is not installable as it
stands): `python -m venv ~/.cache/bert-pretraining-data/clients/lddl` (this
interpreter's, 3.11) with PACKAGES below, then LDDL's work tree at LDDL_COMMIT
(`git archive` of the mirror that `fetch github:NVIDIA/LDDL` makes)
`pip install --no-deps`.
Nothing of LDDL is edited: SHIM, run as the main script, patches three things
before LDDL's `console_script`, and dask's spawned worker re-imports it as
`__mp_main__`, so they hold there too:
- `nltk.download` does nothing (no network), and `nltk.tokenize.sent_tokenize`
  splits at tabs: the corpus is already one sentence per line, there is no punkt
  data here, and ours splits at newlines too, so neither pays for sentence
  splitting (LDDL with punkt would pay more);
- `dask.bytes.open_files` is fsspec's, where 2021 dask re-exported it (only
  LDDL's binned text output uses it; the import fails without it);
- dask's `dataframe.convert-string` is off, as in 2021 dask: on, it casts the
  masked positions' bytes column to str and fails; and its document shuffle is
  dask's task-based one, 2021 dask's: 2024's default, p2p, fails here now and
  then (its barrier task lost to graph fusion, dask/distributed#7816).

Input: LDDL reads `--wikipedia DIR` as DIR/en/*.txt, one document a line, its id
first; each corpus becomes one such file (cached, untimed), sentences tab-joined.
Flags (LDDL_FLAGS) making its work ours: the same vocab (BertTokenizerFast, lower-
cased by default), --target-seq-length 128, --short-seq-prob 0.1,
--duplicate-factor 10, --masking (static masking, as ours) with --masked-lm-ratio
0.15 (LDDL masks round(0.15 * length) tokens with no cap: at most 19 of 128, so
ours' cap of 20 never binds either), --sample-ratio 1.0 (its default drops 10% of
documents), no --bin-size (binning off), one dask worker of one thread
(`--schedule local`: the same pipeline as under mpirun, without MPI), and
--num-blocks of one per MB of corpus.

What LDDL still does differently: it shuffles the documents (a dask shuffle)
and draws NSP's random next documents within its block (1 MB), not the corpus;
it writes Parquet rows of space-joined token strings and masked positions as
.npy bytes (ids and padding are left to its data loader), where ours writes
TFRecord examples of padded ids; its randomness is unseeded, so instance counts
vary a little between runs. Instances are its Parquet rows: one NSP pair each,
the unit of ours' manifest `total_instances`. It runs here on glibc malloc
(its README suggests jemalloc under mpirun).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import pyarrow.parquet as pq  # noqa: E402

from bench.corpus import CACHE_DIR, MB, SHAPES, corpus_path, read_documents  # noqa: E402
from bench.pipeline import HEADER, VOCAB, Run, _row, measure, run_ours  # noqa: E402

VENV = pathlib.Path.home() / ".cache" / "bert-pretraining-data" / "clients" / "lddl"
MIRROR = pathlib.Path("/work/.mirror/NVIDIA+LDDL/repo")
LDDL_COMMIT = "e4006d2bad94113a39ba534d4e8af81db3c40642"  # master, 2024-04-10
PACKAGES = ("dask==2024.2.1", "distributed==2024.2.1", "pandas==2.2.3", "numpy==1.26.4",
            "pyarrow==14.0.2", "transformers==4.46.3", "tokenizers==0.20.3", "nltk==3.10.4")
SHIM = '''import dask, dask.bytes, fsspec, nltk
nltk.download = lambda *args, **kwargs: True
nltk.tokenize.sent_tokenize = lambda text, language="english": text.split("\\t")
dask.bytes.open_files = fsspec.open_files
dask.config.set({"dataframe.convert-string": False, "dataframe.shuffle.method": "tasks"})
if __name__ == "__main__":
    from lddl.dask.bert.pretrain import console_script
    console_script()
'''
LDDL_FLAGS = ("--schedule=local", "--local-n-workers=1", "--local-threads-per-worker=1",
              f"--vocab-file={VOCAB}", "--target-seq-length=128", "--short-seq-prob=0.1",
              "--duplicate-factor=10", "--masking", "--masked-lm-ratio=0.15",
              "--sample-ratio=1.0", "--seed=12345")


def ensure_venv(source: pathlib.Path) -> pathlib.Path:
    """LDDL's venv, built once from PACKAGES and `source` (the fetched bare mirror
    or a work tree); a changed recipe rebuilds it. Returns its python."""
    recipe = "\n".join([*PACKAGES, LDDL_COMMIT])
    marker = VENV / "recipe.txt"
    if not (marker.exists() and marker.read_text() == recipe):
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, *PACKAGES], check=True)
        with tempfile.TemporaryDirectory(prefix="lddl-src-") as tree:
            if (source / "setup.py").exists():
                shutil.copytree(source, tree, dirs_exist_ok=True)
            else:
                archive = subprocess.run(["git", "--git-dir", str(source), "archive",
                                          LDDL_COMMIT], check=True, capture_output=True)
                subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
            subprocess.run([*pip, "--no-deps", tree], check=True)
        marker.write_text(recipe)
    (VENV / "lddl_shim.py").write_text(SHIM)
    return VENV / "bin" / "python"


def lddl_source(corpus: pathlib.Path) -> pathlib.Path:
    """The corpus as LDDL's Wikipedia source: DIR/en/0.txt, a document a line
    ("id sentence<TAB>sentence..."), cached beside the corpus."""
    folder = CACHE_DIR / "lddl" / corpus.stem
    shard = folder / "en" / "0.txt"
    if not shard.exists():
        shard.parent.mkdir(parents=True, exist_ok=True)
        partial = shard.with_name(f".0.txt.{os.getpid()}")
        with open(partial, "w", encoding="utf-8") as out:
            for number, (_, lines) in enumerate(read_documents(corpus)):
                out.write(f"{number} " + "\t".join(lines) + "\n")
        os.replace(partial, shard)
    return folder


def run_lddl(python: pathlib.Path, corpus: pathlib.Path) -> Run:
    """One LDDL run on `corpus`: its Parquet rows are the instances."""
    blocks = max(1, round(corpus.stat().st_size / MB))
    with tempfile.TemporaryDirectory(prefix="bert-bench-lddl-") as tmp:
        out = pathlib.Path(tmp) / "out"
        command = [str(python), str(VENV / "lddl_shim.py"), *LDDL_FLAGS,
                   f"--wikipedia={lddl_source(corpus)}", f"--sink={out}",
                   f"--num-blocks={blocks}"]
        usage = measure(command, pathlib.Path(tmp) / "log", cwd=pathlib.Path(tmp))
        instances = sum(pq.ParquetFile(path).metadata.num_rows
                        for path in out.glob("*.parquet"))
    return Run("LDDL, 1 worker", corpus.name.split("-")[0],
               corpus.stat().st_size / MB, instances, usage)


def _rate(runs: list[Run]) -> float:
    return statistics.median(run.instances / run.cpu for run in runs)


def compare(corpus: pathlib.Path, python: pathlib.Path, repeat: int) -> str:
    """Ours and LDDL on `corpus` in turns, `repeat` times each (a shared machine's
    speed drifts); each run's row as it ends, then one line of medians."""
    runs: dict[str, list[Run]] = {"ours": [], "LDDL": []}
    for _ in range(repeat):
        runs["ours"].append(run_ours(corpus, 1))
        print(_row(runs["ours"][-1]), flush=True)
        runs["LDDL"].append(run_lddl(python, corpus))
        print(_row(runs["LDDL"][-1]), flush=True)
    ours, lddl = runs["ours"], runs["LDDL"]
    return (f"  {ours[0].shape} {ours[0].megabytes:.3g} MB, median of {repeat}: ours "
            f"{statistics.median(r.instances for r in ours):,.0f} instances, "
            f"{statistics.median(r.cpu for r in ours):.1f} CPU s, {_rate(ours):,.0f}/CPU-s; "
            f"LDDL {statistics.median(r.instances for r in lddl):,.0f} instances, "
            f"{statistics.median(r.cpu for r in lddl):.1f} CPU s, {_rate(lddl):,.0f}/CPU-s; "
            f"ours / LDDL = {_rate(ours) / _rate(lddl):.2f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="short,tiny",
                        help=f"comma-separated, of {','.join(SHAPES)}")
    parser.add_argument("--size", type=float, default=20.0, help="corpus MB")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tool, in turns")
    parser.add_argument("--seed", type=int, default=0, help="corpus shuffle seed")
    parser.add_argument("--lddl-source", type=pathlib.Path, default=MIRROR,
                        help="LDDL's bare git mirror (fetch github:NVIDIA/LDDL) or a work tree")
    args = parser.parse_args(argv)
    shapes = [shape.strip() for shape in args.shapes.split(",")]
    if unknown := set(shapes) - set(SHAPES):
        parser.error(f"unknown shapes {sorted(unknown)}; known: {', '.join(SHAPES)}")
    python = ensure_venv(args.lddl_source)
    corpora = [corpus_path(args.size, shape=shape, seed=args.seed) for shape in shapes]
    for corpus in corpora:
        lddl_source(corpus)
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; LDDL {LDDL_COMMIT[:12]}: "
          + " ".join(LDDL_FLAGS[3:]))
    print(HEADER, flush=True)
    summaries = [compare(corpus, python, args.repeat) for corpus in corpora]
    print("\n".join(summaries))


if __name__ == "__main__":
    main()
