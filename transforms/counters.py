"""Beam counters of this pipeline: one namespace, and the names in use.

Every stage counts what it reads, drops, cuts or repairs. Names are recorded
when a counter is created (on the driver, while the pipeline is built), so the
manifest can report a zero for a counter that never fired instead of leaving
it out.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics

NAMESPACE = "bert_data"
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

    def flush(self) -> None:
        for name, value in self.counts.items():
            if value:
                self._counters[name].inc(value)
        self.start()


class CountingDoFn(beam.DoFn):
    """A DoFn whose counts are `self._count`, BundleCounters set in __init__:
    started with each bundle and added to Beam's counters at its end."""

    def start_bundle(self) -> None:
        self._count.start()

    def finish_bundle(self) -> None:
        self._count.flush()


def known_names() -> list[str]:
    return sorted(_NAMES)


def read_counters(result) -> dict[str, int]:
    """Final values from a finished PipelineResult, summed over steps, with a
    zero for every counter created while the pipeline was built."""
    from apache_beam.metrics.metric import MetricsFilter

    totals = dict.fromkeys(known_names(), 0)
    for found in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        value = found.committed if found.committed is not None else found.attempted
        totals[found.key.metric.name] = totals.get(found.key.metric.name, 0) + value
    return totals
