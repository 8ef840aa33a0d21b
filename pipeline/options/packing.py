"""Several instances in a record."""

from __future__ import annotations

import dataclasses
from typing import AbstractSet, Any

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag


@dataclasses.dataclass(frozen=True, kw_only=True)
class PackingFlags(FlagGroup):
    SECTION = ("packing", "several instances in a record")

    pack_sequences: bool = flag(
        "pack up to --max_sequences_per_pack whole instances into each row of "
        "max_seq_length tokens, with MLPerf's packed features (input_mask holds each "
        "token's sequence index, positions restart per sequence, "
        "next_sentence_positions/_labels/_weights per sequence): no padding to train on "
        "(docs/packing.md); false: one instance a record, as the original",
        default=False)
    max_sequences_per_pack: int = flag(  # 3: Krell et al.'s depth, and MLPerf's
        "with --pack_sequences: instances a row holds at most", default=3,
        parser_default=None)

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        return [
            (config.pack_sequences or "max_sequences_per_pack" not in given,
             "--max_sequences_per_pack sets the rows of --pack_sequences; add "
             "--pack_sequences or drop it"),
            (config.max_sequences_per_pack >= 2, "--max_sequences_per_pack must be at least "
             f"2, got {config.max_sequences_per_pack} (one instance a row: drop "
             "--pack_sequences)"),
        ]
