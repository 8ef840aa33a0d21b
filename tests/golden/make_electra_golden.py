#!/usr/bin/env python
"""Regenerate golden outputs of ELECTRA's build_pretraining_dataset.py.

The original script (google-research/electra) is run unmodified in a
subprocess, in one process (--num-processes 1), after the runner has seeded
Python's global ``random`` generator (the only generator the script draws
from). Its TFRecord output is decoded and stored as gzipped JSON lines so
that the pipeline's ELECTRA/RoBERTa-style full-sequence mode can be checked
record for record without TensorFlow.

The script always writes 1000 output files, pretrain_data.tfrecord-<i>-of-1000,
and sends its n-th example (counting from 0 over the whole run) to file
n % 1000. For those cases the records are stored once, in write order
(``records.jsonl.gz``). One extra case passes num_out_files=2 to the
script's ExampleWriter constructor (the only way to change the number of
files; the script's source is not changed) and is stored per output file
(``out-<k>.jsonl.gz``); its write-order stream is checked against a plain
command-line run with the default 1000 files.

Usage:
  python tests/golden/make_electra_golden.py \
      --electra_dir /path/to/electra --out_dir tests/data/golden_electra

Outputs (under --out_dir):
  <case>/records.jsonl.gz       decoded records, in write order (1000 files)
  <case>/out-<k>.jsonl.gz       decoded records of the k-th output file
  cases.json                    flags and record counts of every case
  wikitext2_valid_stats.json    sequence_stats() of runs on --stats_corpus,
                                one per --stats_seeds seed, with mean and sd
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
# pylint: disable=wrong-import-position
from golden_common import (CHINESE_VOCAB, HASH_SEEDS, UNCASED_VOCAB,
                           check_lengths, check_ok, decode_example,
                           golden_parser, parse_golden_args, require_same,
                           run_runner, seed_stats, sha256_file, tests_module,
                           write_cases, write_jsonl_gz, write_per_file_outputs,
                           write_stats)

SCRIPT = "build_pretraining_dataset.py"
# Hard-coded default of ExampleWriter(num_out_files=...); not a CLI flag.
SCRIPT_NUM_OUT_FILES = 1000
OUTPUT_NAME = "pretrain_data.tfrecord-{i}-of-{n}"

FEATURE_KEYS = ("input_ids", "input_mask", "segment_ids")


def _case(name: str, corpus_files: list[str], vocab_file: str,
          do_lower_case: bool, max_seq_length: int, random_seed: int,
          num_out_files: Optional[int] = None) -> dict[str, Any]:
    return {
        "name": name,
        "corpus_files": corpus_files,
        "vocab_file": vocab_file,
        "do_lower_case": do_lower_case,
        "max_seq_length": max_seq_length,
        "random_seed": random_seed,
        # None: the script's own default (1000 files, plain command line).
        "num_out_files": num_out_files,
    }


CASES = [
    _case("electra_sample", ["sample_text.txt"], UNCASED_VOCAB,
          do_lower_case=True, max_seq_length=128, random_seed=12345),
    _case("electra_wiki_cased", ["wiki_small.txt"], UNCASED_VOCAB,
          do_lower_case=False, max_seq_length=64, random_seed=7),
    _case("electra_chinese", ["chinese_small.txt"], CHINESE_VOCAB,
          do_lower_case=True, max_seq_length=128, random_seed=1),
    # Two input files (exercises the random.shuffle of the file names and
    # the state carried from one file to the next) and two output files.
    # Seed 100 makes the shuffle put wiki_small.txt first.
    _case("electra_two_inputs_2out", ["sample_text.txt", "wiki_small.txt"],
          UNCASED_VOCAB, do_lower_case=True, max_seq_length=96,
          random_seed=100, num_out_files=2),
]

# Runs the original script in this process with the global `random` module
# seeded. argv: electra_dir seed num_out_files script-flags...
# num_out_files == 0: run the script as __main__ (its own 1000 files).
# num_out_files > 0: load it as a module, give ExampleWriter that
# num_out_files (a constructor parameter the command line does not expose)
# and call its main().
# Everything the script imports is imported before seeding, so no import can
# touch the generator between the seed and the script's first draw.
_RUNNER = """
import importlib.util, random, runpy, sys
electra_dir, seed, num_out_files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, electra_dir)
import argparse, multiprocessing, os, time
import tensorflow.compat.v1
import model.tokenization, util.utils
script = electra_dir + "/build_pretraining_dataset.py"
sys.argv = [script] + sys.argv[4:]
if num_out_files == 0:
    random.seed(seed)
    runpy.run_path(script, run_name="__main__")
