"""Pipelines for Beam flags, with Beam's DirectRunner going straight to its FnApiRunner.

Since Beam 2.6x the DirectRunner first tries the Prism runner, which
downloads a Go binary: offline it fails and falls back to the FnApiRunner,
having spent CPU and a DNS lookup (docs/design-notes.md, pipeline.local_runner);
online the job runs on Prism, which this pipeline is neither tested nor
measured on. So a DirectRunner job runs on the FnApiRunner directly, set up
as the DirectRunner sets it up for a batch job; other runners are Beam's own.
"""

from __future__ import annotations

from typing import Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineRunner

from bert_pretraining_data.pipeline.beam_options import runner_name

_DIRECT_RUNNERS = ("", "DirectRunner", "SwitchingDirectRunner")


class FnApiDirectRunner(PipelineRunner):
    """The DirectRunner's batch path: its FnApiRunner, given the pipeline's
    options (which multi-processing workers read from the provision info)."""

    def run_pipeline(self, pipeline: beam.Pipeline, options: PipelineOptions):
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        provision_info = fn_runner.ExtendedProvisionInfo(
            beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
        return fn_runner.FnApiRunner(provision_info=provision_info).run_pipeline(
            pipeline, options)


def new_pipeline(beam_args: Sequence[str]) -> beam.Pipeline:
    """A pipeline for these Beam flags; Beam's DirectRunner as FnApiDirectRunner."""
    options = PipelineOptions(list(beam_args))
    if runner_name(beam_args) in _DIRECT_RUNNERS:
        return beam.Pipeline(runner=FnApiDirectRunner(), options=options)
    return beam.Pipeline(options=options)
