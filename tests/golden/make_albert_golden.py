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

import functools
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
# pylint: disable=wrong-import-position
from golden_common import (CHINESE_VOCAB, DEFAULT_DATA_DIR, HASH_SEEDS,
                           UNCASED_VOCAB, case_header, check_bert_shapes,
                           check_ok, decode_outputs, flag_case, golden_parser,
                           output_file_args, output_paths, parse_golden_args,
                           read_examples, recorded_stats_flags, require_same,
                           run_runner, run_twice, seed_stats, tests_module,
                           write_case_outputs, write_cases, write_stats)

DEFAULT_STATS_CORPUS = DEFAULT_DATA_DIR / "wikitext2_valid.txt"
MASK_ID = 103

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


def run_original(albert_dir: Path, flags: dict[str, Any],
                 output_files: list[str], cwd: Path, python: str,
                 hash_seed: str = "0") -> None:
    """Run ALBERT's script once; raise with its log if it fails."""
    check_ok(run_runner(python, _RUNNER,
                        [str(albert_dir), *output_file_args(flags, output_files)],
                        cwd, hash_seed), "ALBERT script")


def read_records(path: str) -> Iterator[dict[str, list]]:
    """Decode a TFRecord file of tf.train.Example into plain dicts."""
    return read_examples(path, FEATURE_KEYS)


def _check_shapes(rec: dict[str, list], flags: dict[str, Any]) -> None:
    preds = flags["max_predictions_per_seq"] * (1 + int(flags["do_permutation"]))
    check_bert_shapes(rec, flags, extra_seq_keys=("token_boundary",),
                      preds=preds)


def run_and_decode(case: dict[str, Any], albert_dir: Path, data_dir: Path,
                   tmp: Path, python: str, hash_seed: str
                   ) -> tuple[list[list[dict[str, list]]], list[str]]:
    """Run one case; return decoded records and sha256 of each TFRecord."""
    outputs = output_paths(tmp, case["num_output_files"])
    run_original(albert_dir, case["flags"], outputs, data_dir, python,
                 hash_seed)
    return decode_outputs(outputs, read_records,
                          lambda rec: _check_shapes(rec, case["flags"]))


def make_case(case: dict[str, Any], albert_dir: Path, data_dir: Path,
              out_dir: Path, python: str, check_determinism: bool
              ) -> dict[str, Any]:
    name = case["name"]
    (decoded, shas), second = run_twice(
        lambda tmp, hash_seed: run_and_decode(case, albert_dir, data_dir,
                                              tmp, python, hash_seed),
        f"golden_albert_{name}", check_determinism)
    determinism = None
    if second is not None:
        again, shas2 = second
        require_same(name, decoded, again)
        # Raw bytes may differ: upb serializes the Features map in a
        # per-process order, so only decoded records are compared.
        determinism = {"identical_records": True,
                       "identical_tfrecord_bytes": shas == shas2,
                       "pythonhashseeds": list(HASH_SEEDS)}
        print(f"  {name}: second run (PYTHONHASHSEED 12345 vs 0) gave "
              f"identical records (raw TFRecord bytes identical: "
              f"{shas == shas2})")

    result = {**case_header(case), **write_case_outputs(name, decoded, out_dir)}
    if determinism is not None:
        result["determinism_check"] = determinism
    return result


def make_stats(corpus: Path, albert_dir: Path, data_dir: Path, out_dir: Path,
               python: str, seeds: list[int]) -> dict[str, Any]:
    """Run ALBERT (SOP mode) on a full corpus once per seed; record
    instance_stats() and span_stats() of each run, their mean and their
    seed-to-seed (sample) standard deviation."""
    span_stats = tests_module("stats_albert").span_stats
    instance_stats = tests_module("stats_util").instance_stats

    flags = {"input_file": str(corpus.resolve()), "vocab_file": UNCASED_VOCAB}
    flags.update(STATS_FLAGS)

    def stats_of(seed: int) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="golden_albert_stats_") as tmp:
            outputs = output_paths(Path(tmp), 1)
            run_original(albert_dir, dict(flags, random_seed=seed), outputs,
                         data_dir, python)
            records = list(read_records(outputs[0]))
        stats = instance_stats(records, flags["max_seq_length"], MASK_ID)
        stats.update(span_stats(records))
        return stats

    return seed_stats(corpus, seeds, stats_of,
                      out_dir / f"{corpus.stem}_sop_stats.json",
                      flags=recorded_stats_flags(flags, corpus),
                      num_output_files=1, mask_id=MASK_ID, seeds=seeds)


def main() -> None:
    parser = golden_parser(
        __doc__, "--albert_dir", "checkout of google-research/albert",
        python_help="interpreter with tensorflow and six",
        check_help="run each case twice (PYTHONHASHSEED 0 and 12345) and "
                   "compare the records",
        stats_corpus=DEFAULT_STATS_CORPUS, stats_seeds="12345,1,2,3,4,5,6,7")
    args = parse_golden_args(parser, "albert_dir",
                             "create_pretraining_data.py")
    write_cases(args, CASES, lambda case: make_case(
        case, args.albert_dir, args.data_dir, args.out_dir, args.python,
        args.check_determinism))
    write_stats(args, lambda seeds: make_stats(
        args.stats_corpus, args.albert_dir, args.data_dir, args.out_dir,
        args.python, seeds))


if __name__ == "__main__":
    main()
