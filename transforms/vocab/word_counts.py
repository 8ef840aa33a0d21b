"""Word-count tables for vocabulary learning, on Beam: the corpus-sized part.

A word here is what BERT's basic tokenizer hands to WordPiece: the text
cleaned and split on whitespace with CJK characters as words of their own
(`split_words`), then lower-cased and accent-stripped if asked and split at
punctuation (`basic_pieces`). Counting is a distributed analyzer: each
document is counted on its own, then `CombinePerKey(sum)`, which Beam lifts
into per-worker partial sums before the shuffle.

Why Beam combiners and not a tf.Transform analyzer: tf.Transform's
`vocabulary` analyzes tensors from a TensorFlow `preprocessing_fn`, so the
words would have to come from a TensorFlow tokenizer, which is not
FullTokenizer-exact (contract 1); underneath, it is the same CombinePerKey.

Documents are split into training and held-out by a stable hash of their
text, so the split is the same on every runner and wherever the corpus is
stored, and duplicated documents never straddle it.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Iterable, Iterator, Sequence

import apache_beam as beam

from bert_pretraining_data.transforms.randomness import stable_hash
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer, basic_pieces, split_words
from bert_pretraining_data.transforms.tokenize.vocabulary import parse_vocabulary
from bert_pretraining_data.transforms.vocab.wordpiece import (TokenizationStats,
                                                                 vocabulary_bytes, word_stats)

WordCount = tuple[str, int]
_HASH_RANGE = 1 << 63  # stable_hash's range


def is_held_out(lines: Sequence[str], fraction: float) -> bool:
    """Whether a document (its stripped lines) is held out for measurement."""
    return stable_hash("held_out", list(lines)) < int(fraction * _HASH_RANGE)


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


def _document_counts(doc: tuple[str, list[str]], do_lower_case: bool) -> Iterable[WordCount]:
    return document_word_counts(doc[1], do_lower_case=do_lower_case).items()


def _held_out_partition(element: tuple[str, list[str]], num_partitions: int,
                        fraction: float) -> int:
    return int(is_held_out(element[1], fraction))


class SplitHeldOut(beam.PTransform):
    """(doc_key, [lines]) -> (training documents, held-out documents)."""

    def __init__(self, *, fraction: float) -> None:
        super().__init__()
        self._fraction = fraction

    def expand(self, docs):
        return docs | "Partition" >> beam.Partition(_held_out_partition, 2, self._fraction)


class CountWords(beam.PTransform):
    """(doc_key, [lines]) -> (word, count) over all documents."""

    def __init__(self, *, do_lower_case: bool) -> None:
        super().__init__()
        self._do_lower_case = do_lower_case

    def expand(self, docs):
        return (docs
                | "CountPerDocument" >> beam.FlatMap(_document_counts, self._do_lower_case)
                | "SumCounts" >> beam.CombinePerKey(sum))


def _weighted_characters(word_count: WordCount) -> Iterator[WordCount]:
    word, count = word_count
    for char, times in Counter(word).items():
        yield char, times * count


class CountCharacters(beam.PTransform):
    """(word, count) -> one {character: occurrences} dict (a small table)."""

    def expand(self, word_counts):
        return (word_counts
                | "Characters" >> beam.FlatMap(_weighted_characters)
                | "SumCounts" >> beam.CombinePerKey(sum)
                | "ToDict" >> beam.combiners.ToDict())


class _MeasureWords(beam.DoFn):
    """(word, count) + vocabulary tokens (side input) -> TokenizationStats."""

    def setup(self) -> None:
        self._tokens: object = None

    def process(self, element: WordCount, tokens: list[str]) -> Iterator[TokenizationStats]:
        if tokens is not self._tokens:  # the side input is one object per bundle
            vocab = parse_vocabulary(vocabulary_bytes(tokens), source="learned vocabulary")
            self._tokenizer = FullTokenizer(vocab, do_lower_case=False)  # words are cased already
            self._tokens = tokens
        yield word_stats(self._tokenizer, *element)


def sum_stats(stats: Iterable[TokenizationStats]) -> TokenizationStats:
    return sum(stats, TokenizationStats())


class MeasureVocabulary(beam.PTransform):
    """(word, count) -> one TokenizationStats of the vocabulary on those words
    (all zero for an empty table)."""

    def __init__(self, *, vocab: beam.PCollection) -> None:
        super().__init__()
        self._vocab = vocab

    def expand(self, word_counts):
        return (word_counts
                | "Measure" >> beam.ParDo(_MeasureWords(), beam.pvalue.AsSingleton(self._vocab))
                | "Sum" >> beam.CombineGlobally(sum_stats))
