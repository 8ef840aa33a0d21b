#!/usr/bin/env python
"""Regenerate golden outputs of the TF Model Garden create_pretraining_data.py.

The Model Garden script (official/nlp/data/create_pretraining_data.py of the
tf-models-official wheel, unzipped) is run unmodified in a subprocess under
TensorFlow 2. Two imports that a WordPiece run never uses are replaced by
empty modules: ``sentencepiece`` (not installed) and ``tf_keras``.

The script draws its n-gram sizes from Python's unseeded global ``random``
generator (``random.choices``), so the runner calls ``random.seed(S)`` with
S = the ``--random_seed`` flag after the script's imports and before running
it. Nothing else is seeded; the script does not use numpy.

The TFRecord output (optionally GZIP-compressed) is decoded and stored as
gzipped JSON lines (one object per record, in record order, keyed by the
feature names the script wrote), like tests/golden/make_pipeline_golden.py.

Usage:
  python tests/golden/make_model_garden_golden.py \
      --models_dir /path/to/unzipped/tf_models_official \
      --out_dir tests/data/golden_model_garden --check_determinism

Outputs (under --out_dir):
  <case>/out-<k>.jsonl.gz          decoded records of the k-th output file
  cases.json                       flags, record counts (or the expected
                                   error) of every case
  model_garden.json                wheel version, sha256 of the script run
  wikitext2_valid_ngram_stats.json instance_stats() + span_stats() of n-gram
                                   runs on --stats_corpus, one per seed, with
                                   mean and sd
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
SCRIPT = "official/nlp/data/create_pretraining_data.py"

UNCASED_VOCAB = "bert-base-uncased-vocab.txt"
CHINESE_VOCAB = "bert-base-chinese-vocab.txt"

# Defaults of the Model Garden script's flags. Every flag is passed explicitly
# except those whose value is None (absl cannot spell None on the command
# line; for max_ngram_size, leaving it out is how the default is selected).
ORIGINAL_DEFAULTS: dict[str, Any] = {
    "tokenization": "WordPiece",
    "sp_model_file": "",
    "do_lower_case": True,
    "do_whole_word_mask": False,
    "max_ngram_size": None,
    "gzip_compress": False,
    "use_v2_feature_names": False,
    "max_seq_length": 128,
    "max_predictions_per_seq": 20,
    "random_seed": 12345,
    "dupe_factor": 10,
    "masked_lm_prob": 0.15,
    "short_seq_prob": 0.1,
}

V1_KEYS = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)
# use_v2_feature_names renames input_ids and segment_ids only.
V2_RENAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}
V2_KEYS = tuple(V2_RENAMES.get(key, key) for key in V1_KEYS)

NGRAM_WITHOUT_WWM_ERROR = "cannot use ngram masking without whole word masking"


def _case(name: str, input_file: str, vocab_file: str, num_outputs: int,
          expect_error: str | None = None, **overrides: Any) -> dict[str, Any]:
    unknown = set(overrides) - set(ORIGINAL_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown flags {unknown}")
    flags = {"input_file": input_file, "vocab_file": vocab_file}
    flags.update(ORIGINAL_DEFAULTS)
    flags.update(overrides)
    case = {"name": name, "flags": flags, "num_output_files": num_outputs}
    if expect_error:
        case["expect_error"] = expect_error
    return case


CASES = [
    # max_ngram_size left at its default (None): token-level masking.
    _case("mg_default", "sample_text.txt", UNCASED_VOCAB, 1,
          dupe_factor=2, random_seed=12345),
    _case("mg_ngram3_wwm", "wiki_small.txt", UNCASED_VOCAB, 1,
          do_whole_word_mask=True, max_ngram_size=3, max_seq_length=64,
          max_predictions_per_seq=10, dupe_factor=1, random_seed=7,
          short_seq_prob=0.2),
    # n-grams need whole word masking: the script raises ValueError on the
    # first instance and writes no output file. Kept to pin that behaviour.
    _case("mg_ngram2_cased", "sample_text.txt", UNCASED_VOCAB, 1,
          expect_error=NGRAM_WITHOUT_WWM_ERROR,
          do_lower_case=False, max_ngram_size=2, do_whole_word_mask=False,
          dupe_factor=2, random_seed=5),
    # The same with whole word masking, which does produce output.
    _case("mg_ngram2_cased_wwm", "sample_text.txt", UNCASED_VOCAB, 1,
          do_lower_case=False, max_ngram_size=2, do_whole_word_mask=True,
          dupe_factor=2, random_seed=5),
    _case("mg_v2_gzip", "sample_text.txt", UNCASED_VOCAB, 2,
          max_ngram_size=3, do_whole_word_mask=True,
          use_v2_feature_names=True, gzip_compress=True, dupe_factor=1,
          random_seed=9),
    _case("mg_chinese", "chinese_small.txt", CHINESE_VOCAB, 1,
          do_whole_word_mask=True, max_ngram_size=3, dupe_factor=1,
          random_seed=1),
]

# Flags of the statistics runs (input_file and random_seed are set per run).
STATS_FLAGS: dict[str, Any] = dict(
    ORIGINAL_DEFAULTS, vocab_file=UNCASED_VOCAB, do_lower_case=True,
    do_whole_word_mask=True, max_ngram_size=3, max_seq_length=128,
    max_predictions_per_seq=20, dupe_factor=2)
DEFAULT_STATS_SEEDS = "12345,1,2,3,4,5,6,7"

# Runs the Model Garden script as __main__. argv[1] is the directory that
# holds the unzipped wheel's `official` package, the rest are the script's
# flags (which always include --random_seed). The global `random` generator
# is seeded after all imports, immediately before the script module runs.
_RUNNER = """
import random, runpy, sys, types
for name in ("sentencepiece", "tf_keras"):
    sys.modules[name] = types.ModuleType(name)
