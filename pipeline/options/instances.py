"""How documents become sequence pairs (or full sequences)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import AbstractSet, Any, Sequence

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag
from bert_pretraining_data.transforms.instances.pairs import NEXT_SENTENCE_OBJECTIVES
from bert_pretraining_data.transforms.seeds import MAX_DUPE_FACTOR
from bert_pretraining_data.transforms.write.formats import output_format


@dataclasses.dataclass(frozen=True, kw_only=True)
class InstanceFlags(FlagGroup):
    SECTION = ("instances", "how documents become sequence pairs")

    max_seq_length: int = flag(
        "tokens an instance holds at most, [CLS] and [SEP]s included",
        default=128)
    random_seed: int = flag(
        "the seed of every random choice: sequence lengths, random next "
        "sentences, masks", default=12345)
    dupe_factor: int = flag(
        "copies of the data, each with different masks",
        default_help="10; 1 with --recipe=d2l, which makes one pass as d2l does, with "
                     "--recipe=roberta, whose masks are drawn at load time, with --mixture, "
                     "whose sources' weights are their copies, and with "
                     "--output_format=megatron, which writes the corpus once")
    short_seq_prob: float = flag(
        "the chance that an instance aims at a random shorter length (2 to "
        "max_seq_length - 3 tokens), as the original, so that short inputs are seen too",
        default=0.1)
    nsp_sample_size: int = flag(
        "documents in the sample random next sentences come from (a side "
        "input)", default=10_000)
    nsp_sample_max_bytes: int = flag(
        "cap on the sample's token bytes", default=256 << 20)
    next_sentence: str = flag(
        "the sentence-pair task: nsp, BERT's next sentence prediction; sop, "
        "ALBERT's sentence order prediction (B is the actual next segment, swapped with A "
        "half the time; label 1 = swapped); none, ELECTRA's and RoBERTa's full sequences "
        "(filled to max_seq_length across a document's sentences, no label; with "
        "--masking=none, ELECTRA's input_ids, input_mask and segment_ids only)",
        choices=list(NEXT_SENTENCE_OBJECTIVES), default="nsp", parser_default=None,
        default_help="nsp; none with --recipe=roberta")

    @classmethod
    def defaults(cls, args: argparse.Namespace, beam_args: Sequence[str]) -> dict[str, Any]:
        """d2l makes one pass over the corpus, as d2l does; RoBERTa draws its
        masks at load time and has no pair task; a mixture's copies are its
        sources' weights."""
        return {"dupe_factor": (1 if args.recipe in ("d2l", "roberta") or args.mixture
                                or not output_format(args.output_format).makes_instances
                                else 10),
                "next_sentence": "none" if args.recipe == "roberta" else "nsp"}

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        return [
            (config.max_seq_length >= 5, "--max_seq_length must be at least 5 to hold "
             f"[CLS] A [SEP] B [SEP], got {config.max_seq_length}"),
            (config.dupe_factor >= 1,
             f"--dupe_factor must be at least 1, got {config.dupe_factor}"),
            (config.dupe_factor <= MAX_DUPE_FACTOR, f"--dupe_factor must be at most "
             f"{MAX_DUPE_FACTOR:,} (seeds give each copy 22 bits), got {config.dupe_factor}"),
            (0 <= config.short_seq_prob <= 1, "--short_seq_prob must be in [0, 1], got "
             f"{config.short_seq_prob}"),
            (config.nsp_sample_size >= 1, "--nsp_sample_size must be at least 1, got "
             f"{config.nsp_sample_size}"),
            (config.nsp_sample_max_bytes >= 1, "--nsp_sample_max_bytes must be positive"),
        ]
