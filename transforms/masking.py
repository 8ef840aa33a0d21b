"""Masked-LM predictions with the original's rules, on token ids.

One function serves the pipeline (static masking) and the loaders (dynamic
masking at load time), so both follow the same budget and 80/10/10 rule.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence

from transforms.vocabulary import Vocabulary


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """What masking needs from the flags and the vocabulary."""

    masked_lm_prob: float
    max_predictions_per_seq: int
    vocab_size: int
    mask_id: int
    cls_id: int
    sep_id: int
    # Per vocabulary id, True for `##` pieces; set only for whole-word masking.
    continuation: tuple[bool, ...] | None = None


@dataclasses.dataclass(frozen=True)
class Masked:
    """Masked token ids, and the sorted positions with their original ids."""

    tokens: list[int]
    positions: list[int]
    labels: list[int]


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


def num_to_predict(length: int, config: MaskingConfig) -> int:
    """The original's budget: 15% of the length, Python's round, at least 1."""
    return min(config.max_predictions_per_seq,
               max(1, int(round(length * config.masked_lm_prob))))


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


def masking_config(vocab: Vocabulary, *, masked_lm_prob: float,
                   max_predictions_per_seq: int, do_whole_word_mask: bool) -> MaskingConfig:
    """Masking as the flags ask: the pipeline builds it from its flags, the
    loaders' dynamic masking from the manifest's, through this one function."""
    return MaskingConfig(
        masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions_per_seq,
        vocab_size=len(vocab), mask_id=vocab.mask_id, cls_id=vocab.cls_id,
        sep_id=vocab.sep_id,
        continuation=tuple(vocab.continuation_flags()) if do_whole_word_mask else None)