models_dir = sys.argv[1]
sys.path.insert(0, models_dir)
import tensorflow
import absl.app, absl.flags, absl.logging
import official.nlp.tools.tokenization
args = sys.argv[2:]
seed = int([a for a in args if a.startswith("--random_seed=")][-1]
           .split("=", 1)[1])
random.seed(seed)
script = models_dir + "/official/nlp/data/create_pretraining_data.py"
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


def run_model_garden(models_dir: Path, flags: dict[str, Any],
                     output_files: list[str], cwd: Path, python: str,
                     hash_seed: str = "0") -> subprocess.CompletedProcess:
    """Run the script once and return the finished process (not checked)."""
    argv = [python, "-c", _RUNNER, str(models_dir)]
    argv += _flag_args(flags) + [f"--output_file={','.join(output_files)}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONHASHSEED=hash_seed,
               CUDA_VISIBLE_DEVICES="")
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True,
                          text=True)


def _check_ok(proc: subprocess.CompletedProcess) -> None:
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise RuntimeError(f"script failed with {proc.returncode}")


def read_records(path: str, gzip_compress: bool = False,
                 v2_names: bool = False) -> Iterator[dict[str, list]]:
    """Decode a TFRecord file of tf.train.Example into plain dicts, keyed by
    the feature names found in the file (which must be the expected set)."""
    import tensorflow as tf

    keys = V2_KEYS if v2_names else V1_KEYS
    dataset = tf.data.TFRecordDataset(
        path, compression_type="GZIP" if gzip_compress else "")
    for raw in dataset.as_numpy_iterator():
        example = tf.train.Example.FromString(raw)
        feats = example.features.feature
        if set(feats.keys()) != set(keys):
            raise ValueError(f"unexpected features {sorted(feats.keys())}")
        rec: dict[str, list] = {}
        for key in keys:
            if key == "masked_lm_weights":
                rec[key] = [float(v) for v in feats[key].float_list.value]
            else:
                rec[key] = [int(v) for v in feats[key].int64_list.value]
        yield rec


