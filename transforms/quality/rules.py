"""Web-text quality rules as the field runs them (`--quality_filters`): C4's
line and page rules, Gopher's quality and repetition rules, FineWeb's rules.

A document is its stripped non-blank lines (transforms.read.documents), the
text they make joined by newlines. The rules decide as datatrove's
C4QualityFilter, GopherRepetitionFilter, GopherQualityFilter and
FineWebQualityFilter decide on that text, in that order (FineWeb's own
pipeline order). Words are spaCy's English tokens, as datatrove splits them
and C4's sentences spaCy's sentencizer's (transforms.quality.english_words
reproduces both at 5-40x spaCy's speed). One difference of means, not of
rule, remains (its effect is measured in docs/quality.md): punctuation and
symbols are Unicode's (categories P, S and control characters;
Sentence_Terminal for FineWeb's stop characters), where datatrove lists
characters by hand.
C4's thresholds are its code's (TFDS c4_utils: lines of at least 5 words,
pages of at least 3 sentences); its paper, which datatrove follows, says 3
words and 5 sentences. Every threshold is a rule's and can be changed
(QualityConfig.parse).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import unicodedata
from collections import Counter
from typing import Iterable, Sequence

import numpy as np
import regex

from bert_pretraining_data.transforms.quality.english_words import words_and_sentences, words_of
from bert_pretraining_data.transforms.quality.language import LanguageFilter
from bert_pretraining_data.transforms.quality.ngram_kernel import REPEATED, TOP, ngram_characters
from bert_pretraining_data.transforms.quality.rule_table import (C4, FINEWEB, GOPHER, NO_LINES_LEFT,
                                                                 RULE_SETS, RULES,
                                                                 QualityConfigError)

_C4_END = (".", "?", "!", '"', "'")
_C4_POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies",
              "use of cookies", "use cookies")
_CITATION = regex.compile(r"\[\d*]|\[edit]|\[citation needed]")
_PARAGRAPHS = regex.compile(r"\n{2,}")
_STOP_WORDS = frozenset(("the", "be", "to", "of", "and", "that", "have", "with"))
_FINEWEB_SHORT_LINE = 30  # characters: a line this long or shorter is short
_BULLETS = ("•", "-")
_ELLIPSES = ("...", "…")


def _symbolic(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] in "PS" or category == "Cc"


_SENTENCE_TERMINAL = regex.compile(r"\p{Sentence_Terminal}")


@functools.lru_cache(maxsize=4096)
def _is_sentence_terminal(char: str) -> bool:
    return _SENTENCE_TERMINAL.fullmatch(char) is not None


@dataclasses.dataclass(frozen=True)
class QualityConfig:
    """The rule sets a run applies and each rule's threshold (None: off)."""

    rule_sets: tuple[str, ...]
    thresholds: dict[str, float | bool | None]

    @classmethod
    def parse(cls, rule_sets: str, overrides: dict | None = None,
              source: str = "--quality_config", *, others: bool = False,
              where: str = "--quality_filters") -> "QualityConfig":
        """--quality_filters' comma list and --quality_config's {rule: threshold};
        `others`: overrides of rules of other sets are left out (a mixture's
        source takes those of its own sets), not refused."""
        names = tuple(name.strip() for name in rule_sets.split(",") if name.strip())
        unknown = [name for name in names if name not in RULE_SETS]
        if unknown or not names:
            raise QualityConfigError(
                f"{where}={rule_sets!r}: {'unknown ' + unknown[0] if unknown else 'empty'};"
                f" give any of {','.join(RULE_SETS)}, separated by commas")
        thresholds = {name: rule.threshold for name, rule in RULES.items()
                      if rule.rule_set in names}
        for name, value in (overrides or {}).items():
            rule = RULES.get(name)
            if rule is None:
                raise QualityConfigError(f"{source}: no rule {name!r}; the rules are "
                                         f"{', '.join(RULES)}")
            if rule.rule_set not in names:
                if others:
                    continue
                raise QualityConfigError(f"{source}: {name} is a {rule.rule_set} rule; add "
                                         f"{rule.rule_set} to --quality_filters or remove it")
            switch = isinstance(rule.threshold, bool)
            if value is not None and (isinstance(value, bool) != switch
                                      or not isinstance(value, (int, float))):
                raise QualityConfigError(
                    f"{source}: {name} takes {'true or false' if switch else 'a number'} "
                    f"(or null to turn it off), not {value!r}")
            thresholds[name] = None if value is False else value
        return cls(tuple(sorted(names, key=RULE_SETS.index)), thresholds)

    def on(self, name: str) -> bool:
        return self.thresholds.get(name) is not None

    def fails(self, name: str, value: float) -> bool:
        """Whether `value` fails rule `name` (never, where the rule is off)."""
        threshold = self.thresholds.get(name)
        if threshold is None:
            return False
        return value > threshold if RULES[name].most else value < threshold


