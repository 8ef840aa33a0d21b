"""Web-text quality: lines and documents removed by the field's rule sets and
by language identification, before dedup."""

from __future__ import annotations

import dataclasses
from typing import AbstractSet, Any

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag
from bert_pretraining_data.transforms.quality.language import DEFAULT_THRESHOLD, LanguageFilter
from bert_pretraining_data.transforms.quality.rule_table import RULE_SETS, QualityConfigError
from bert_pretraining_data.transforms.quality.rules import QualityConfig


def _error(parse: Any, *values: Any) -> str | None:
    """The one line `parse` refuses `values` with, or None."""
    try:
        parse(*values)
    except QualityConfigError as err:
        return str(err)
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class QualityFlags(FlagGroup):
    SECTION = ("quality", "web text: lines and documents removed by the field's quality "
                          "rules and by language, once per document, before dedup")

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
    languages: str | None = flag(
        "keep only documents in these languages, comma-separated lid.176 codes (en, de, "
        "zh, ...): fastText's language ID, as FineWeb runs it; the manifest counts the "
        "documents of every language seen (docs/quality.md)", default=None)
    language_threshold: float | None = flag(
        "with --languages: the probability one of them needs for a document to be kept",
        default=None, default_help=f"{DEFAULT_THRESHOLD}, FineWeb's for lid.176")

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        rules_error = (_error(QualityConfig.parse, config.quality_filters)
                       if config.quality_filters is not None else None)
        language_error = (_error(LanguageFilter.parse, config.languages,
                                 config.language_threshold)
                          if config.languages is not None else None)
        flags = " and ".join(name for name, value in (
            ("--quality_filters", config.quality_filters), ("--languages", config.languages))
            if value is not None)
        return [
            (rules_error is None, rules_error or ""),
            (language_error is None, language_error or ""),
            # (a mixture's sources may name their own filters)
            (config.quality_filters or config.mixture or not config.quality_config,
             "--quality_config sets the thresholds of --quality_filters' rules; add "
             "--quality_filters"),
            (config.languages or config.mixture or config.language_threshold is None,
             "--language_threshold applies to --languages; add --languages"),
            (not (flags and config.reference_compatible),
             "--reference_compatible makes the original's records from every document; "
             f"drop {flags}, or drop --reference_compatible"),
            (not (flags and config.recipe == "d2l"),
             "--recipe=d2l builds its own tf.Transform pipeline without quality rules; "
             f"drop {flags}, or use --recipe=bert"),
        ]
