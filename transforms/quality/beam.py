"""FilterQuality: the Beam shell of the quality stage (`--quality_filters`).

    documents -> ApplyQualityRules -> documents kept (their lines as the line rules leave them),
                                   -> removed documents, by rule -> the SAMPLE_PER_RULE of each
                                      rule whose keys rank first -> one list (quality.jsonl)

Each document is decided alone (transforms.quality.rules.decide), so what is
kept does not depend on bundles or workers; the sample of each rule is the
documents of smallest keyed hash, the same on every runner.
"""

from __future__ import annotations

from typing import Iterator, Literal

import apache_beam as beam
from apache_beam.pvalue import TaggedOutput

from bert_pretraining_data.transforms.counters import (FIGURES, BundleCounters, CountingDoFn,
                                                       FiguresOutput)
from bert_pretraining_data.transforms.quality.rule_table import (DROPPED, LINE, LINES_REMOVED,
                                                                 NO_LINES_LEFT, RULES)
from bert_pretraining_data.transforms.quality.rules import QualityConfig, decide
from bert_pretraining_data.transforms.randomness import stable_hasher
from bert_pretraining_data.transforms.read.documents import DOCUMENTS, Document

REMOVED = "removed"  # the output of the removed documents' sample
SAMPLE_PER_RULE = 20  # removed documents kept per rule in quality.jsonl
SAMPLE_CHARACTERS = 2000  # of a sampled document's text


def counter_names(config: QualityConfig) -> list[str]:
    """The counters of a run's rules: documents each dropped, lines each removed."""
    rules = [name for name in RULES if name in config.thresholds]
    return ([DROPPED + name for name in (*rules, NO_LINES_LEFT)]
            + [LINES_REMOVED + name for name in rules if RULES[name].scope == LINE])


class _ApplyRules(CountingDoFn):
    """A document -> itself with the lines the line rules keep (main output),
    or, dropped, (rule, (rank, record)) on REMOVED."""

    def __init__(self, config: QualityConfig) -> None:
        self._config = config
        self._count = BundleCounters(*counter_names(config))

    def setup(self) -> None:
        self._rank = stable_hasher("quality-sample")

    def process(self, document: Document
                ) -> Iterator[Document | TaggedOutput[Literal["removed"], tuple[str, tuple[int, dict]]]
                              | FiguresOutput]:
        key, lines = document
        decision = decide(lines, self._config)
        for rule, count in decision.lines_removed.items():
            self._count.counts[LINES_REMOVED + rule] += count
        if decision.lines is not None:
            yield key, decision.lines
            return
        self._count.counts[DROPPED + decision.rule] += 1
        record = {"rule": decision.rule, "value": decision.value, "key": key,
                  "text": "\n".join(lines)[:SAMPLE_CHARACTERS]}
        yield TaggedOutput(REMOVED, (decision.rule, (self._rank(key), record)))


def _sample_list(ranked: list[tuple[str, list[tuple[int, dict]]]]) -> list[dict]:
    return [record for _, sample in sorted(ranked) for _, record in sample]


class FilterQuality(beam.PTransform):
    """(key, lines) documents -> {DOCUMENTS: those the rules keep, REMOVED: one
    list of the sampled removed documents, FIGURES: the counts}."""

    def __init__(self, config: QualityConfig) -> None:
        super().__init__()
        self._config = config

    def expand(self, documents):
        decided = documents | "ApplyQualityRules" >> beam.ParDo(
            _ApplyRules(self._config)).with_outputs(REMOVED, FIGURES, main=DOCUMENTS)
        sample = (decided[REMOVED]
                  | "SampleEachRule" >> beam.combiners.Top.SmallestPerKey(
                      SAMPLE_PER_RULE, key=lambda ranked: ranked[0])
                  | "CollectSamples" >> beam.combiners.ToList()
                  | "SampleList" >> beam.Map(_sample_list))
        return {DOCUMENTS: decided[DOCUMENTS], REMOVED: sample, FIGURES: decided[FIGURES]}
