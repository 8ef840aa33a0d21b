"""The WordPiece learner on plain word-count tables: no Beam, milliseconds each."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
from bert_pretraining_data.transforms.tokenize.vocabulary import parse_vocabulary
from bert_pretraining_data.transforms.vocab.word_counts import document_word_counts
from bert_pretraining_data.transforms.vocab.wordpiece import (RESERVED_TOKENS, LearningConfig,
                                                                 LearningError, TokenizationStats,
                                                                 _candidate_gains, _Segmenter,
                                                                 character_tokens, count_characters,
                                                                 learn_wordpiece, vocabulary_bytes,
                                                                 word_stats)

from conftest import DATA

SMALL_TABLE = {"lower": 5, "lowest": 3, "newer": 4, "wider": 2, "low": 7, "slow": 1}


def _tokenizer(tokens: list[str]) -> FullTokenizer:
    """The real tokenizer on words that are already basic-tokenized."""
    return FullTokenizer(parse_vocabulary(vocabulary_bytes(tokens)), do_lower_case=False)


def _total_tokens(tokens: list[str], table: dict[str, int]) -> int:
    tokenizer = _tokenizer(tokens)
    return sum(len(tokenizer.tokenize(word)) * count for word, count in table.items())


@pytest.fixture(scope="module")
def sample_table() -> dict[str, int]:
    lines = (DATA / "sample_text.txt").read_text(encoding="utf-8").splitlines()
    return dict(document_word_counts(lines, do_lower_case=True))


def test_vocabulary_is_reserved_tokens_then_characters_then_subwords(sample_table):
    tokens = learn_wordpiece(sample_table.items(), LearningConfig(vocab_size=600, num_unused=3))
    vocab = parse_vocabulary(vocabulary_bytes(tokens))  # valid for the pipeline
    assert len(vocab) == 600
    assert list(tokens[:8]) == [*RESERVED_TOKENS, "[unused0]", "[unused1]", "[unused2]"]
    chars = set(count_characters(sample_table.items()))
    assert chars <= set(tokens)
    assert "##e" in vocab.ids and "e" in vocab.ids
    # Punctuation is always a word of its own: its ## form could never be used.
    assert "," in vocab.ids and "##," not in vocab.ids
    # Every word of the corpus segments without [UNK], and frequent words whole.
    tokenizer = FullTokenizer(vocab, do_lower_case=False)
    assert all(vocab.unk_id not in tokenizer.tokenize_to_ids(w) for w in sample_table)
    assert tokenizer.tokenize("the") == ["the"]


def test_character_coverage_keeps_the_most_frequent_characters():
    counts = {"a": 90, "b": 9, "c": 1, ".": 5, "中": 5}
    assert character_tokens(counts, 1.0) == ["a", "b", ".", "中", "c", "##a", "##b", "##c"]
    assert character_tokens(counts, 0.8) == ["a", "##a"]
    assert character_tokens(counts, 0.9) == ["a", "b", "##a", "##b"]  # 99 of 110
    # 102.3 needed: one of the two tied at 5 more, the first by code point.
    assert character_tokens(counts, 0.93) == ["a", "b", ".", "##a", "##b"]


def test_gain_of_a_candidate_is_the_real_reduction_in_tokens():
    base = [*RESERVED_TOKENS, *character_tokens(count_characters(SMALL_TABLE.items()), 1.0),
            "lo", "##er"]
    gains = _candidate_gains(sorted(SMALL_TABLE.items()), _Segmenter(base), max_len=50)
    before = _total_tokens(base, SMALL_TABLE)
    checked = 0
    for word in SMALL_TABLE:
        for start in range(len(word)):
            for end in range(start + 2, len(word) + 1):
                body = word[start:end]
                # The gain counts a candidate's first use in a word only.
                if any(w.count(body) > 1 for w in SMALL_TABLE):
                    continue
                candidate = body if start == 0 else "##" + body
                if candidate in base:
                    continue
                real = before - _total_tokens([*base, candidate], SMALL_TABLE)
                assert gains.get(candidate, 0) == real, candidate
                checked += 1
    assert checked > 40
    assert gains["lower"] == 5 * 2  # lo ##w ##er -> lower, 5 times


@given(st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=14), min_size=1,
                max_size=30))
def test_segmenter_agrees_with_full_tokenizer(words):
    table = {"abcabc": 5, "bcdefg": 3, "cafe": 4, "badge": 2, "fed": 6, "gh": 1}
    tokens = learn_wordpiece(table.items(), LearningConfig(vocab_size=40))
    segmenter, tokenizer = _Segmenter(tokens), _tokenizer(tokens)
    for word in words:
        assert (segmenter.tokens(word) or ["[UNK]"]) == tokenizer.tokenize(word)


def test_learning_is_deterministic_whatever_the_table_order(sample_table):
    config = LearningConfig(vocab_size=500)
    items = list(sample_table.items())
    first = learn_wordpiece(items, config)
    random.Random(7).shuffle(items)
    assert learn_wordpiece(items, config) == first
    assert learn_wordpiece(reversed(items), config) == first


def test_larger_vocabulary_segments_the_corpus_shorter(sample_table):
    lengths = [_total_tokens(learn_wordpiece(sample_table.items(), LearningConfig(vocab_size=n)),
                             sample_table) for n in (200, 400, 800)]
    assert lengths[0] > lengths[1] > lengths[2]
    assert lengths[2] < 1.1 * sum(sample_table.values())


def test_learning_stops_when_every_word_is_one_token():
    tokens = learn_wordpiece({"hello": 3, "world": 2}.items(), LearningConfig(vocab_size=1000))
    assert len(tokens) < 1000
    assert _tokenizer(tokens).tokenize("hello") == ["hello"]
    assert _tokenizer(tokens).tokenize("world") == ["world"]


def test_words_over_200_characters_are_not_learned_from():
    # The tokenizer makes such a word [UNK] whatever the vocabulary holds.
    tokens = learn_wordpiece({"a" * 300: 1000, "ab": 1}.items(), LearningConfig(vocab_size=50))
    assert "ab" in tokens
    assert not any(t.lstrip("#").startswith("aa") for t in tokens)


def test_full_character_table_is_kept_when_learning_from_the_top_words():
    tokens = learn_wordpiece({"abc": 9}.items(), LearningConfig(vocab_size=50),
                             char_counts={"a": 9, "b": 9, "c": 9, "z": 1})
    assert "z" in tokens and "##z" in tokens


@pytest.mark.parametrize("config, table, message", [
    (LearningConfig(vocab_size=8), {"abc": 1}, "raise --vocab_size"),
    (LearningConfig(vocab_size=100), {}, "no words"),
    (LearningConfig(vocab_size=100), {"x" * 201: 5}, "no words"),
])
def test_impossible_vocabularies_fail_in_one_line(config, table, message):
    with pytest.raises(LearningError, match=message):
        learn_wordpiece(table.items(), config)


@pytest.mark.parametrize("settings_, message", [
    ({"vocab_size": 0}, "vocab_size must be positive"),
    ({"vocab_size": 10, "character_coverage": 0}, "character_coverage"),
    ({"vocab_size": 10, "num_unused": -1}, "num_unused"),
])
def test_bad_settings_are_rejected(settings_, message):
    with pytest.raises(LearningError, match=message):
        LearningConfig(**settings_)


def test_word_stats_count_tokens_unknowns_and_covered_characters():
    tokenizer = _tokenizer([*RESERVED_TOKENS, "a", "##b"])
    stats = word_stats(tokenizer, "ab", 2) + word_stats(tokenizer, "ba", 1)
    assert stats == TokenizationStats(distinct_words=2, words=3, tokens=5, unk_tokens=1,
                                      characters=6, covered_characters=4)
    assert stats.rates() == {"unk_rate": round(1 / 3, 6), "tokens_per_word": round(5 / 3, 6),
                             "character_coverage": round(4 / 6, 6)}
    assert TokenizationStats().rates() == {"unk_rate": None, "tokens_per_word": None,
                                           "character_coverage": None}
