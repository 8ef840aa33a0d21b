"""Statistics specific to ALBERT-style records (n-gram masking, SOP, boundaries).

Used with tests/stats_util.instance_stats to compare the distribution of the
pipeline's ALBERT mode with the statistics recorded from ALBERT's own
create_pretraining_data.py on a real corpus (see
tests/data/golden_albert/wikitext2_valid_sop_stats.json).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def _run_lengths(positions: list[int]) -> list[int]:
    """Lengths of the maximal runs of consecutive integers in `positions`."""
    lengths: list[int] = []
    previous = None
    for pos in sorted(set(positions)):
        if previous is not None and pos == previous + 1:
            lengths[-1] += 1
        else:
            lengths.append(1)
        previous = pos
    return lengths


def span_stats(records: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Span, sentence-order and token-boundary statistics, pooled over records.

    Each record is a dict with the keys masked_lm_positions,
    masked_lm_weights, next_sentence_labels, input_mask and token_boundary
    (lists of numbers, as in the golden JSON files).

    Spans: within one record, the real masked positions (weight > 0) are split
    into maximal runs of consecutive positions. A span is measured in
    WordPiece positions, so two masked n-grams that touch form one longer
    span, and an n-gram that skips over a [SEP] (ALBERT's n-grams are runs of
    consecutive *candidates*, and [SEP] is not a candidate) counts as two.
    The shares are shares of spans (not of masked positions).

    Returned keys (0.0 where the denominator is 0):
      spans: number of spans, all records pooled.
      span_1, span_2, span_3, span_4plus: share of spans of length 1, 2, 3,
        or 4 and more (they add up to 1).
      mean_span: mean span length (real masked positions / spans).
      sop_swapped_fraction: share of records with next_sentence_labels == 1
        (in SOP mode: swapped segments, or a one-segment chunk completed from
        another document).
      token_boundary_fraction: per record, the share of 1s in token_boundary
        over its real tokens (input_mask == 1); the mean of that over records.
    """
    counts = [0, 0, 0, 0]  # lengths 1, 2, 3, >= 4
    total_spans = 0
    total_positions = 0
    n = 0
    swapped = 0
    boundary_share_sum = 0.0
    for rec in records:
        n += 1
        if int(rec["next_sentence_labels"][0]) == 1:
            swapped += 1
        real = [int(b) for b, m in zip(rec["token_boundary"], rec["input_mask"])
                if int(m) == 1]
        if real:
            boundary_share_sum += sum(real) / len(real)
        positions = [
            int(pos)
            for pos, weight in zip(rec["masked_lm_positions"],
                                   rec["masked_lm_weights"])
            if weight > 0
        ]
        for length in _run_lengths(positions):
            counts[min(length, 4) - 1] += 1
            total_spans += 1
            total_positions += length

    def ratio(num: float, den: float) -> float:
        return float(num) / den if den else 0.0

    return {
        "spans": total_spans,
        "span_1": ratio(counts[0], total_spans),
        "span_2": ratio(counts[1], total_spans),
        "span_3": ratio(counts[2], total_spans),
        "span_4plus": ratio(counts[3], total_spans),
        "mean_span": ratio(total_positions, total_spans),
        "sop_swapped_fraction": ratio(swapped, n),
        "token_boundary_fraction": ratio(boundary_share_sum, n),
    }
