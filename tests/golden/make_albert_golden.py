#!/usr/bin/env python
"""Regenerate golden outputs of ALBERT's create_pretraining_data.py.

ALBERT's script (google-research/albert) is run unmodified in a subprocess,
on its WordPiece path (``--vocab_file``, no ``--spm_model_file``), and its
TFRecord output is decoded and stored as gzipped JSON lines (one object per
record, in record order), like tests/golden/make_pipeline_golden.py does for
the original BERT script.

The runner (``_RUNNER``) does, in this order, before the script runs:
  1. imports tensorflow and aliases ``tensorflow`` to ``tensorflow.compat.v1``
     in sys.modules (ALBERT already imports ``tensorflow.compat.v1``; the alias
     only mirrors the BERT runner);
  2. puts stub modules in sys.modules for ``tensorflow_hub`` and
     ``sentencepiece``, which ALBERT's tokenization.py imports at top level
     but only uses for hub modules and ``--spm_model_file``; any attribute
     access on a stub raises, so a run that needed them would fail loudly;
  3. imports the checkout as the package ``albert`` (the script does
     ``from albert import tokenization``), whatever the directory is called;
  4. seeding shim: takes S = the integer value of the last
     ``--random_seed=`` argument (every case passes it) and calls
     ``random.seed(S)`` (the global ``random`` module) and
     ``numpy.random.seed(S)`` (numpy's legacy global RandomState, MT19937
     seeded with init_genrand(S), the same stream as
     ``numpy.random.RandomState(S)``), then runs the script with
     ``runpy.run_path(..., run_name="__main__")``. Nothing else is seeded.
     The script itself seeds its own ``random.Random(FLAGS.random_seed)``;
     the only global generator it draws from is numpy's, in
     ``np.random.choice`` (one draw per visited n-gram candidate); it never
     draws from the global ``random`` module, which is seeded only for safety.
     Unseeded, ALBERT's output is not reproducible.

Usage:
  python tests/golden/make_albert_golden.py \
      --albert_dir /path/to/albert --out_dir tests/data/golden_albert \
      --check_determinism

Outputs (under --out_dir):
  <case>/out-<k>.jsonl.gz           decoded records of the k-th output file
  cases.json                        flags and record counts of every case
  wikitext2_valid_sop_stats.json    instance_stats() + stats_albert.span_stats()
                                    of SOP runs on --stats_corpus, one per
                                    --stats_seeds seed, with mean and sd
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

TESTS_DIR = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = TESTS_DIR / "data"
DEFAULT_STATS_CORPUS = DEFAULT_DATA_DIR / "wikitext2_valid.txt"

UNCASED_VOCAB = "bert-base-uncased-vocab.txt"
CHINESE_VOCAB = "bert-base-chinese-vocab.txt"

# Defaults of ALBERT's flags (commit b772393). All are passed explicitly,
# except spm_model_file, whose default None must stay unset for the WordPiece
# path (flags whose value is None are not passed).
ORIGINAL_DEFAULTS: dict[str, Any] = {
    "spm_model_file": None,
    "input_file_mode": "r",
    "do_lower_case": True,
    "do_whole_word_mask": True,
    "do_permutation": False,
    "favor_shorter_ngram": True,
    "random_next_sentence": False,
    "max_seq_length": 512,
    "ngram": 3,
    "max_predictions_per_seq": 20,
    "random_seed": 12345,
    "dupe_factor": 40,
    "masked_lm_prob": 0.15,
    "short_seq_prob": 0.1,
}

FEATURE_KEYS = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "token_boundary",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)


def _case(name: str, input_file: str, vocab_file: str, num_outputs: int,
          **overrides: Any) -> dict[str, Any]:
    unknown = set(overrides) - set(ORIGINAL_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown flags {unknown}")
    flags = {"input_file": input_file, "vocab_file": vocab_file}
    flags.update(ORIGINAL_DEFAULTS)
    flags.update(overrides)
    return {"name": name, "flags": flags, "num_output_files": num_outputs}


# Flags not given here keep ALBERT's defaults, except do_whole_word_mask:
# ALBERT defaults it to True, but only sop_wwm is meant to use whole-word
# masking, so every other case sets it to False explicitly.
CASES = [
    _case("sop_sample", "sample_text.txt", UNCASED_VOCAB, 1,
          do_lower_case=True, do_whole_word_mask=False,
          random_next_sentence=False, ngram=3, favor_shorter_ngram=True,
          max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2,
          random_seed=12345),
    _case("sop_wiki_cased", "wiki_small.txt", UNCASED_VOCAB, 1,
          do_lower_case=False, do_whole_word_mask=False,
          random_next_sentence=False, ngram=3, favor_shorter_ngram=False,
          max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1,
          random_seed=7, short_seq_prob=0.2),
    _case("sop_unigram", "sample_text.txt", UNCASED_VOCAB, 1,
          do_lower_case=True, do_whole_word_mask=False,
          random_next_sentence=False, ngram=1, dupe_factor=2, random_seed=3),
    _case("sop_wwm", "wiki_small.txt", UNCASED_VOCAB, 1,
          do_lower_case=True, do_whole_word_mask=True, ngram=2,
          favor_shorter_ngram=True, max_seq_length=64,
          max_predictions_per_seq=10, dupe_factor=1, random_seed=11),
    _case("nsp_random_next", "sample_text.txt", UNCASED_VOCAB, 1,
          do_lower_case=True, do_whole_word_mask=False,
          random_next_sentence=True, ngram=3, dupe_factor=2, random_seed=5),
    _case("chinese_sop", "chinese_small.txt", CHINESE_VOCAB, 1,
          do_whole_word_mask=False, random_next_sentence=False, ngram=3,
          dupe_factor=1, random_seed=1),
]

# Flags of the statistics runs (random_seed varies per run).
STATS_FLAGS: dict[str, Any] = dict(
    ORIGINAL_DEFAULTS, do_lower_case=True, do_whole_word_mask=False,
    random_next_sentence=False, ngram=3, favor_shorter_ngram=True,
    max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2)

# Runs ALBERT's script as __main__; see the module docstring.
# argv[1] is the albert checkout, the rest are the script's flags.
_RUNNER = """
import importlib.util, os, random, runpy, sys, types
import numpy
import tensorflow
sys.modules["tensorflow"] = tensorflow.compat.v1


