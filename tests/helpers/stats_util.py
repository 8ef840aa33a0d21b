"""Summary statistics over pretraining instances (decoded TF examples).

Used to compare the distribution of the pipeline's output with the
statistics recorded from the original BERT script on a real corpus
(see tests/data/golden_pipeline/wikitext2_valid_stats.json).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def ratio(num: float, den: float) -> float:
    """num / den, 0.0 for an empty denominator (no records, no masks)."""
    return float(num) / den if den else 0.0


def instance_stats(
    records: Iterable[Mapping[str, Any]], max_seq_length: int, mask_id: int
) -> dict[str, float]:
    """Compute aggregate statistics of pretraining records.

    Each record is a dict with the keys input_ids, input_mask, segment_ids,
    masked_lm_positions, masked_lm_ids, masked_lm_weights and
    next_sentence_labels (lists of numbers, as in the golden JSON files).

    Returned keys:
      instances: number of records.
      random_next_fraction: share of records with next_sentence_labels == 1.
      mask_fraction / kept_fraction / random_fraction: over all real masked
        positions (weight > 0), the share whose input token is mask_id, equals
        the original token (masked_lm_ids), or is anything else.
      mean_tokens: mean number of real tokens (sum of input_mask).
      short_fraction: share of records with fewer than max_seq_length // 2
        real tokens.
      mean_predictions: mean number of real predictions (sum of weights).
    """
    n = 0
    random_next = 0
    total_tokens = 0
    short = 0
    total_predictions = 0.0
    n_mask = n_kept = n_random = 0
    short_limit = max_seq_length // 2

    for rec in records:
        n += 1
        if int(rec["next_sentence_labels"][0]) == 1:
            random_next += 1
        num_tokens = int(sum(rec["input_mask"]))
        total_tokens += num_tokens
        if num_tokens < short_limit:
            short += 1
        total_predictions += float(sum(rec["masked_lm_weights"]))

        input_ids = rec["input_ids"]
        for pos, label, weight in zip(
            rec["masked_lm_positions"], rec["masked_lm_ids"], rec["masked_lm_weights"]
        ):
            if weight <= 0:
                continue
            token = input_ids[int(pos)]
            if token == mask_id:
                n_mask += 1
            elif token == label:
                n_kept += 1
            else:
                n_random += 1

    n_masked = n_mask + n_kept + n_random

    return {
        "instances": n,
        "random_next_fraction": ratio(random_next, n),
        "mask_fraction": ratio(n_mask, n_masked),
        "kept_fraction": ratio(n_kept, n_masked),
        "random_fraction": ratio(n_random, n_masked),
        "mean_tokens": ratio(total_tokens, n),
        "short_fraction": ratio(short, n),
        "mean_predictions": ratio(total_predictions, n),
    }


def differences_beyond_standard_errors(ours: list[Mapping[str, float]],
                                       golden: Mapping[str, Any],
                                       limit: float = 3.0) -> dict[str, tuple[float, float]]:
    """Statistics whose mean over our runs (one per seed) differs from the
    anchor's mean over its seeds by more than `limit` standard errors of the
    difference (from both sides' seed-to-seed spreads); {name: (ours, theirs)}."""
    import statistics

    n_ours, n_theirs = len(ours), len(golden["runs"])
    failures = {}
    for name, theirs in golden["mean"].items():
        values = [run[name] for run in ours]
        mean = statistics.mean(values)
        error = (golden["sd"][name] ** 2 / n_theirs
                 + statistics.stdev(values) ** 2 / n_ours) ** 0.5
        if abs(mean - theirs) > limit * error:
            failures[name] = (mean, theirs)
    return failures
