"""What the golden-data generators of this directory have in common.

Every make_*_golden.py (original BERT, ALBERT, the Model Garden, ELECTRA,
Chinese whole-word masking) runs an anchor script unmodified in a
subprocess, decodes its TFRecord output (tf.train.Example records) and
stores the records as gzipped JSON lines with reproducible bytes, so that
the pipeline can be checked record for record without TensorFlow. This
module holds the pieces they share: the subprocess environment, flag
spelling, decoding, the reproducible writers, the determinism re-run, the
statistics file layout and the command-line boilerplate. What differs from
anchor to anchor (the runner, the flags, the cases) stays in each generator.

The generators are run as scripts (``python tests/golden/make_x_golden.py``
from the repository root): Python then puts this directory first on
sys.path, which is how ``import golden_common`` finds this module. Each
generator also inserts its own directory there, so the import works
however the generator is loaded.

Conventions: a generator's ``make_case(case, args)`` and
``make_stats(args, seeds)`` take the parsed command line of
parse_golden_args(), where ``args.anchor_dir`` is the anchor's checkout.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

TESTS_DIR = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = TESTS_DIR / "data"
DEFAULT_STATS_CORPUS = DEFAULT_DATA_DIR / "wikitext2_valid.txt"
DEFAULT_STATS_SEEDS = "12345,1,2,3,4,5,6,7"

UNCASED_VOCAB = "bert-base-uncased-vocab.txt"
CHINESE_VOCAB = "bert-base-chinese-vocab.txt"
MASK_ID = 103  # [MASK] in both vocabularies
SPM_MODEL = "sentencepiece-8k.model"  # the tests' SentencePiece model (ALBERT's ids)
SPM_VOCAB = "sentencepiece-8k.vocab"  # its .vocab, which ALBERT wants beside it
SPM_MASK_ID = 4

# Defaults of the original BERT script's flags (google-research/bert); the
# generators pass all of them explicitly.
BERT_DEFAULTS: dict[str, Any] = {
    "do_lower_case": True,
    "do_whole_word_mask": False,
    "max_seq_length": 128,
    "max_predictions_per_seq": 20,
    "random_seed": 12345,
    "dupe_factor": 10,
    "masked_lm_prob": 0.15,
    "short_seq_prob": 0.1,
}

# The features the original BERT script writes, in the order the golden
# records keep them.
BERT_FEATURE_KEYS = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)

# PYTHONHASHSEED of the first run of a case and of the determinism re-run.
HASH_SEEDS = ("0", "12345")

Record = dict[str, list]
Case = dict[str, Any]


# --- cases and flags -------------------------------------------------------

def flag_case(defaults: dict[str, Any], name: str, input_file: str,
              vocab_file: str, num_outputs: int, **overrides: Any) -> Case:
    """A case: every flag of the anchor spelled out (its defaults, then the
    overrides, which must name known flags), and the number of output files."""
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise ValueError(f"unknown flags {unknown}")
    flags = {"input_file": input_file, "vocab_file": vocab_file}
    flags.update(defaults)
    flags.update(overrides)
    return {"name": name, "flags": flags, "num_output_files": num_outputs}


def flag_args(flags: dict[str, Any]) -> list[str]:
    """absl-style ``--key=value`` arguments; booleans as true/false. A flag
    whose value is None is not passed (absl cannot spell None)."""
    args = []
    for key, value in flags.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        args.append(f"--{key}={value}")
    return args


def output_paths(tmp: Path, num_output_files: int) -> list[str]:
    """Scratch TFRecord paths out-<k>.tfrecord under tmp."""
    return [str(tmp / f"out-{k}.tfrecord") for k in range(num_output_files)]


# --- running the anchor ----------------------------------------------------

def run_runner(python: str, runner: str, args: list[str], cwd: Path,
               hash_seed: str = "0", extra_env: Optional[dict[str, str]] = None
               ) -> subprocess.CompletedProcess:
    """Run ``python -c runner args...`` and return the finished process (not
    checked). TensorFlow's log is quietened, the GPU hidden, and
    PYTHONHASHSEED fixed so that runs can be repeated with another value."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONHASHSEED=hash_seed,
               CUDA_VISIBLE_DEVICES="", **(extra_env or {}))
    return subprocess.run([python, "-c", runner, *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def check_ok(proc: subprocess.CompletedProcess, what: str = "script") -> None:
    """Raise with the process's log if it failed."""
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise RuntimeError(f"{what} failed with {proc.returncode}")


def run_flag_script(runner: str, anchor_dir: Path, flags: dict[str, Any],
                    output_files: list[str], cwd: Path, python: str,
                    hash_seed: str = "0", *, check: bool = True,
                    what: str = "script", runner_args: Sequence[str] = (),
                    extra_env: Optional[dict[str, str]] = None
                    ) -> subprocess.CompletedProcess:
    """Run an absl-flag anchor script once through its runner:
    ``python -c runner anchor_dir runner_args... --flag=value...
    --output_file=a,b``. With check, raise with its log if it fails (the
    error names it ``what``); return the finished process."""
    args = [str(anchor_dir), *runner_args, *flag_args(flags),
            f"--output_file={','.join(output_files)}"]
    proc = run_runner(python, runner, args, cwd, hash_seed, extra_env)
    if check:
        check_ok(proc, what)
    return proc


# --- decoding --------------------------------------------------------------

def decode_example(raw: bytes, keys: Sequence[str]) -> Record:
    """One serialized tf.train.Example as a dict keyed (in the order of keys)
    by its features, which must be exactly keys: masked_lm_weights as floats,
    everything else as ints."""
    from tensorflow.core.example import example_pb2  # pylint: disable=import-outside-toplevel

    feats = example_pb2.Example.FromString(raw).features.feature
    if set(feats.keys()) != set(keys):
        raise ValueError(f"unexpected features {sorted(feats.keys())}")
    rec: Record = {}
    for key in keys:
        if key == "masked_lm_weights":
            rec[key] = [float(v) for v in feats[key].float_list.value]
        else:
            rec[key] = [int(v) for v in feats[key].int64_list.value]
    return rec


def read_examples(path: str, keys: Sequence[str], compression: str = ""
                  ) -> Iterator[Record]:
    """Decode a TFRecord file (compression "" or "GZIP") of tf.train.Example
    into plain dicts."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    dataset = tf.data.TFRecordDataset(path, compression_type=compression)
    for raw in dataset.as_numpy_iterator():
        yield decode_example(raw, keys)


def check_lengths(rec: Record, expected: dict[str, int]) -> None:
    for key, length in expected.items():
        if len(rec[key]) != length:
            raise ValueError(f"{key} has length {len(rec[key])}, not {length}")


def check_bert_shapes(rec: Record, flags: dict[str, Any],
                      extra_seq_keys: Sequence[str] = (),
                      preds: Optional[int] = None) -> None:
    """Check the lengths of a BERT-style record (v1 feature names): sequence
    features of max_seq_length, prediction features of preds (default
    max_predictions_per_seq), one next_sentence_labels."""
    seq = flags["max_seq_length"]
    if preds is None:
        preds = flags["max_predictions_per_seq"]
    expected = dict.fromkeys(("input_ids", "input_mask", "segment_ids",
                              *extra_seq_keys), seq)
    expected.update(dict.fromkeys(("masked_lm_positions", "masked_lm_ids",
                                   "masked_lm_weights"), preds))
    expected["next_sentence_labels"] = 1
    check_lengths(rec, expected)


# --- reproducible files ----------------------------------------------------

def write_jsonl_gz(records: Iterable[dict], path: Path,
                   ensure_ascii: bool = True) -> None:
    """Write records as gzipped JSON lines with reproducible bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                           compresslevel=9) as gz:
            for rec in records:
                line = json.dumps(rec, separators=(",", ":"),
                                  ensure_ascii=ensure_ascii)
                gz.write(line.encode("utf-8") + b"\n")


def write_json(path: Path, obj: Any, ensure_ascii: bool = True) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=ensure_ascii)
                    + "\n")


