"""Progress of a local run, shared by its worker processes through small files.

Beam's counters are read only when a run ends, so a local run of minutes would
be silent. Each DoFn that knows a piece of the progress (Tokenize: documents
and text bytes; CreateInstances: instances) adds it to a `ProgressSink`, which
writes its running totals to its own file at most once a second; the driver
sums the files (`read_progress`) and prints them (pipeline.progress_printer).
A Dataflow job's progress is its console page.
"""

from __future__ import annotations

import json
import os
import time
import uuid

_INTERVAL_SECONDS = 1.0


class ProgressSink:
    """Running totals of one DoFn instance; nothing at all without a directory."""

    def __init__(self, directory: str | None) -> None:
        self._directory = directory
        self._totals: dict[str, int] = {}
        self._path = None
        self._written = 0.0

    @property
    def active(self) -> bool:
        """Whether anyone reads the totals: callers skip computing them if not."""
        return self._directory is not None

    def add(self, **counts: int) -> None:
        if self._directory is None:
            return
        for name, value in counts.items():
            self._totals[name] = self._totals.get(name, 0) + value
        now = time.monotonic()
        if now - self._written >= _INTERVAL_SECONDS:
            self.write()
            self._written = now

    def write(self) -> None:
        """Writes the totals (atomically: a reader never sees half a file)."""
        if self._directory is None or not self._totals:
            return
        if self._path is None:
            self._path = os.path.join(self._directory, f"{uuid.uuid4().hex}.json")
        staged = self._path + ".tmp"
        with open(staged, "w", encoding="utf-8") as handle:
            json.dump(self._totals, handle)
        os.replace(staged, self._path)


def read_progress(directory: str) -> dict[str, int]:
    """The totals of every sink writing to `directory`, summed."""
    totals: dict[str, int] = {}
    for name in os.listdir(directory):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                counts = json.load(handle)
        except (OSError, ValueError):  # replaced or removed meanwhile
            continue
        for key, value in counts.items():
            totals[key] = totals.get(key, 0) + value
    return totals
