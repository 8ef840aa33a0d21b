#!/usr/bin/env python
"""Regenerate golden outputs of the original BERT create_pretraining_data.py.

The original script (google-research/bert) is run unmodified in a subprocess,
with ``tensorflow`` aliased to ``tensorflow.compat.v1`` so that it works
under TensorFlow 2. Its TFRecord output is decoded and stored as gzipped
JSON lines (one object per record, in record order) so that the pipeline's
compat mode can be checked record for record without TensorFlow.

Usage:
  python tests/golden/make_pipeline_golden.py \
      --bert_dir /path/to/bert --out_dir tests/data/golden_pipeline

Outputs (under --out_dir):
  <case>/out-<k>.jsonl.gz       decoded records of the k-th output file
  cases.json                    flags and record counts of every case
  wikitext2_valid_stats.json    instance_stats() of runs on --stats_corpus, one
                                per --stats_seeds seed, with mean and sd
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
DEFAULT_STATS_CORPUS = "/work/shared/data/corpora/wikitext2_valid.txt"

UNCASED_VOCAB = "bert-base-uncased-vocab.txt"
CHINESE_VOCAB = "bert-base-chinese-vocab.txt"

# Defaults of the original script's flags (all passed explicitly below).
ORIGINAL_DEFAULTS: dict[str, Any] = {
    "do_lower_case": True,
    "do_whole_word_mask": False,
    "max_seq_length": 128,
    "max_predictions_per_seq": 20,
    "random_seed": 12345,
    "dupe_factor": 10,
    "masked_lm_prob": 0.15,
    "short_seq_prob": 0.1,
}

FEATURE_KEYS = (
    "input_ids",
    "input_mask",
    "segment_ids",
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


CASES = [
    _case("sample_default", "sample_text.txt", UNCASED_VOCAB, 1),
    _case("wiki_wwm_short", "wiki_small.txt", UNCASED_VOCAB, 1,
          max_seq_length=64, max_predictions_per_seq=10,
          do_whole_word_mask=True, dupe_factor=3, random_seed=7,
          short_seq_prob=0.2),
    _case("multi_in_multi_out", "sample_text.txt,wiki_small.txt",
          UNCASED_VOCAB, 3,
          max_seq_length=96, masked_lm_prob=0.2, dupe_factor=2,
          random_seed=99),
    _case("chinese", "chinese_small.txt", CHINESE_VOCAB, 1,
          max_seq_length=128, dupe_factor=2, random_seed=1),
    _case("cased_tiny", "sample_text.txt", UNCASED_VOCAB, 1,
          do_lower_case=False, max_seq_length=32, max_predictions_per_seq=5,
          dupe_factor=2, short_seq_prob=0.5),
]

# Runs the original script as __main__ with tensorflow -> tf.compat.v1.
# argv[1] is the bert checkout, the rest are the script's flags.
_RUNNER = """
import runpy, sys
import tensorflow
sys.modules["tensorflow"] = tensorflow.compat.v1
bert_dir = sys.argv[1]
sys.path.insert(0, bert_dir)
script = bert_dir + "/create_pretraining_data.py"
sys.argv = [script] + sys.argv[2:]
runpy.run_path(script, run_name="__main__")
"""


def _flag_args(flags: dict[str, Any]) -> list[str]:
    args = []
    for key, value in flags.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        args.append(f"--{key}={value}")
    return args


def run_original(bert_dir: Path, flags: dict[str, Any], output_files: list[str],
                 cwd: Path, python: str, hash_seed: str = "0") -> None:
    """Run the original script once; raise with its log if it fails."""
    argv = [python, "-c", _RUNNER, str(bert_dir)]
    argv += _flag_args(flags) + [f"--output_file={','.join(output_files)}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONHASHSEED=hash_seed,
               CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise RuntimeError(f"original script failed with {proc.returncode}")


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
    seq, preds = flags["max_seq_length"], flags["max_predictions_per_seq"]
    expected = {"input_ids": seq, "input_mask": seq, "segment_ids": seq,
                "masked_lm_positions": preds, "masked_lm_ids": preds,
                "masked_lm_weights": preds, "next_sentence_labels": 1}
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


def run_and_decode(case: dict[str, Any], bert_dir: Path, data_dir: Path,
                   tmp: Path, python: str, hash_seed: str
                   ) -> tuple[list[list[dict[str, list]]], list[str]]:
    """Run one case; return decoded records and sha256 of each TFRecord."""
    outputs = [str(tmp / f"out-{k}.tfrecord")
               for k in range(case["num_output_files"])]
    run_original(bert_dir, case["flags"], outputs, data_dir, python, hash_seed)
    decoded = []
    for out in outputs:
        records = list(read_records(out))
        for rec in records:
            _check_shapes(rec, case["flags"])
        decoded.append(records)
    return decoded, [_sha256(out) for out in outputs]


def make_case(case: dict[str, Any], bert_dir: Path, data_dir: Path,
              out_dir: Path, python: str, check_determinism: bool
              ) -> dict[str, Any]:
    name = case["name"]
    with tempfile.TemporaryDirectory(prefix=f"golden_{name}_") as tmp:
        decoded, shas = run_and_decode(case, bert_dir, data_dir, Path(tmp),
                                       python, hash_seed="0")
    if check_determinism:
        with tempfile.TemporaryDirectory(prefix=f"golden_{name}_2_") as tmp:
            again, shas2 = run_and_decode(case, bert_dir, data_dir, Path(tmp),
                                          python, hash_seed="12345")
        if again != decoded:
            raise RuntimeError(f"{name}: second run produced other records")
        # Raw bytes usually differ: upb serializes the Features map in a
        # per-process random order, so only decoded records are compared.
        print(f"  {name}: second run gave identical records "
              f"(raw TFRecord bytes identical: {shas == shas2})")

    outputs = []
    for k, records in enumerate(decoded):
        rel = f"{name}/out-{k}.jsonl.gz"
        write_jsonl_gz(records, out_dir / rel)
        outputs.append({"path": rel, "records": len(records)})
    counts = [len(r) for r in decoded]
    print(f"  {name}: records per output file {counts}")
    return {
        "name": name,
        "flags": case["flags"],
        "num_output_files": case["num_output_files"],
        "record_counts": counts,
        "total_records": sum(counts),
        "outputs": outputs,
    }


def make_stats(corpus: Path, bert_dir: Path, data_dir: Path, out_dir: Path,
               python: str, seeds: list[int]) -> dict[str, Any]:
    """Run the original on a full corpus once per seed and record instance
    statistics, their mean and their run-to-run standard deviation.

    One run is not enough: the original draws a short target length once per
    document, so on a corpus of ~60 long articles its instance count alone
    moves by ~2% from seed to seed. Tests compare with the spread, not a draw.
    """
    sys.path.insert(0, str(TESTS_DIR))
    from stats_util import instance_stats  # pylint: disable=import-outside-toplevel

    flags = {"input_file": str(corpus.resolve()), "vocab_file": UNCASED_VOCAB}
    flags.update(ORIGINAL_DEFAULTS)
    flags["dupe_factor"] = 5
    mask_id = 103
    runs = []
    for seed in seeds:
        with tempfile.TemporaryDirectory(prefix="golden_stats_") as tmp:
            out = str(Path(tmp) / "out-0.tfrecord")
            run_original(bert_dir, dict(flags, random_seed=seed), [out], data_dir, python)
            runs.append({"random_seed": seed, "stats": instance_stats(
                read_records(out), flags["max_seq_length"], mask_id)})
        print(f"  seed {seed}: {json.dumps(runs[-1]['stats'])}")
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
        "mean": {name: statistics.mean(v) for name, v in values.items()},
        "sd": {name: statistics.stdev(v) for name, v in values.items()},
        "runs": runs,
    }
    path = out_dir / f"{corpus.stem}_stats.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"  stats written to {path}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--bert_dir", required=True, type=Path,
                        help="checkout of google-research/bert")
    parser.add_argument("--out_dir", required=True, type=Path)
    parser.add_argument("--stats_corpus", type=Path,
                        default=Path(DEFAULT_STATS_CORPUS))
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR,
                        help="directory with the input corpora and vocabs")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with tensorflow for the original")
    parser.add_argument("--cases", default="",
                        help="comma-separated subset of case names")
    parser.add_argument("--skip_stats", action="store_true")
    parser.add_argument("--skip_cases", action="store_true",
                        help="only (re)compute the statistics file")
    parser.add_argument("--stats_seeds", default="12345,1,2,3,4,5,6,7,8,9",
                        help="comma-separated random seeds of the statistics runs")
    parser.add_argument("--check_determinism", action="store_true",
                        help="run each case twice and compare the records")
    args = parser.parse_args()

    bert_dir = args.bert_dir.resolve()
    data_dir = args.data_dir.resolve()
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if not (bert_dir / "create_pretraining_data.py").is_file():
        parser.error(f"no create_pretraining_data.py in {bert_dir}")

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
        results.append(make_case(case, bert_dir, data_dir, out_dir,
                                 args.python, args.check_determinism))
    if not args.skip_cases:
        cases_path.write_text(json.dumps(results, indent=2) + "\n")

    if not args.skip_stats:
        print(f"stats on {args.stats_corpus}")
        make_stats(args.stats_corpus, bert_dir, data_dir, out_dir, args.python,
                   [int(seed) for seed in args.stats_seeds.split(",")])


if __name__ == "__main__":
    main()
