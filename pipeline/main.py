"""create-pretraining-data: BERT pre-training TFRecords from raw text, on Beam.

On this machine (DirectRunner, several processes):

    create-pretraining-data --input_file=corpus/*.txt --output_dir=out/ \\
        --vocab_file=vocab.txt --direct_running_mode=multi_processing \\
        --direct_num_workers=4

On Dataflow (inputs, vocabulary and output on gs://):

    create-pretraining-data --input_file=gs://b/corpus/*.txt.gz \\
        --output_dir=gs://b/bert-data/ --vocab_file=gs://b/vocab.txt \\
        --runner=DataflowRunner --project=P --region=R \\
        --temp_location=gs://b/tmp --setup_file=./setup.py

An existing command line of the original create_pretraining_data.py runs
unchanged (`--output_file` names the exact output files).
"""

from __future__ import annotations

import sys
from typing import Sequence

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.build import build_pipeline
from pipeline.compat import run_compat
from pipeline.dataflow import check_dataflow_options
from pipeline.options import Config, ConfigError, Stages, default_num_shards, parse_args
from pipeline.publish import (OutputLayout, check_output_location, output_layout, publish,
                              PROBLEM_LIST_NAME, SHARD_LIST_NAME, check_writable,
                              read_staging_json, remove_tree)
from transforms.documents import InputError, match_inputs
from transforms.counters import NAMESPACE, known_names
from transforms.tokenization import FullTokenizer
from transforms.vocabulary import VocabularyError, load_vocabulary

PROG = "create-pretraining-data"


def _num_shards(config: Config, inputs: Sequence[tuple[str, int]]) -> int:
    if config.output_file:
        return len([p for p in config.output_file.split(",") if p.strip()])
    return config.num_shards or default_num_shards(sum(s for _, s in inputs),
                                                   config.dupe_factor)


def _counters(result: beam.runners.runner.PipelineResult) -> dict[str, int]:
    found = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    totals = dict.fromkeys(known_names(), 0)
    for counter in found["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        totals[counter.key.metric.name] += value
    return totals


def _run_beam(config: Config, stages: Stages, layout: OutputLayout,
              beam_args: list[str]) -> dict[str, int]:
    patterns = [p.strip() for p in config.input_file.split(",") if p.strip()]
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    build_pipeline(pipeline, config=config, stages=stages, patterns=patterns,
                   layout=layout)
    result = pipeline.run()
    result.wait_until_finish()
    return _counters(result)


def run(argv: Sequence[str]) -> dict:
    """Parses, validates, builds, runs and publishes; returns the manifest
    (plus `manifest_path`, where it was written)."""
    config, beam_args = parse_args(argv)
    check_dataflow_options(config, beam_args)
    if config.recipe == "d2l":
        from pipeline.d2l_recipe import run_d2l  # loads tf.Transform: this recipe only

        return run_d2l(config, beam_args)
    inputs = match_inputs(config.input_file)
    vocab = load_vocabulary(config.vocab_file)
    stages = Stages.of(config, vocab)
    layout = output_layout(config, _num_shards(config, inputs))
    replaces = check_output_location(config, layout, overwrite=config.overwrite)
    remove_tree(layout.staging_dir)  # whatever an interrupted run left
    check_writable(layout)
    if config.reference_compatible:
        tokenizer = FullTokenizer(vocab, do_lower_case=config.do_lower_case)
        shards = run_compat(config, stages=stages, tokenizer=tokenizer, layout=layout)
        counters: dict[str, int] = {}
        problems: list[dict] = []
    else:
        counters = _run_beam(config, stages, layout, beam_args)
        shards = read_staging_json(layout, SHARD_LIST_NAME)
        problems = read_staging_json(layout, PROBLEM_LIST_NAME)
    manifest = publish(layout, config=config, vocab_sha256=vocab.sha256, inputs=inputs,
                       shards=shards, counters=counters, input_problems=problems,
                       warnings=warnings(counters, problems), replaces=replaces)
    return dict(manifest, manifest_path=layout.manifest_path)


def warnings(counters: dict[str, int], problems: list[dict]) -> list[str]:
    """Signs of an input that is not what the user meant, in plain words."""
    found = [f"{p['path']}: {p['message']}" for p in problems]
    documents = counters.get("tokenized_documents", 0)
    if counters and not documents:
        found.append("the input holds no text: no document had a single token")
    if documents and counters.get("sentences") == documents:
        found.append("every document has a single sentence, so every instance is a "
                     "random next: is the input one document per line? Put one sentence "
                     "per line and a blank line between documents")
    if counters.get("random_next_unavailable"):
        found.append(f"{counters['random_next_unavailable']:,} chunk(s) needed a random "
                     "next sentence but the corpus has no other document: they were "
                     "paired with their actual next sentence, or dropped if they had none")
    return found


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
    try:
        manifest = run(sys.argv[1:] if argv is None else argv)
    except (ConfigError, VocabularyError, InputError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        sys.exit(2)
    print(summary(manifest))
    for warning in manifest["warnings"]:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)


if __name__ == "__main__":
    main()
