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

from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.build import build_pipeline
from bert_pretraining_data.pipeline.changes import DocumentHistory
from bert_pretraining_data.pipeline.dataflow import (check_dataflow_options, dry_run_summary,
                                                     is_dry_run, launch)
from bert_pretraining_data.pipeline.disk_space import (estimate_space, full_disk_reported,
                                                       space_warning)
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.pipeline.prepare import Prepared, prepare, run_to_completion
from bert_pretraining_data.pipeline.progress_printer import local_progress
from bert_pretraining_data.pipeline.publish import (PROBLEM_LIST_NAME, SHARD_LIST_NAME,
                                                    PublishError, dataset_warnings, publish,
                                                    read_dedup_summary, read_staging_json)
from bert_pretraining_data.pipeline.reference_run import run_compat
from bert_pretraining_data.transforms.read.documents import InputError
from bert_pretraining_data.transforms.tokenize.vocabulary import VocabularyError

PROG = "create-pretraining-data"


def run(argv: Sequence[str], *, history: DocumentHistory | None = None) -> dict:
    """Parses, validates, builds, runs and publishes; returns the manifest
    (plus `manifest_path`, where it was written). `history` (a refresh's
    runs): record the documents and what changed (the distributed bert
    recipe; --recipe=d2l and --reference_compatible record none)."""
    config, beam_args = parse_args(argv)
    check_dataflow_options(config, beam_args)
    run = prepare(config, beam_args)
    estimate = functools.cache(lambda: estimate_space(run))
    warning = space_warning(run, estimate)  # a local output's: said before the work
    if warning:
        print(f"{PROG}: warning: {warning}", file=sys.stderr, flush=True)
    with full_disk_reported(run, estimate):
        if config.recipe == "d2l":
            # loads tf.Transform: this recipe only
            from bert_pretraining_data.pipeline.d2l_recipe import run_d2l

            return run_d2l(run)
        return _run_bert(run, history)


def _run_bert(run: Prepared, history: DocumentHistory | None) -> dict:
    """The bert recipes' pipeline (or the reference run) and publish."""
    config, layout = run.config, run.layout
    documents = None  # reference mode records none: it is one process, for migration checks
    if config.reference_compatible:
        shards = run_compat(config, stages=run.stages,
                            tokenizer=config.tokenizer.tokenizer(run.vocab), layout=layout)
        counters: dict[str, int] = {}
        problems: list[dict] = []
        dedup = None
    else:
        pipeline = run.new_pipeline()
        documents = run.document_plan(history)
        with local_progress(config, run.beam_args, run.inputs) as progress_dir:
            build_pipeline(pipeline, config=config, stages=run.stages, patterns=run.patterns,
                           layout=layout, progress_dir=progress_dir,
                           input_bytes=sum(size for _, size in run.inputs),
                           documents=documents)
            counters = run_to_completion(pipeline)
        shards = read_staging_json(layout, SHARD_LIST_NAME)
        problems = read_staging_json(layout, PROBLEM_LIST_NAME)
        dedup = read_dedup_summary(layout, config)
    manifest = publish(layout, config=config, vocab_sha256=run.vocab.sha256, inputs=run.inputs,
                       shards=shards, counters=counters, input_problems=problems,
                       warnings=dataset_warnings(counters, problems), replaces=run.replaces,
                       max_predictions_per_row=run.stages.rows.max_predictions, dedup=dedup,
                       documents=documents)
    return dict(manifest, manifest_path=layout.manifest_path)


def summary(manifest: dict) -> str:
    """A few lines for the terminal: where the data went and what it holds."""
    shards = manifest["shards"]
    counters = manifest["counters"]
    lines = [f"wrote {manifest['total_instances']:,} instances in {len(shards)} file(s):"]
    lines += [f"  {s['path']}  ({s['records']:,} records)" for s in shards[:5]]
    if len(shards) > 5:
        lines.append(f"  ... and {len(shards) - 5} more")
    lines.append(f"manifest: {manifest['manifest_path']}")
    if counters:
        lines.append("counters: " + ", ".join(f"{k}={v:,}" for k, v in counters.items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        _, beam_args = parse_args(argv)
        if is_dry_run(beam_args):  # the job is built, nothing runs: no manifest
            print(dry_run_summary(launch(argv)))
            return
        manifest = run(argv)
    except (ConfigError, VocabularyError, InputError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        sys.exit(2)
    except PublishError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        sys.exit(1)
    print(summary(manifest))
    for warning in manifest["warnings"]:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)


if __name__ == "__main__":
    main()
