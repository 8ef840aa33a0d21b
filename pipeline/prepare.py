"""What every entry point does between its flags and its pipeline, in one place.

`create-pretraining-data` (`main.create_dataset`, either recipe) and the launch-only
job of the Flex Template (`dataflow.launch`) match the inputs, read the
vocabulary and prepare the output location the same way; each step fails
in one line (InputError, VocabularyError, ConfigError) before any work starts.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.pipeline.changes import DocumentHistory, DocumentPlan
from bert_pretraining_data.pipeline.local_runner import new_pipeline
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.publish import OutputPaths, prepare_output
from bert_pretraining_data.pipeline.stages import Stages
from bert_pretraining_data.transforms.counters import read_counters
from bert_pretraining_data.transforms.decontaminate.beam import match_benchmarks, read_benchmark
from bert_pretraining_data.transforms.read.beam import check_parquet_schema, match_inputs
from bert_pretraining_data.transforms.read.documents import comma_separated
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A validated run, ready for its pipeline."""

    config: Config
    beam_args: Sequence[str]
    inputs: list[tuple[str, int]]  # (path, bytes) of every input file
    output: OutputPaths
    replaces: list[str]  # existing outputs the run will replace (--overwrite)
    vocab: Vocabulary | None  # None with --recipe=d2l, which computes its own
    stages: Stages | None
    benchmarks: list[str] = dataclasses.field(default_factory=list)  # --decontaminate's files

    @property
    def patterns(self) -> list[str]:
        return comma_separated(self.config.input_file)

    def new_pipeline(self) -> beam.Pipeline:
        return new_pipeline(self.beam_args)

    def document_plan(self, history: DocumentHistory | None) -> DocumentPlan | None:
        """Where this run's document hashes go, when a refresh asks for them."""
        if history is None:
            return None
        return history.plan(staging_dir=self.output.staging_dir,
                            output_dir=self.config.output_dir,
                            input_bytes=sum(size for _, size in self.inputs))


def prepare(config: Config, beam_args: Sequence[str]) -> Prepared:
    """Matches the inputs and the benchmark files (read once: a bad one is
    said now), reads the vocabulary (every recipe's but d2l's, which computes
    its own) and prepares the output location."""
    inputs = match_inputs(config.input_file)
    if config.input_format == "parquet":
        check_parquet_schema([path for path, _ in inputs], config.text_field)
    benchmarks = match_benchmarks(config.decontaminate) if config.decontaminate else []
    for path in benchmarks:  # an empty or unreadable one fails now, in one line
        read_benchmark(path, config.decontaminate_field)
    vocab = config.tokenizer.load_vocabulary(FileSystems.open) if config.recipe != "d2l" else None
    stages = Stages.of(config, vocab) if vocab else None
    output, replaces = prepare_output(config, inputs)
    return Prepared(config=config, beam_args=beam_args, inputs=inputs, output=output,
                    replaces=replaces, vocab=vocab, stages=stages, benchmarks=benchmarks)


def run_to_completion(pipeline: beam.Pipeline) -> dict[str, int]:
    """Runs a pipeline, waits for it and returns its counters."""
    result = pipeline.run()
    job_id = getattr(result, "job_id", None)
    if callable(job_id):  # a Dataflow job: its console shows the progress
        options = pipeline.options.get_all_options()
        print(f"Dataflow job: https://console.cloud.google.com/dataflow/jobs/"
              f"{options.get('region')}/{job_id()}?project={options.get('project')}",
              file=sys.stderr, flush=True)
    result.wait_until_finish()
    return read_counters(result)
