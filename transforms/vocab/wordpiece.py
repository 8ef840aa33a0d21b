"""WordPiece vocabulary learning on a word-count table: pure and deterministic.

The learner optimizes for the tokenizer that will use the vocabulary,
FullTokenizer's greedy longest-match-first with `##` continuations: after
the reserved tokens and the characters that reach `character_coverage`, it
adds subwords in rounds, a candidate being a substring at a current token
boundary (greedy matching can pick nothing else) and its gain the tokens it
alone would save the count-weighted corpus; rounds grow with the vocabulary,
so N subwords take O(log N) rounds, and tokens the final segmentation never
uses are pruned and refilled. Ties break on the token string, never on dict
or set order, so every run gives the same vocabulary.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Iterable, Mapping, Sequence

from bert_pretraining_data.transforms.handoff.words import split_words
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer, basic_pieces
from bert_pretraining_data.transforms.tokenize.wordpiece_kernel import MAX_INPUT_CHARS_PER_WORD

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
CONTINUATION = "##"
ROUND_GROWTH = 0.3  # a round adds this fraction of the subwords learned so far ...
MIN_ROUND_SIZE = 16  # ... but at least this many
PRUNE_PASSES = 4  # more than pruning needs to converge (docs/design-notes.md)


class LearningError(ValueError):
    """The table or settings cannot give a vocabulary; the message says what to change."""


@dataclasses.dataclass(frozen=True)
class LearningConfig:
    """What to learn; `max_token_chars` bounds candidate length (and work)."""

    vocab_size: int
    num_unused: int = 0
    character_coverage: float = 1.0
    max_token_chars: int = 24

    def __post_init__(self) -> None:
        checks = [
            (self.vocab_size >= 1, f"vocab_size must be positive, got {self.vocab_size}"),
            (self.num_unused >= 0, f"num_unused must be >= 0, got {self.num_unused}"),
            (0 < self.character_coverage <= 1,
             f"character_coverage must be in (0, 1], got {self.character_coverage}"),
            (self.max_token_chars >= 2,
             f"max_token_chars must be at least 2, got {self.max_token_chars}"),
        ]
        for ok, message in checks:
            if not ok:
                raise LearningError(message)


def reserved_tokens(num_unused: int) -> list[str]:
    return [*RESERVED_TOKENS, *(f"[unused{i}]" for i in range(num_unused))]


def count_characters(word_counts: Iterable[tuple[str, int]]) -> Counter[str]:
    """Occurrences of each character, weighted by word count."""
    chars: Counter[str] = Counter()
    for word, count in word_counts:
        for char in word:
            chars[char] += count
    return chars


def _can_continue_a_word(char: str) -> bool:
    """False for characters the basic tokenizer always splits off (punctuation,
    CJK ideographs): their `##` form could never be used."""
    probe = "a" + char
    return [p for w in split_words(probe) for p in basic_pieces(w, do_lower_case=False)] == [probe]


def character_tokens(char_counts: Mapping[str, int], coverage: float) -> list[str]:
    """The most frequent characters that cover `coverage` of all occurrences,
    then the `##` forms of those that can continue a word."""
    ranked = sorted(char_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    needed = coverage * sum(char_counts.values())
    kept: list[str] = []
    covered = 0
    for char, count in ranked:
        if kept and covered >= needed:
            break
        kept.append(char)
        covered += count
    return kept + [CONTINUATION + c for c in kept if _can_continue_a_word(c)]


class _Segmenter:
    """Greedy longest-match-first over a growing set of token strings.

    FullTokenizer's WordPiece algorithm (tests check that they agree), but it
    returns token boundaries and, for every position, what the rest of the
    word costs from there: what the gain of a candidate needs.
    """

    def __init__(self, tokens: Iterable[str]) -> None:
        self.vocab: set[str] = set()
        self._max_head = self._max_tail = 1
        self.add(tokens)

    def add(self, tokens: Iterable[str]) -> None:
        for token in tokens:
            self.vocab.add(token)
            if token.startswith(CONTINUATION):
                self._max_tail = max(self._max_tail, len(token) - len(CONTINUATION))
            else:
                self._max_head = max(self._max_head, len(token))

    def analyze(self, word: str) -> tuple[list[int], list[int]] | None:
        """(token boundaries from 0 to len(word), tokens the greedy `##`
        segmentation of word[i:] takes for each i), or None if the word
        cannot be segmented (it holds a character outside the vocabulary)."""
        vocab, length = self.vocab, len(word)
        jumps = [0] * length  # jumps[i]: end of the greedy `##` token at i (0: none)
        for start in range(1, length):
            for end in range(min(length, start + self._max_tail), start, -1):
                if CONTINUATION + word[start:end] in vocab:
                    jumps[start] = end
                    break
        rest_cost = [0] * (length + 1)
        for start in range(length - 1, 0, -1):
            end = jumps[start]
            # No match: the word fails from here, worse than any segmentation.
            rest_cost[start] = 1 + (rest_cost[end] if end else length)
        first = next((end for end in range(min(length, self._max_head), 0, -1)
                      if word[:end] in vocab), 0)
        if not first:
            return None
        bounds = [0, first]
        while bounds[-1] < length:
            end = jumps[bounds[-1]]
            if not end:
                return None
            bounds.append(end)
        return bounds, rest_cost

    def tokens(self, word: str) -> list[str] | None:
        analysis = self.analyze(word)
        if analysis is None:
            return None
        bounds = analysis[0]
        return [word[:bounds[1]], *(CONTINUATION + word[a:b]
                                    for a, b in zip(bounds[1:], bounds[2:]))]


def _candidate_gains(table: Sequence[tuple[str, int]], segmenter: _Segmenter,
                     max_len: int) -> Counter[str]:
    """Tokens saved in the whole table by adding each candidate alone.

    A candidate is used at the first boundary where it is longer than the
    token greedy picks now; the rest of the word is then re-segmented.
    """
    gains: Counter[str] = Counter()
    for word, count in table:
        analysis = segmenter.analyze(word)
        if analysis is None:
            continue
        bounds, rest_cost = analysis
        tokens = len(bounds) - 1
        seen: set[str] = set()
        for i in range(tokens - 1):  # a candidate at the last token saves nothing
            start = bounds[i]
            prefix = CONTINUATION if start else ""
            for end in range(bounds[i + 1] + 1, min(len(word), start + max_len) + 1):
                candidate = prefix + word[start:end]
                if candidate not in seen:
                    seen.add(candidate)
                    gain = tokens - i - 1 - rest_cost[end]
                    if gain:
                        gains[candidate] += gain * count
    return gains


def _independent_best(gains: Mapping[str, int], size: int) -> list[str]:
    """Up to `size` candidates of highest gain (ties: token order), skipping one
    that extends or is extended by a candidate already chosen in the round:
    gains of such a pair overlap, so the next round judges the second one."""
    chosen: list[str] = []
    chosen_set: set[str] = set()
    prefixes: set[str] = set()
    for _, token in sorted((-g, t) for t, g in gains.items() if g > 0):
        start = len(CONTINUATION) + 1 if token.startswith(CONTINUATION) else 1
        own = [token[:end] for end in range(start, len(token) + 1)]
        if token in prefixes or any(p in chosen_set for p in own):
            continue
        chosen.append(token)
        chosen_set.add(token)
        prefixes.update(own)
        if len(chosen) == size:
            break
    return chosen


def _fill(table: Sequence[tuple[str, int]], base: list[str], learned: list[str],
          budget: int, max_len: int) -> list[str]:
    """`learned` plus subwords added in rounds until `budget` or no gain."""
    segmenter = _Segmenter([*base, *learned])
    learned = list(learned)
    while len(learned) < budget:
        size = min(budget - len(learned),
                   max(MIN_ROUND_SIZE, int(len(learned) * ROUND_GROWTH)))
        gains = _candidate_gains(table, segmenter, max_len)
        chosen = _independent_best(gains, size)
        if not chosen:
            break
        segmenter.add(chosen)
        learned += chosen
    return learned


def _used_tokens(table: Sequence[tuple[str, int]], segmenter: _Segmenter) -> set[str]:
    used: set[str] = set()
    for word, _ in table:
        used.update(segmenter.tokens(word) or ())
    return used


def learn_wordpiece(word_counts: Iterable[tuple[str, int]], config: LearningConfig, *,
                    char_counts: Mapping[str, int] | None = None) -> list[str]:
    """The vocabulary (tokens in id order) learned from (word, count) pairs.

    `char_counts` defaults to the characters of `word_counts`; pass the
    corpus' full character table when `word_counts` holds only its most
    frequent words. The vocabulary is shorter than `vocab_size` only when
    no further subword would shorten the corpus.
    """
    table = sorted((w, c) for w, c in word_counts if len(w) <= MAX_INPUT_CHARS_PER_WORD)
    if not table:
        raise LearningError("the corpus has no words to learn a vocabulary from; "
                            "check --input_file")
    reserved = reserved_tokens(config.num_unused)
    chars = character_tokens(char_counts or count_characters(table),
                             config.character_coverage)
    budget = config.vocab_size - len(reserved) - len(chars)
    if budget < 0:
        raise LearningError(
            f"vocab_size {config.vocab_size} cannot hold the {len(reserved)} reserved "
            f"and {len(chars)} character tokens needed for character_coverage "
            f"{config.character_coverage}; raise --vocab_size or lower "
            "--character_coverage")
    base = reserved + chars
    learned = _fill(table, base, [], budget, config.max_token_chars)
    for _ in range(PRUNE_PASSES):
        used = _used_tokens(table, _Segmenter(base + learned))
        kept = [t for t in learned if t in used]
        if len(kept) == len(learned):
            break
        refilled = _fill(table, base, kept, budget, config.max_token_chars)
        if len(refilled) < budget:
            break  # nothing better for the freed slots: unused stems may still help new words
        learned = refilled
    return base + learned


def vocabulary_bytes(tokens: Sequence[str]) -> bytes:
    """The vocab.txt contents: one token per line, UTF-8."""
    return "".join(f"{t}\n" for t in tokens).encode("utf-8")


@dataclasses.dataclass(frozen=True)
class TokenizationStats:
    """Sums over (word, count) pairs; add them up in any order."""

    distinct_words: int = 0
    words: int = 0
    tokens: int = 0
    unk_tokens: int = 0
    characters: int = 0
    covered_characters: int = 0

    def __add__(self, other: "TokenizationStats") -> "TokenizationStats":
        return TokenizationStats(*(a + b for a, b in zip(dataclasses.astuple(self),
                                                          dataclasses.astuple(other))))

    def rates(self) -> dict[str, float | None]:
        """[UNK] per word (a word that cannot be segmented is one [UNK]), tokens
        per word, and the share of characters the vocabulary has (in the
        bare or `##` form their position needs)."""
        def ratio(a: int, b: int) -> float | None:
            return round(a / b, 6) if b else None
        return {"unk_rate": ratio(self.unk_tokens, self.words),
                "tokens_per_word": ratio(self.tokens, self.words),
                "character_coverage": ratio(self.covered_characters, self.characters)}


def word_stats(tokenizer: FullTokenizer, word: str, count: int) -> TokenizationStats:
    """How `tokenizer` (built with do_lower_case=False: `word` is already a
    basic-tokenizer word) handles `count` occurrences of `word`."""
    ids = tokenizer.tokenize_to_ids(word)
    vocab = tokenizer.vocab
    covered = sum((CONTINUATION + c if i else c) in vocab for i, c in enumerate(word))
    return TokenizationStats(distinct_words=1, words=count, tokens=len(ids) * count,
                             unk_tokens=ids.count(tokenizer.vocabulary.unk_id) * count,
                             characters=len(word) * count,
                             covered_characters=covered * count)
