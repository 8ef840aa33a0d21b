"""ALBERT's objectives (--next_sentence=sop, --ngram, token_boundary) against
ALBERT's own create_pretraining_data.py, on its WordPiece path and on its
SentencePiece path (--spm_model_file) (golden data made by
tests/golden/make_albert_golden.py)."""

from __future__ import annotations

import functools
import json

import pytest

from helpers.anchors import assert_reference_mode_reproduces, assert_statistics_match
from conftest import DATA
from helpers.stats_albert import span_stats
from helpers.stats_util import instance_stats

GOLDEN = DATA / "golden_albert"
GOLDEN_SENTENCEPIECE = DATA / "golden_albert_sentencepiece"
# ALBERT's flags that are ours by another name or not ours at all.
_RENAMED = {"random_next_sentence": lambda on: ("next_sentence", "nsp" if on else "sop")}
_DROPPED = ("input_file_mode", "do_permutation")


def our_flags(albert_flags: dict) -> list[str]:
    flags = []
    for name, value in albert_flags.items():
        if name in _DROPPED:
            assert not value or name == "input_file_mode", (name, value)
            continue
        if value is None:  # not passed: --spm_model_file on the WordPiece path
            continue
        if name in _RENAMED:
            name, value = _RENAMED[name](value)
        flags.append(f"--{name}={value}")
    return flags


@pytest.mark.slow
@pytest.mark.parametrize("case", json.loads((GOLDEN / "cases.json").read_text()),
                         ids=lambda case: case["name"])
def test_reference_mode_reproduces_albert_record_for_record(case, tmp_path, monkeypatch):
    monkeypatch.chdir(DATA)  # the case's paths are relative to tests/data
    assert_reference_mode_reproduces(case, GOLDEN, our_flags(case["flags"]), tmp_path)


@pytest.mark.slow
def test_distributed_sop_statistics_match_albert_on_wikitext(tmp_path):
    """Label share, span lengths, replacement split, lengths, token boundaries."""
    golden = json.loads((GOLDEN / "wikitext2_valid_sop_stats.json").read_text())
    assert_statistics_match(golden, our_flags, [
        functools.partial(instance_stats, max_seq_length=128, mask_id=golden["mask_id"]),
        span_stats], tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", json.loads((GOLDEN_SENTENCEPIECE / "cases.json").read_text()),
                         ids=lambda case: case["name"])
def test_reference_mode_reproduces_albert_with_sentencepiece_record_for_record(
        case, tmp_path, monkeypatch):
    """Whole words and n-grams on pieces, token_boundary, the model's ids."""
    monkeypatch.chdir(DATA)
    assert case["flags"]["spm_model_file"]
    assert_reference_mode_reproduces(case, GOLDEN_SENTENCEPIECE, our_flags(case["flags"]),
                                     tmp_path)


@pytest.mark.slow
def test_distributed_sentencepiece_statistics_match_albert_on_wikitext(tmp_path, monkeypatch):
    """The same statistics with --spm_model_file and whole words on pieces."""
    monkeypatch.chdir(DATA)  # the model's path is relative to tests/data
    golden = json.loads((GOLDEN_SENTENCEPIECE / "wikitext2_valid_sop_stats.json").read_text())
    assert golden["flags"]["spm_model_file"] and golden["flags"]["do_whole_word_mask"]
    assert_statistics_match(golden, our_flags, [
        functools.partial(instance_stats, max_seq_length=128, mask_id=golden["mask_id"]),
        span_stats], tmp_path)
