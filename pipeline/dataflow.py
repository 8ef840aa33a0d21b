"""Dataflow wiring: our own checks of a Dataflow job's options, and the
launch-only mode that a Flex Template needs.

Beam validates its options only once the Pipeline is built, after the driver
has matched inputs, read the vocabulary and cleared staging, and misses some
mistakes entirely (a local --input_file, no package on the workers, no
--temp_location): `check_dataflow_options` runs right after parsing, each
failure one line naming the flag. A Flex Template launcher exits long before
the job ends, so `launch` makes publishing the job's own last step; such a
manifest has empty `counters` (the counts are in the job's metrics).
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import (GoogleCloudOptions, PipelineOptions, SetupOptions,
                                                  TestOptions, WorkerOptions)
from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
from apache_beam.runners.runner import PipelineResult

from bert_pretraining_data.loaders.manifest import DatasetManifest
from bert_pretraining_data.pipeline.beam_options import (ConfigError, is_dataflow, lock_path,
                                                         locked_versions)
from bert_pretraining_data.pipeline.build import build_pipeline
from bert_pretraining_data.pipeline.changes import DocumentHistory
from bert_pretraining_data.pipeline.options import Config, parse_args
from bert_pretraining_data.pipeline.prepare import prepare
from bert_pretraining_data.pipeline.publish import PROBLEM_LIST_NAME, publish, read_published
from bert_pretraining_data.pipeline.run_manifest import PublishPlan, staged_manifest
from bert_pretraining_data.transforms.read.documents import comma_separated



def is_dry_run(beam_args: Sequence[str]) -> bool:
    """A Dataflow `--dry_run`: Beam builds the job and submits nothing."""
    return is_dataflow(beam_args) and bool(
        PipelineOptions(list(beam_args)).view_as(TestOptions).dry_run)


def dry_run_summary(result: PipelineResult) -> str:
    """What a dry run would have submitted: stages, workers, how workers get
    this package. (A dry run's result has no metrics to read.)"""
    job = result.job
    options = job.options.get_all_options()
    transforms = job.proto_pipeline.components.transforms
    ids = list(job.proto_pipeline.root_transform_ids)
    while len(ids) == 1 and transforms[ids[0]].subtransforms:  # the pipeline's own wrapper
        ids = list(transforms[ids[0]].subtransforms)
    stages = [transforms[i].unique_name for i in ids]
    image = options.get("sdk_container_image")
    package = (f"image {image}" if image else
               f"setup file {options.get('setup_file')} with requirements "
               f"{options.get('requirements_file')}" if options.get("setup_file") else
               "no package (workers would not import this project)")
    workers = (f"{options.get('num_workers') or 'auto'} to "
               f"{options.get('max_num_workers') or 'auto'} workers of "
               f"{options.get('machine_type') or 'the default machine type'}")
    return "\n".join([
        f"dry run: Dataflow job {options.get('job_name') or '(unnamed)'} in "
        f"{options.get('project')}/{options.get('region')}, not submitted",
        f"  stages: {' -> '.join(stages)}",
        f"  workers: {workers}; {package}",
        f"  temp: {options.get('temp_location')}"])


def _paths(config: Config) -> list[tuple[str, str]]:
    """(flag, path) for every path the workers read or write."""
    found = [("input_file", p) for p in comma_separated(config.input_file)]
    for flag in ("vocab_file", "spm_model_file", "sp_model_file"):
        if getattr(config, flag):  # --recipe=d2l computes its vocabulary
            found.append((flag, getattr(config, flag)))
    outputs = config.output_dir or config.output_file
    flag = "output_dir" if config.output_dir else "output_file"
    found += [(flag, p) for p in comma_separated(outputs)]
    return found


def dataflow_option_errors(config: Config, beam_args: Sequence[str]) -> list[str]:
    """Every problem Dataflow (or Beam, too late) would find in these options."""
    options = PipelineOptions(list(beam_args))
    cloud = options.view_as(GoogleCloudOptions)
    setup = options.view_as(SetupOptions)
    workers = options.view_as(WorkerOptions)
    errors = []
    if not cloud.project:
        errors.append("--project is required on Dataflow (the Google Cloud project ID)")
    elif not re.fullmatch(PipelineOptionsValidator.PROJECT_ID_PATTERN, cloud.project):
        errors.append(f"--project={cloud.project} is not a project ID (lower-case letters, "
                      "digits and dashes, starting with a letter)")
    if not cloud.region:
        errors.append("--region is required on Dataflow, e.g. --region=us-central1")
    for flag in ("temp_location", "staging_location"):
        value = getattr(cloud, flag)
        if flag == "temp_location" and not value:
            errors.append("--temp_location=gs://BUCKET/tmp is required on Dataflow "
                          "(without it Beam would try to create a bucket)")
        elif value and not value.startswith("gs://"):
            errors.append(f"--{flag}={value} must be a gs:// path on Dataflow")
    if cloud.job_name and not re.fullmatch(PipelineOptionsValidator.JOB_PATTERN, cloud.job_name):
        errors.append(f"--job_name={cloud.job_name} is not a Dataflow job name (lower-case "
                      "letters, digits and dashes, starting with a letter)")
    for flag, path in _paths(config):
        if not path.startswith("gs://"):
            errors.append(f"--{flag}={path} must be a gs:// path on Dataflow: workers cannot "
                          "read this machine's files; copy it with `gcloud storage cp`")
    if not (setup.setup_file or workers.sdk_container_image or setup.extra_packages):
        errors.append("Dataflow workers need this package: pass --setup_file=./setup.py "
                      "or --sdk_container_image=IMAGE (see deploy/Dockerfile)")
    if (workers.num_workers and workers.max_num_workers
            and workers.num_workers > workers.max_num_workers):
        errors.append(f"--num_workers={workers.num_workers} is above "
                      f"--max_num_workers={workers.max_num_workers}")
    if config.reference_compatible:
        errors.append("--reference_compatible runs in this process, not on Dataflow; "
                      "drop it or use the DirectRunner")
    lock = lock_path("workers")
    if setup.requirements_file == str(lock):  # the workers' lock, sent by with_worker_requirements
        locked_beam = locked_versions(lock)["apache-beam"]
        if beam.__version__ != locked_beam:  # Dataflow starts workers on the launcher's
            errors.append(f"this launcher runs apache-beam {beam.__version__}, the "
                          f"workers' lock {lock} pins {locked_beam}: install the lock here "
                          f"(pip install -r {lock}), or pass --sdk_container_image or a "
                          "--requirements_file of your own")
    return errors


def check_dataflow_options(config: Config, beam_args: Sequence[str]) -> None:
    """Raises ConfigError for the first problem when the runner is Dataflow;
    does nothing for other runners."""
    if not is_dataflow(beam_args):
        return
    errors = dataflow_option_errors(config, beam_args)
    if errors:
        raise ConfigError(errors[0])


def publish_in_job(shard_count: int, problem_count: int, *staged_counts: int,
                   plan: PublishPlan, hash_count: int | None = None) -> DatasetManifest:
    """The job's publish step, run once every staged list exists (the
    shards, the input problems, `staged_counts`: the figures and each
    stage's list; side inputs, their lengths as the job wrote them): the
    manifest a local run makes, from the same staged lists (staged_manifest).

    Dataflow retries a failed step whole: a retry after an attempt that wrote
    the manifest and cleared staging (its worker lost before it reported)
    returns that manifest; one after a partial attempt completes it
    (`publish` counts renames already made as done).
    """
    output, documents = plan.output, plan.documents
    if (not FileSystems.exists(FileSystems.join(output.staging_dir, PROBLEM_LIST_NAME))
            and FileSystems.exists(output.manifest_path)):
        return read_published(output.manifest_path)
    manifest = staged_manifest(plan)
    hash_files = len(documents.staged) if documents else None
    found = (len(manifest.shards), len(manifest.input_problems), hash_files)
    if found != (shard_count, problem_count, hash_count):
        raise RuntimeError(f"{output.staging_dir}: the staging lists do not match what "
                           "the job wrote; was the output location written by another run?")
    publish(output, manifest, replaces=plan.replaces, documents=documents)
    return manifest


AfterPublish = Callable[[beam.PCollection], object]


def launch(argv: Sequence[str], *, after_publish: AfterPublish | None = None,
           history: DocumentHistory | None = None) -> PipelineResult:
    """Validates and prepares as `main.create_dataset` does, builds the job with publishing
    as its last step (then `after_publish`, given the manifest PCollection),
    submits it and returns without waiting. On the DirectRunner the job has
    finished when this returns. `history`: as for `main.create_dataset`. The Flex
    Template calls it through pipeline.refresh.template_main (deploy/flex_main.py)."""
    config, beam_args = parse_args(argv)
    check_dataflow_options(config, beam_args)
    if config.reference_compatible:
        raise ConfigError("--reference_compatible runs in one process, as the original, not as "
                          "a launch-only job (the Flex Template); run it with "
                          "create-pretraining-data")
    if config.recipe == "d2l":
        raise ConfigError("--recipe=d2l computes its vocabulary with tf.Transform in a pipeline "
                          "of its own, which a launch-only job (the Flex Template) does not "
                          "build; run it with create-pretraining-data")
    prepared = prepare(config, beam_args)
    documents = prepared.document_plan(history)
    pipeline = prepared.new_pipeline()
    staged = build_pipeline(pipeline, config=config, stages=prepared.stages,
                            output=prepared.output, patterns=prepared.patterns,
                            input_bytes=sum(size for _, size in prepared.inputs),
                            documents=documents, benchmarks=prepared.benchmarks,
                            mixture=prepared.mixture, filters=prepared.filters)
    # Side inputs: publishing waits for every staged list.
    hash_count = ({"hash_count": beam.pvalue.AsSingleton(staged.hashes)}
                  if staged.hashes is not None else {})
    manifest = staged.shards | "Publish" >> beam.Map(
        publish_in_job, beam.pvalue.AsSingleton(staged.problems),
        *map(beam.pvalue.AsSingleton, staged.lists), plan=prepared.publish_plan(documents),
        **hash_count)
    if after_publish is not None:
        after_publish(manifest)
    return pipeline.run()
