#!/usr/bin/env python
"""Regenerate golden outputs of the TF Model Garden create_pretraining_data.py.

The Model Garden script (official/nlp/data/create_pretraining_data.py of the
tf-models-official wheel, unzipped) is run unmodified in a subprocess under
TensorFlow 2. Two imports that a WordPiece run never uses are replaced by
empty modules: ``sentencepiece`` and ``tf_keras``. With ``--sentencepiece``
the script's SentencePiece cases run instead (``--tokenization=SentencePiece
--sp_model_file``, the tests' model), with the real ``sentencepiece`` library
(only ``tf_keras`` is then an empty module).

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
  python tests/golden/make_model_garden_golden.py --sentencepiece --skip_stats \
      --models_dir /path/to/unzipped/tf_models_official \
      --out_dir tests/data/golden_model_garden_sentencepiece --check_determinism

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
import functools
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
# pylint: disable=wrong-import-position
from golden_common import (BERT_DEFAULTS, BERT_FEATURE_KEYS, CHINESE_VOCAB,
                           SPM_MODEL, UNCASED_VOCAB, case_header, check_bert_shapes,
                           flag_case, golden_parser, make_flag_case,
                           make_flag_stats, output_paths, parse_golden_args,
                           read_examples, require_same, run_flag_script,
                           run_once, run_twice, sha256_file, tests_module,
                           write_cases, write_json, write_stats)

SCRIPT = "official/nlp/data/create_pretraining_data.py"

# Defaults of the Model Garden script's flags. Every flag is passed explicitly
# except those whose value is None (absl cannot spell None on the command
# line; for max_ngram_size, leaving it out is how the default is selected).
# The script is a fork of the original BERT one and keeps all of its flags
# with the same defaults (the rest of the dict, after max_seq_length, in the
# original's order); do_lower_case and do_whole_word_mask are listed here
# only to keep their place in the order.
ORIGINAL_DEFAULTS: dict[str, Any] = {
    "tokenization": "WordPiece",
    "sp_model_file": "",
    "do_lower_case": True,
    "do_whole_word_mask": False,
    "max_ngram_size": None,
    "gzip_compress": False,
    "use_v2_feature_names": False,
    **BERT_DEFAULTS,
}

V1_KEYS = BERT_FEATURE_KEYS
# use_v2_feature_names renames input_ids and segment_ids only.
V2_RENAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}
V2_KEYS = tuple(V2_RENAMES.get(key, key) for key in V1_KEYS)

NGRAM_WITHOUT_WWM_ERROR = "cannot use ngram masking without whole word masking"


def _case(name: str, input_file: str, vocab_file: str, num_outputs: int,
          expect_error: str | None = None, **overrides: Any) -> dict[str, Any]:
    case = flag_case(ORIGINAL_DEFAULTS, name, input_file, vocab_file,
                     num_outputs, **overrides)
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

# The SentencePiece path (--sentencepiece): the tests' model, no vocab_file
# (the script reads none for SentencePiece); n-grams over its whole words
# (which on SentencePiece pieces are the pieces), cased and lower-cased.
_spm_case = functools.partial(_case, tokenization="SentencePiece", sp_model_file=SPM_MODEL)
SPM_CASES = [
    _spm_case("mg_spm_ngram3_wwm_cased", "en_ewt-ud-test.sentences.txt", None, 1,
              do_lower_case=False, do_whole_word_mask=True, max_ngram_size=3,
              dupe_factor=1, random_seed=7),
    _spm_case("mg_spm_ngram2_wwm_v2", "wiki_small.txt", None, 1,
              do_lower_case=True, do_whole_word_mask=True, max_ngram_size=2,
              use_v2_feature_names=True, max_seq_length=64, max_predictions_per_seq=10,
              dupe_factor=1, random_seed=3, short_seq_prob=0.2),
    _spm_case("mg_spm_default_cased", "sample_text.txt", None, 1,
              do_lower_case=False, dupe_factor=2, random_seed=12345),
    _spm_case("mg_spm_chinese", "chinese_small.txt", None, 1,
              do_whole_word_mask=True, max_ngram_size=3, dupe_factor=1, random_seed=1),
]

# Flags of the statistics runs (input_file and random_seed are set per run).
STATS_FLAGS: dict[str, Any] = dict(
    ORIGINAL_DEFAULTS, vocab_file=UNCASED_VOCAB, do_lower_case=True,
    do_whole_word_mask=True, max_ngram_size=3, max_seq_length=128,
    max_predictions_per_seq=20, dupe_factor=2)

# Runs the Model Garden script as __main__. argv[1] is the directory that
# holds the unzipped wheel's `official` package, the rest are the script's
# flags (which always include --random_seed). The global `random` generator
# is seeded after all imports, immediately before the script module runs.
_RUNNER = """
import random, runpy, sys, types
for name in ("sentencepiece", "tf_keras"):
    if name != "sentencepiece" or "--tokenization=SentencePiece" not in sys.argv:
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