def _stub(name):
    module = types.ModuleType(name)

    def __getattr__(attr):
        raise ImportError(name + "." + attr + " is stubbed out by the golden "
                          "runner (not needed for a --vocab_file run)")

    module.__getattr__ = __getattr__
    sys.modules[name] = module


_stub("tensorflow_hub")
_stub("sentencepiece")

albert_dir = os.path.abspath(sys.argv[1])
spec = importlib.util.spec_from_file_location(
    "albert", os.path.join(albert_dir, "__init__.py"),
    submodule_search_locations=[albert_dir])
package = importlib.util.module_from_spec(spec)
sys.modules["albert"] = package
spec.loader.exec_module(package)

args = sys.argv[2:]
seeds = [a.split("=", 1)[1] for a in args if a.startswith("--random_seed=")]
if not seeds:
    raise SystemExit("the seeding shim needs an explicit --random_seed=")
seed = int(seeds[-1])
random.seed(seed)
numpy.random.seed(seed)

script = os.path.join(albert_dir, "create_pretraining_data.py")
sys.argv = [script] + args
runpy.run_path(script, run_name="__main__")
"""


def _flag_args(flags: dict[str, Any]) -> list[str]:
    args = []
    for key, value in flags.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        args.append(f"--{key}={value}")
    return args


def run_original(albert_dir: Path, flags: dict[str, Any],
                 output_files: list[str], cwd: Path, python: str,
                 hash_seed: str = "0") -> None:
    """Run ALBERT's script once; raise with its log if it fails."""
    argv = [python, "-c", _RUNNER, str(albert_dir)]
    argv += _flag_args(flags) + [f"--output_file={','.join(output_files)}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONHASHSEED=hash_seed,
               CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise RuntimeError(f"ALBERT script failed with {proc.returncode}")


def read_records(path: str) -> Iterator[dict[str, list]]:
    """Decode a TFRecord file of tf.train.Example into plain dicts."""
    import tensorflow as tf

    for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
        example = tf.train.Example.FromString(raw)
        feats = example.features.feature
        if set(feats.keys()) != set(FEATURE_KEYS):
            raise ValueError(f"unexpected features {sorted(feats.keys())}")
        rec: dict[str, list] = {}
        for key in FEATURE_KEYS:
            if key == "masked_lm_weights":
                rec[key] = [float(v) for v in feats[key].float_list.value]
            else:
                rec[key] = [int(v) for v in feats[key].int64_list.value]
        yield rec


def _check_shapes(rec: dict[str, list], flags: dict[str, Any]) -> None:
    seq = flags["max_seq_length"]
    preds = flags["max_predictions_per_seq"] * (1 + int(flags["do_permutation"]))
    expected = {"input_ids": seq, "input_mask": seq, "segment_ids": seq,
                "token_boundary": seq, "masked_lm_positions": preds,
                "masked_lm_ids": preds, "masked_lm_weights": preds,
                "next_sentence_labels": 1}
    for key, length in expected.items():
        if len(rec[key]) != length:
            raise ValueError(f"{key} has length {len(rec[key])}, not {length}")


def write_jsonl_gz(records: list[dict[str, list]], path: Path) -> None:
    """Write records as gzipped JSON lines with reproducible bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                           compresslevel=9) as gz:
            for rec in records:
                line = json.dumps(rec, separators=(",", ":"))
                gz.write(line.encode("utf-8") + b"\n")


def _sha256(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_and_decode(case: dict[str, Any], albert_dir: Path, data_dir: Path,
                   tmp: Path, python: str, hash_seed: str
                   ) -> tuple[list[list[dict[str, list]]], list[str]]:
    """Run one case; return decoded records and sha256 of each TFRecord."""
    outputs = [str(tmp / f"out-{k}.tfrecord")
               for k in range(case["num_output_files"])]
    run_original(albert_dir, case["flags"], outputs, data_dir, python,
                 hash_seed)
    decoded = []
    for out in outputs:
        records = list(read_records(out))
        for rec in records:
            _check_shapes(rec, case["flags"])
        decoded.append(records)
    return decoded, [_sha256(out) for out in outputs]


def make_case(case: dict[str, Any], albert_dir: Path, data_dir: Path,
              out_dir: Path, python: str, check_determinism: bool
              ) -> dict[str, Any]:
    name = case["name"]
    with tempfile.TemporaryDirectory(prefix=f"golden_albert_{name}_") as tmp:
        decoded, shas = run_and_decode(case, albert_dir, data_dir, Path(tmp),
                                       python, hash_seed="0")
    determinism = None
    if check_determinism:
        with tempfile.TemporaryDirectory(
                prefix=f"golden_albert_{name}_2_") as tmp:
            again, shas2 = run_and_decode(case, albert_dir, data_dir,
                                          Path(tmp), python,
                                          hash_seed="12345")
        if again != decoded:
            raise RuntimeError(f"{name}: second run produced other records")
        # Raw bytes may differ: upb serializes the Features map in a
        # per-process order, so only decoded records are compared.
        determinism = {"identical_records": True,
                       "identical_tfrecord_bytes": shas == shas2,
                       "pythonhashseeds": ["0", "12345"]}
        print(f"  {name}: second run (PYTHONHASHSEED 12345 vs 0) gave "
              f"identical records (raw TFRecord bytes identical: "
              f"{shas == shas2})")

    outputs = []
    for k, records in enumerate(decoded):
        rel = f"{name}/out-{k}.jsonl.gz"
        write_jsonl_gz(records, out_dir / rel)
        outputs.append({"path": rel, "records": len(records)})
    counts = [len(r) for r in decoded]
    print(f"  {name}: records per output file {counts}")
    result = {
        "name": name,
        "flags": case["flags"],
        "num_output_files": case["num_output_files"],
        "record_counts": counts,
        "total_records": sum(counts),
        "outputs": outputs,
    }
    if determinism is not None:
        result["determinism_check"] = determinism
    return result


def make_stats(corpus: Path, albert_dir: Path, data_dir: Path, out_dir: Path,
               python: str, seeds: list[int]) -> dict[str, Any]:
    """Run ALBERT (SOP mode) on a full corpus once per seed; record
    instance_stats() and span_stats() of each run, their mean and their
    seed-to-seed (sample) standard deviation."""
    sys.path.insert(0, str(TESTS_DIR))
    # pylint: disable=import-outside-toplevel
    from stats_albert import span_stats
    from stats_util import instance_stats

    flags = {"input_file": str(corpus.resolve()), "vocab_file": UNCASED_VOCAB}
    flags.update(STATS_FLAGS)
    mask_id = 103
    runs = []
    for seed in seeds:
        with tempfile.TemporaryDirectory(prefix="golden_albert_stats_") as tmp:
            out = str(Path(tmp) / "out-0.tfrecord")
            run_original(albert_dir, dict(flags, random_seed=seed), [out],
                         data_dir, python)
            records = list(read_records(out))
        stats = instance_stats(records, flags["max_seq_length"], mask_id)
        stats.update(span_stats(records))
        runs.append({"random_seed": seed, "stats": stats})
        print(f"  seed {seed}: {json.dumps(stats)}")
    names = list(runs[0]["stats"])
    values = {name: [run["stats"][name] for run in runs] for name in names}
    recorded_flags = dict(flags, input_file=corpus.name)
    del recorded_flags["random_seed"]
    result = {
        "corpus": corpus.name,
        "corpus_sha256": _sha256(corpus),
        "corpus_bytes": corpus.stat().st_size,
        "flags": recorded_flags,
        "num_output_files": 1,
        "mask_id": mask_id,
        "seeds": seeds,
        "mean": {name: statistics.mean(v) for name, v in values.items()},
        "sd": {name: statistics.stdev(v) for name, v in values.items()},
        "runs": runs,
    }
    path = out_dir / f"{corpus.stem}_sop_stats.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"  stats written to {path}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--albert_dir", required=True, type=Path,
                        help="checkout of google-research/albert")
    parser.add_argument("--out_dir", required=True, type=Path)
    parser.add_argument("--stats_corpus", type=Path,
                        default=DEFAULT_STATS_CORPUS)
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR,
                        help="directory with the input corpora and vocabs")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with tensorflow and six")
    parser.add_argument("--cases", default="",
                        help="comma-separated subset of case names")
    parser.add_argument("--skip_stats", action="store_true")
    parser.add_argument("--skip_cases", action="store_true",
                        help="only (re)compute the statistics file")
    parser.add_argument("--stats_seeds", default="12345,1,2,3,4,5,6,7",
                        help="comma-separated random seeds of the statistics "
                             "runs")
    parser.add_argument("--check_determinism", action="store_true",
                        help="run each case twice (PYTHONHASHSEED 0 and "
                             "12345) and compare the records")
    args = parser.parse_args()

    albert_dir = args.albert_dir.resolve()
    data_dir = args.data_dir.resolve()
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if not (albert_dir / "create_pretraining_data.py").is_file():
        parser.error(f"no create_pretraining_data.py in {albert_dir}")

    wanted = set(filter(None, args.cases.split(",")))
    cases_path = out_dir / "cases.json"
    previous = {}
    if wanted and cases_path.exists():
        previous = {c["name"]: c for c in json.loads(cases_path.read_text())}

    results = []
    for case in [] if args.skip_cases else CASES:
        if wanted and case["name"] not in wanted:
            if case["name"] in previous:
                results.append(previous[case["name"]])
            continue
        print(f"case {case['name']}")
        results.append(make_case(case, albert_dir, data_dir, out_dir,
                                 args.python, args.check_determinism))
    if not args.skip_cases:
        cases_path.write_text(json.dumps(results, indent=2) + "\n")

    if not args.skip_stats:
        print(f"stats on {args.stats_corpus}")
        make_stats(args.stats_corpus, albert_dir, data_dir, out_dir,
                   args.python,
                   [int(seed) for seed in args.stats_seeds.split(",")])


if __name__ == "__main__":
    main()
