"""Masked-LM predictions, step for step as the original, on token ids.

One function serves the pipeline (static masking) and the loaders (dynamic
masking at load time), so both follow the same budget and 80/10/10 rule.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence


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


def mask_tokens(tokens: Sequence[int], config: MaskingConfig,
                rng: random.Random) -> Masked:
    """Chooses predictions and replaces them: 80% [MASK], 10% kept, 10% random.

    Draws from `rng` in exactly the original's order, so a shared RNG (compat
    mode) reproduces the original's output.
    """
    groups = _candidate_groups(tokens, config)
    rng.shuffle(groups)
    budget = num_to_predict(len(tokens), config)
    output = list(tokens)
    covered: set[int] = set()
    for group in groups:
        if len(covered) >= budget:
            break
        if len(covered) + len(group) > budget:
            continue  # a whole word that does not fit the budget is skipped
        if any(index in covered for index in group):
            continue
        for index in group:
            covered.add(index)
            if rng.random() < 0.8:
                output[index] = config.mask_id
            elif rng.random() < 0.5:
                output[index] = tokens[index]
            else:
                output[index] = rng.randint(0, config.vocab_size - 1)
    positions = sorted(covered)
    return Masked(tokens=output, positions=positions,
                  labels=[tokens[i] for i in positions])