@dataclasses.dataclass(frozen=True)
class Decision:
    """A document's fate: the lines it keeps (None: dropped), the rule that
    dropped it and the value that failed it, and the lines each line rule
    removed."""

    lines: list[str] | None
    rule: str | None = None
    value: float | None = None
    lines_removed: Counter = dataclasses.field(default_factory=Counter)


def _c4_lines(lines: Sequence[str], config: QualityConfig, removed: Counter
              ) -> tuple[list[str], str | None, int, list[str]]:
    """C4's line rules: (the lines kept, the page rule that drops the page or
    None, the kept lines' sentences, their words)."""
    kept: list[str] = []
    words_kept: list[str] = []
    sentences = 0
    terminal, lorem, javascript, curly, policy = map(config.on, (
        "c4_terminal_punctuation", "c4_lorem_ipsum", "c4_javascript", "c4_curly_bracket",
        "c4_policy"))
    for line in lines:
        words = line.split()
        if config.fails("c4_max_word_length", max(map(len, words), default=0)):
            removed["c4_max_word_length"] += 1
            continue
        if "[" in line:  # every citation mark opens with one
            line = _CITATION.sub("", line)  # not stripped again, as C4's code
        if terminal and (not line.endswith(_C4_END) or line.endswith("...")):
            removed["c4_terminal_punctuation"] += 1
            continue
        if config.fails("c4_min_words_per_line", len(words)):
            removed["c4_min_words_per_line"] += 1
            continue
        lower = line.lower()
        if lorem and "lorem ipsum" in lower:
            return kept, "c4_lorem_ipsum", sentences, words_kept
        if javascript and "javascript" in lower:
            removed["c4_javascript"] += 1
            continue
        if curly and "{" in line:
            return kept, "c4_curly_bracket", sentences, words_kept
        if policy and any(phrase in lower for phrase in _C4_POLICY):
            removed["c4_policy"] += 1
            continue
        line_words, line_sentences = words_and_sentences(line)
        sentences += line_sentences
        words_kept += line_words
        kept.append(line)
    return kept, None, sentences, words_kept


def _duplicates(items: Iterable[str]) -> tuple[int, int]:
    """(items seen before, their characters)."""
    seen: set[str] = set()
    count = characters = 0
    for item in items:
        if item in seen:
            count += 1
            characters += len(item)
        else:
            seen.add(item)
    return count, characters


def _gopher_repetition(text: str, lines: Sequence[str], words: Sequence[str]
                       ) -> Iterable[tuple[str, float]]:
    """(rule, value) of each repetition rule, lazily, in order."""
    paragraphs = _PARAGRAPHS.split(text.strip())
    count, characters = _duplicates(paragraphs)
    yield "gopher_duplicate_paragraphs", count / len(paragraphs)
    yield "gopher_duplicate_paragraph_characters", characters / len(text)
    count, characters = _duplicates(lines)
    yield "gopher_duplicate_lines", count / len(lines)
    yield "gopher_duplicate_line_characters", characters / len(text)
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.fromiter(map(len, words), dtype=np.int64, count=len(words)))
    codes = np.frombuffer("".join(words).encode("utf-32-le"), dtype=np.uint32)
    figures = ngram_characters(codes, offsets).tolist()
    for n, characters in zip((*TOP, *REPEATED), figures):
        name = f"gopher_top_{n}_gram" if n in TOP else f"gopher_duplicate_{n}_grams"
        yield name, characters / len(text)


