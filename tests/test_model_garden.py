"""The TF Model Garden's masking (--max_ngram_size), v2 feature names and gzip
against its own create_pretraining_data.py, with WordPiece and with
SentencePiece (--tokenization=SentencePiece --sp_model_file) (golden data made
by tests/golden/make_model_garden_golden.py from the tf-models-official wheel)."""

from __future__ import annotations

import functools
import json

import pytest

from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.main import run
from conftest import DATA
from helpers.anchors import assert_reference_mode_reproduces, assert_statistics_match
from helpers.stats_ngram import span_stats
from helpers.stats_util import instance_stats

GOLDEN = DATA / "golden_model_garden"
GOLDEN_SENTENCEPIECE = DATA / "golden_model_garden_sentencepiece"
CASES = json.loads((GOLDEN / "cases.json").read_text())


def our_flags(garden_flags: dict) -> list[str]:
    """The script's flags as ours; its default masking (no --max_ngram_size)
    is its policy with 1-grams, which is ours with --max_ngram_size=1."""
    flags = []
    for name, value in garden_flags.items():
        if name == "max_ngram_size" and value is None:
            value = 1
        if value is None:  # not passed: --vocab_file with SentencePiece
            continue
        flags.append(f"--{name}={value}")
    return flags


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c["outputs"]], ids=lambda c: c["name"])
def test_reference_mode_reproduces_the_model_garden_record_for_record(case, tmp_path,
                                                                      monkeypatch):
    monkeypatch.chdir(DATA)  # the case's paths are relative to tests/data
    assert_reference_mode_reproduces(case, GOLDEN, our_flags(case["flags"]), tmp_path,
                                     compression=case["compression"])


@pytest.mark.slow
@pytest.mark.parametrize("case", json.loads((GOLDEN_SENTENCEPIECE / "cases.json").read_text()),
                         ids=lambda c: c["name"])
def test_reference_mode_reproduces_the_model_garden_with_sentencepiece_record_for_record(
        case, tmp_path, monkeypatch):
    """Its text handling and pieces, its n-grams over its whole words (on
    SentencePiece, the pieces), the model's ids."""
    monkeypatch.chdir(DATA)
    assert case["flags"]["tokenization"] == "SentencePiece"
    assert_reference_mode_reproduces(case, GOLDEN_SENTENCEPIECE, our_flags(case["flags"]),
                                     tmp_path, compression=case["compression"])


@pytest.mark.parametrize("case", [c for c in CASES if not c["outputs"]], ids=lambda c: c["name"])
def test_what_the_model_garden_refuses_is_refused_before_any_work(case, tmp_path, monkeypatch):
    monkeypatch.chdir(DATA)
    assert "whole word" in case["expected_error"]["last_log_line"]
    with pytest.raises(ConfigError, match="--do_whole_word_mask"):
        run(our_flags(case["flags"]) + [f"--output_file={tmp_path / 'out.tfrecord'}"])
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_distributed_ngram_statistics_match_the_model_garden_on_wikitext(tmp_path):
    """Label share, span lengths, replacement split, lengths."""
    golden = json.loads((GOLDEN / "wikitext2_valid_ngram_stats.json").read_text())
    assert_statistics_match(golden, our_flags, [
        functools.partial(instance_stats, max_seq_length=128, mask_id=golden["mask_id"]),
        span_stats], tmp_path)