def as_v1(rec: dict[str, list]) -> dict[str, list]:
    """A record with v2 feature names renamed to the v1 ones."""
    inverse = {v2: v1 for v1, v2 in V2_RENAMES.items()}
    return {inverse.get(key, key): value for key, value in rec.items()}


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


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def run_and_decode(case: dict[str, Any], models_dir: Path, data_dir: Path,
                   tmp: Path, python: str, hash_seed: str
                   ) -> tuple[list[list[dict[str, list]]], list[str]]:
    """Run one case that must succeed; return the decoded records and the
    sha256 of each TFRecord file."""
    flags = case["flags"]
    outputs = [str(tmp / f"out-{k}.tfrecord")
               for k in range(case["num_output_files"])]
    _check_ok(run_model_garden(models_dir, flags, outputs, data_dir, python,
                               hash_seed))
    decoded = []
    for out in outputs:
        if _is_gzip(out) != bool(flags["gzip_compress"]):
            raise RuntimeError(f"{out}: gzip magic does not match the flag")
        records = list(read_records(out, flags["gzip_compress"],
                                    flags["use_v2_feature_names"]))
        for rec in records:
            _check_shapes(as_v1(rec), flags)
        decoded.append(records)
    return decoded, [_sha256(out) for out in outputs]


def run_expecting_error(case: dict[str, Any], models_dir: Path,
                        data_dir: Path, tmp: Path, python: str,
                        hash_seed: str) -> dict[str, Any]:
    """Run a case that must fail with case['expect_error']."""
    outputs = [str(tmp / f"out-{k}.tfrecord")
               for k in range(case["num_output_files"])]
    proc = run_model_garden(models_dir, case["flags"], outputs, data_dir,
                            python, hash_seed)
    log = proc.stdout + proc.stderr
    if proc.returncode == 0 or case["expect_error"] not in log:
        sys.stderr.write(log)
        raise RuntimeError(f"{case['name']}: expected failure with "
                           f"{case['expect_error']!r}")
    last = [line for line in log.splitlines() if line.strip()][-1]
    return {"returncode": proc.returncode, "last_log_line": last.strip(),
            "output_files_created": [os.path.exists(o) for o in outputs]}


def make_case(case: dict[str, Any], models_dir: Path, data_dir: Path,
              out_dir: Path, python: str, check_determinism: bool
              ) -> dict[str, Any]:
    name = case["name"]
    result = {"name": name, "flags": case["flags"],
              "num_output_files": case["num_output_files"]}
    if "expect_error" in case:
        with tempfile.TemporaryDirectory(prefix=f"mg_golden_{name}_") as tmp:
            error = run_expecting_error(case, models_dir, data_dir, Path(tmp),
                                        python, hash_seed="0")
        if check_determinism:
            with tempfile.TemporaryDirectory(prefix=f"mg_golden_{name}_2_") as tmp:
                again = run_expecting_error(case, models_dir, data_dir,
                                            Path(tmp), python,
                                            hash_seed="12345")
            if again != error:
                raise RuntimeError(f"{name}: second run failed differently")
            print(f"  {name}: second run (PYTHONHASHSEED=12345) failed the "
                  f"same way")
        print(f"  {name}: failed as expected: {error['last_log_line']}")
        result.update(expected_error=error, record_counts=[],
                      total_records=0, outputs=[])
        return result

    with tempfile.TemporaryDirectory(prefix=f"mg_golden_{name}_") as tmp:
        decoded, shas = run_and_decode(case, models_dir, data_dir, Path(tmp),
                                       python, hash_seed="0")
    if check_determinism:
        with tempfile.TemporaryDirectory(prefix=f"mg_golden_{name}_2_") as tmp:
            again, shas2 = run_and_decode(case, models_dir, data_dir,
                                          Path(tmp), python,
                                          hash_seed="12345")
        if again != decoded:
            raise RuntimeError(f"{name}: second run produced other records")
        # Raw bytes may differ (upb serializes the Features map in a
        # per-process order), so only decoded records are compared.
        print(f"  {name}: second run (PYTHONHASHSEED=12345) gave identical "
              f"records (raw TFRecord bytes identical: {shas == shas2})")

    outputs = []
    for k, records in enumerate(decoded):
        rel = f"{name}/out-{k}.jsonl.gz"
        write_jsonl_gz(records, out_dir / rel)
        outputs.append({"path": rel, "records": len(records)})
    counts = [len(r) for r in decoded]
    print(f"  {name}: records per output file {counts}")
    result.update(
        feature_names=list(V2_KEYS if case["flags"]["use_v2_feature_names"]
                           else V1_KEYS),
        compression="GZIP" if case["flags"]["gzip_compress"] else "",
        record_counts=counts, total_records=sum(counts), outputs=outputs)
    return result


