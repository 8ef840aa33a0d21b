"""What the pipeline counts: as figures, data on each counting step's
FIGURES output, summed into the one dict the manifest reports on every runner
(a job publishing itself reads no metrics); and as Beam counters of one
namespace, which a runner shows while it works.

Every stage counts what it reads, drops, cuts or repairs. Names are recorded
when a counter is created (on the driver, while the pipeline is built), so the
manifest can report a zero for a counter that never fired instead of leaving
it out.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Iterator, Literal

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindows

NAMESPACE = "bert_data"
# The output a counting step gives its counts on: a dict of counts, at most one a
# bundle; FiguresOutput is its type, for a DoFn that declares its tagged outputs.
FIGURES = "figures"
FiguresOutput = TaggedOutput[Literal["figures"], dict[str, int]]
_NAMES: set[str] = set()


def counter(name: str):
    """A Beam counter in this pipeline's namespace."""
    _NAMES.add(name)
    return Metrics.counter(NAMESPACE, name)


class BundleCounters:
    """Counts of a DoFn, summed over a bundle and added to Beam's counters at
    its end: a Beam counter update per element and counter costs more than
    a short document's tokenization (docs/design-notes.md,
    transforms.counters). A failed bundle adds nothing, as Beam's own
    committed counters.

    Call `start()` from `start_bundle` and `flush()` from `finish_bundle`
    (CountingDoFn does).
    """

    def __init__(self, *names: str) -> None:
        self._counters = {name: counter(name) for name in names}
        self.start()

    def start(self) -> None:
        self.counts = dict.fromkeys(self._counters, 0)

    def add(self, name: str, value: int = 1) -> None:
        """Counts under a name known only as the data is read (the language a
        document is in); the manifest shows it where it is not zero."""
        self.counts[name] = self.counts.get(name, 0) + value

    def flush(self) -> Iterator[TaggedOutput]:
        """Adds the bundle's counts to Beam's counters, and gives those that
        are not zero as one element of the FIGURES output."""
        counted = {name: value for name, value in self.counts.items() if value}
        for name, value in counted.items():
            if name not in self._counters:
                self._counters[name] = counter(name)
            self._counters[name].inc(value)
        self.start()
        if counted:
            yield TaggedOutput(FIGURES, GlobalWindows.windowed_value(counted))


class CountingDoFn(beam.DoFn):
    """A DoFn whose counts are `self._count`, BundleCounters set in __init__:
    started with each bundle and, at its end, added to Beam's counters and
    given on the FIGURES output."""

    def start_bundle(self) -> None:
        self._count.start()

    def finish_bundle(self) -> Iterator[TaggedOutput]:
        yield from self._count.flush()


class SumFigures(beam.CombineFn):
    """Dicts of counts -> one dict, each count summed."""

    def create_accumulator(self) -> Counter:
        return Counter()

    def add_input(self, accumulator: Counter, figures: dict[str, int]) -> Counter:
        accumulator.update(figures)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[Counter]) -> Counter:
        merged = Counter()
        for accumulator in accumulators:
            merged.update(accumulator)
        return merged

    def extract_output(self, accumulator: Counter) -> dict[str, int]:
        return dict(accumulator)


class CollectFigures(beam.PTransform):
    """A pipeline's counting steps' FIGURES outputs, flattened -> one dict of
    every counter made while the pipeline was built (`names`), summed, zero
    where it never fired, in name order."""

    def __init__(self, names: Iterable[str]) -> None:
        super().__init__()
        self._names = sorted(names)

    def expand(self, figures: beam.PCollection) -> beam.PCollection:
        names = self._names
        return (figures
                | "SumFigures" >> beam.CombineGlobally(SumFigures())
                | "EveryName" >> beam.Map(lambda summed: {
                    name: summed.get(name, 0) for name in sorted({*names, *summed})}))


def known_names() -> list[str]:
    return sorted(_NAMES)


def forget_names() -> None:
    """Starts a pipeline's names afresh: a process that builds several
    pipelines (tests, a refresh's runs) reports each one's own counters."""
    _NAMES.clear()


def read_counters(result) -> dict[str, int]:
    """Final values from a finished PipelineResult, summed over steps, with a
    zero for every counter created while the pipeline was built."""
    from apache_beam.metrics.metric import MetricsFilter

    totals = dict.fromkeys(known_names(), 0)
    for found in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        value = found.committed if found.committed is not None else found.attempted
        totals[found.key.metric.name] = totals.get(found.key.metric.name, 0) + value
    return totals