# run_model_garden(models_dir, flags, output_files, cwd, python,
# hash_seed="0", check=True): run the script once and return the finished
# process; with check, raise with its log if it failed.
run_model_garden = functools.partial(run_flag_script, _RUNNER)


def read_records(path: str, gzip_compress: bool = False,
                 v2_names: bool = False) -> Iterator[dict[str, list]]:
    """Decode a TFRecord file of tf.train.Example into plain dicts, keyed by
    the feature names found in the file (which must be the expected set)."""
    return read_examples(path, V2_KEYS if v2_names else V1_KEYS,
                         "GZIP" if gzip_compress else "")


def as_v1(rec: dict[str, list]) -> dict[str, list]:
    """A record with v2 feature names renamed to the v1 ones."""
    inverse = {v2: v1 for v1, v2 in V2_RENAMES.items()}
    return {inverse.get(key, key): value for key, value in rec.items()}


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def read_output(path: str, flags: dict[str, Any]) -> Iterator[dict[str, list]]:
    """Decode an output file of a run with these flags, after checking that
    it is gzip-compressed exactly when --gzip_compress says so."""
    if _is_gzip(path) != bool(flags["gzip_compress"]):
        raise RuntimeError(f"{path}: gzip magic does not match the flag")
    return read_records(path, flags["gzip_compress"],
                        flags["use_v2_feature_names"])


def run_expecting_error(case: dict[str, Any], models_dir: Path,
                        data_dir: Path, tmp: Path, python: str,
                        hash_seed: str) -> dict[str, Any]:
    """Run a case that must fail with case['expect_error']."""
    outputs = output_paths(tmp, case["num_output_files"])
    proc = run_model_garden(models_dir, case["flags"], outputs, data_dir,
                            python, hash_seed, check=False)
    log = proc.stdout + proc.stderr
    if proc.returncode == 0 or case["expect_error"] not in log:
        sys.stderr.write(log)
        raise RuntimeError(f"{case['name']}: expected failure with "
                           f"{case['expect_error']!r}")
    last = [line for line in log.splitlines() if line.strip()][-1]
    return {"returncode": proc.returncode, "last_log_line": last.strip(),
            "output_files_created": [os.path.exists(o) for o in outputs]}


def make_case(case: dict[str, Any], args: argparse.Namespace
              ) -> dict[str, Any]:
    name = case["name"]
    if "expect_error" in case:
        error, again = run_twice(
            lambda tmp, hash_seed: run_expecting_error(
                case, args.models_dir, args.data_dir, tmp, args.python,
                hash_seed),
            f"mg_golden_{name}", args.check_determinism)
        if again is not None:
            require_same(name, error, again, "failed differently")
            print(f"  {name}: second run (PYTHONHASHSEED=12345) failed the "
                  f"same way")
        print(f"  {name}: failed as expected: {error['last_log_line']}")
        return {**case_header(case), "expected_error": error,
                "record_counts": [], "total_records": 0, "outputs": []}

    flags = case["flags"]
    # Raw bytes may differ (upb serializes the Features map in a
    # per-process order), so only decoded records are compared.
    entry, _ = make_flag_case(
        case, args, run_model_garden, lambda path: read_output(path, flags),
        lambda rec, case_flags: check_bert_shapes(as_v1(rec), case_flags),
        "mg_golden", rerun_note=" (PYTHONHASHSEED=12345)",
        feature_names=list(V2_KEYS if flags["use_v2_feature_names"]
                           else V1_KEYS),
        compression="GZIP" if flags["gzip_compress"] else "")
    return entry


