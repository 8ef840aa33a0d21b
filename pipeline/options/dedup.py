"""Documents dropped as copies of others, before tokenizing."""

from __future__ import annotations

import argparse
import dataclasses
from typing import AbstractSet, Any, Sequence

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag
from bert_pretraining_data.transforms.dedup.decisions import DEDUP_MODES


@dataclasses.dataclass(frozen=True, kw_only=True)
class DedupFlags(FlagGroup):
    SECTION = ("dedup", "documents dropped as copies of others, before tokenizing")

    dedup: str = flag(
        "documents kept once: exact, those whose normalised text (NFKC, case "
        "folded, whitespace collapsed) is the same; near, also those whose word n-gram "
        "Jaccard similarity reaches --dedup_threshold (MinHash and LSH, candidates "
        "verified, clusters formed transitively); none, every document",
        choices=list(DEDUP_MODES),
        default_help="exact; none with --reference_compatible or --recipe=d2l, which keep "
                     "every document as the tools they reproduce do")
    dedup_threshold: float = flag(
        "with --dedup=near or a held-out split: the Jaccard similarity of two "
        "documents' word n-grams from which they are near copies", default=0.8, parser_default=None)
    dedup_ngram: int = flag(
        "with --dedup=near or a held-out split: words per shingle", default=5, parser_default=None)

    @classmethod
    def defaults(cls, args: argparse.Namespace, beam_args: Sequence[str]) -> dict[str, Any]:
        """A run that reproduces a tool which keeps every document
        (--reference_compatible, --recipe=d2l) does not dedup."""
        keeps_all = args.reference_compatible or args.recipe == "d2l"
        return {"dedup": "none" if keeps_all else "exact"}

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        return [
            (config.dedup == "near" or config.split_fractions.active
             or not given & {"dedup_threshold", "dedup_ngram"},
             "--dedup_threshold and --dedup_ngram set --dedup=near, or a held-out split's "
             "near-copy guard (--validation_fraction, --test_fraction); add one"),
            (0 < config.dedup_threshold <= 1, "--dedup_threshold is a Jaccard similarity in "
             f"(0, 1], got {config.dedup_threshold}"),
            (config.dedup_ngram >= 1,
             f"--dedup_ngram must be at least 1, got {config.dedup_ngram}"),
        ]
