"""Checks against an anchor's own script, shared by the tests of each
objective: its golden records (reference mode, record for record) and its
statistics over seeds (distributed mode)."""

from __future__ import annotations

import gzip
import json
import pathlib
from typing import Callable, Sequence

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.pipeline.main import run
from helpers.records import decode_records
from helpers.stats_util import differences_beyond_standard_errors

StatsFn = Callable[[list[dict]], dict[str, float]]


def assert_reference_mode_reproduces(case: dict, golden_dir: pathlib.Path, flags: list[str],
                                     tmp_path: pathlib.Path, compression: str = "") -> None:
    """Runs `flags` with --reference_compatible into the case's output files
    (from tests/data) and compares every record with the anchor's."""
    outputs = [str(tmp_path / f"out-{k}.tfrecord") for k in range(case["num_output_files"])]
    run([*flags, f"--output_file={','.join(outputs)}", "--reference_compatible"])
    for output, golden in zip(outputs, case["outputs"]):
        with gzip.open(golden_dir / golden["path"], "rt") as handle:
            expected = [json.loads(line) for line in handle]
        ours = decode_records(output, compression)
        assert len(ours) == len(expected) == golden["records"]
        for index, (mine, theirs) in enumerate(zip(ours, expected)):
            assert mine == theirs, f"record {index} of {output}"


def assert_statistics_match(golden: dict, flags: Callable[[dict], list[str]],
                            stats: Sequence[StatsFn], tmp_path: pathlib.Path,
                            seeds: Sequence[int] = (12345, 1, 2, 3)) -> None:
    """Distributed mode draws per document, not in the script's order, so its
    records differ; their statistics must not: our means over `seeds` within
    3 standard errors of the anchor's means over its seeds."""
    runs = []
    for seed in seeds:
        out = tmp_path / str(seed)
        run(flags(dict(golden["flags"], input_file=DATA / golden["corpus"], random_seed=seed,
                       vocab_file=UNCASED_VOCAB))
            + [f"--output_dir={out}", "--num_shards=1"])
        records = decode_records(str(next(out.glob("part-*"))))
        runs.append({name: value for fn in stats for name, value in fn(records).items()})
    assert differences_beyond_standard_errors(runs, golden) == {}
