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
import functools
import sys
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
# pylint: disable=wrong-import-position
from golden_common import (BERT_DEFAULTS, BERT_FEATURE_KEYS, CHINESE_VOCAB,
                           UNCASED_VOCAB, check_bert_shapes, flag_case,
                           golden_parser, make_flag_case, make_flag_stats,
                           parse_golden_args, read_examples, run_flag_script,
                           write_cases, write_stats)

DEFAULT_STATS_CORPUS = "/work/shared/data/corpora/wikitext2_valid.txt"

# Defaults of the original script's flags (all passed explicitly below).
ORIGINAL_DEFAULTS: dict[str, Any] = BERT_DEFAULTS

FEATURE_KEYS = BERT_FEATURE_KEYS


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


# run_original(bert_dir, flags, output_files, cwd, python, hash_seed="0"):
# run the original script once; raise with its log if it fails.
run_original = functools.partial(run_flag_script, _RUNNER,
                                 what="original script")


def read_records(path: str) -> Iterator[dict[str, list]]:
    """Decode a TFRecord file of tf.train.Example into plain dicts."""
    return read_examples(path, FEATURE_KEYS)


def make_case(case: dict[str, Any], args: argparse.Namespace
              ) -> dict[str, Any]:
    # Raw bytes usually differ: upb serializes the Features map in a
    # per-process random order, so only decoded records are compared.
    entry, _ = make_flag_case(case, args, run_original, read_records,
                              check_bert_shapes, "golden")
    return entry


def make_stats(args: argparse.Namespace, seeds: list[int]) -> dict[str, Any]:
    """Run the original on a full corpus once per seed and record instance
    statistics, their mean and their run-to-run standard deviation.

    One run is not enough: the original draws a short target length once per
    document, so on a corpus of ~60 long articles its instance count alone
    moves by ~2% from seed to seed. Tests compare with the spread, not a draw.
    """
    flags = {"input_file": str(args.stats_corpus.resolve()),
             "vocab_file": UNCASED_VOCAB}
    flags.update(ORIGINAL_DEFAULTS)
    flags["dupe_factor"] = 5
    return make_flag_stats(args, seeds, run_original, read_records, flags,
                           "golden_stats_", "_stats")


def main() -> None:
    parser = golden_parser(
        __doc__, "--bert_dir", "checkout of google-research/bert",
        stats_corpus=Path(DEFAULT_STATS_CORPUS),
        stats_seeds="12345,1,2,3,4,5,6,7,8,9")
    args = parse_golden_args(parser, "bert_dir", "create_pretraining_data.py")
    write_cases(args, CASES, make_case)
    write_stats(args, make_stats)


if __name__ == "__main__":
    main()