def compare_with_bert(case: dict[str, Any], records: list[dict[str, list]],
                      bert_dir: Path, data_dir: Path, python: str
                      ) -> dict[str, Any]:
    """Run google-research/bert's original script with the same flags as a
    token-level case and count where the two outputs agree.

    Expected: everything but the choice of masked positions agrees, because
    the Model Garden script makes exactly the same draws from the seeded
    generator and only picks other candidates from the shuffled list.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import make_pipeline_golden as bert_golden  # pylint: disable=import-outside-toplevel

    keys = ["input_file", "vocab_file", *bert_golden.ORIGINAL_DEFAULTS]
    flags = {key: case["flags"][key] for key in keys}
    with tempfile.TemporaryDirectory(prefix="mg_golden_bert_") as tmp:
        out = str(Path(tmp) / "out-0.tfrecord")
        bert_golden.run_original(bert_dir, flags, [out], data_dir, python)
        bert = list(bert_golden.read_records(out))

    def unmasked(rec: dict[str, list]) -> list[int]:
        ids = list(rec["input_ids"])
        for pos, label, weight in zip(rec["masked_lm_positions"],
                                      rec["masked_lm_ids"],
                                      rec["masked_lm_weights"]):
            if weight > 0:
                ids[pos] = label
        return ids

    def n_masked(rec: dict[str, list]) -> int:
        return sum(1 for w in rec["masked_lm_weights"] if w > 0)

    def kinds(rec: dict[str, list]) -> tuple[int, int]:
        real = [(pos, label) for pos, label, w in zip(
            rec["masked_lm_positions"], rec["masked_lm_ids"],
            rec["masked_lm_weights"]) if w > 0]
        mask = sum(1 for pos, _ in real if rec["input_ids"][pos] == 103)
        kept = sum(1 for pos, label in real if rec["input_ids"][pos] == label)
        return mask, kept

    pairs = list(zip(bert, records))
    same = lambda f: sum(1 for a, b in pairs if f(a) == f(b))  # noqa: E731
    summary = {
        "bert_records": len(bert),
        "model_garden_records": len(records),
        "same_unmasked_input_ids": same(unmasked),
        "same_segment_ids": same(lambda r: r["segment_ids"]),
        "same_input_mask": same(lambda r: r["input_mask"]),
        "same_next_sentence_labels": same(lambda r: r["next_sentence_labels"]),
        "same_number_of_predictions": same(n_masked),
        "same_mask_and_kept_counts": same(kinds),
        "same_masked_positions": same(
            lambda r: r["masked_lm_positions"][:n_masked(r)]),
        "identical_records": sum(1 for a, b in pairs if a == b),
    }
    print(f"  {case['name']} vs original BERT: {json.dumps(summary)}")
    return summary


def make_stats(corpus: Path, models_dir: Path, data_dir: Path, out_dir: Path,
               python: str, seeds: list[int]) -> dict[str, Any]:
    """Run n-gram masking on a full corpus once per seed and record instance
    and span statistics, their mean and their seed-to-seed sd."""
    sys.path.insert(0, str(TESTS_DIR))
    from stats_ngram import span_stats  # pylint: disable=import-outside-toplevel
    from stats_util import instance_stats  # pylint: disable=import-outside-toplevel

    flags = dict(STATS_FLAGS, input_file=str(corpus.resolve()))
    mask_id = 103
    runs = []
    for seed in seeds:
        with tempfile.TemporaryDirectory(prefix="mg_golden_stats_") as tmp:
            out = str(Path(tmp) / "out-0.tfrecord")
            _check_ok(run_model_garden(models_dir, dict(flags, random_seed=seed),
                                       [out], data_dir, python))
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
        "global_random_seeded_with": "random_seed",
        "mean": {name: statistics.mean(v) for name, v in values.items()},
        "sd": {name: statistics.stdev(v) for name, v in values.items()},
        "runs": runs,
    }
    path = out_dir / f"{corpus.stem}_ngram_stats.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"  stats written to {path}")
    return result


def _model_garden_info(models_dir: Path, wheel: Path | None
                       ) -> dict[str, Any]:
    """Wheel version (from its dist-info, if unzipped alongside), the sha256
    of the wheel (if given), of the script and of the tokenization module."""
    version = None
    for meta in sorted(models_dir.glob("tf_models_official-*.dist-info/METADATA")):
        for line in meta.read_text().splitlines():
            if line.startswith("Version:"):
                version = line.split(":", 1)[1].strip()
    return {
        "package": "tf-models-official",
        "version": version,
        "wheel": wheel.name if wheel else None,
        "wheel_sha256": _sha256(wheel) if wheel else None,
        "script": SCRIPT,
        "script_sha256": _sha256(models_dir / SCRIPT),
        "tokenization_sha256": _sha256(
            models_dir / "official/nlp/tools/tokenization.py"),
        "stubbed_imports": ["sentencepiece", "tf_keras"],
        "global_random_seed": "random.seed(random_seed), after imports",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--models_dir", required=True, type=Path,
                        help="unzipped tf-models-official wheel (the "
                             "directory that holds `official/`)")
    parser.add_argument("--out_dir", required=True, type=Path)
    parser.add_argument("--stats_corpus", type=Path,
                        default=DEFAULT_STATS_CORPUS)
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR,
                        help="directory with the input corpora and vocabs")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with tensorflow for the script")
    parser.add_argument("--cases", default="",
                        help="comma-separated subset of case names")
    parser.add_argument("--skip_stats", action="store_true")
    parser.add_argument("--skip_cases", action="store_true",
                        help="only (re)compute the statistics file")
    parser.add_argument("--stats_seeds", default=DEFAULT_STATS_SEEDS,
                        help="comma-separated random seeds of the statistics runs")
    parser.add_argument("--check_determinism", action="store_true",
                        help="run each case twice and compare the records")
    parser.add_argument("--wheel", type=Path, default=None,
                        help="optional: the wheel --models_dir was unzipped "
                             "from, to record its sha256")
    parser.add_argument("--bert_dir", type=Path, default=None,
                        help="optional google-research/bert checkout: compare "
                             "mg_default with the original script's output")
    args = parser.parse_args()

    models_dir = args.models_dir.resolve()
    data_dir = args.data_dir.resolve()
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if not (models_dir / SCRIPT).is_file():
        parser.error(f"no {SCRIPT} in {models_dir}")
    info = _model_garden_info(models_dir, args.wheel)
    print(f"model garden: {json.dumps(info)}")

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
        result = make_case(case, models_dir, data_dir, out_dir, args.python,
                           args.check_determinism)
        if args.bert_dir is not None and case["name"] == "mg_default":
            with gzip.open(out_dir / result["outputs"][0]["path"], "rt") as f:
                records = [json.loads(line) for line in f]
            result["bert_comparison"] = compare_with_bert(
                case, records, args.bert_dir.resolve(), data_dir, args.python)
        results.append(result)
    if not args.skip_cases:
        cases_path.write_text(json.dumps(results, indent=2) + "\n")
        (out_dir / "model_garden.json").write_text(
            json.dumps(info, indent=2) + "\n")

    if not args.skip_stats:
        print(f"stats on {args.stats_corpus}")
        make_stats(args.stats_corpus, models_dir, data_dir, out_dir,
                   args.python, [int(seed) for seed in args.stats_seeds.split(",")])


if __name__ == "__main__":
    main()