def compare_with_bert(case: dict[str, Any], records: list[dict[str, list]],
                      bert_dir: Path, data_dir: Path, python: str
                      ) -> dict[str, Any]:
    """Run google-research/bert's original script with the same flags as a
    token-level case and count where the two outputs agree.

    Expected: everything but the choice of masked positions agrees, because
    the Model Garden script makes exactly the same draws from the seeded
    generator and only picks other candidates from the shuffled list.
    """
    import make_pipeline_golden as bert_golden  # pylint: disable=import-outside-toplevel

    keys = ["input_file", "vocab_file", *BERT_DEFAULTS]
    flags = {key: case["flags"][key] for key in keys}
    bert = run_once(
        lambda outputs: bert_golden.run_original(bert_dir, flags, outputs,
                                                 data_dir, python),
        bert_golden.read_records, "mg_golden_bert_")

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


def make_stats(args: argparse.Namespace, seeds: list[int]) -> dict[str, Any]:
    """Run n-gram masking on a full corpus once per seed and record instance
    and span statistics, their mean and their seed-to-seed sd."""
    flags = dict(STATS_FLAGS, input_file=str(args.stats_corpus.resolve()))
    return make_flag_stats(args, seeds, run_model_garden, read_records, flags,
                           "mg_golden_stats_", "_ngram_stats",
                           tests_module("stats_ngram").span_stats,
                           global_random_seeded_with="random_seed")


def _model_garden_info(models_dir: Path, wheel: Path | None, sentencepiece: bool = False
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
        "wheel_sha256": sha256_file(wheel) if wheel else None,
        "script": SCRIPT,
        "script_sha256": sha256_file(models_dir / SCRIPT),
        "tokenization_sha256": sha256_file(
            models_dir / "official/nlp/tools/tokenization.py"),
        "stubbed_imports": ["tf_keras"] if sentencepiece else ["sentencepiece", "tf_keras"],
        "global_random_seed": "random.seed(random_seed), after imports",
    }


def make_case_and_compare(case: dict[str, Any], args: argparse.Namespace
                          ) -> dict[str, Any]:
    """make_case(), then, given --bert_dir, compare_with_bert() for
    mg_default."""
    result = make_case(case, args)
    if args.bert_dir is not None and case["name"] == "mg_default":
        with gzip.open(args.out_dir / result["outputs"][0]["path"],
                       "rt") as f:
            records = [json.loads(line) for line in f]
        result["bert_comparison"] = compare_with_bert(
            case, records, args.bert_dir.resolve(), args.data_dir,
            args.python)
    return result


def main() -> None:
    parser = golden_parser(
        __doc__, "--models_dir", "unzipped tf-models-official wheel (the "
                                 "directory that holds `official/`)",
        python_help="interpreter with tensorflow for the script")
    parser.add_argument("--wheel", type=Path, default=None,
                        help="optional: the wheel --models_dir was unzipped "
                             "from, to record its sha256")
    parser.add_argument("--bert_dir", type=Path, default=None,
                        help="optional google-research/bert checkout: compare "
                             "mg_default with the original script's output")
    parser.add_argument("--sentencepiece", action="store_true",
                        help="the SentencePiece cases (--tokenization=SentencePiece)")
    args = parse_golden_args(parser, "models_dir", SCRIPT)
    info = _model_garden_info(args.models_dir, args.wheel, args.sentencepiece)
    print(f"model garden: {json.dumps(info)}")
    if write_cases(args, SPM_CASES if args.sentencepiece else CASES, make_case_and_compare):
        write_json(args.out_dir / "model_garden.json", info)
    write_stats(args, make_stats)


if __name__ == "__main__":
    main()
