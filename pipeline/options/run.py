"""What the run reproduces (a recipe, the original record for record) and how it
runs; what a recipe and --reference_compatible allow of the other flags is in
rules.py."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Sequence

from bert_pretraining_data.pipeline.beam_options import default_shuffle
from bert_pretraining_data.pipeline.command_line import FlagGroup, flag
from bert_pretraining_data.transforms.handoff.shuffle.entries import SHUFFLES

RECIPES = ("bert", "roberta", "d2l")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunFlags(FlagGroup):
    SECTION = ("run", "what the run reproduces and how it runs")

    reference_compatible: bool = flag(
        "reproduce the original script record for record: one process, one "
        "random.Random, the whole corpus and all instances in memory like the original; "
        "for migration checks, not for large corpora", default=False)
    recipe: str = flag(
        "bert: the original's instances and features; roberta: RoBERTa's "
        "DOC-SENTENCES (whole consecutive sentences of one document up to max_seq_length, "
        "one segment framed by the tokenizer, e.g. <s> ... </s>, no pair task), masked at "
        "load time unless --masking=static; d2l: the WikiText-2 dataset of d2l.ai (one "
        "paragraph per line, word tokens, a vocabulary computed from the corpus, written "
        "as vocab.txt)", choices=list(RECIPES), default="bert")
    shuffle: str = flag(
        "how records reach their shard: runner (the runner's GroupByKey; on "
        "Dataflow the Shuffle service) or files (temporary bucket files, for the "
        "DirectRunner, which holds a GroupByKey's input in memory); the same bytes "
        "either way", choices=list(SHUFFLES),
        default_help="files on the DirectRunner (Beam's default runner), runner on others")
    progress: str = flag(
        "auto: a local run prints its progress (a live line on a terminal, a line "
        "every 30 s in a log); a Dataflow run prints its console URL; none: quiet until "
        "the end", choices=["auto", "none"], default="auto")

    @classmethod
    def defaults(cls, args: argparse.Namespace, beam_args: Sequence[str]) -> dict[str, Any]:
        return {"shuffle": default_shuffle(beam_args)}
