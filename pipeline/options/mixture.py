"""Several corpora in one run, each with its weight (--mixture)."""

from __future__ import annotations

import dataclasses
from typing import AbstractSet, Any

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag

MIXTURE_LAYOUTS = ("mixed", "by_source")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MixtureFlags(FlagGroup):
    SECTION = ("mixture", "several corpora in one run, each with its weight")

    mixture: str | None = flag(
        "a mixture file (JSON or YAML, local or gs://) in place of --input_file: "
        '{"sources": [{"name", "input_file", "weight", and where they differ from the '
        'command line "input_format", "text_field", "sentence_splitter"}], or "alpha" '
        "(and \"total_tokens\") in place of the weights; a weight is copies per document, "
        "fractions drawn per document (docs/mixtures.md)", default=None)
    mixture_layout: str = flag(
        "with --mixture: mixed, one shuffled dataset with the weights applied; "
        "by_source, each source's instances in a folder of its own, one copy per "
        "document, the weights in the manifest for a trainer that mixes",
        choices=list(MIXTURE_LAYOUTS), default="mixed", parser_default=None)

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        if not config.mixture:
            return [("mixture_layout" not in given,
                     "--mixture_layout applies with --mixture; add it")]
        return [
            (not config.input_file, "--mixture names each source's input_file; drop "
             "--input_file"),
            ("dupe_factor" not in given, "with --mixture each source's weight is its copies "
             "per document (its dupe factor); drop --dupe_factor and set the weights"),
            (not config.reference_compatible and config.recipe != "d2l",
             "--mixture makes one dataset of several corpora, which --reference_compatible "
             "and --recipe=d2l do not; drop one"),
            (not (config.mixture_layout == "by_source" and config.output_file),
             "--mixture_layout=by_source writes a folder per source: use --output_dir"),
        ]
