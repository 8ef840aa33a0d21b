"""create-vocab's Beam shell: the corpus-sized parts of learning a vocabulary.

WordPiece: each document is counted on its own, then `CombinePerKey(sum)`,
which Beam lifts into per-worker partial sums before the shuffle. Not a
tf.Transform analyzer: its `vocabulary` analyzes tensors, so the words would
come from a TensorFlow tokenizer, which is not FullTokenizer-exact; underneath
it is the same CombinePerKey. SentencePiece: the trainer sees a sample of the
corpus's sentences, the same on every runner (transforms.vocab.sentencepiece).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Iterator

import apache_beam as beam

from bert_pretraining_data.transforms.tokenize.sentencepiece_text import preprocess_text
from bert_pretraining_data.transforms.tokenize.vocabulary import parse_vocabulary
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
from bert_pretraining_data.transforms.vocab.sentencepiece import in_sample
from bert_pretraining_data.transforms.vocab.word_counts import (WordCount, document_word_counts,
                                                                is_held_out, sum_stats)
from bert_pretraining_data.transforms.vocab.wordpiece import (TokenizationStats, vocabulary_bytes,
                                                              word_stats)



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


def _sentences(doc: tuple[str, list[str]]) -> list[str]:
    """A document's lines that are sentences (not blank once preprocessed)."""
    return [line for line in doc[1] if preprocess_text(line, lower=False)]


class SampleSentences(beam.PTransform):
    """(doc_key, [lines]) -> the lines the trainer may use: those whose key is
    below the threshold set by the corpus's sentence count (`size`: the
    trainer's input_sentence_size). Raw lines, not preprocessed ones, so the
    training metrics tokenize them as the pipeline will."""

    def __init__(self, *, size: int) -> None:
        super().__init__()
        self._size = size

    def expand(self, docs):
        lines = docs | "Sentences" >> beam.FlatMap(_sentences)
        total = lines | "CountSentences" >> beam.combiners.Count.Globally()
        return lines | "InSample" >> beam.Filter(in_sample, beam.pvalue.AsSingleton(total),
                                                 self._size)