def sha256_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- one case ---------------------------------------------------------------

def run_twice(run: Callable[[Path, str], Any], prefix: str,
              check_determinism: bool) -> tuple[Any, Any]:
    """``run(tmp, hash_seed)`` in a fresh temporary directory with
    PYTHONHASHSEED 0 and, with check_determinism, once more with 12345.
    Returns both results (the second is None without check_determinism)."""
    with tempfile.TemporaryDirectory(prefix=f"{prefix}_") as tmp:
        first = run(Path(tmp), HASH_SEEDS[0])
    if not check_determinism:
        return first, None
    with tempfile.TemporaryDirectory(prefix=f"{prefix}_2_") as tmp:
        second = run(Path(tmp), HASH_SEEDS[1])
    return first, second


def require_same(name: str, first: Any, second: Any,
                 what: str = "produced other records") -> None:
    if second != first:
        raise RuntimeError(f"{name}: second run {what}")


def case_header(case: Case) -> dict[str, Any]:
    """The first entries of a case in cases.json."""
    return {"name": case["name"], "flags": case["flags"],
            "num_output_files": case["num_output_files"]}


def write_per_file_outputs(name: str, per_file: list[list[Record]],
                           out_dir: Path) -> list[dict[str, Any]]:
    """Write <name>/out-<k>.jsonl.gz per output file; return their entries."""
    outputs = []
    for k, records in enumerate(per_file):
        rel = f"{name}/out-{k}.jsonl.gz"
        write_jsonl_gz(records, out_dir / rel)
        outputs.append({"path": rel, "records": len(records)})
    return outputs