else:
    spec = importlib.util.spec_from_file_location("build_pretraining_dataset", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    class _Writer(mod.ExampleWriter):
        def __init__(self, *args, **kwargs):
            kwargs["num_out_files"] = num_out_files
            super().__init__(*args, **kwargs)
    mod.ExampleWriter = _Writer
    random.seed(seed)
    mod.main()
"""


def _script_flags(case: dict[str, Any], corpus_dir: str, vocab_file: str,
                  output_dir: str) -> list[str]:
    return [
        "--corpus-dir", corpus_dir,
        "--vocab-file", vocab_file,
        "--output-dir", output_dir,
        "--max-seq-length", str(case["max_seq_length"]),
        "--num-processes", "1",
        "--do-lower-case" if case["do_lower_case"] else "--no-lower-case",
    ]


def run_original(electra_dir: Path, case: dict[str, Any], data_dir: Path,
                 tmp: Path, python: str, hash_seed: str,
                 num_out_files: Optional[int]) -> Path:
    """Run the script once on a fresh input dir; return its output dir."""
    corpus_dir = tmp / "corpus"
    corpus_dir.mkdir()
    for name in case["corpus_files"]:
        src = Path(name) if Path(name).is_absolute() else data_dir / name
        shutil.copyfile(src, corpus_dir / src.name)
    output_dir = tmp / "output"
    args = [str(electra_dir), str(case["random_seed"]), str(num_out_files or 0)]
    args += _script_flags(case, str(corpus_dir),
                          str(data_dir / case["vocab_file"]), str(output_dir))
    check_ok(run_runner(python, _RUNNER, args, tmp, hash_seed),
             "original script")
    return output_dir


def _tfrecord_payloads(path: Path) -> list[bytes]:
    """Split a TFRecord file into its record payloads (framing only)."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        if pos + 12 > len(data):
            raise ValueError(f"{path}: truncated record header")
        (length,) = struct.unpack_from("<Q", data, pos)
        start, end = pos + 12, pos + 12 + length
        if end + 4 > len(data):
            raise ValueError(f"{path}: truncated record")
        out.append(data[start:end])
        pos = end + 4
    return out


def read_records(path: Path, max_seq_length: int) -> list[dict[str, list]]:
    """Decode a TFRecord file of tf.train.Example into plain dicts."""
    records = []
    for raw in _tfrecord_payloads(path):
        rec = decode_example(raw, FEATURE_KEYS)
        check_lengths(rec, dict.fromkeys(FEATURE_KEYS, max_seq_length))
        records.append(rec)
    return records


def read_output_dir(output_dir: Path, num_files: int, max_seq_length: int
                    ) -> list[list[dict[str, list]]]:
    """Records of every output file, indexed by file number."""
    expected = {OUTPUT_NAME.format(i=i, n=num_files) for i in range(num_files)}
    found = set(os.listdir(output_dir))
    if found != expected:
        raise ValueError(f"unexpected output files: {sorted(found ^ expected)[:5]}")
    return [read_records(output_dir / OUTPUT_NAME.format(i=i, n=num_files),
                         max_seq_length) for i in range(num_files)]


def write_order(per_file: list[list[dict[str, list]]]
                ) -> list[dict[str, list]]:
    """Undo the round robin: the n-th example went to file n % num_files."""
    num_files = len(per_file)
    total = sum(len(r) for r in per_file)
    stream: list[Optional[dict[str, list]]] = [None] * total
    for i, records in enumerate(per_file):
        if len(records) != len(range(i, total, num_files)):
            raise ValueError(f"file {i} has {len(records)} records, not the "
                             f"round-robin share of {total}")
        for j, rec in enumerate(records):
            stream[i + num_files * j] = rec
    return stream  # type: ignore[return-value]


def run_and_decode(case: dict[str, Any], args: argparse.Namespace,
                   hash_seed: str, num_out_files: Optional[int]
                   ) -> tuple[list[list[dict[str, list]]], list[str]]:
    """Run one case; return per-file records and sha256 of each TFRecord."""
    num_files = num_out_files or SCRIPT_NUM_OUT_FILES
    with tempfile.TemporaryDirectory(prefix=f"electra_{case['name']}_",
                                     dir=args.tmp_dir) as tmp:
        output_dir = run_original(args.electra_dir, case, args.data_dir,
                                  Path(tmp), args.python, hash_seed,
                                  num_out_files)
        per_file = read_output_dir(output_dir, num_files,
                                   case["max_seq_length"])
        shas = [sha256_file(output_dir / OUTPUT_NAME.format(i=i, n=num_files))
                for i in range(num_files)]
    return per_file, shas


def make_case(case: dict[str, Any], args: argparse.Namespace
              ) -> dict[str, Any]:
    name = case["name"]
    n_out = case["num_out_files"]
    per_file, shas = run_and_decode(case, args, HASH_SEEDS[0], n_out)
    stream = write_order(per_file)
    determinism = None
    if args.check_determinism:
        again, shas2 = run_and_decode(case, args, HASH_SEEDS[1], n_out)
        require_same(name, per_file, again)
        # Raw bytes may differ: the Features map entries are serialized in
        # an order that varies from process to process (not with
        # PYTHONHASHSEED), so only decoded records are compared and recorded.
        determinism = {"pythonhashseeds": list(HASH_SEEDS),
                       "identical_records": True}
        print(f"  {name}: run with PYTHONHASHSEED=12345 gave identical records"
              f" (raw TFRecord bytes identical this time: {shas == shas2})")
    if n_out is not None:
        # The number of files must only change where records go.
        default_files, _ = run_and_decode(case, args, HASH_SEEDS[0], None)
        if write_order(default_files) != stream:
            raise RuntimeError(f"{name}: the 1000-file run wrote other records")
        print(f"  {name}: write order equals that of the default 1000-file run")

    outputs = []
    if n_out is None:
        rel = f"{name}/records.jsonl.gz"
        write_jsonl_gz(stream, args.out_dir / rel)
        outputs.append({"path": rel, "records": len(stream),
                        "content": "all records in write order; record n is "
                                   f"record n // {SCRIPT_NUM_OUT_FILES} of "
                                   f"pretrain_data.tfrecord-(n % "
                                   f"{SCRIPT_NUM_OUT_FILES})-of-"
                                   f"{SCRIPT_NUM_OUT_FILES}"})
    else:
        outputs = write_per_file_outputs(name, per_file, args.out_dir)
        for k, output in enumerate(outputs):
            output["content"] = ("records of pretrain_data.tfrecord-"
                                 f"{k}-of-{n_out}, in file order")
    num_files = n_out or SCRIPT_NUM_OUT_FILES
    counts = [len(r) for r in per_file]
    print(f"  {name}: {len(stream)} records, "
          f"{sum(1 for c in counts if c)} of {num_files} output files non-empty")
    result = {
        "name": name,
        "corpus_files": case["corpus_files"],
        "vocab_file": case["vocab_file"],
        "do_lower_case": case["do_lower_case"],
        "strip_accents": True,
        "max_seq_length": case["max_seq_length"],
        "random_seed": case["random_seed"],
        "script_flags": _script_flags(case, "<corpus_dir>", case["vocab_file"],
                                      "<output_dir>"),
        "num_out_files": num_files,
        "num_out_files_source": ("script default (plain command line)"
                                 if n_out is None else
                                 "ExampleWriter(num_out_files=...) set by the runner"),
        "total_records": len(stream),
        "nonempty_output_files": sum(1 for c in counts if c),
        "outputs": outputs,
    }
    if n_out is not None:
        result["record_counts"] = counts
    if determinism is not None:
        result["determinism"] = determinism
    return result


def make_stats(args: argparse.Namespace, seeds: list[int]) -> dict[str, Any]:
    """Run the script on a full corpus once per seed and record sequence
    statistics, their mean and their seed-to-seed standard deviation."""
    sequence_stats = tests_module("stats_electra").sequence_stats

    corpus = args.stats_corpus
    base = _case("stats", [str(corpus.resolve())], UNCASED_VOCAB,
                 do_lower_case=True, max_seq_length=128, random_seed=0)

    def stats_of(seed: int) -> dict[str, Any]:
        per_file, _ = run_and_decode(dict(base, random_seed=seed), args,
                                     HASH_SEEDS[0], None)
        return sequence_stats(write_order(per_file), base["max_seq_length"])

    return seed_stats(
        corpus, seeds, stats_of, args.out_dir / f"{corpus.stem}_stats.json",
        vocab_file=UNCASED_VOCAB, do_lower_case=True, strip_accents=True,
        max_seq_length=base["max_seq_length"],
        num_out_files=SCRIPT_NUM_OUT_FILES,
        script_flags=_script_flags(base, "<corpus_dir>", UNCASED_VOCAB,
                                   "<output_dir>"),
        seeds=seeds)


def main() -> None:
    parser = golden_parser(
        __doc__, "--electra_dir", "checkout of google-research/electra",
        check_help="run each case twice (other PYTHONHASHSEED) and compare "
                   "the records",
        after_python=[("--tmp_dir", {
            "default": None,
            "help": "where to put the scratch input/output dirs"})])
    args = parse_golden_args(parser, "electra_dir", SCRIPT)
    write_cases(args, CASES, make_case)
    write_stats(args, make_stats)


if __name__ == "__main__":
    main()
