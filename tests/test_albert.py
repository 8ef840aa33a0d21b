"""ALBERT's objectives (--next_sentence=sop, --ngram, token_boundary): record
for record against ALBERT's own create_pretraining_data.py (golden data made
by tests/golden/make_albert_golden.py), and the distributed mode's
statistics within the script's seed-to-seed spread."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import DATA, UNCASED_VOCAB
from pipeline.main import run
from records import decode_records
from stats_albert import span_stats
from stats_util import instance_stats

GOLDEN = DATA / "golden_albert"
# ALBERT's flags that are ours by another name or not ours at all.
_RENAMED = {"random_next_sentence": lambda on: ("next_sentence", "nsp" if on else "sop")}
_DROPPED = ("spm_model_file", "input_file_mode", "do_permutation")


def our_flags(albert_flags: dict) -> list[str]:
    flags = []
    for name, value in albert_flags.items():
        if name in _DROPPED:
            assert not value or name == "input_file_mode", (name, value)
            continue
        if name in _RENAMED:
            name, value = _RENAMED[name](value)
        flags.append(f"--{name}={value}")
    return flags


def golden_records(path: str) -> list[dict]:
    with gzip.open(GOLDEN / path, "rt") as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.slow
@pytest.mark.parametrize("case", json.loads((GOLDEN / "cases.json").read_text()),
                         ids=lambda case: case["name"])
def test_reference_mode_reproduces_albert_record_for_record(case, tmp_path, monkeypatch):
    monkeypatch.chdir(DATA)  # the case's paths are relative to tests/data
    outputs = [str(tmp_path / f"out-{k}.tfrecord") for k in range(case["num_output_files"])]
    run(our_flags(case["flags"]) + [f"--output_file={','.join(outputs)}",
                                    "--reference_compatible"])
    for output, golden in zip(outputs, case["outputs"]):
        expected = golden_records(golden["path"])
        ours = decode_records(output)
        assert len(ours) == len(expected) == golden["records"]
        for index, (mine, theirs) in enumerate(zip(ours, expected)):
            assert mine == theirs, f"record {index} of {output}"


@pytest.mark.slow
def test_distributed_sop_statistics_match_albert_on_wikitext(tmp_path):
    """Per-document generators draw differently from the script's one
    generator, so the records differ; their statistics (label share, span
    lengths, replacement split, lengths, token boundaries) must be those of
    the script: each within 3 seed-to-seed standard deviations of its mean."""
    golden = json.loads((GOLDEN / "wikitext2_valid_sop_stats.json").read_text())
    flags = dict(golden["flags"], input_file=DATA / golden["corpus"], random_seed=12345,
                 vocab_file=UNCASED_VOCAB)
    run(our_flags(flags) + [f"--output_dir={tmp_path / 'out'}", "--num_shards=1"])
    records = decode_records(str(next((tmp_path / "out").glob("part-*"))))
    ours = {**instance_stats(records, 128, golden["mask_id"]), **span_stats(records)}
    for name, mean in golden["mean"].items():
        assert abs(ours[name] - mean) <= 3 * golden["sd"][name], (name, ours[name], mean)
