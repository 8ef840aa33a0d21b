"""What every entry point does between its flags and its pipeline, in one place.

`create-pretraining-data` (`main.create_dataset`, either recipe) and the launch-only
job of the Flex Template (`dataflow.launch`) match the inputs, read the
vocabulary and prepare the output location the same way; each step fails
in one line (InputError, VocabularyError, ConfigError) before any work starts.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from typing import Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.pipeline.beam_options import ConfigError, is_dataflow
from bert_pretraining_data.pipeline.changes import DocumentHistory, DocumentPlan
from bert_pretraining_data.pipeline.input_sample import sample_documents, sample_entries
from bert_pretraining_data.pipeline.local_runner import new_pipeline
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.options.masking import prediction_cap_warning
from bert_pretraining_data.pipeline.publish import OutputPaths, prepare_output
from bert_pretraining_data.pipeline.run_manifest import PublishPlan
from bert_pretraining_data.pipeline.stages import StageSettings
from bert_pretraining_data.transforms.counters import read_counters
from bert_pretraining_data.transforms.decontaminate.beam import match_benchmarks, read_benchmark
from bert_pretraining_data.transforms.decontaminate.benchmarks import DecontaminationError
from bert_pretraining_data.transforms.handoff.shuffle.frames import EntryCodebook, entry_codebook
from bert_pretraining_data.transforms.quality.language import LanguageFilter
from bert_pretraining_data.transforms.quality.rule_table import QualityConfigError
from bert_pretraining_data.transforms.quality.rules import QualityConfig, QualityFilters
from bert_pretraining_data.transforms.read.beam import (check_input_format, check_input_schema,
                                                       head_documents, match_inputs,
                                                       sample_lines, windows_cut_from)
from bert_pretraining_data.transforms.read.documents import InputError, comma_separated
from bert_pretraining_data.transforms.read.mixture import (FILTER_FLAGS, INPUT_FLAGS, Mixture,
                                                           MixtureError, Source, input_sources,
                                                           parse_mixture)
from bert_pretraining_data.transforms.read.tables import INPUT_FORMATS
from bert_pretraining_data.transforms.split.held_out import SPLITS
from bert_pretraining_data.transforms.tokenize.sentences import DEFAULT_SPLITTER, SPLITTERS
from bert_pretraining_data.transforms.tokenize.engines import (CHECK_LINES, TOKENIZERS,
                                                               choose_engine)
from bert_pretraining_data.transforms.tokenize.tokenizer_json import JsonTokenizer, JsonVocabulary
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary, VocabularyError
from bert_pretraining_data.transforms.write.formats import output_format


# Bytes of the input read for the engine's check: its lines, spread over the input.
ENGINE_SAMPLE_BYTES = 4 << 20
# Input bytes whose instances the shuffle frames' codebook is learned from
# (bench/README.md, shuffle_bytes.py).
CODEBOOK_SAMPLE_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A validated run, ready for its pipeline."""

    config: Config
    beam_args: Sequence[str]
    inputs: list[tuple[str, int]]  # (path, bytes) of every input file
    output: OutputPaths
    replaces: list[str]  # existing outputs the run will replace (--overwrite)
    vocab: Vocabulary | None  # None with --recipe=d2l, which computes its own
    stages: StageSettings | None
    benchmarks: list[str] = dataclasses.field(default_factory=list)  # --decontaminate's files
    mixture: Mixture | None = None  # --mixture's sources, read in place of --input_file
    # each source's --quality_filters, --languages (transforms.quality.rules); None: no filters
    filters: tuple[QualityFilters, ...] | None = None
    # known before the work: the tokenizer engine's check failed (tokenizer_engine),
    # the masks' cap is under what --masked_lm_prob asks (prediction_cap_warning)
    warnings: tuple[str, ...] = ()

    @property
    def patterns(self) -> list[str]:
        """--input_file's patterns (none with --mixture: its sources have theirs)."""
        return comma_separated(self.config.input_file) if self.config.input_file else []

    def new_pipeline(self) -> beam.Pipeline:
        return new_pipeline(self.beam_args)

    def publish_plan(self, documents: DocumentPlan | None) -> PublishPlan:
        """What publishing this run takes besides what its pipeline stages."""
        return PublishPlan(config=self.config, output=self.output,
                           vocab_sha256=self.vocab.sha256, inputs=self.inputs,
                           replaces=self.replaces,
                           max_predictions_per_row=self.stages.rows.max_predictions,
                           documents=documents, mixture=self.mixture,
                           tokenizer_engine=self.stages.tokenizer.engine,
                           warnings=self.warnings, own_flags=self.vocab.own_flags())

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
    mixture = read_mixture(config) if config.mixture else None
    sources, by_source = input_sources(config, mixture), []
    filters = read_filters(config, sources, mixture)
    for source in sources:
        try:
            files = match_inputs(source.input_file)
            paths = [path for path, _ in files]
            check_input_schema(source.input_format, paths, source.text_field)
            check_input_format(source.input_format, paths, 'set its "input_format": "{}"'
                               if mixture else "pass --input_format={}")
        except InputError as err:
            if not mixture:
                raise
            raise MixtureError(f"{config.mixture}: source {source.name!r}: {err}") from None
        by_source.append(files)
    if mixture and is_dataflow(beam_args):  # --input_file's own check: check_dataflow_options
        local = [(source.name, pattern) for source in mixture.sources
                 for pattern in comma_separated(source.input_file)
                 if not pattern.startswith("gs://")]
        if local:
            raise ConfigError(f"{config.mixture}: source {local[0][0]!r}: {local[0][1]} must be "
                              "a gs:// path on Dataflow: workers cannot read this machine's "
                              "files; copy it with `gcloud storage cp`")
    inputs = sorted({file for files in by_source for file in files})
    benchmarks = match_benchmarks(config.decontaminate) if config.decontaminate else []
    for path in benchmarks:  # an empty or unreadable one fails now, in one line
        read_benchmark(path, config.decontaminate_field)
    vocab = config.tokenizer.load_vocabulary(FileSystems.open) if config.recipe != "d2l" else None
    engine, engine_warning = tokenizer_engine(
        config, list(zip(sources, by_source)), vocab)
    stages = StageSettings.of(config, vocab, engine) if vocab else None
    # Only runs whose instances cross the runner's shuffle use it: not the
    # reference run (one process) nor a tokenized corpus' (no instances).
    if (stages is not None and config.shuffle == "runner" and not config.reference_compatible
            and output_format(config.output_format).makes_instances):
        stages = stages.with_entry_codebook(entry_codebook_of(config, stages, vocab, inputs))
    output, replaces = prepare_output(config, inputs, [
        (source.name, sum(size for _, size in files))
        for source, files in zip(mixture.sources, by_source)] if mixture else ())
    return Prepared(config=config, beam_args=beam_args, inputs=inputs, output=output,
                    replaces=replaces, vocab=vocab, stages=stages, benchmarks=benchmarks,
                    mixture=mixture, filters=filters, warnings=tuple(filter(None, [
                        engine_warning, prediction_cap_warning(config)])))


