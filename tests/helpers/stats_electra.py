"""Summary statistics over ELECTRA-style full-sequence records.

Used to compare the distribution of the pipeline's ELECTRA/RoBERTa-style
output (no next-sentence task, no masking) with the statistics recorded from
google-research/electra's build_pretraining_dataset.py on a real corpus
(see tests/data/golden_electra/wikitext2_valid_stats.json).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from helpers.stats_util import ratio


def sequence_stats(
    records: Iterable[Mapping[str, Any]], max_seq_length: Optional[int] = None
) -> dict[str, float]:
    """Compute aggregate statistics of full-sequence records.

    Each record is a dict with (at least) the keys input_ids, input_mask and
    segment_ids, each a list of max_seq_length numbers, as in the golden JSON
    files. If max_seq_length is not given it is taken from the length of each
    record's input_mask.

    Returned keys:
      instances: number of records.
      mean_tokens: mean number of real tokens (sum of input_mask), counting
        [CLS] and [SEP].
      full_fraction: share of records whose max_seq_length positions are all
        real (sum of input_mask == max_seq_length).
      single_segment_fraction: share of records with no real position whose
        segment_id is 1.
      mean_segment_a_fraction: mean over records of len(A) / real tokens,
        where len(A) is the number of real positions with segment_id 0 (so it
        includes [CLS] and the first [SEP]); 1.0 for single-segment records.
      short_fraction: share of records with fewer than max_seq_length // 2
        real tokens.
    """
    n = 0
    total_tokens = 0
    full = 0
    single = 0
    short = 0
    a_fraction_sum = 0.0

    for rec in records:
        mask = [int(v) for v in rec["input_mask"]]
        segments = [int(v) for v in rec["segment_ids"]]
        seq_len = max_seq_length if max_seq_length is not None else len(mask)
        n += 1
        num_tokens = sum(mask)
        total_tokens += num_tokens
        if num_tokens == seq_len:
            full += 1
        if num_tokens < seq_len // 2:
            short += 1
        len_b = sum(1 for m, s in zip(mask, segments) if m and s == 1)
        if len_b == 0:
            single += 1
        if num_tokens:
            a_fraction_sum += (num_tokens - len_b) / num_tokens

    return {
        "instances": n,
        "mean_tokens": ratio(total_tokens, n),
        "full_fraction": ratio(full, n),
        "single_segment_fraction": ratio(single, n),
        "mean_segment_a_fraction": ratio(a_fraction_sum, n),
        "short_fraction": ratio(short, n),
    }