def make_flag_case(case: Case, args: argparse.Namespace,
                   run: Callable[..., Any],
                   read: Callable[[str], Iterable[Record]],
                   check: Callable[[Record, dict[str, Any]], None],
                   prefix: str, /, rerun_note: str = "", **entries: Any
                   ) -> tuple[dict[str, Any], Optional[bool]]:
    """Run a case of an absl-flag anchor, ``run(anchor_dir, flags,
    output_files, cwd, python, hash_seed)`` with data_dir as cwd, in a fresh
    temporary directory; decode every output file with ``read(path)`` and
    check each record with ``check(record, flags)``. With --check_determinism
    run it again with PYTHONHASHSEED 12345: the records must be the same.
    Then write the records of every output file.

    Returns the case's entry of cases.json (name, flags, num_output_files,
    the given entries, record_counts, total_records, outputs) and whether
    the re-run's raw TFRecord bytes were identical too (None without
    --check_determinism); they need not be, as upb serializes the Features
    map in a per-process order, so only decoded records are compared."""
    name, flags = case["name"], case["flags"]

    def run_and_decode(tmp: Path, hash_seed: str
                       ) -> tuple[list[list[Record]], list[str]]:
        outputs = output_paths(tmp, case["num_output_files"])
        run(args.anchor_dir, flags, outputs, args.data_dir, args.python,
            hash_seed)
        decoded = []
        for out in outputs:
            records = list(read(out))
            for rec in records:
                check(rec, flags)
            decoded.append(records)
        return decoded, [sha256_file(out) for out in outputs]

    (decoded, shas), second = run_twice(run_and_decode, f"{prefix}_{name}",
                                        args.check_determinism)
    same_bytes = None
    if second is not None:
        again, shas2 = second
        require_same(name, decoded, again)
        same_bytes = shas == shas2
        print(f"  {name}: second run{rerun_note} gave identical records "
              f"(raw TFRecord bytes identical: {same_bytes})")

    outputs = write_per_file_outputs(name, decoded, args.out_dir)
    counts = [len(r) for r in decoded]
    print(f"  {name}: records per output file {counts}")
    return {**case_header(case), **entries, "record_counts": counts,
            "total_records": sum(counts), "outputs": outputs}, same_bytes


# --- statistics --------------------------------------------------------------

def tests_module(name: str) -> ModuleType:
    """Import a helper module of tests/ (stats_util, stats_albert, ...)."""
    sys.path.insert(0, str(TESTS_DIR))
    return importlib.import_module(name)


