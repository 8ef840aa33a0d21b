"""ELECTRA's full sequences (--next_sentence=none --masking=none) against
ELECTRA's own build_pretraining_dataset.py (golden data made by
tests/golden/make_electra_golden.py)."""

from __future__ import annotations

import json

import pytest

from helpers.anchors import assert_reference_mode_reproduces, assert_statistics_match
from conftest import DATA
from helpers.stats_electra import sequence_stats

GOLDEN = DATA / "golden_electra"


def our_flags(case: dict) -> list[str]:
    """The script's settings as our flags: one pass, no pair task, no masking."""
    return [f"--input_file={','.join(case['corpus_files'])}",
            f"--vocab_file={case['vocab_file']}", f"--do_lower_case={case['do_lower_case']}",
            f"--max_seq_length={case['max_seq_length']}",
            f"--random_seed={case['random_seed']}", "--dupe_factor=1",
            "--next_sentence=none", "--masking=none"]


@pytest.mark.slow
@pytest.mark.parametrize("case", json.loads((GOLDEN / "cases.json").read_text()),
                         ids=lambda case: case["name"])
def test_reference_mode_reproduces_electra_record_for_record(case, tmp_path, monkeypatch):
    monkeypatch.chdir(DATA)  # the case's paths are relative to tests/data
    assert case["strip_accents"]  # the default: accents go when lower-casing, as in BERT
    # The script writes example n to file n % num_out_files; a case stored as
    # one list in write order is compared with one output file.
    files = len(case["outputs"])
    assert_reference_mode_reproduces(dict(case, num_output_files=files), GOLDEN,
                                     our_flags(case), tmp_path)


@pytest.mark.slow
def test_distributed_full_sequence_statistics_match_electra_on_wikitext(tmp_path):
    """Lengths, full and single-segment shares, segment A's share."""
    golden = json.loads((GOLDEN / "wikitext2_valid_stats.json").read_text())
    golden["flags"] = {}

    def flags(run_flags: dict) -> list[str]:
        return our_flags(dict(corpus_files=[str(run_flags["input_file"])],
                              vocab_file=run_flags["vocab_file"],
                              do_lower_case=golden["do_lower_case"],
                              max_seq_length=golden["max_seq_length"],
                              random_seed=run_flags["random_seed"]))

    assert_statistics_match(golden, flags, [sequence_stats], tmp_path)
