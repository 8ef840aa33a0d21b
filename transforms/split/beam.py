"""SplitDocuments: the held-out splits' Beam shell (transforms.split.held_out).

    documents -> BatchDocuments -> AssignSplits -> batches of train, validation, test
                 (by each text's keyed hash)
    validation + test -> FingerprintHeldOut -> IndexHeldOut (one HeldOutShingles, a side input)
    train + the index -> DropNearCopies -> train without near copies of held-out documents

Training documents wait for the index (the side input), as the dedup stage's
wait for its decisions; only held-out documents are fingerprinted into it, so
a worker holds the held-out text's shingles and band keys, 0.8 to 1.8 bytes
per byte of held-out text (bench/held_out.py).
"""

from __future__ import annotations

from typing import Iterable, Iterator, Literal

import apache_beam as beam
from apache_beam.pvalue import TaggedOutput

from bert_pretraining_data.transforms.counters import (FIGURES, BundleCounters, CountingDoFn,
                                                       FiguresOutput)
from bert_pretraining_data.transforms.dedup.beam import BatchByCharacters
from bert_pretraining_data.transforms.dedup.normalise import normalised_text, text_digest
from bert_pretraining_data.transforms.handoff.tokenized_documents import (CompactDocument,
                                                                          compact_token_count)
from bert_pretraining_data.transforms.read.documents import Document
from bert_pretraining_data.transforms.split.held_out import (TRAIN, HeldOutShingles,
                                                             SplitFractions)

NEAR_COPIES = "near_copies"


def _assign_splits(batch: list[Document], fractions: SplitFractions) -> Iterator[object]:
    """A batch of documents -> a batch per split, training's the main output:
    the guard's work is numpy's, a batch at a time."""
    batches: dict[str, list[Document]] = {name: [] for name in fractions.names}
    for document in batch:
        text = normalised_text(document[1])
        batches[fractions.split_of(text_digest(text) if text else None)].append(document)
    for name, documents in batches.items():
        if documents:
            yield documents if name == TRAIN else TaggedOutput(name, documents)


class _DropNearCopies(CountingDoFn):
    """A batch of training documents -> those that are no near copy of a
    held-out document (the rest counted)."""

    def __init__(self) -> None:
        self._count = BundleCounters("held_out_near_copies")

    def process(self, batch: list[Document], held_out: HeldOutShingles
                ) -> Iterator[Document | TaggedOutput[Literal["near_copies"], int]
                              | FiguresOutput]:
        if not len(held_out):
            yield from batch
            return
        near = held_out.near_copies([normalised_text(lines) for _, lines in batch])
        if near.any():
            self._count.counts["held_out_near_copies"] += int(near.sum())
            yield TaggedOutput(NEAR_COPIES, int(near.sum()))
        for document, drop in zip(batch, near):
            if not drop:
                yield document


class SplitDocuments(beam.PTransform):
    """(key, lines) documents -> {split name: its documents, NEAR_COPIES: how
    many training documents were dropped as near copies of held-out ones
    (one int; also the counter `held_out_near_copies`), FIGURES: its counts},
    each document in the split its text draws."""

    def __init__(self, *, fractions: SplitFractions, ngram: int, threshold: float) -> None:
        super().__init__()
        self._fractions, self._ngram, self._threshold = fractions, ngram, threshold

    def expand(self, documents):
        held_out = self._fractions.held_out
        batches = (documents
                   | "BatchDocuments" >> beam.ParDo(BatchByCharacters())
                   | "AssignSplits" >> beam.FlatMap(_assign_splits, self._fractions)
                   .with_output_types(list[Document], **dict.fromkeys(held_out, list[Document]))
                   .with_outputs(*held_out, main=TRAIN))
        ngram, threshold = self._ngram, self._threshold
        empty = HeldOutShingles.of([], ngram=ngram, threshold=threshold)
        index = (tuple(batches[name] for name in held_out)
                 | "HeldOutBatches" >> beam.Flatten()
                 | "FingerprintHeldOut" >> beam.Map(lambda batch: HeldOutShingles.of(
                     [text for text in (normalised_text(lines) for _, lines in batch) if text],
                     ngram=ngram, threshold=threshold))
                 | "IndexHeldOut" >> beam.CombineGlobally(
                     lambda parts: HeldOutShingles.merge(parts, ngram=ngram,
                                                         threshold=threshold)).without_defaults())
        train = batches[TRAIN] | "DropNearCopies" >> beam.ParDo(
            _DropNearCopies(), held_out=beam.pvalue.AsSingleton(
                index, default_value=empty)).with_outputs(NEAR_COPIES, FIGURES, main=TRAIN)
        near_copies = train[NEAR_COPIES] | "CountNearCopies" >> beam.CombineGlobally(sum)
        return {TRAIN: train[TRAIN], NEAR_COPIES: near_copies, FIGURES: train[FIGURES],
                **{name: batches[name] | f"{name.title()}Documents" >> beam.FlatMap(
                    lambda batch: batch) for name in held_out}}


class SplitFigures(beam.CombineFn):
    """A split's tokenized documents -> {"documents", "tokens"} (zeros for
    none), for its manifest entry."""

    def create_accumulator(self) -> tuple[int, int]:
        return 0, 0

    def add_input(self, accumulator: tuple[int, int], document: tuple[str, CompactDocument]
                  ) -> tuple[int, int]:
        return accumulator[0] + 1, accumulator[1] + compact_token_count(document[1])

    def merge_accumulators(self, accumulators: Iterable[tuple[int, int]]) -> tuple[int, int]:
        documents, tokens = zip(*accumulators)
        return sum(documents), sum(tokens)

    def extract_output(self, accumulator: tuple[int, int]) -> dict[str, int]:
        return {"documents": accumulator[0], "tokens": accumulator[1]}
