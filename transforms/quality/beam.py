"""FilterQuality: the Beam shell of the quality stage (`--quality_filters`,
`--languages`).

    documents -> ApplyQualityRules -> documents kept (their lines as the line rules leave them),
                                   -> removed documents, by rule -> the SAMPLE_PER_RULE of each
                                      rule whose keys rank first -> one list (quality.jsonl)

Each document is decided alone, by its source's filters (a mixture's sources
may name their own): its language first (transforms.quality.language), then
the rules (transforms.quality.rules.decide), so what is kept does not depend
on bundles or workers; the sample of each rule is the documents of smallest
keyed hash, the same on every runner.
"""

from __future__ import annotations

from typing import Iterator, Literal, Sequence

import apache_beam as beam
from apache_beam.pvalue import TaggedOutput

from bert_pretraining_data.transforms.counters import (FIGURES, BundleCounters, CountingDoFn,
                                                       FiguresOutput)
from bert_pretraining_data.transforms.quality.rule_table import (DROPPED, LANGUAGE,
                                                                 LANGUAGE_DOCUMENTS,
                                                                 LANGUAGE_DROPPED, LINE,
                                                                 LINES_REMOVED, NO_LINES_LEFT,
                                                                 RULES, source_counter)
from bert_pretraining_data.transforms.quality.rules import QualityFilters, decide
from bert_pretraining_data.transforms.randomness import stable_hasher
from bert_pretraining_data.transforms.read.documents import DOCUMENTS, Document
from bert_pretraining_data.transforms.read.mixture import source_of

REMOVED = "removed"  # the output of the removed documents' sample
SAMPLE_PER_RULE = 20  # removed documents kept per rule in quality.jsonl
SAMPLE_CHARACTERS = 2000  # of a sampled document's text


def counter_names(filters: Sequence[QualityFilters]) -> list[str]:
    """The counters of a run's filters: documents each rule dropped, lines
    each line rule removed; with languages, the documents dropped for theirs
    and those read in each listed one (the others are counted as they are
    seen)."""
    rules = [name for name in RULES
             if any(f.rules is not None and name in f.rules.thresholds for f in filters)]
    listed = dict.fromkeys(code for f in filters if f.languages for code in f.languages.languages)
    names = []
    if rules:
        names += [DROPPED + name for name in (*rules, NO_LINES_LEFT)]
        names += [LINES_REMOVED + name for name in rules if RULES[name].scope == LINE]
    if listed:
        names += [DROPPED + LANGUAGE, *(LANGUAGE_DOCUMENTS + code for code in listed)]
    return names


class _ApplyFilters(CountingDoFn):
    """A document -> itself with the lines the line rules keep (main output),
    or, dropped, (rule, (rank, record)) on REMOVED."""

    def __init__(self, filters: Sequence[QualityFilters], by_source: bool) -> None:
        self._filters = tuple(filters)
        self._by_source = by_source
        self._count = BundleCounters(*counter_names(filters))

    def setup(self) -> None:
        self._rank = stable_hasher("quality-sample")

    def _counted(self, name: str, value: int, source: int) -> None:
        """Counts `name` for the run and, in a mixture, for the document's source."""
        self._count.counts[name] += value
        if self._by_source:
            self._count.add(source_counter(source, name), value)

    def process(self, document: Document
                ) -> Iterator[Document | TaggedOutput[Literal["removed"], tuple[str, tuple[int, dict]]]
                              | FiguresOutput]:
        key, lines = document
        source = source_of(key) if self._by_source else 0
        filters = self._filters[source]
        record = None
        if filters.languages is not None:
            language, score, kept = filters.languages.identify(lines)
            self._count.add(LANGUAGE_DOCUMENTS + language)
            if not kept:
                self._count.add(LANGUAGE_DROPPED + language)
                record = {"rule": LANGUAGE, "value": round(score, 4), "language": language}
        if record is None and filters.rules is not None:
            decision = decide(lines, filters.rules)
            for rule, count in decision.lines_removed.items():
                self._counted(LINES_REMOVED + rule, count, source)
            lines = decision.lines
            if lines is None:
                record = {"rule": decision.rule, "value": decision.value}
        if record is None:
            yield key, lines
            return
        self._counted(DROPPED + record["rule"], 1, source)
        record.update(key=key, text="\n".join(document[1])[:SAMPLE_CHARACTERS])
        yield TaggedOutput(REMOVED, (record["rule"], (self._rank(key), record)))


def _sample_list(ranked: list[tuple[str, list[tuple[int, dict]]]]) -> list[dict]:
    return [record for _, sample in sorted(ranked) for _, record in sample]


class FilterQuality(beam.PTransform):
    """(key, lines) documents -> {DOCUMENTS: those their filters keep, REMOVED:
    one list of the sampled removed documents, FIGURES: the counts}.
    `filters`: one for every document, or with `by_source`, one per mixture
    source, in the mixture's order (transforms.read.mixture.source_of)."""

    def __init__(self, filters: Sequence[QualityFilters], *, by_source: bool = False) -> None:
        super().__init__()
        if not any(f.active for f in filters) or (len(filters) != 1 and not by_source):
            raise ValueError("FilterQuality needs one set of filters, or one per source")
        self._filters = tuple(filters)
        self._by_source = by_source

    def expand(self, documents):
        decided = documents | "ApplyQualityRules" >> beam.ParDo(
            _ApplyFilters(self._filters, self._by_source)).with_outputs(
                REMOVED, FIGURES, main=DOCUMENTS)
        sample = (decided[REMOVED]
                  | "SampleEachRule" >> beam.combiners.Top.SmallestPerKey(
                      SAMPLE_PER_RULE, key=lambda ranked: ranked[0])
                  | "CollectSamples" >> beam.combiners.ToList()
                  | "SampleList" >> beam.Map(_sample_list))
        return {DOCUMENTS: decided[DOCUMENTS], REMOVED: sample, FIGURES: decided[FIGURES]}