def run_once(run: Callable[[list[str]], Any],
             read: Callable[[str], Iterable[Record]], prefix: str
             ) -> list[Record]:
    """The records of one run, ``run(output_files)``, with a single output
    file in a fresh temporary directory."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        outputs = output_paths(Path(tmp), 1)
        run(outputs)
        return list(read(outputs[0]))


def record_stats(records: list[Record], max_seq_length: int,
                 span_stats: Optional[Callable[[list[Record]], dict]] = None,
                 mask_id: int = MASK_ID) -> dict[str, Any]:
    """stats_util.instance_stats() of the records, merged with
    span_stats(records) if given."""
    instance_stats = tests_module("stats_util").instance_stats
    stats = instance_stats(records, max_seq_length, mask_id)
    if span_stats is not None:
        stats.update(span_stats(records))
    return stats


def recorded_stats_flags(flags: dict[str, Any], corpus: Path
                         ) -> dict[str, Any]:
    """The flags of the statistics runs as recorded: the corpus by its name,
    random_seed left out (it varies per run)."""
    recorded = dict(flags, input_file=corpus.name)
    del recorded["random_seed"]
    return recorded


def seed_stats(corpus: Path, seeds: list[int],
               stats_of: Callable[[int], dict[str, Any]], path: Path, /,
               **layout: Any) -> dict[str, Any]:
    """Run ``stats_of(seed)`` for every seed and write the statistics file:
    the corpus (name, sha256, size), the layout entries given, then the mean
    and the seed-to-seed (sample) standard deviation of every statistic and
    the runs themselves. One run is not enough: the anchors' instance counts
    move by a few percent from seed to seed, so tests compare with the
    spread, not with a draw."""
    runs = []
    for seed in seeds:
        stats = stats_of(seed)
        runs.append({"random_seed": seed, "stats": stats})
        print(f"  seed {seed}: {json.dumps(stats)}")
    names = list(runs[0]["stats"])
    values = {name: [run["stats"][name] for run in runs] for name in names}
    result = {
        "corpus": corpus.name,
        "corpus_sha256": sha256_file(corpus),
        "corpus_bytes": corpus.stat().st_size,
        **layout,
        "mean": {name: statistics.mean(v) for name, v in values.items()},
        "sd": {name: statistics.stdev(v) for name, v in values.items()},
        "runs": runs,
    }
    write_json(path, result)
    print(f"  stats written to {path}")
    return result


def make_flag_stats(args: argparse.Namespace, seeds: list[int],
                    run: Callable[..., Any],
                    read: Callable[[str], Iterable[Record]],
                    flags: dict[str, Any], prefix: str, suffix: str,
                    span_stats: Optional[Callable[[list[Record]], dict]] = None,
                    /, mask_id: int = MASK_ID, **layout: Any) -> dict[str, Any]:
    """seed_stats() of an absl-flag anchor on --stats_corpus, written to
    <corpus stem><suffix>.json: per seed one run, ``run(anchor_dir, flags
    with that random_seed, output_files, data_dir, python)``, with a single
    output file read with ``read(path)``, and record_stats() of its records.
    The file records the flags (recorded_stats_flags()), num_output_files,
    mask_id and the layout entries given."""
    corpus = args.stats_corpus

    def stats_of(seed: int) -> dict[str, Any]:
        records = run_once(
            lambda outputs: run(args.anchor_dir, dict(flags, random_seed=seed),
                                outputs, args.data_dir, args.python),
            read, prefix)
        return record_stats(records, flags["max_seq_length"], span_stats, mask_id)

    return seed_stats(corpus, seeds, stats_of,
                      args.out_dir / f"{corpus.stem}{suffix}.json",
                      flags=recorded_stats_flags(flags, corpus),
                      num_output_files=1, mask_id=mask_id, **layout)


# --- command line --------------------------------------------------------------

ArgSpec = tuple[str, dict[str, Any]]


def golden_parser(doc: str, anchor: str, anchor_help: str,
                  python_help: str = "interpreter with tensorflow for the "
                                     "original",
                  check_help: str = "run each case twice and compare the "
                                    "records",
                  stats: bool = True,
                  stats_corpus: Path = DEFAULT_STATS_CORPUS,
                  stats_seeds: str = DEFAULT_STATS_SEEDS,
                  data_help: str = "directory with the input corpora and vocabs",
                  after_out_dir: Sequence[ArgSpec] = (),
                  after_python: Sequence[ArgSpec] = ()
                  ) -> argparse.ArgumentParser:
    """The generators' common options: the anchor's directory (required),
    --out_dir, --data_dir, --python, --cases, --check_determinism and, with
    stats, --stats_corpus, --skip_stats, --skip_cases and --stats_seeds.
    after_out_dir and after_python are (flag, add_argument keywords) of a
    generator's own options, listed after --out_dir and after --python."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[1])
    parser.add_argument(anchor, required=True, type=Path, help=anchor_help)
    parser.add_argument("--out_dir", required=True, type=Path)
    for flag, kwargs in after_out_dir:
        parser.add_argument(flag, **kwargs)
    if stats:
        parser.add_argument("--stats_corpus", type=Path, default=stats_corpus)
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR,
                        help=data_help)
    parser.add_argument("--python", default=sys.executable, help=python_help)
    for flag, kwargs in after_python:
        parser.add_argument(flag, **kwargs)
    parser.add_argument("--cases", default="",
                        help="comma-separated subset of case names")
    if stats:
        parser.add_argument("--skip_stats", action="store_true")
        parser.add_argument("--skip_cases", action="store_true",
                            help="only (re)compute the statistics file")
        parser.add_argument("--stats_seeds", default=stats_seeds,
                            help="comma-separated random seeds of the "
                                 "statistics runs")
    parser.add_argument("--check_determinism", action="store_true",
                        help=check_help)
    return parser


