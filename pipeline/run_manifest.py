"""What a run's manifest says: the typed `DatasetManifest` (loaders.manifest)
made from a run's results by one function, `run_manifest`, for every entry
point (the bert recipes' runs, d2l's, the reference run), so that each
records the same keys alike; `publish` then writes it. A pipeline's run,
local or a job that publishes itself, takes it through `staged_manifest`:
from what the pipeline staged, its figures included, and a PublishPlan.
"""

from __future__ import annotations

import dataclasses
import platform
import unicodedata
from importlib import metadata
from typing import Sequence

from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.loaders.manifest import (NO_DEDUP, DatasetManifest, Packing,
                                                    SplitRecord, manifest_format)
from bert_pretraining_data.pipeline.changes import HASH_LIST_NAME, DocumentPlan, version_record
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.publish import (AUDIT_NAME, DECONTAMINATION_NAME, DEDUP_NAME,
                                                    FIGURES_NAME, MIXTURE_OUTPUT_NAME,
                                                    MIXTURE_SOURCES_NAME, NEAR_COPY_NAME,
                                                    PROBLEM_LIST_NAME, SPLIT_NAME, OutputPaths,
                                                    dataset_warnings, read_staging_json,
                                                    staged_shards, training_shards)
from bert_pretraining_data.pipeline.stages import held_out_config, record_layout
from bert_pretraining_data.transforms.quality.rule_table import (removed_by_rule,
                                                                 split_source_counters)
from bert_pretraining_data.transforms.read.mixture import Mixture
from bert_pretraining_data.transforms.split.held_out import TRAIN, split_seed
from bert_pretraining_data.transforms.write.formats import output_format
from bert_pretraining_data.transforms.write.shard_record import ShardRecord


def package_versions() -> dict[str, str]:
    """The versions the output depends on. Python's among them: tokenization
    follows Python's own Unicode database, as the original does, so Pythons
    of other Unicode versions tokenize some rarely used code points
    differently (docs/install.md: Supported Pythons)."""
    names = ("bert-pretraining-data", "apache-beam", "tensorflow", "tensorflow-transform")
    versions = {"python": platform.python_version(), "unicode": unicodedata.unidata_version}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def packing_summary(config: Config, shards: Sequence[ShardRecord], max_predictions_per_row: int
                    ) -> Packing:
    """The packed rows (--pack_sequences), from the writer's shard list: their
    depths and how full they are."""
    rows = sum(s.records for s in shards)
    tokens = sum(s.tokens for s in shards)
    by_depth = [sum(column) for column in zip(*(s.figures["rows_by_depth"] for s in shards))]
    return Packing(max_sequences_per_pack=config.max_sequences_per_pack,
                   max_predictions_per_row=max_predictions_per_row,
                   rows=rows, instances=sum(s.instances for s in shards), tokens=tokens,
                   token_slots=rows * config.max_seq_length,
                   filled=round(tokens / max(1, rows * config.max_seq_length), 6),
                   rows_by_depth={str(depth): n for depth, n in enumerate(by_depth, 1)})


def _schema(shards: Sequence[ShardRecord]) -> dict[str, str] | None:
    """Parquet and MDS shards name their columns' types (MDS: encodings); the
    manifest states them once."""
    return next((s.columns for s in shards if s.columns is not None), None)


def _instances(shards: Sequence[ShardRecord]) -> int:
    """A packed shard's records are rows of several instances."""
    return sum(s.instances for s in shards)