_MEANINGFUL, _ALPHABETIC = 1, 2


@functools.lru_cache(maxsize=1 << 16)
def _other_word(word: str) -> int:
    """What Gopher's rules see in a word that is not letters alone: _MEANINGFUL
    (not symbols alone, or opening with a letter or digit) | _ALPHABETIC
    (holding a letter). Cached: such words (numbers, punctuation) repeat."""
    meaningful = word[0].isalnum() or not all(map(_symbolic, word))
    return _MEANINGFUL * meaningful | _ALPHABETIC * any(map(str.isalpha, word))


def _gopher_quality(text: str, lines: Sequence[str], words: Sequence[str]
                    ) -> Iterable[tuple[str, float]]:
    # Most words are letters alone (meaningful and alphabetic): the others are looked at.
    letters = list(filter(str.isalpha, words))
    others = list(itertools.filterfalse(str.isalpha, words))
    kinds = list(map(_other_word, others))
    meaningful = list(itertools.compress(others, (kind & _MEANINGFUL for kind in kinds)))
    count = len(letters) + len(meaningful)
    yield "gopher_min_words", count
    yield "gopher_max_words", count
    mean = (sum(map(len, letters)) + sum(map(len, meaningful))) / count if count else 0.0
    yield "gopher_min_mean_word_length", mean
    yield "gopher_max_mean_word_length", mean
    total = max(1, len(words))
    yield "gopher_hash_ratio", text.count("#") / total
    yield "gopher_ellipsis_ratio", (text.count("...") + text.count("…")) / total
    yield "gopher_bullet_lines", sum(line.startswith(_BULLETS) for line in lines) / len(lines)
    yield "gopher_ellipsis_lines", sum(line.endswith(_ELLIPSES) for line in lines) / len(lines)
    yield "gopher_alphabetic_words", (len(letters) + sum(
        kind & _ALPHABETIC for kind in kinds) // _ALPHABETIC) / total
    yield "gopher_stop_words", len(_STOP_WORDS.intersection(words))


def _fineweb(text: str, lines: Sequence[str], words: Sequence[str]
             ) -> Iterable[tuple[str, float]]:
    yield "fineweb_line_punctuation", sum(
        _is_sentence_terminal(line[-1]) for line in lines) / len(lines)
    yield "fineweb_short_lines", sum(
        len(line) <= _FINEWEB_SHORT_LINE for line in lines) / len(lines)
    yield "fineweb_duplicate_line_characters", _duplicates(lines)[1] / max(
        1, len(text) - text.count("\n"))
    yield "fineweb_newline_ratio", text.count("\n") / max(1, len(words))


_DOCUMENT_RULES = ((GOPHER, _gopher_repetition), (GOPHER, _gopher_quality),
                   (FINEWEB, _fineweb))


def decide(lines: Sequence[str], config: QualityConfig) -> Decision:
    """A document's Decision under `config`: C4's line rules first (the
    later rules see the lines they keep), then each document rule in turn,
    the first that fails dropping the document."""
    removed: Counter = Counter()
    kept = list(lines)
    words = None
    if C4 in config.rule_sets:  # its kept lines' words are the text's (a line ends a chunk)
        kept, page_rule, sentences, words = _c4_lines(kept, config, removed)
        if page_rule is not None:
            return Decision(None, page_rule, 1.0, removed)
        if config.fails("c4_min_sentences", sentences):
            return Decision(None, "c4_min_sentences", sentences, removed)
    if not kept:
        return Decision(None, NO_LINES_LEFT, 0, removed)
    text = "\n".join(kept)
    if words is None:
        words = words_of(text)
    for rule_set, values in _DOCUMENT_RULES:
        if rule_set in config.rule_sets:
            for name, value in values(text, kept, words):
                if config.fails(name, value):
                    return Decision(None, name, value, removed)
    return Decision(kept, None, None, removed)


@dataclasses.dataclass(frozen=True)
class QualityFilters:
    """What one source's documents go through: its language filter, then its
    rules (either may be None)."""

    rules: QualityConfig | None = None
    languages: LanguageFilter | None = None

    @property
    def active(self) -> bool:
        return self.rules is not None or self.languages is not None
