"""Command-line flags: the original's names and defaults, plus this pipeline's.

An existing `create_pretraining_data.py` command line runs unchanged (absl
spellings included: `--do_lower_case=False`, `--nodo_lower_case`, bare
`--do_whole_word_mask`). Each flag is a field of one group (a module here, a
section of --help) that also says what decides its default and what checks
it; `Config` is every group's fields together. Flags the parser does not know
go to Beam (`pipeline.beam_options`). Everything is checked before any
pipeline object exists and becomes a frozen `Config` that the stages
receive: no global FLAGS in library code. What a recipe and
--reference_compatible allow of the other groups is in `rules.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from bert_pretraining_data.pipeline.command_line import (FlagGroup, OneLineParser, build_parser,
                                                         parse_config)
from bert_pretraining_data.pipeline.options.dedup import DedupFlags
from bert_pretraining_data.pipeline.options.evaluation import EvaluationFlags
from bert_pretraining_data.pipeline.options.input import InputFlags
from bert_pretraining_data.pipeline.options.instances import InstanceFlags
from bert_pretraining_data.pipeline.options.masking import MaskingFlags
from bert_pretraining_data.pipeline.options.mixture import MixtureFlags
from bert_pretraining_data.pipeline.options.output import OutputFlags
from bert_pretraining_data.pipeline.options.packing import PackingFlags
from bert_pretraining_data.pipeline.options.quality import QualityFlags
from bert_pretraining_data.pipeline.options.rules import RULES
from bert_pretraining_data.pipeline.options.run import RunFlags
from bert_pretraining_data.pipeline.options.tokenizer import TokenizerFlags
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(InputFlags, MixtureFlags, QualityFlags, DedupFlags, EvaluationFlags, TokenizerFlags,
             InstanceFlags, MaskingFlags, PackingFlags, OutputFlags, RunFlags):
    """The flags, validated: one field per flag, of every group. Its bases
    are the groups, in the order of the pipeline's stages (--help's sections
    and the order their checks run in): a new group is a new base."""

    @property
    def token_boundary(self) -> bool:
        """ALBERT's objectives write ALBERT's token_boundary feature."""
        return self.next_sentence == "sop" or self.ngram > 0

    @property
    def tokenizer(self) -> TokenizerSpec:
        """WordPiece (--vocab_file), SentencePiece (ALBERT's --spm_model_file, the
        Model Garden's --tokenization=SentencePiece --sp_model_file) or a
        tokenizer.json (--tokenizer_file), grouping words where the masking
        or the features read them."""
        return dataclasses.replace(TokenizerSpec.of(self.flags()),
                                   words=self.do_whole_word_mask or self.token_boundary)

    def flags(self) -> dict[str, object]:
        """The flags as recorded in the manifest."""
        return dataclasses.asdict(self)


# --help's sections, and the order their checks run in.
GROUPS: tuple[type[FlagGroup], ...] = Config.__bases__


def parser() -> OneLineParser:
    """create-pretraining-data's parser: every group's flags, in its section."""
    return build_parser(
        prog="create-pretraining-data", groups=GROUPS,
        usage="%(prog)s --input_file=... (--output_file=... | --output_dir=...) "
              "[--vocab_file=...] [flags] [Beam pipeline options]",
        description="BERT masked-LM + next-sentence-prediction TFRecords on Apache Beam. "
                    "Unknown flags are Beam pipeline options (--runner, ...).")


def parse_args(argv: Sequence[str]) -> tuple[Config, list[str]]:
    """Parses and validates; returns the config and the flags left for Beam."""
    return parse_config(parser(), Config, GROUPS, argv, RULES)
