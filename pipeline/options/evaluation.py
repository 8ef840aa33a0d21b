"""Evaluation data: held-out splits, and benchmark text kept out of every split."""

from __future__ import annotations

import dataclasses
from typing import AbstractSet, Any

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag
from bert_pretraining_data.transforms.split.held_out import SplitFractions

# A held-out split this large is no longer held out: training would lose half the corpus.
MAX_HELD_OUT = 0.5


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvaluationFlags(FlagGroup):
    SECTION = ("evaluation data", "held-out splits, and benchmark text kept out of every split")

    validation_fraction: float = flag(
        "the share of documents held out as the validation split (train/ and "
        "validation/ folders under --output_dir), chosen by a keyed hash of each "
        "document's normalised text, so a document stays on its side in every run and "
        "refresh; training documents that are near copies of held-out ones (Jaccard of "
        "--dedup_ngram word n-grams >= --dedup_threshold) are dropped", default=0.0)
    test_fraction: float = flag(
        "the share of documents held out as the test split (test/), as "
        "--validation_fraction", default=0.0)
    held_out_masking: str | None = flag(
        "how held-out splits are masked: static: here, once, so every evaluation sees the "
        "same masks; none: unmasked, as training's --masking=none, for a reader that masks "
        "at load time (this package's loaders mask a held-out split with the same masks at "
        "every evaluation)", choices=["static", "none"], default=None,
        default_help="training's --masking")
    decontaminate: str | None = flag(
        "benchmark texts no split may contain, comma-separated file patterns (local "
        "or gs://): one item per line, or JSONL (--decontaminate_field); a document "
        "holding any of an item's --decontaminate_ngram-word n-grams is dropped, and "
        "listed in decontamination.json beside the manifest", default=None)
    decontaminate_field: str = flag(
        "with --decontaminate: the field of a JSONL benchmark record that holds its "
        "text; comma-separated, the first a record has (sentence,context: GLUE-style and "
        "SQuAD-style files together)", default="text", parser_default=None)
    decontaminate_ngram: int = flag(
        "with --decontaminate: words per n-gram, after case folding and stripping "
        "punctuation (GPT-3's and lm-eval's 13)", default=13, parser_default=None)

    @property
    def split_fractions(self) -> SplitFractions:
        return SplitFractions(validation=self.validation_fraction, test=self.test_fraction)

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        fractions = config.validation_fraction + config.test_fraction
        return [
            *((0 <= getattr(config, name) < MAX_HELD_OUT,
               f"--{name} is a share of the documents in [0, {MAX_HELD_OUT}), got "
               f"{getattr(config, name)}") for name in ("validation_fraction", "test_fraction")),
            (fractions < MAX_HELD_OUT, "--validation_fraction and --test_fraction together "
             f"hold out {fractions:g} of the documents; keep them below {MAX_HELD_OUT}"),
            (not (fractions and config.output_file), "a held-out split is written in a "
             "folder of its own (train/, validation/, test/): use --output_dir, not "
             "--output_file"),
            (not ((fractions or config.decontaminate) and config.recipe == "d2l"),
             "--recipe=d2l makes d2l's one training set of every document, as d2l's "
             "load_data_wiki does; drop --validation_fraction, --test_fraction and "
             "--decontaminate, or use --recipe=bert"),
            (config.decontaminate or not given & {"decontaminate_field",
                                                   "decontaminate_ngram"},
             "--decontaminate_field and --decontaminate_ngram apply with --decontaminate; "
             "add it"),
            (bool(fractions) or "held_out_masking" not in given, "--held_out_masking applies "
             "with --validation_fraction or --test_fraction; add one"),
            (not (config.held_out_masking == "none" and (
                config.whole_word_segmenter != "none"
                or (config.tokenizer_file and config.do_whole_word_mask))),
             "--held_out_masking=none leaves held-out records with plain ids, and this run's "
             "whole words are known only when masking here; drop --held_out_masking=none"),
            (config.decontaminate_ngram >= 1, "--decontaminate_ngram must be at least 1, "
             f"got {config.decontaminate_ngram}"),
            (not (config.reference_compatible and (fractions or config.decontaminate)),
             "--reference_compatible reproduces the original, which has no held-out split "
             "and keeps every document; drop it, or drop the split and --decontaminate"),
        ]