def parse_golden_args(parser: argparse.ArgumentParser, anchor_dest: str,
                      script: str) -> argparse.Namespace:
    """Parse the command line; resolve the anchor, data and output
    directories (creating the output directory) and check that the anchor
    directory holds the script. The anchor directory is also
    ``args.anchor_dir``."""
    args = parser.parse_args()
    args.anchor_dir = getattr(args, anchor_dest).resolve()
    setattr(args, anchor_dest, args.anchor_dir)
    args.data_dir = args.data_dir.resolve()
    args.out_dir = args.out_dir.resolve()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if not (args.anchor_dir / script).is_file():
        parser.error(f"no {script} in {args.anchor_dir}")
    return args


def run_cases(cases: list[Case], cases_arg: str, cases_path: Path,
              make_case: Callable[[Case], dict[str, Any]],
              listed: Callable[[Any], list[dict[str, Any]]] = lambda d: d
              ) -> list[dict[str, Any]]:
    """Make the cases named in cases_arg (comma-separated; all if empty). A
    case left out keeps its entry from the existing cases.json, whose list of
    cases is ``listed(json)``."""
    wanted = set(filter(None, cases_arg.split(",")))
    previous = {}
    if wanted and cases_path.exists():
        previous = {c["name"]: c
                    for c in listed(json.loads(cases_path.read_text()))}
    results = []
    for case in cases:
        if wanted and case["name"] not in wanted:
            if case["name"] in previous:
                results.append(previous[case["name"]])
            continue
        print(f"case {case['name']}")
        results.append(make_case(case))
    return results


def write_cases(args: argparse.Namespace, cases: list[Case],
                make_case: Callable[[Case, argparse.Namespace],
                                    dict[str, Any]]) -> bool:
    """Unless --skip_cases: ``make_case(case, args)`` for the chosen cases
    and write cases.json (a list of their entries). Returns whether it did."""
    if args.skip_cases:
        return False
    cases_path = args.out_dir / "cases.json"
    write_json(cases_path, run_cases(cases, args.cases, cases_path,
                                     lambda case: make_case(case, args)))
    return True


def write_stats(args: argparse.Namespace,
                make_stats: Callable[[argparse.Namespace, list[int]], Any]
                ) -> None:
    """Unless --skip_stats: ``make_stats(args, seeds)`` with the
    --stats_seeds."""
    if not args.skip_stats:
        print(f"stats on {args.stats_corpus}")
        make_stats(args, [int(seed) for seed in args.stats_seeds.split(",")])