def entry_codebook_of(config: Config, stages: StageSettings, vocab: Vocabulary,
                      inputs: Sequence[tuple[str, int]]) -> EntryCodebook | None:
    """The codebook of the runner's shuffle frames (transforms.handoff.shuffle.frames),
    learned from the instances of CODEBOOK_SAMPLE_BYTES of the input, each
    document once; None where the input cannot be sampled
    (pipeline.input_sample) or gives too few instances."""
    sampled = sample_documents(config, stages, vocab, inputs, CODEBOOK_SAMPLE_BYTES)
    if sampled is None:
        return None
    return entry_codebook(sample_entries(config, stages, sampled[0], 0, 1))


def tokenizer_engine(config: Config,
                     corpora: Sequence[tuple[Source, list[tuple[str, int]]]],
                     vocab: Vocabulary | None) -> tuple[str, str | None]:
    """The engine of a tokenizer.json run (transforms.tokenize.engines), and
    the warning of a check that failed. `corpora`: (the source, read as it
    says, its files) for --input_file or each mixture source. The check
    encodes CHECK_LINES lines of the input, each source its share: from
    windows spread over plain text and JSONL files, else (compressed files,
    Parquet, dumps, WET files) from the first documents of files spread over
    the source, read as the run reads them."""
    if not isinstance(vocab, JsonVocabulary):
        return TOKENIZERS, None

    def sample() -> list[str]:  # read only when the fast engine could run
        lines = []
        budget = ENGINE_SAMPLE_BYTES // len(corpora)
        for corpus, files in corpora:
            if corpus.input_format in ("text", "jsonl") and windows_cut_from(files):
                sampled, _ = sample_lines(files, budget)
                found = [line.decode("utf-8", "replace").rstrip("\r\n") for _, line in sampled]
                if corpus.input_format == "jsonl":
                    found = [text for line in found
                             for text in _jsonl_text(line, corpus.text_field)]
            else:
                found = [line for lines in head_documents(
                    corpus.input_format, [path for path, _ in files], budget, corpus.text_field)
                    for line in lines]
            found = [line for line in found if line.strip()]
            share = CHECK_LINES // len(corpora)
            lines += found[::max(1, len(found) // share)][:share]
        return lines
    tokenizers_ids = JsonTokenizer(vocab, words=False).lines_to_ids
    return choose_engine(vocab, tokenizers_ids, sample, requested=config.tokenizer_engine,
                         words=config.tokenizer.words)


def read_filters(config: Config, sources: Sequence[Source], mixture: Mixture | None
                 ) -> tuple[QualityFilters, ...] | None:
    """Each source's filters: its rule sets with --quality_config's thresholds,
    its languages (a one-line QualityConfigError, or MixtureError naming the
    source, for a value or file that cannot be used); None where no source
    has any."""
    overrides = read_quality_config(config)
    filters = []
    for source in sources:
        try:
            filters.append(QualityFilters(
                rules=QualityConfig.parse(
                    source.quality_filters, overrides,
                    source=f"--quality_config {config.quality_config}", others=bool(mixture),
                    where="quality_filters" if mixture else "--quality_filters")
                if source.quality_filters else None,
                languages=LanguageFilter.parse(
                    source.languages, source.language_threshold,
                    where="languages" if mixture else "--languages")
                if source.languages else None))
        except QualityConfigError as err:
            if not mixture:
                raise
            raise MixtureError(f"{config.mixture}: source {source.name!r}: {err}") from None
    if overrides and not any(f.rules for f in filters):
        raise QualityConfigError("--quality_config sets the thresholds of quality rules, and no "
                                 "source of --mixture names quality_filters; add them, or "
                                 "drop --quality_config")
    return tuple(filters) if any(f.active for f in filters) else None


def read_quality_config(config: Config) -> dict | None:
    """--quality_config's {rule: threshold} (a one-line QualityConfigError for
    a file that is missing or not a JSON object)."""
    overrides = None
    if config.quality_config:
        path = config.quality_config
        data = _flag_file("--quality_config", path, QualityConfigError)
        try:
            overrides = json.loads(data)
        except ValueError as err:
            raise QualityConfigError(f"--quality_config {path}: not JSON ({err}); write "
                                     '{"rule": threshold, ...}') from None
        if not isinstance(overrides, dict):
            raise QualityConfigError(f"--quality_config {path}: not a JSON object; write "
                                     '{"rule": threshold, ...}')
    return overrides


def _flag_file(flag: str, path: str, error: type[Exception]) -> bytes:
    """The bytes of the file a flag names (local or gs://); `error`, one line,
    where there is none."""
    if not FileSystems.exists(path):
        raise error(f"{flag} {path}: no such file; check the path")
    with FileSystems.open(path) as handle:
        return handle.read()


def read_mixture(config: Config) -> Mixture:
    """--mixture's file, parsed and checked (a one-line MixtureError)."""
    data = _flag_file("--mixture", config.mixture, MixtureError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MixtureError(f"{config.mixture}: not UTF-8; save it as UTF-8 JSON or YAML") from None
    mixture = parse_mixture(text, config.mixture,
                            defaults={flag: getattr(config, flag)
                                      for flag in (*INPUT_FLAGS, *FILTER_FLAGS)},
                            choices={"input_format": INPUT_FORMATS,
                                     "sentence_splitter": tuple(SPLITTERS)},
                            default_splitter=DEFAULT_SPLITTER)
    for name in mixture.names:  # by source, its folder is beside (or for) the splits'
        if name in SPLITS:
            raise MixtureError(f"{config.mixture}: source {name!r}: {name!r} names a split's "
                               "folder; give the source another name")
    return mixture


# The errors a user fixes in the input or the flags (exit code 2), wherever
# they are found: before the run, or by a worker.
USER_ERRORS = (VocabularyError, InputError, DecontaminationError, QualityConfigError)


class RunFailed(RuntimeError):
    """A run that failed after it started (exit code 1): one line naming the
    step and what failed, where the runner relays a worker's traceback."""


_STEP = re.compile(r"\s*\[while running '([^']*)'\]")
_MAX_CHARS = 600
_OWN = "bert_pretraining_data"  # this package's errors say what they are


def run_failure(err: BaseException) -> RunFailed:
    """`err`, raised by a worker or the runner, as one line: the step Beam
    names ([while running 'step']), the error's own last line (a relayed
    traceback's is the error), and that nothing was published."""
    text = str(err).strip()
    steps = _STEP.findall(text)
    lines = [line.strip() for line in _STEP.sub("", text).splitlines() if line.strip()]
    if "Traceback" in text and lines:  # a worker's, relayed as text: its last line is the error
        name, _, message = lines[-1].partition(": ")
        module, _, name = name.rpartition(".")
    else:
        module, name, message = type(err).__module__, type(err).__name__, " ".join(lines)
    if not module.startswith(_OWN) and name:  # another library's error: its name helps
        message = f"{name}: {message}" if message else name
    if len(message) > _MAX_CHARS:
        message = message[:_MAX_CHARS - 3] + "..."
    where = f" in step '{steps[0]}'" if steps else ""
    return RunFailed(f"the run failed{where}: {message}; nothing was published")


def run_to_completion(pipeline: beam.Pipeline) -> dict[str, int]:
    """Runs a pipeline, waits for it and returns its counters; a failure is a
    USER_ERRORS one as raised, any other a RunFailed."""
    try:
        result = pipeline.run()
        job_id = getattr(result, "job_id", None)
        if callable(job_id):  # a Dataflow job: its console shows the progress
            options = pipeline.options.get_all_options()
            print(f"Dataflow job: https://console.cloud.google.com/dataflow/jobs/"
                  f"{options.get('region')}/{job_id()}?project={options.get('project')}",
                  file=sys.stderr, flush=True)
        result.wait_until_finish()
    except USER_ERRORS:
        raise
    except Exception as err:  # noqa: BLE001 - every runner's and storage's errors
        raise run_failure(err) from err
    return read_counters(result)


def _jsonl_text(line: str, field: str) -> list[str]:
    """The lines of a JSONL record's text (none for a line that is not one:
    the run counts those itself)."""
    try:
        record = json.loads(line)
    except ValueError:
        return []
    text = record.get(field) if isinstance(record, dict) else None
    return text.splitlines() if isinstance(text, str) else []
