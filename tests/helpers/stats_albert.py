"""Statistics specific to ALBERT-style records: span lengths (tests/stats_ngram),
sentence order and token boundaries.

Used with tests/stats_util.instance_stats to compare the distribution of the
pipeline's ALBERT mode with the statistics recorded from ALBERT's own
create_pretraining_data.py on a real corpus (see
tests/data/golden_albert/wikitext2_valid_sop_stats.json).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from helpers import stats_ngram


def span_stats(records: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """stats_ngram.span_stats (an n-gram that skips over a [SEP], ALBERT's
    n-grams being runs of candidates, counts as two spans), plus:

      sop_swapped_fraction: share of records with next_sentence_labels == 1
        (in SOP mode: swapped segments, or a one-segment chunk completed from
        another document).
      token_boundary_fraction: per record, the share of 1s in token_boundary
        over its real tokens (input_mask == 1); the mean of that over records.
    """
    records = list(records)
    swapped = sum(int(rec["next_sentence_labels"][0]) == 1 for rec in records)
    shares = []
    for rec in records:
        real = [int(b) for b, m in zip(rec["token_boundary"], rec["input_mask"]) if int(m) == 1]
        if real:
            shares.append(sum(real) / len(real))
    return {**stats_ngram.span_stats(records),
            "sop_swapped_fraction": swapped / len(records) if records else 0.0,
            "token_boundary_fraction": sum(shares) / len(records) if records else 0.0}
