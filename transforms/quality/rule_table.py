"""The published rules of `--quality_filters`, by name: their sets, what each
removes and its threshold, and the names a run records them under. Apart from
the rules' code (transforms.quality.rules), which needs `regex` and numba, so
that `inspect-pretraining-data` reads a dataset's figures on the base install.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, Sequence

C4, GOPHER, FINEWEB = "c4", "gopher", "fineweb"
RULE_SETS = (C4, GOPHER, FINEWEB)
LINE, DOCUMENT = "line", "document"
# What drops a document whose every line a line rule removed.
NO_LINES_LEFT = "c4_no_lines_left"
# The manifest's counters of a rule: documents it dropped, lines it removed.
DROPPED, LINES_REMOVED = "quality_dropped_", "quality_lines_removed_"
SAMPLE_FILE = "quality.jsonl"  # beside the manifest: a sample of each rule's dropped documents
# --languages: the rule name of a document in no listed language, and the
# manifest's counters of documents by their most probable language: read, dropped.
LANGUAGE = "language"
LANGUAGE_DOCUMENTS, LANGUAGE_DROPPED = "language_documents_", "language_dropped_"
# A mixture source's own counts of its rules, counted as `source_<index>_<counter>`
# beside the run's and moved into the manifest's mixture section (letters, digits
# and underscores, as every other counter's name).
_SOURCE_COUNTER = re.compile(r"source_(\d+)_(.+)")


def source_counter(index: int, name: str) -> str:
    """The counter of mixture source `index`'s own count of `name`."""
    return f"source_{index}_{name}"


def split_source_counters(counters: Mapping[str, int]
                          ) -> tuple[dict[str, int], dict[int, dict[str, int]]]:
    """(the run's counters, each mixture source's own counters by its index)."""
    run: dict[str, int] = {}
    sources: dict[int, dict[str, int]] = {}
    for name, value in counters.items():
        own = _SOURCE_COUNTER.fullmatch(name)
        if own:
            sources.setdefault(int(own.group(1)), {})[own.group(2)] = value
        else:
            run[name] = value
    return run, sources


def filters_named(flags: Mapping[str, Any], sources: Sequence[Mapping[str, Any]] = ()) -> str:
    """The quality stage's filters of a run, in words: its flags' ("c4,gopher,
    languages en,de"), or where a mixture's sources (their manifest entries)
    name their own, each source's ("web: c4, languages en; wiki: none");
    empty where the run has none."""
    def named(settings: Mapping[str, Any]) -> str:
        return ", ".join(filter(None, [settings.get("quality_filters"),
                                       settings.get("languages")
                                       and f"languages {settings['languages']}"]))

    own = {named(source) for source in sources}
    if not sources or own == {named(flags)}:
        return named(flags)
    if own == {""}:
        return ""
    return "; ".join(f"{source['name']}: {named(source) or 'none'}" for source in sources)


def removed_by_rule(counters: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """From a run's counters: for each rule that removed something (language
    first, then the rules in their order), the documents it dropped and the
    lines it removed."""
    removed = {rule: {"documents": counters.get(DROPPED + rule, 0),
                      "lines": counters.get(LINES_REMOVED + rule, 0)}
               for rule in (LANGUAGE, *RULES, NO_LINES_LEFT)}
    return {rule: figures for rule, figures in removed.items() if any(figures.values())}


class QualityConfigError(ValueError):
    """A bad --quality_filters, --quality_config, --languages or
    --language_threshold: one line saying what to fix."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule: the set it belongs to, whether it removes lines or drops
    the document, its published threshold (True: a rule that is on or off),
    and whether a value above it (`most`) or below it fails."""

    name: str
    rule_set: str
    scope: str
    threshold: float | bool
    most: bool = True


def _rules(*rules: Rule) -> dict[str, Rule]:
    return {rule.name: rule for rule in rules}


RULES = _rules(
    # C4 (TFDS c4_utils.clean_page), line by line, then the page
    Rule("c4_max_word_length", C4, LINE, 1000),
    Rule("c4_terminal_punctuation", C4, LINE, True),
    Rule("c4_min_words_per_line", C4, LINE, 5, most=False),
    Rule("c4_lorem_ipsum", C4, DOCUMENT, True),
    Rule("c4_javascript", C4, LINE, True),
    Rule("c4_curly_bracket", C4, DOCUMENT, True),
    Rule("c4_policy", C4, LINE, True),
    Rule("c4_min_sentences", C4, DOCUMENT, 3, most=False),
    # Gopher's repetition rules (Rae et al. 2021, table A1)
    Rule("gopher_duplicate_paragraphs", GOPHER, DOCUMENT, 0.3),
    Rule("gopher_duplicate_paragraph_characters", GOPHER, DOCUMENT, 0.2),
    Rule("gopher_duplicate_lines", GOPHER, DOCUMENT, 0.3),
    Rule("gopher_duplicate_line_characters", GOPHER, DOCUMENT, 0.2),
    Rule("gopher_top_2_gram", GOPHER, DOCUMENT, 0.2),
    Rule("gopher_top_3_gram", GOPHER, DOCUMENT, 0.18),
    Rule("gopher_top_4_gram", GOPHER, DOCUMENT, 0.16),
    *(Rule(f"gopher_duplicate_{n}_grams", GOPHER, DOCUMENT, round(0.2 - 0.01 * n, 2))
      for n in range(5, 11)),
    # Gopher's quality rules
    Rule("gopher_min_words", GOPHER, DOCUMENT, 50, most=False),
    Rule("gopher_max_words", GOPHER, DOCUMENT, 100_000),
    Rule("gopher_min_mean_word_length", GOPHER, DOCUMENT, 3, most=False),
    Rule("gopher_max_mean_word_length", GOPHER, DOCUMENT, 10),
    Rule("gopher_hash_ratio", GOPHER, DOCUMENT, 0.1),
    Rule("gopher_ellipsis_ratio", GOPHER, DOCUMENT, 0.1),
    Rule("gopher_bullet_lines", GOPHER, DOCUMENT, 0.9),
    Rule("gopher_ellipsis_lines", GOPHER, DOCUMENT, 0.3),
    Rule("gopher_alphabetic_words", GOPHER, DOCUMENT, 0.8, most=False),
    Rule("gopher_stop_words", GOPHER, DOCUMENT, 2, most=False),
    # FineWeb (Penedo et al. 2024)
    Rule("fineweb_line_punctuation", FINEWEB, DOCUMENT, 0.12, most=False),
    Rule("fineweb_short_lines", FINEWEB, DOCUMENT, 0.67),
    Rule("fineweb_duplicate_line_characters", FINEWEB, DOCUMENT, 0.01),
    Rule("fineweb_newline_ratio", FINEWEB, DOCUMENT, 0.3),
)
