"""Next-sentence-prediction instances of one document, as the original builds them.

The algorithm is the original's, step by step: a target length (shortened
with `short_seq_prob`), chunks of whole sentences, `a_end`, a random next
segment when the chunk has one segment or with p=0.5 (and the unused segments
put back), `truncate_seq_pair`, `[CLS] A [SEP] B [SEP]`. What differs between
the distributed pipeline and compat mode is passed in: where a random document
comes from, and the RNG (both mask each instance with this function's RNG as
soon as it is built, where the original draws its masking randomness).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable, Sequence

from transforms.masking import Masked

Document = Sequence[Sequence[int]]
# Returns a document other than the current one, or None when none exists.
RandomDocumentFn = Callable[[random.Random], "Document | None"]
MaskFn = Callable[[list[int]], Masked]


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    max_seq_length: int
    short_seq_prob: float
    cls_id: int
    sep_id: int


@dataclasses.dataclass
class Instance:
    """One training pair; the masked_lm fields are empty until it is masked."""

    tokens: list[int]
    segment_ids: list[int]
    is_random_next: bool
    masked_lm_positions: list[int] = dataclasses.field(default_factory=list)
    masked_lm_labels: list[int] = dataclasses.field(default_factory=list)

    def with_mask(self, masked: Masked) -> "Instance":
        return dataclasses.replace(self, tokens=masked.tokens,
                                   masked_lm_positions=masked.positions,
                                   masked_lm_labels=masked.labels)


@dataclasses.dataclass
class InstanceStats:
    """What happened to one document, for counters: nothing is cut silently."""

    truncated_tokens: int = 0
    random_next_unavailable: int = 0


def truncate_seq_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int,
                      rng: random.Random) -> int:
    """Trims the longer side, front or back at random; returns tokens removed.

    One draw per removed token, in the original's order, but each step only
    moves a window bound: deleting from the front of a list is O(n), which
    made the original quadratic on a very long sentence.
    """
    a_start, a_end, b_start, b_end = 0, len(tokens_a), 0, len(tokens_b)
    removed = 0
    while (a_end - a_start) + (b_end - b_start) > max_num_tokens:
        trim_a = (a_end - a_start) > (b_end - b_start)
        front = rng.random() < 0.5
        if trim_a:
            a_start, a_end = (a_start + 1, a_end) if front else (a_start, a_end - 1)
        else:
            b_start, b_end = (b_start + 1, b_end) if front else (b_start, b_end - 1)
        removed += 1
    if removed:
        tokens_a[:] = tokens_a[a_start:a_end]
        tokens_b[:] = tokens_b[b_start:b_end]
    return removed


def _pair(tokens_a: list[int], tokens_b: list[int], is_random_next: bool,
          config: InstanceConfig) -> Instance:
    tokens = [config.cls_id, *tokens_a, config.sep_id, *tokens_b, config.sep_id]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    return Instance(tokens=tokens, segment_ids=segment_ids, is_random_next=is_random_next)


def create_instances(document: Document, *, config: InstanceConfig,
                     random_document: RandomDocumentFn, rng: random.Random,
                     mask: MaskFn | None = None) -> tuple[list[Instance], InstanceStats]:
    """All instances of one document, in the original's order.

    `mask`, when given, is applied to each instance as soon as it is built,
    which is where the original draws its masking randomness.
    """
    max_num_tokens = config.max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances: list[Instance] = []
    stats = InstanceStats()
    chunk: list[Sequence[int]] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_seq_length:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for segment in chunk[:a_end] for t in segment]
            tokens_b: list[int] = []
            is_random_next = len(chunk) == 1 or rng.random() < 0.5
            other = random_document(rng) if is_random_next else None
            if is_random_next and other is None:
                # No other document exists: never pair with our own text.
                stats.random_next_unavailable += 1
                is_random_next = False
            if is_random_next:
                target_b_length = target_seq_length - len(tokens_a)
                for segment in other[rng.randint(0, len(other) - 1):]:
                    tokens_b.extend(segment)
                    if len(tokens_b) >= target_b_length:
                        break
                i -= len(chunk) - a_end  # put the unused segments back
            else:
                tokens_b = [t for segment in chunk[a_end:] for t in segment]
            if tokens_b:  # empty only when a lone segment had no other document
                stats.truncated_tokens += truncate_seq_pair(
                    tokens_a, tokens_b, max_num_tokens, rng)
                instance = _pair(tokens_a, tokens_b, is_random_next, config)
                if mask is not None:
                    instance = instance.with_mask(mask(instance.tokens))
                instances.append(instance)
            chunk = []
            chunk_length = 0
        i += 1
    return instances, stats
