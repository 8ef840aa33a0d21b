"""The quality rules one by one (transforms.quality.rules): each drops, or
removes the lines of, a document made to fail it, keeps a clean one, and
turns off or moves with --quality_config's thresholds; bad settings are one
line each."""

from __future__ import annotations

import pytest

from bert_pretraining_data.transforms.quality.rule_table import RULES
from bert_pretraining_data.transforms.quality.rules import QualityConfig, QualityConfigError, decide

# Real prose (the English Wikipedia excerpt's first article, as its reader extracts it).
CLEAN = [
    "Anarchism is a political philosophy that advocates self-governed societies based on "
    "voluntary institutions.",
    "These are often described as stateless societies, although several authors have defined "
    "them more specifically as institutions based on non-hierarchical free associations.",
    "Anarchism considers the state to be undesirable, unnecessary and harmful.",
    "While opposition to the state is central, anarchism specifically entails opposing "
    "authority or hierarchical organisation in the conduct of all human relations.",
    "Anarchism is usually considered a far-left ideology and much of anarchist economics and "
    "anarchist legal philosophy reflects anti-authoritarian interpretations of communism.",
]
ALL = QualityConfig.parse("c4,gopher,fineweb")


def test_a_clean_document_is_kept_whole():
    assert decide(CLEAN, ALL).lines == CLEAN


# (rule, lines added to CLEAN or a document of its own): a line rule removes
# the added line; the others drop the document.
LINE_CASES = {
    "c4_max_word_length": "This line holds one word of " + "x" * 1001 + " characters in it.",
    "c4_terminal_punctuation": "Home About Contact Privacy Careers Press",
    "c4_min_words_per_line": "Read more here.",
    "c4_javascript": "Please enable JavaScript in your browser to see the comments.",
    "c4_policy": "By using this site you agree to our privacy policy and terms.",
}
DOCUMENT_CASES = {
    "c4_lorem_ipsum": CLEAN + ["Lorem ipsum dolor sit amet, consectetur adipiscing elit."],
    "c4_curly_bracket": CLEAN + ["The function returns {value} to the caller every time."],
    "c4_min_sentences": CLEAN[:2],
    "gopher_duplicate_lines": CLEAN + [CLEAN[0]] * 3,
    "gopher_min_words": ["A short note that ends here.", "Another line that ends as well.",
                         "And a third line to make three."],
    "gopher_max_mean_word_length": [" ".join(["incomprehensibilities"] * 6) + "."] * 1
    + [f"Electroencephalographically internationalization {n} characteristically." for n in
       range(12)],
    "gopher_hash_ratio": CLEAN + ["#tag #news #today #sale #deal #free #best #top #hot #new."] * 2,
    "gopher_stop_words": ["Quick brown foxes jump over lazy dogs again today."] * 1
    + [f"Bright red apples grow in orchard number {n} again today." for n in range(8)],
}


def only(rule: str) -> QualityConfig:
    """The rule's set with every other document rule of the set off."""
    rule_set = RULES[rule].rule_set
    return QualityConfig.parse(rule_set, {
        name: None for name, other in RULES.items()
        if other.rule_set == rule_set and other.scope == "document" and name != rule})


@pytest.mark.parametrize("rule", sorted(LINE_CASES))
def test_a_line_rule_removes_its_line_only(rule):
    lines = CLEAN[:3] + [LINE_CASES[rule]] + CLEAN[3:]
    decision = decide(lines, QualityConfig.parse("c4"))
    assert decision.lines == CLEAN
    assert decision.lines_removed == {rule: 1}
    off = QualityConfig.parse("c4", {rule: None})  # the rule turned off
    assert LINE_CASES[rule] in (decide(lines, off).lines or [])


@pytest.mark.parametrize("rule", sorted(DOCUMENT_CASES))
def test_a_document_rule_drops_the_document_it_fails(rule):
    decision = decide(DOCUMENT_CASES[rule], only(rule))
    assert (decision.lines, decision.rule) == (None, rule)
    assert decision.value is not None
    assert decide(DOCUMENT_CASES[rule], QualityConfig.parse(
        RULES[rule].rule_set, {rule: None})).rule != rule


def test_a_threshold_from_the_config_moves_the_decision():
    assert decide(CLEAN, QualityConfig.parse("gopher", {"gopher_min_words": 1000})).rule == (
        "gopher_min_words")
    assert decide(CLEAN[:2], QualityConfig.parse("c4", {"c4_min_sentences": 2})).lines == (
        CLEAN[:2])


def test_each_rule_set_applies_only_its_rules():
    spam = [CLEAN[0]] * 6
    assert decide(spam, QualityConfig.parse("gopher")).rule == "gopher_duplicate_lines"
    assert decide(spam, QualityConfig.parse("c4")).lines == spam  # C4 has no repetition rule
    assert decide(spam, QualityConfig.parse("fineweb")).rule == (
        "fineweb_duplicate_line_characters")
    assert {rule.rule_set for rule in RULES.values()} == {"c4", "gopher", "fineweb"}


@pytest.mark.parametrize("sets, overrides, expected", [
    ("c4,spam", None, "--quality_filters='c4,spam': unknown spam"),
    ("", None, "--quality_filters='': empty"),
    ("c4", {"c4_min_word": 3}, "no rule 'c4_min_word'"),
    ("c4", {"gopher_min_words": 10}, "gopher_min_words is a gopher rule; add gopher"),
    ("c4", {"c4_min_sentences": "3"}, "c4_min_sentences takes a number"),
    ("c4", {"c4_javascript": 1}, "c4_javascript takes true or false"),
])
def test_bad_settings_are_one_line(sets, overrides, expected):
    with pytest.raises(QualityConfigError) as raised:
        QualityConfig.parse(sets, overrides)
    assert expected in str(raised.value) and "\n" not in str(raised.value)


def _reference_figures(words: list[str]) -> list[int]:
    """Gopher's n-gram figures with Python strings, as datatrove computes them."""
    from collections import Counter

    figures = []
    for n in (2, 3, 4):
        grams = Counter(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))
        gram, count = grams.most_common(1)[0] if grams else ("", 0)
        figures.append(len(gram) * count)
    for n in range(5, 11):
        seen, repeated, i = set(), 0, 0
        while i < len(words) - n + 1:
            gram = "".join(words[i:i + n])
            if gram in seen:
                repeated, i = repeated + len(gram), i + n
            else:
                seen.add(gram)
                i += 1
        figures.append(repeated)
    return figures


@pytest.mark.parametrize("words", [
    [],
    ["one"],
    "the cat sat on the mat and the cat sat on the mat again".split(),
    # the same string joined without spaces from other words: a repeat for the
    # 5-grams and up, not for the top n-grams (their words differ)
    ["ab", "c", "d", "e", "f", "x", "a", "bc", "d", "e", "f"],
    # ties: the first seen of the most frequent
    "a b c a b c d e d e".split(),
    [w for _ in range(30) for w in "buy cheap pills now".split()],
    ["日本", "語", "の", "文", "日本語", "の", "文", "🙂", "e\u0301", "🙂"] * 3,
])
def test_the_compiled_ngram_figures_are_the_string_ones(words):
    import numpy as np

    from bert_pretraining_data.transforms.quality.ngram_kernel import ngram_characters

    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(word) for word in words])
    codes = np.frombuffer("".join(words).encode("utf-32-le"), dtype=np.uint32)
    assert ngram_characters(codes, offsets).tolist() == _reference_figures(words)
