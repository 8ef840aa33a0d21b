"""The random-document sample that random-next segments are drawn from.

The original draws random next segments from the whole corpus held in memory.
Here a deterministic sample of K tokenized documents (the K smallest seeded
hashes of their keys: `beam.combiners.Sample` is not seeded) becomes a side
input, so memory is bounded by the sample, never by the corpus.

The K smallest are kept per bundle where the documents are batched
(`SampleCandidates`), then merged (`smallest_candidates`): a step per
document of its own (rank, key it for a global combine, add it) cost the
runner more than a short document's tokenizing (bench/README, "Per core").
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import random
from typing import Callable, Iterable, Sequence

from bert_pretraining_data.transforms.handoff.tokenized_documents import (CompactDocument,
                                                                          CompactView,
                                                                          compact_document,
                                                                          compact_token_count,
                                                                          expand_document)
from bert_pretraining_data.transforms.instances.pairs import random_document
from bert_pretraining_data.transforms.mersenne_twister import generator_state
from bert_pretraining_data.transforms.randomness import stable_hasher

SampledDocument = tuple[str, CompactDocument]


def sample_ranker(seed: int) -> Callable[[str], int]:
    """doc_key -> the document's seeded rank: the sample is the documents of
    smallest rank (the seed's prefix hashed once, transforms.randomness)."""
    return stable_hasher("nsp-sample", seed)


RankedDocument = tuple[int, str, CompactDocument]


@dataclasses.dataclass(frozen=True)
class SampleSettings:
    """The sample's seed, its K documents (--nsp_sample_size), its token-byte
    cap (--nsp_sample_max_bytes) and the tokens kept of each document."""

    seed: int
    size: int
    max_bytes: int
    max_tokens_per_document: int


class SampleCandidates:
    """The `settings.size` documents of smallest (rank, key) among those
    added: the candidates one bundle offers to the sample. A heap of exactly
    K, as the combiner's own Top keeps (a bundle holds no more capped
    documents than the sample itself); a document ranked past the K kept is
    rejected before it is capped."""

    def __init__(self, settings: SampleSettings) -> None:
        self._rank = sample_ranker(settings.seed)
        self._size, self._max_tokens = settings.size, settings.max_tokens_per_document
        # (-rank, key reversed, document): the heap's first is the largest kept.
        self._heap: list[tuple[int, _Descending, CompactDocument]] = []

    def add(self, key: str, document: CompactDocument) -> None:
        rank = self._rank(key)
        full = len(self._heap) == self._size
        if full and (rank, key) > (-self._heap[0][0], self._heap[0][1].key):
            return
        entry = (-rank, _Descending(key), cap_document(document, self._max_tokens))
        if full:
            heapq.heapreplace(self._heap, entry)
        else:
            heapq.heappush(self._heap, entry)

    def take(self) -> list[RankedDocument]:
        """The candidates, smallest first; the set is empty after."""
        kept = sorted((-rank, key.key, document) for rank, key, document in self._heap)
        self._heap = []
        return kept


class _Descending:
    """A key that orders in reverse, so that the heap's first entry is the
    largest (rank, key) kept; keys are unique, so documents are never compared."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __lt__(self, other: "_Descending") -> bool:
        return other.key < self.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and other.key == self.key


def smallest_candidates(candidates: Iterable[list[RankedDocument]],
                        size: int) -> list[RankedDocument]:
    """The `size` smallest of several bundles' candidates: the sample before
    `bound_sample`. Associative, so a runner may merge in any grouping."""
    return heapq.nsmallest(size, itertools.chain.from_iterable(candidates))


def cap_document(document: CompactDocument, max_tokens: int) -> CompactDocument:
    """The leading whole sentences of a document, about `max_tokens` long.

    A random-next segment needs at most max_seq_length tokens from a random
    sentence on, so a long document contributes its first few thousand
    tokens; at least one sentence is always kept. A document within the cap
    (most of them) is returned as it is, without expanding it.
    """
    if compact_token_count(document) <= max_tokens:
        return document
    kept: list[list[int]] = []
    total = 0
    for sentence in expand_document(document):
        if kept and total + len(sentence) > max_tokens:
            break
        kept.append(sentence)
        total += len(sentence)
    return compact_document(kept)


def bound_sample(ranked: list[RankedDocument],
                 max_bytes: int) -> list[SampledDocument]:
    """Orders by rank and keeps the prefix that fits `max_bytes` (4 bytes per id)."""
    sample: list[SampledDocument] = []
    used = 0
    for _, key, document in sorted(ranked):
        size = 4 * compact_token_count(document)
        if sample and used + size > max_bytes:
            break
        sample.append((key, document))
        used += size
    return sample


def sample_positions(sample: Sequence[SampledDocument]) -> dict[str, int]:
    """doc_key -> position in the sample: built once per sample, so that a
    draw does not scan it for the current document."""
    return {key: position for position, (key, _) in enumerate(sample)}


def random_document_from_sample(sample: Sequence[SampledDocument], own: int,
                                rng: random.Random) -> CompactView | None:
    """A document of the sample other than the one at position `own` (-1: the
    current document is not in it), drawn by the pipeline's chooser
    (transforms.instances.pairs.random_document) from `rng`; None when the sample
    has no other document."""
    with generator_state(rng) as mt:
        index = random_document(mt, len(sample), own, False)
    return None if index < 0 else CompactView(sample[index][1])


