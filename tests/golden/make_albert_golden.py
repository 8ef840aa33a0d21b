#!/usr/bin/env python
"""Regenerate golden outputs of ALBERT's create_pretraining_data.py.

ALBERT's script (google-research/albert) is run unmodified in a subprocess,
on its WordPiece path (``--vocab_file``, no ``--spm_model_file``), or with
``--sentencepiece`` on its SentencePiece path (``--spm_model_file``, the
tests' model, with the real ``sentencepiece`` library), and its TFRecord
output is decoded and stored as gzipped JSON lines (one object per record,
in record order), like tests/golden/make_pipeline_golden.py does for the
original BERT script.

The runner (``_RUNNER``) does, in this order, before the script runs:
  1. imports tensorflow and aliases ``tensorflow`` to ``tensorflow.compat.v1``
     in sys.modules (ALBERT already imports ``tensorflow.compat.v1``; the alias
     only mirrors the BERT runner);
  2. puts stub modules in sys.modules for ``tensorflow_hub`` and, unless
     ``--spm_model_file=`` is given, ``sentencepiece``, which ALBERT's
     tokenization.py imports at top level but only uses for hub modules and
     ``--spm_model_file``; any attribute access on a stub raises, so a run
     that needed them would fail loudly;
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
  python tests/golden/make_albert_golden.py --sentencepiece \
      --albert_dir /path/to/albert --out_dir tests/data/golden_albert_sentencepiece \
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
import functools
import sys
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
# pylint: disable=wrong-import-position
from golden_common import (CHINESE_VOCAB, HASH_SEEDS, MASK_ID, SPM_MASK_ID, SPM_MODEL,
                           SPM_VOCAB, UNCASED_VOCAB, check_bert_shapes, flag_case, golden_parser,
                           make_flag_case, make_flag_stats, parse_golden_args,
                           read_examples, run_flag_script, tests_module,
                           write_cases, write_stats)

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


# _case(name, input_file, vocab_file, num_outputs, **flag_overrides)
_case = functools.partial(flag_case, ORIGINAL_DEFAULTS)


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

# The SentencePiece path (--sentencepiece): the tests' model, with the .vocab
# ALBERT requires beside it (unread); whole words on pieces, n-grams, SOP and
# NSP, lower-cased and cased, web text, WikiText and Chinese.
_spm_case = functools.partial(_case, spm_model_file=SPM_MODEL)
SPM_CASES = [
    _spm_case("spm_sop_wwm_ngram3", "en_ewt-ud-test.sentences.txt", SPM_VOCAB, 1,
              do_lower_case=True, do_whole_word_mask=True, ngram=3,
              max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2,
              random_seed=12345),
    _spm_case("spm_sop_wwm_ngram3_cased", "en_ewt-ud-test.sentences.txt", SPM_VOCAB, 1,
              do_lower_case=False, do_whole_word_mask=True, ngram=3,
              max_seq_length=128, max_predictions_per_seq=20, dupe_factor=1,
              random_seed=3),
    _spm_case("spm_sop_ngram2_longer_cased", "wiki_small.txt", SPM_VOCAB, 1,
              do_lower_case=False, do_whole_word_mask=False, ngram=2,
              favor_shorter_ngram=False, max_seq_length=64, max_predictions_per_seq=10,
              dupe_factor=1, random_seed=7, short_seq_prob=0.2),
    _spm_case("spm_nsp_wwm", "sample_text.txt", SPM_VOCAB, 1,
              do_lower_case=True, do_whole_word_mask=True, random_next_sentence=True,
              ngram=3, max_seq_length=128, dupe_factor=2, random_seed=5),
    _spm_case("spm_chinese_sop_wwm", "chinese_small.txt", SPM_VOCAB, 1,
              do_lower_case=True, do_whole_word_mask=True, ngram=3,
              max_seq_length=128, dupe_factor=1, random_seed=1),
]

# Flags of the statistics runs (random_seed varies per run).
STATS_FLAGS: dict[str, Any] = dict(
    ORIGINAL_DEFAULTS, do_lower_case=True, do_whole_word_mask=False,
    random_next_sentence=False, ngram=3, favor_shorter_ngram=True,
    max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2)
# ... and on the SentencePiece path: ALBERT's default whole words, on pieces.
SPM_STATS_FLAGS: dict[str, Any] = dict(
    STATS_FLAGS, spm_model_file=SPM_MODEL, do_whole_word_mask=True)

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
if not any(a.startswith("--spm_model_file=") for a in sys.argv[2:]):
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


# run_original(albert_dir, flags, output_files, cwd, python, hash_seed="0"):
# run ALBERT's script once; raise with its log if it fails.
run_original = functools.partial(run_flag_script, _RUNNER,
                                 what="ALBERT script")


def read_records(path: str) -> Iterator[dict[str, list]]:
    """Decode a TFRecord file of tf.train.Example into plain dicts."""
    return read_examples(path, FEATURE_KEYS)


def _check_shapes(rec: dict[str, list], flags: dict[str, Any]) -> None:
    preds = flags["max_predictions_per_seq"] * (1 + int(flags["do_permutation"]))
    check_bert_shapes(rec, flags, extra_seq_keys=("token_boundary",),
                      preds=preds)


def make_case(case: dict[str, Any], args: argparse.Namespace
              ) -> dict[str, Any]:
    # Raw bytes may differ: upb serializes the Features map in a
    # per-process order, so only decoded records are compared.
    entry, same_bytes = make_flag_case(
        case, args, run_original, read_records, _check_shapes,
        "golden_albert", rerun_note=" (PYTHONHASHSEED 12345 vs 0)")
    if same_bytes is not None:
        entry["determinism_check"] = {"identical_records": True,
                                      "identical_tfrecord_bytes": same_bytes,
                                      "pythonhashseeds": list(HASH_SEEDS)}
    return entry


def make_stats(args: argparse.Namespace, seeds: list[int]) -> dict[str, Any]:
    """Run ALBERT (SOP mode) on a full corpus once per seed; record
    instance_stats() and span_stats() of each run, their mean and their
    seed-to-seed (sample) standard deviation."""
    flags = {"input_file": str(args.stats_corpus.resolve()),
             "vocab_file": SPM_VOCAB if args.sentencepiece else UNCASED_VOCAB}
    flags.update(SPM_STATS_FLAGS if args.sentencepiece else STATS_FLAGS)
    return make_flag_stats(args, seeds, run_original, read_records, flags,
                           "golden_albert_stats_", "_sop_stats",
                           tests_module("stats_albert").span_stats,
                           mask_id=SPM_MASK_ID if args.sentencepiece else MASK_ID,
                           seeds=seeds)


def main() -> None:
    parser = golden_parser(
        __doc__, "--albert_dir", "checkout of google-research/albert",
        python_help="interpreter with tensorflow and six (and sentencepiece, "
                    "for --sentencepiece)",
        check_help="run each case twice (PYTHONHASHSEED 0 and 12345) and "
                   "compare the records",
        after_python=[("--sentencepiece", {
            "action": "store_true",
            "help": "the SentencePiece cases and statistics (--spm_model_file)"})])
    args = parse_golden_args(parser, "albert_dir",
                             "create_pretraining_data.py")
    write_cases(args, SPM_CASES if args.sentencepiece else CASES, make_case)
    write_stats(args, make_stats)


if __name__ == "__main__":
    main()
