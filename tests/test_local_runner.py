"""A DirectRunner job runs on Beam's FnApiRunner directly, without Beam's Prism attempt."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.runners.portability import prism_runner
from apache_beam.testing.util import assert_that, equal_to

from bert_pretraining_data.pipeline.local_runner import FnApiDirectRunner, new_pipeline


def _prism_calls(monkeypatch) -> list:
    calls: list = []

    def refuse(self, pipeline, options):
        calls.append(pipeline)
        raise RuntimeError("no Prism here")  # Beam's DirectRunner then falls back

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse)
    return calls


def _square(pipeline: beam.Pipeline) -> None:
    squares = pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * x)
    assert_that(squares, equal_to([1, 4, 9]))


@pytest.mark.slow
def test_direct_runner_jobs_skip_prism(monkeypatch):
    calls = _prism_calls(monkeypatch)
    for flags in ([], ["--runner=DirectRunner"],
                  ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]):
        pipeline = new_pipeline(flags)
        assert isinstance(pipeline.runner, FnApiDirectRunner)
        _square(pipeline)
        pipeline.run().wait_until_finish()
    assert calls == []


def test_beams_own_direct_runner_would_try_prism_first(monkeypatch):
    """What the test above guards against (Beam 2.6x and later)."""
    calls = _prism_calls(monkeypatch)
    pipeline = beam.Pipeline()
    _square(pipeline)
    pipeline.run().wait_until_finish()
    assert len(calls) == 1


def test_other_runners_are_beams_own():
    assert not isinstance(new_pipeline(["--runner=BundleBasedDirectRunner"]).runner,
                          FnApiDirectRunner)
