"""Chinese whole-word masking over jieba's words (--whole_word_segmenter=jieba)
against the original BERT script run with Chinese BERT-wwm's marking (HF's
run_chinese_ref.py rules, jieba for LTP) in its shim (golden data made by
tests/golden/make_chinese_wwm_golden.py)."""

from __future__ import annotations

import functools
import gzip
import json

import pytest

from helpers.anchors import assert_reference_mode_reproduces, assert_statistics_match
from conftest import CHINESE_VOCAB, DATA
from helpers.stats_ngram import span_stats
from helpers.stats_util import instance_stats
from bert_pretraining_data.transforms.tokenize.chinese_words import MARK, JiebaMarker, continuation_marks
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer

GOLDEN = DATA / "golden_chinese_wwm"
CASES = json.loads((GOLDEN / "cases.json").read_text())["cases"]


def golden_marks(case: dict) -> list[dict]:
    with gzip.open(GOLDEN / case["name"] / "marks.jsonl.gz", "rt") as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case["name"])
def test_jieba_words_mark_the_tokens_the_reference_marks(case):
    tokenizer = FullTokenizer(str(CHINESE_VOCAB), do_lower_case=case["flags"]["do_lower_case"])
    marker = JiebaMarker(tokenizer)
    lines = golden_marks(case)
    assert sum(sum(line["continues"]) for line in lines) > 1000  # the marks do something
    for line in lines:
        ids = marker(line["line"])
        assert tokenizer.convert_ids_to_tokens([i & ~MARK for i in ids]) == line["tokens"]
        assert [bool(i & MARK) for i in ids] == [bool(c) for c in line["continues"]], line["line"]


def test_marking_follows_the_longest_word_left_to_right():
    tokens = ["北", "京", "大", "学", "生", "[UNK]", "大", "学", "##s"]
    words = {"北京", "北京大学", "大学", "学生"}
    assert continuation_marks(tokens, words) == [
        False, True, True, True, False, False, False, True, False]
    assert continuation_marks(tokens, set()) == [False] * len(tokens)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda case: case["name"])
def test_reference_mode_reproduces_chinese_wwm_record_for_record(case, tmp_path, monkeypatch):
    monkeypatch.chdir(GOLDEN if (GOLDEN / case["flags"]["input_file"]).exists() else DATA)
    flags = dict(case["flags"], vocab_file=CHINESE_VOCAB, whole_word_segmenter="jieba")
    assert_reference_mode_reproduces(case, GOLDEN, [f"--{k}={v}" for k, v in flags.items()],
                                     tmp_path)


@pytest.mark.slow
def test_distributed_statistics_match_the_reference_over_seeds(tmp_path):
    """Label share, 80/10/10 split, lengths and the runs of masked positions
    (whole words make them longer) of the shimmed original over 8 seeds."""
    golden = json.loads((GOLDEN / "chinese_small_stats.json").read_text())
    stats = [functools.partial(instance_stats, max_seq_length=128, mask_id=golden["mask_id"]),
             span_stats]

    def flags(run_flags: dict) -> list[str]:
        run_flags = dict(run_flags, vocab_file=CHINESE_VOCAB, whole_word_segmenter="jieba")
        return [f"--{name}={value}" for name, value in run_flags.items()]

    assert_statistics_match(golden, flags, stats, tmp_path)
