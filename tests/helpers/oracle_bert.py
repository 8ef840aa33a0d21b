"""The original BERT algorithm as readable Python: the oracle the compiled
definition (transforms.instances.pairs, transforms.instances.masking,
transforms.write.tf_example) is tested against, draw for draw and byte for
byte (tests/test_instance_units.py). The pipeline never imports it.

Written from the original `create_pretraining_data.py`: instance creation
with a pluggable random-document chooser and RNG, masking (with
`original_draws`, the original's shuffle of every candidate; otherwise
`random.sample` of the chosen positions, as the pipeline draws), and the
original's padded Example (or the unpadded one of `--padding=none`).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable, Sequence

from bert_pretraining_data.transforms.d2l.example import encode_features
from bert_pretraining_data.transforms.d2l.pairs import SentencePair
from bert_pretraining_data.transforms.handoff.tokenized_documents import CompactView
from bert_pretraining_data.transforms.instances.masking import Masked, MaskingConfig, num_to_predict
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig

Document = Sequence[Sequence[int]]
# Returns a document other than the current one, or None when none exists.
RandomDocumentFn = Callable[[random.Random], "Document | None"]
MaskFn = Callable[[list[int]], Masked]


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
          config: InstanceConfig) -> SentencePair:
    tokens = [config.cls_id, *tokens_a, config.sep_id, *tokens_b, config.sep_id]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    return SentencePair(tokens=tokens, segment_ids=segment_ids, is_random_next=is_random_next)


def create_instances(document: Document, *, config: InstanceConfig,
                     random_document: RandomDocumentFn, rng: random.Random,
                     mask: MaskFn | None = None) -> tuple[list[SentencePair], InstanceStats]:
    """All instances of one document, in the original's order.

    `mask`, when given, is applied to each instance as soon as it is built,
    which is where the original draws its masking randomness.
    """
    max_num_tokens = config.max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances: list[SentencePair] = []
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


def _candidate_groups(tokens: Sequence[int], config: MaskingConfig) -> list[list[int]]:
    """Positions that may be masked, grouped into whole words if configured.

    As in the original, a `##` piece joins the previous candidate even across
    a [SEP], and [CLS]/[SEP] themselves are never candidates.
    """
    groups: list[list[int]] = []
    continuation = config.continuation
    for index, token in enumerate(tokens):
        if token == config.cls_id or token == config.sep_id:
            continue
        if continuation is not None and groups and continuation[token]:
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def _candidates(tokens: Sequence[int], config: MaskingConfig) -> list[int]:
    """Positions other than [CLS]/[SEP], in order; the few special positions
    are found by C-level `list.index` scans instead of a Python loop."""
    tokens = list(tokens)
    specials = []
    for special in {config.cls_id, config.sep_id}:
        start = 0
        while True:
            try:
                start = tokens.index(special, start)
            except ValueError:
                break
            specials.append(start)
            start += 1
    candidates = list(range(len(tokens)))
    for position in sorted(specials, reverse=True):
        del candidates[position]
    return candidates


def _whole_word_choice(groups: list[list[int]], budget: int) -> list[int]:
    """The original's walk over shuffled groups: a word that does not fit the
    remaining budget is skipped, and a later, shorter one may still fit."""
    chosen: list[int] = []
    for group in groups:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(group) <= budget:
            chosen.extend(group)
    return chosen


def mask_tokens(tokens: Sequence[int], config: MaskingConfig, rng: random.Random, *,
                original_draws: bool = False) -> Masked:
    """Chooses predictions and replaces them: 80% [MASK], 10% kept, 10% random.

    The choice is a uniformly random set of candidates within the budget, as
    in the original. With `original_draws` the RNG is consumed exactly as the
    original consumes it (a shuffle of every candidate), so a shared RNG
    (compat mode) reproduces its output; otherwise per-token masking draws
    only the chosen positions (`random.sample`), a fraction of the cost.
    """
    budget = num_to_predict(len(tokens), config)
    if config.continuation is None:
        chosen = _candidates(tokens, config)
        if original_draws:
            rng.shuffle(chosen)
            del chosen[budget:]
        else:
            chosen = rng.sample(chosen, min(budget, len(chosen)))
    else:
        groups = _candidate_groups(tokens, config)
        rng.shuffle(groups)
        chosen = _whole_word_choice(groups, budget)
    output = list(tokens)
    for index in chosen:  # draws in the order the original makes them
        if rng.random() < 0.8:
            output[index] = config.mask_id
        elif rng.random() >= 0.5:
            output[index] = rng.randint(0, config.vocab_size - 1)
    positions = sorted(chosen)
    return Masked(tokens=output, positions=positions,
                  labels=[tokens[i] for i in positions])


def random_document_from_sample(sample, own_key: str) -> RandomDocumentFn:
    """The pipeline's chooser: 10 tries to avoid the current document, then
    uniform over the others; None when there is no other document."""

    def choose(rng: random.Random) -> Document | None:
        if not sample:
            return None
        for _ in range(10):
            key, document = sample[rng.randint(0, len(sample) - 1)]
            if key != own_key:
                return CompactView(document)
        others = [document for key, document in sample if key != own_key]
        return CompactView(others[rng.randint(0, len(others) - 1)]) if others else None

    return choose


def encode_instance(instance: SentencePair, *, max_seq_length: int, max_predictions_per_seq: int,
                    padded: bool = True) -> bytes:
    """The original's padded Example of an instance (input_mask and
    masked_lm_weights only when padded), written by the generic writer."""
    n, k = len(instance.tokens), len(instance.masked_lm_positions)
    token_pad = [0] * (max_seq_length - n) if padded else []
    prediction_pad = [0] * (max_predictions_per_seq - k) if padded else []
    int64 = {
        "input_ids": instance.tokens + token_pad,
        "segment_ids": instance.segment_ids + token_pad,
        "masked_lm_positions": instance.masked_lm_positions + prediction_pad,
        "masked_lm_ids": instance.masked_lm_labels + prediction_pad,
        "next_sentence_labels": [int(instance.is_random_next)],
    }
    float32 = {}
    if padded:
        int64["input_mask"] = [1] * n + token_pad
        float32["masked_lm_weights"] = [1.0] * k + prediction_pad
    return encode_features(int64=int64, float32=float32)
