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

import functools
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
# pylint: disable=wrong-import-position
from golden_common import (BERT_DEFAULTS, BERT_FEATURE_KEYS, CHINESE_VOCAB,
                           UNCASED_VOCAB, case_header, check_bert_shapes,
                           check_ok, decode_outputs, flag_case, golden_parser,
                           output_file_args, output_paths, parse_golden_args,
                           read_examples, recorded_stats_flags, require_same,
                           run_runner, run_twice, seed_stats, tests_module,
                           write_case_outputs, write_cases, write_stats)

DEFAULT_STATS_CORPUS = "/work/shared/data/corpora/wikitext2_valid.txt"

# Defaults of the original script's flags (all passed explicitly below).
ORIGINAL_DEFAULTS: dict[str, Any] = BERT_DEFAULTS

FEATURE_KEYS = BERT_FEATURE_KEYS
MASK_ID = 103


# _case(name, input_file, vocab_file, num_outputs, **flag_overrides)
_case = functools.partial(flag_case, ORIGINAL_DEFAULTS)


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


def run_original(bert_dir: Path, flags: dict[str, Any], output_files: list[str],
                 cwd: Path, python: str, hash_seed: str = "0") -> None:
    """Run the original script once; raise with its log if it fails."""
    check_ok(run_runner(python, _RUNNER,
                        [str(bert_dir), *output_file_args(flags, output_files)],
                        cwd, hash_seed), "original script")


def read_records(path: str) -> Iterator[dict[str, list]]:
    """Decode a TFRecord file of tf.train.Example into plain dicts."""
    return read_examples(path, FEATURE_KEYS)


def run_and_decode(case: dict[str, Any], bert_dir: Path, data_dir: Path,
                   tmp: Path, python: str, hash_seed: str
                   ) -> tuple[list[list[dict[str, list]]], list[str]]:
    """Run one case; return decoded records and sha256 of each TFRecord."""
    outputs = output_paths(tmp, case["num_output_files"])
    run_original(bert_dir, case["flags"], outputs, data_dir, python, hash_seed)
    return decode_outputs(outputs, read_records,
                          lambda rec: check_bert_shapes(rec, case["flags"]))


def make_case(case: dict[str, Any], bert_dir: Path, data_dir: Path,
              out_dir: Path, python: str, check_determinism: bool
              ) -> dict[str, Any]:
    name = case["name"]
    (decoded, shas), second = run_twice(
        lambda tmp, hash_seed: run_and_decode(case, bert_dir, data_dir, tmp,
                                              python, hash_seed),
        f"golden_{name}", check_determinism)
    if second is not None:
        again, shas2 = second
        require_same(name, decoded, again)
        # Raw bytes usually differ: upb serializes the Features map in a
        # per-process random order, so only decoded records are compared.
        print(f"  {name}: second run gave identical records "
              f"(raw TFRecord bytes identical: {shas == shas2})")
    return {**case_header(case), **write_case_outputs(name, decoded, out_dir)}


def make_stats(corpus: Path, bert_dir: Path, data_dir: Path, out_dir: Path,
               python: str, seeds: list[int]) -> dict[str, Any]:
    """Run the original on a full corpus once per seed and record instance
    statistics, their mean and their run-to-run standard deviation.

    One run is not enough: the original draws a short target length once per
    document, so on a corpus of ~60 long articles its instance count alone
    moves by ~2% from seed to seed. Tests compare with the spread, not a draw.
    """
    instance_stats = tests_module("stats_util").instance_stats

    flags = {"input_file": str(corpus.resolve()), "vocab_file": UNCASED_VOCAB}
    flags.update(ORIGINAL_DEFAULTS)
    flags["dupe_factor"] = 5

    def stats_of(seed: int) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="golden_stats_") as tmp:
            outputs = output_paths(Path(tmp), 1)
            run_original(bert_dir, dict(flags, random_seed=seed), outputs,
                         data_dir, python)
            return instance_stats(read_records(outputs[0]),
                                  flags["max_seq_length"], MASK_ID)

    return seed_stats(corpus, seeds, stats_of,
                      out_dir / f"{corpus.stem}_stats.json",
                      flags=recorded_stats_flags(flags, corpus),
                      num_output_files=1, mask_id=MASK_ID)


def main() -> None:
    parser = golden_parser(
        __doc__, "--bert_dir", "checkout of google-research/bert",
        python_help="interpreter with tensorflow for the original",
        check_help="run each case twice and compare the records",
        stats_corpus=Path(DEFAULT_STATS_CORPUS),
        stats_seeds="12345,1,2,3,4,5,6,7,8,9")
    args = parse_golden_args(parser, "bert_dir", "create_pretraining_data.py")
    write_cases(args, CASES, lambda case: make_case(
        case, args.bert_dir, args.data_dir, args.out_dir, args.python,
        args.check_determinism))
    write_stats(args, lambda seeds: make_stats(
        args.stats_corpus, args.bert_dir, args.data_dir, args.out_dir,
        args.python, seeds))


if __name__ == "__main__":
    main()
