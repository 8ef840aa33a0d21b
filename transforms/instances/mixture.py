"""A mixture's copies of each document (transforms.read.mixture): a source's
weight is copies per document, a fraction drawn per document; with alpha, the
weights follow from the tokens each source holds.
"""

from __future__ import annotations

import hashlib
import math
from typing import Iterator, Sequence

from bert_pretraining_data.transforms.handoff.tokenized_documents import (CompactDocument,
                                                                          compact_token_count)
from bert_pretraining_data.transforms.instances.units import WorkUnit, fan_out
from bert_pretraining_data.transforms.read.mixture import source_of

_DRAWS = float(1 << 64)


def document_copies(seed: int, doc_key: str, weight: float) -> int:
    """floor(weight) copies, and one more with probability weight - floor(weight),
    drawn from the document's own key and the run's seed: a rerun or a
    refresh draws the same."""
    whole = math.floor(weight)
    if weight == whole:
        return int(whole)
    keyed = hashlib.blake2b(f"{seed}/{doc_key}".encode("utf-8", "surrogatepass"),
                            digest_size=8, person=b"copies").digest()
    return int(whole) + (int.from_bytes(keyed, "big") / _DRAWS < weight - whole)


def alpha_weights(tokens: Sequence[int], alpha: float,
                  total_tokens: int | None = None) -> tuple[float, ...]:
    """Temperature sampling as XLM-R's: source i's share of the tokens made is
    q_i = p_i^alpha / sum_j p_j^alpha, p_i its share of the tokens held;
    `total_tokens` (default: as many as held) are made, so its weight (copies
    per document) is q_i * total / tokens_i. A source without tokens weighs 0."""
    held = sum(tokens)
    if not held:
        return tuple(0.0 for _ in tokens)
    powered = [(n / held) ** alpha if n else 0.0 for n in tokens]
    total = total_tokens or held
    return tuple(p / sum(powered) * total / n if n else 0.0 for p, n in zip(powered, tokens))


def fan_out_mixture(batch: list[tuple[str, CompactDocument]], weights: Sequence[float],
                    seed: int) -> Iterator[WorkUnit]:
    """A batch of one source's documents -> its units of work, each document's
    copies drawn from its source's weight."""
    return fan_out((doc_key, document,
                    document_copies(seed, doc_key, weights[source_of(doc_key)]))
                   for doc_key, document in batch)


def source_tokens(element: tuple[str, CompactDocument]) -> tuple[int, int]:
    """(source, tokens) of a tokenized document, for the alpha weights' counts."""
    return source_of(element[0]), compact_token_count(element[1])


def document_figures(element: tuple[str, CompactDocument], weights: Sequence[float],
                     seed: int) -> tuple[int, tuple[int, int, int]]:
    """(source, (1, tokens, copies)) of a tokenized document: its source's
    figures, summed over its documents, with the copies drawn as
    fan_out_mixture draws them."""
    doc_key, document = element
    source = source_of(doc_key)
    return source, (1, compact_token_count(document),
                    document_copies(seed, doc_key, weights[source]))
