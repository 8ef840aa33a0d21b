"""Word counts for vocabulary learning: the words of a document, and the held-out split.

A word here is what BERT's basic tokenizer hands to WordPiece: the text
cleaned and split on whitespace with CJK characters as words of their own
(`split_words`), then lower-cased and accent-stripped if asked and split at
punctuation (`basic_pieces`). Documents are split into training and held-out
by a stable hash of their text, so the split is the same on every runner and
wherever the corpus is stored, and duplicated documents never straddle it.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Iterable, Sequence

from bert_pretraining_data.transforms.handoff.words import split_words
from bert_pretraining_data.transforms.randomness import STABLE_HASH_RANGE, stable_hash
from bert_pretraining_data.transforms.tokenize.wordpiece import basic_pieces
from bert_pretraining_data.transforms.vocab.wordpiece import TokenizationStats

WordCount = tuple[str, int]


def is_held_out(lines: Sequence[str], fraction: float) -> bool:
    """Whether a document (its stripped lines) is held out for measurement."""
    return stable_hash("held_out", list(lines)) < int(fraction * STABLE_HASH_RANGE)


@functools.lru_cache(maxsize=1 << 18)
def _pieces(word: str, do_lower_case: bool) -> tuple[str, ...]:
    return tuple(basic_pieces(word, do_lower_case=do_lower_case))


def document_word_counts(lines: Iterable[str], *, do_lower_case: bool) -> Counter[str]:
    """Basic-tokenizer words of one document, counted."""
    raw = Counter(w for line in lines for w in split_words(line))
    counts: Counter[str] = Counter()
    for word, count in raw.items():
        for piece in _pieces(word, do_lower_case):
            counts[piece] += count
    return counts


def sum_stats(stats: Iterable[TokenizationStats]) -> TokenizationStats:
    return sum(stats, TokenizationStats())