def split_records(config: Config, output: OutputPaths, train_instances: int,
                  max_predictions_per_row: int | None) -> dict[str, SplitRecord] | None:
    """Each split's entry (with held-out splits): what its pipeline staged
    (documents, tokens; training's near copies dropped) and, for a held-out
    split, its own shards, features and packing."""
    fractions = config.split_fractions
    if not fractions.active:
        return None
    (near,) = read_staging_json(output, NEAR_COPY_NAME)
    held_out = held_out_config(config)
    indexed = not output_format(config.output_format).makes_instances  # masked nowhere
    records = {}
    for name in fractions.names:
        part = output.part(name)
        (figures,) = read_staging_json(part, SPLIT_NAME)
        common = dict(fraction=fractions.fraction(name), **figures,
                      seed=split_seed(config.random_seed, name))
        if name == TRAIN:
            records[name] = SplitRecord(
                **common, instances=train_instances, dupe_factor=config.dupe_factor,
                masking=config.masking, **near)
            continue
        shards = staged_shards(part)
        records[name] = SplitRecord(
            **common, instances=_instances(shards), near_copies_dropped=0, dupe_factor=1,
            masking=config.masking if indexed else held_out.masking,
            shards=[shard.listed() for shard in shards],
            features={} if indexed else record_layout(held_out).roles(), schema=_schema(shards),
            packing=(packing_summary(held_out, shards, max_predictions_per_row)
                     if config.pack_sequences else None))
    return records


def _decontamination(config: Config, output: OutputPaths) -> dict | None:
    """--decontaminate's figures, and where its audit list of matches is."""
    if not config.decontaminate:
        return None
    (summary,) = read_staging_json(output, DECONTAMINATION_NAME)
    return dict(summary, audit=FileSystems.split(output.beside_manifest(AUDIT_NAME))[1])


def mixture_section(config: Config, output: OutputPaths, mixture: Mixture | None,
                    dedup: dict, source_counters: dict[int, dict[str, int]]) -> dict | None:
    """What the mixture is and what each source made: its flags, what its
    quality filters removed (`source_counters`: each source's own counters),
    planned weight, documents and tokens (after dedup and the held-out
    splits), copies and realised epochs, instances, output tokens and their
    share (training's), and the copies dropped across sources."""
    if mixture is None:
        return None
    train = output.part(TRAIN)
    held = {row["source"]: row for row in read_staging_json(train, MIXTURE_SOURCES_NAME)}
    made = {row["source"]: row for row in read_staging_json(train, MIXTURE_OUTPUT_NAME)}
    total = sum(row["tokens"] for row in made.values())
    sources = []
    for index, source in enumerate(mixture.sources):
        documents = held.get(index, {}).get("documents", 0)
        copies = held.get(index, {}).get("copies", 0)
        output_tokens = made.get(index, {}).get("tokens", 0)
        sources.append({
            **dataclasses.asdict(source),
            "quality": removed_by_rule(source_counters.get(index, {})),
            "weight": held.get(index, {}).get("weight", source.weight or 0.0),
            "documents": documents, "tokens": held.get(index, {}).get("tokens", 0),
            "copies": copies, "epochs": round(copies / documents, 6) if documents else 0.0,
            "instances": made.get(index, {}).get("instances", 0), "output_tokens": output_tokens,
            "share": round(output_tokens / total, 6) if total else 0.0})
    names = mixture.names
    return {"layout": config.mixture_layout, "alpha": mixture.alpha,
            "total_tokens": mixture.total_tokens, "sources": sources,
            "duplicates_across_sources": [
                {"kept": names[pair["kept"]], "dropped": names[pair["dropped"]],
                 "documents": pair["documents"]} for pair in dedup.get("across_sources", [])]}


def _dedup_summary(output: OutputPaths, config: Config) -> dict:
    """The dedup stage's figures (its one staged summary)."""
    if config.dedup == "none":
        return dict(NO_DEDUP)
    (summary,) = read_staging_json(output, DEDUP_NAME)
    return summary


