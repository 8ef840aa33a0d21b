"""create-pretraining-data: BERT pre-training TFRecords from raw text, on Beam.

    create-pretraining-data --input_file=corpus/*.txt --output_dir=out/ \\
        --vocab_file=vocab.txt --direct_running_mode=multi_processing \\
        --direct_num_workers=4

On Dataflow the same with gs:// paths and Beam's flags (--runner=DataflowRunner
--project --region --temp_location --setup_file=./setup.py). An existing
command line of the original create_pretraining_data.py runs unchanged
(`--output_file` names the exact output files).
"""

from __future__ import annotations

import functools
import sys
from typing import Sequence

from bert_pretraining_data.loaders.manifest import DatasetManifest
from bert_pretraining_data.pipeline.build import build_pipeline
from bert_pretraining_data.pipeline.changes import DocumentHistory
from bert_pretraining_data.pipeline.command_line import run_command
from bert_pretraining_data.pipeline.dataflow import (check_dataflow_options, dry_run_summary,
                                                     is_dry_run, launch)
from bert_pretraining_data.pipeline.disk_space import (estimate_space, full_disk_reported,
                                                       space_warning)
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.pipeline.prepare import (USER_ERRORS, Prepared, RunFailed, prepare,
                                                    run_to_completion)
from bert_pretraining_data.pipeline.progress_printer import local_progress
from bert_pretraining_data.pipeline.publish import PublishError, placed, publish
from bert_pretraining_data.pipeline.reference_run import run_compat
from bert_pretraining_data.pipeline.run_manifest import plan_manifest, staged_manifest
from bert_pretraining_data.transforms.split.held_out import TRAIN
from bert_pretraining_data.transforms.write.formats import output_format

PROG = "create-pretraining-data"


def run(argv: Sequence[str], *, history: DocumentHistory | None = None) -> dict:
    """`create_dataset`, its manifest as written (JSON), plus `manifest_path`,
    where it was written."""
    path, manifest = create_dataset(argv, history=history)
    return dict(manifest.to_json(), manifest_path=path)


def create_dataset(argv: Sequence[str], *, history: DocumentHistory | None = None
                   ) -> tuple[str, DatasetManifest]:
    """Parses, validates, builds, runs and publishes; returns where the
    manifest was written, and the manifest. `history` (a refresh's runs):
    record the documents and what changed (the distributed bert recipe;
    --recipe=d2l and --reference_compatible record none)."""
    config, beam_args = parse_args(argv)
    check_dataflow_options(config, beam_args)
    prepared = prepare(config, beam_args)
    estimate = functools.cache(lambda: estimate_space(prepared))
    # a local output's space, and what prepare found: said before the work
    for warning in (space_warning(prepared, estimate), *prepared.warnings):
        if warning:
            print(f"{PROG}: warning: {warning}", file=sys.stderr, flush=True)
    with full_disk_reported(prepared, estimate):
        if config.recipe == "d2l":
            # loads tf.Transform: this recipe only
            from bert_pretraining_data.pipeline.d2l_recipe import run_d2l

            return prepared.output.manifest_path, run_d2l(prepared)
        return prepared.output.manifest_path, _run_bert(prepared, history)


def _run_bert(prepared: Prepared, history: DocumentHistory | None) -> DatasetManifest:
    """The bert recipes' pipeline (or the reference run) and publish."""
    config, output = prepared.config, prepared.output
    documents = None  # reference mode records none: it is one process, for migration checks
    if config.reference_compatible:
        shards = placed(run_compat(config, stages=prepared.stages,
                                   tokenizer=config.tokenizer.tokenizer(prepared.vocab),
                                   output=output), output)
        manifest = plan_manifest(prepared.publish_plan(documents), shards=shards, counters={})
    else:
        pipeline = prepared.new_pipeline()
        documents = prepared.document_plan(history)
        with local_progress(config, prepared.beam_args, prepared.inputs) as progress_dir:
            build_pipeline(pipeline, config=config, stages=prepared.stages,
                           patterns=prepared.patterns, output=output, progress_dir=progress_dir,
                           input_bytes=sum(size for _, size in prepared.inputs),
                           documents=documents, benchmarks=prepared.benchmarks,
                           mixture=prepared.mixture, filters=prepared.filters)
            run_to_completion(pipeline)
        manifest = staged_manifest(prepared.publish_plan(documents))
    publish(output, manifest, replaces=prepared.replaces, documents=documents)
    return manifest


def summary(path: str, manifest: DatasetManifest) -> str:
    """A few lines for the terminal: where the data went and what it holds."""
    shards, counters = manifest.shards, manifest.counters
    made = output_format(manifest.flags["output_format"]).holds
    lines = [f"wrote {manifest.total_instances:,} {made} in {len(shards)} shard(s):"]
    lines += [f"  {s.path}  ({s.records:,} records)" for s in shards[:5]]
    if len(shards) > 5:
        lines.append(f"  ... and {len(shards) - 5} more")
    for name, split in (manifest.splits or {}).items():
        if name != TRAIN:
            lines.append(f"{name}: {split.instances:,} {made} of {split.documents:,} "
                         f"held-out documents in {len(split.shards)} file(s) under {name}/")
    if manifest.splits:
        lines.append(f"near copies of held-out documents dropped from training: "
                     f"{manifest.splits[TRAIN].near_copies_dropped:,}")
    lines.append(f"manifest: {path}")
    if counters:
        lines.append("counters: " + ", ".join(f"{k}={v:,}" for k, v in counters.items()))
    return "\n".join(lines)


def run_or_dry_run(argv: Sequence[str]) -> tuple[str, list[str]]:
    """A run's summary and warnings; a Dataflow dry run's summary (the job is
    built, nothing runs: no manifest)."""
    _, beam_args = parse_args(argv)
    if is_dry_run(beam_args):
        return dry_run_summary(launch(argv)), []
    path, manifest = create_dataset(argv)
    return summary(path, manifest), list(manifest.warnings)


def print_result(outcome: tuple[str, list[str]]) -> None:
    text, warnings = outcome
    print(text)
    for warning in warnings:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> None:
    run_command(PROG, run_or_dry_run, print_result, argv,
                user_errors=USER_ERRORS, failed_runs=(PublishError, RunFailed),
                every_failure_said=True)


if __name__ == "__main__":
    main()
