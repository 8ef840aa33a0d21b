"""Web-text quality: lines and documents removed by the field's rule sets, before dedup."""

from __future__ import annotations

import dataclasses
from typing import AbstractSet, Any

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag
from bert_pretraining_data.transforms.quality.rule_table import RULE_SETS
from bert_pretraining_data.transforms.quality.rules import QualityConfig, QualityConfigError


def _rule_sets_error(value: str) -> str | None:
    try:
        QualityConfig.parse(value)
    except QualityConfigError as err:
        return str(err)
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class QualityFlags(FlagGroup):
    SECTION = ("quality", "web text: lines and documents removed by the field's quality "
                          "rules, once per document, before dedup")

    quality_filters: str | None = flag(
        f"rule sets applied to each document, comma-separated, any of {', '.join(RULE_SETS)}: "
        "c4, C4's line rules (terminal punctuation, at least 5 words, no javascript or "
        "cookie notice) and page rules (lorem ipsum, a curly brace, at least 3 sentences); "
        "gopher, Gopher's quality and repetition rules; fineweb, FineWeb's; a line rule "
        "removes lines, the others drop the document (docs/quality.md)", default=None)
    quality_config: str | None = flag(
        "with --quality_filters: a JSON file (local or gs://) of {rule: threshold} over "
        "the published thresholds; null turns a rule off (docs/quality.md lists the rules)",
        default=None)

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        error = (_rule_sets_error(config.quality_filters)
                 if config.quality_filters is not None else None)
        return [
            (error is None, error or ""),
            (config.quality_filters or not config.quality_config,
             "--quality_config sets the thresholds of --quality_filters' rules; add "
             "--quality_filters"),
            (not (config.quality_filters and config.reference_compatible),
             "--reference_compatible makes the original's records from every document; "
             "drop --quality_filters, or drop --reference_compatible"),
            (not (config.quality_filters and config.recipe == "d2l"),
             "--recipe=d2l builds its own tf.Transform pipeline without quality rules; "
             "drop --quality_filters, or use --recipe=bert"),
        ]