def run_manifest(config: Config, output: OutputPaths, *, vocab_sha256: str,
                 inputs: Sequence[tuple[str, int]], shards: Sequence[ShardRecord],
                 counters: dict[str, int], input_problems: Sequence[dict] = (),
                 warnings: Sequence[str] = (), max_predictions_per_row: int | None = None,
                 documents: DocumentPlan | None = None,
                 mixture: Mixture | None = None,
                 tokenizer_engine: str | None = None,
                 own_flags: dict[str, object] | None = None) -> DatasetManifest:
    """The manifest of a run that finished, before it is published: its
    shards (training's, at their final paths: publish.placed), counters, input
    problems and warnings, and what its pipeline staged beside them (the
    dedup figures; the hash files `documents` asked for). `own_flags`: the
    settings the vocabulary decides itself (Vocabulary.own_flags), recorded
    over the flags'."""
    total_instances = _instances(shards)
    dedup = _dedup_summary(output, config)
    counters, source_counters = split_source_counters(counters)
    manifest = DatasetManifest(
        format=manifest_format(config.output_format),
        flags={**config.flags(), **(own_flags or {})},
        # d2l's own features are described by its recipe; a tokenized corpus' files hold ids only.
        features=({} if config.recipe == "d2l"
                  or not output_format(config.output_format).makes_instances
                  else record_layout(config).roles()),
        vocab_sha256=vocab_sha256,
        inputs=[{"path": p, "bytes": size} for p, size in inputs],
        shards=[shard.listed() for shard in shards],
        total_instances=total_instances,
        counters=dict(sorted(counters.items())),
        dedup=dedup,
        input_problems=list(input_problems),
        warnings=list(warnings),
        versions=package_versions(),
        schema=_schema(shards),
        packing=(packing_summary(config, shards, max_predictions_per_row)
                 if config.pack_sequences else None),
        splits=split_records(config, output, total_instances, max_predictions_per_row),
        decontamination=_decontamination(config, output),
        mixture=mixture_section(config, output, mixture, dedup, source_counters),
        tokenizer_engine=tokenizer_engine if config.tokenizer_file else None)
    if documents is None:
        return manifest
    return dataclasses.replace(manifest, refresh=version_record(
        documents, read_staging_json(output, HASH_LIST_NAME),
        instances=manifest.total_instances, shard_bytes=manifest.shard_bytes,
        splits=manifest.splits, mixture=manifest.mixture,
        quality=removed_by_rule(manifest.counters)))


@dataclasses.dataclass(frozen=True)
class PublishPlan:
    """What publishing a pipeline's run takes besides what the pipeline
    staged: the same for a local run and for a job that publishes itself."""

    config: Config
    output: OutputPaths
    vocab_sha256: str
    inputs: Sequence[tuple[str, int]]
    replaces: Sequence[str]  # existing outputs the run replaces (--overwrite)
    max_predictions_per_row: int | None
    documents: DocumentPlan | None = None  # where the documents' hashes went (a refresh)
    mixture: Mixture | None = None
    tokenizer_engine: str | None = None
    warnings: Sequence[str] = ()  # known before the run (pipeline.prepare.Prepared)
    own_flags: dict[str, object] = dataclasses.field(default_factory=dict)  # the vocabulary's


def plan_manifest(plan: PublishPlan, *, shards: Sequence[ShardRecord],
                  counters: dict[str, int], input_problems: Sequence[dict] = (),
                  warnings: Sequence[str] = ()) -> DatasetManifest:
    """run_manifest of a run the plan describes, given what the run made
    (`warnings`: what its output says, before those known at launch)."""
    return run_manifest(plan.config, plan.output, vocab_sha256=plan.vocab_sha256,
                        inputs=plan.inputs, shards=shards, counters=counters,
                        input_problems=input_problems, warnings=[*warnings, *plan.warnings],
                        tokenizer_engine=plan.tokenizer_engine,
                        max_predictions_per_row=plan.max_predictions_per_row,
                        documents=plan.documents, mixture=plan.mixture,
                        own_flags=plan.own_flags)


def staged_manifest(plan: PublishPlan) -> DatasetManifest:
    """The manifest of a pipeline that finished, from what it staged: its
    shards, input problems and figures (the manifest's counters, data on
    every runner), and each stage's list."""
    (figures,) = read_staging_json(plan.output, FIGURES_NAME)
    problems = read_staging_json(plan.output, PROBLEM_LIST_NAME)
    return plan_manifest(plan, shards=training_shards(plan.output), counters=figures,
                         input_problems=problems, warnings=dataset_warnings(figures, problems))
