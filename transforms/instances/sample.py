"""The random-document sample that random-next segments are drawn from.

The original draws random next segments from the whole corpus held in memory.
Here a deterministic sample of K tokenized documents (the K smallest seeded
hashes of their keys: `beam.combiners.Sample` is not seeded) becomes a side
input, so memory is bounded by the sample, never by the corpus.
"""

from __future__ import annotations

import random
from typing import Sequence

from bert_pretraining_data.transforms.handoff.tokenized_documents import (CompactDocument,
                                                                          CompactView,
                                                                          compact_document,
                                                                          compact_token_count,
                                                                          expand_document)
from bert_pretraining_data.transforms.instances.pairs import random_document
from bert_pretraining_data.transforms.mersenne_twister import generator_state
from bert_pretraining_data.transforms.randomness import stable_hasher

SampledDocument = tuple[str, CompactDocument]


def sample_rank(seed: int, doc_key: str) -> int:
    """A document's seeded rank: the sample is the documents of smallest rank."""
    return stable_hasher("nsp-sample", seed)(doc_key)


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


def bound_sample(ranked: list[tuple[int, str, CompactDocument]],
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


