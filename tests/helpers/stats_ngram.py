"""Span statistics of masked positions, for n-gram (span) masking.

Used with tests/stats_util.instance_stats to compare the distribution of the
pipeline's n-gram masking with the statistics recorded from the TF Model
Garden's create_pretraining_data.py on a real corpus (see
tests/data/golden_model_garden/wikitext2_valid_ngram_stats.json).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from helpers.stats_util import ratio


def _runs(positions: list[int]) -> list[int]:
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
    """Share of masked spans by length, pooled over all records.

    Each record is a dict with the keys masked_lm_positions and
    masked_lm_weights (lists of numbers, as in the golden JSON files). Only
    real masked positions (weight > 0) count. Within one record they are split
    into maximal runs of consecutive positions ("spans"); a span is measured in
    WordPiece positions, so one masked word of three pieces is a span of 3,
    and two masked n-grams that touch form one longer span.

    Returned keys (all runs of all records pooled; 0.0 if there is none):
      spans: number of spans.
      span_1, span_2, span_3, span_4plus: share of spans whose length is 1,
        2, 3, or 4 and more (these four add up to 1).
      mean_span: mean span length (real masked positions / spans).
    """
    counts = [0, 0, 0, 0]  # lengths 1, 2, 3, >= 4
    total_spans = 0
    total_positions = 0
    for rec in records:
        positions = [
            int(pos)
            for pos, weight in zip(rec["masked_lm_positions"], rec["masked_lm_weights"])
            if weight > 0
        ]
        for length in _runs(positions):
            counts[min(length, 4) - 1] += 1
            total_spans += 1
            total_positions += length

    return {
        "spans": total_spans,
        "span_1": ratio(counts[0], total_spans),
        "span_2": ratio(counts[1], total_spans),
        "span_3": ratio(counts[2], total_spans),
        "span_4plus": ratio(counts[3], total_spans),
        "mean_span": ratio(total_positions, total_spans),
    }
