"""The pipeline, narrated as the design card draws it.

    ReadDocuments -> FilterQuality -> Deduplicate -> Decontaminate -> SplitDocuments
    -> per split: Tokenize -> BatchDocuments (and the sample's candidates
                  -> SampleRandomDocuments, a side input)
                  -> SpreadDocuments (--shuffle=runner) -> FanOutDupes
                  -> CreateInstances -> WriteShards -> ListShards

CreateInstances is the design card's CreateInstances, MaskTokens and Encode,
compiled into one step per unit of work (transforms.instances.units);
documents travel in batches, because the runner's work per element would
cost more than a short document's own. A refresh also writes the documents'
hashes (RecordDocuments, pipeline.changes). `build_pipeline` only adds
transforms to `p`; it runs nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.pipeline.changes import HASH_LIST_NAME, DocumentPlan
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.publish import (AUDIT_NAME, DECONTAMINATION_NAME,
                                                    DEDUP_BATCHES_NAME, DEDUP_NAME, FIGURES_NAME,
                                                    MIXTURE_OUTPUT_NAME, MIXTURE_SOURCES_NAME,
                                                    NEAR_COPY_NAME, PROBLEM_LIST_NAME,
                                                    QUALITY_NAME, SHARD_LIST_NAME, SPLIT_NAME,
                                                    TOKENIZED_BATCHES_NAME, OutputPaths,
                                                    write_staging_json)
from bert_pretraining_data.pipeline.stages import StageSettings
from bert_pretraining_data.transforms.counters import (FIGURES, CollectFigures, forget_names,
                                                       known_names)
from bert_pretraining_data.transforms.decontaminate.beam import Decontaminate
from bert_pretraining_data.transforms.decontaminate.benchmarks import MATCHES
from bert_pretraining_data.transforms.dedup.beam import Deduplicate
from bert_pretraining_data.transforms.dedup.decisions import SUMMARY, Fingerprints, dedup_partitions
from bert_pretraining_data.transforms.handoff.beam import SpreadBatchFiles
from bert_pretraining_data.transforms.handoff.shuffle.instances import entry_source, entry_tokens
from bert_pretraining_data.transforms.hashes.beam import WriteDocumentHashes
from bert_pretraining_data.transforms.instances.beam import (BATCHES, CANDIDATES, ENTRIES,
                                                             BatchDocuments, CreateInstances,
                                                             SampleDocuments)
from bert_pretraining_data.transforms.instances.mixture import (alpha_weights, document_figures,
                                                                fan_out_mixture, source_tokens)
from bert_pretraining_data.transforms.instances.sample import SampleSettings
from bert_pretraining_data.transforms.instances.units import fan_out_batch
from bert_pretraining_data.transforms.quality.beam import REMOVED, FilterQuality
from bert_pretraining_data.transforms.quality.rules import QualityFilters
from bert_pretraining_data.transforms.read.beam import (ReadDocuments, ReadDump, ReadTables,
                                                       ReadWarc)
from bert_pretraining_data.transforms.read.documents import DOCUMENTS, PROBLEMS, comma_separated
from bert_pretraining_data.transforms.read.mixture import (Mixture, input_sources, source_key,
                                                           source_of)
from bert_pretraining_data.transforms.split.beam import NEAR_COPIES, SplitDocuments, SplitFigures
from bert_pretraining_data.transforms.split.held_out import TRAIN, split_seed
from bert_pretraining_data.transforms.tokenize.beam import TokenizeDocument
from bert_pretraining_data.transforms.write.beam import SHARDS, WriteIndexedDatasets, WriteShards
from bert_pretraining_data.transforms.write.formats import output_format

# A sampled document keeps about this many tokens per max_seq_length.
SAMPLE_DOCUMENT_SEQUENCES = 8


def stage_list(items: list[dict], output: OutputPaths, name: str) -> int:
    """Stages a list for the publisher (a step's last element); returns its length."""
    write_staging_json(output, name, items)
    return len(items)


@dataclasses.dataclass(frozen=True)
class StagedRun:
    """What a built pipeline stages for publishing, each a PCollection of one
    element, the length of a list it staged: the publisher reads the lists
    (pipeline.run_manifest), and a job's publish step waits for these."""

    shards: beam.PCollection  # training's shards
    problems: beam.PCollection  # the input problems
    lists: tuple[beam.PCollection, ...]  # the run's figures, and each stage's own list
    hashes: beam.PCollection | None  # the documents' hash files (a refresh's runs)


@dataclasses.dataclass
class _Staging:
    """What the graph stages and counts as it is built: each staged list's
    length and each counting step's FIGURES output."""

    lists: list[beam.PCollection] = dataclasses.field(default_factory=list)
    figures: list[beam.PCollection] = dataclasses.field(default_factory=list)

    def list(self, items: beam.PCollection, output: OutputPaths, name: str,
             label: str) -> beam.PCollection:
        """Stages the one list `items` is (a PCollection of one list) as `name`."""
        staged = items | label >> beam.Map(stage_list, output, name)
        self.lists.append(staged)
        return staged

    def counted(self, outputs, main: str) -> beam.PCollection:
        """The `main` output of a counting step's outputs; its FIGURES kept."""
        self.figures.append(outputs[FIGURES])
        return outputs[main]


def write_shards(entries: beam.PCollection, *, config: Config, stages: StageSettings,
                 output: OutputPaths, prefix: str, staging: _Staging) -> beam.PCollection:
    """Entries -> the length of the shard list it staged, the shards written
    into `output`'s staging."""
    shards = staging.counted(entries | f"{prefix}WriteShards" >> WriteShards(
        staging_dir=output.staging_dir, shard_names=output.shard_names,
        compression=config.compression, shuffle=config.shuffle, rows=stages.rows,
        codebook=stages.entry_codebook), SHARDS)
    return list_shards(shards, output, prefix)


def list_shards(shards: beam.PCollection, output: OutputPaths, prefix: str) -> beam.PCollection:
    """The writer's ShardRecords, staged as one list for the publisher
    (publish.staged_shards reads it)."""
    return (shards
            | f"{prefix}CollectShards" >> beam.combiners.ToList()
            | f"{prefix}ListShards" >> beam.Map(
                lambda records: stage_list([r.to_json() for r in records], output,
                                           SHARD_LIST_NAME)))


def mixture_weights(tokenized_docs: beam.PCollection, mixture: Mixture):
    """Each source's weight: as given, or (alpha) from the tokens each source's
    documents hold, measured here, as a side input."""
    if mixture.alpha is None:
        return tuple(source.weight for source in mixture.sources)
    count = len(mixture.sources)
    return beam.pvalue.AsSingleton(
        tokenized_docs
        | "SourceTokens" >> beam.Map(source_tokens)
        | "SumSourceTokens" >> beam.CombinePerKey(sum)
        | "AllSourceTokens" >> beam.combiners.ToList()
        | "AlphaWeights" >> beam.Map(lambda pairs: alpha_weights(
            [dict(pairs).get(i, 0) for i in range(count)], mixture.alpha,
            mixture.total_tokens)))


def source_figures(tokenized_docs: beam.PCollection, made: beam.PCollection, *,
                   mixture: Mixture, output: OutputPaths, seed: int, copies, planned,
                   staging: _Staging) -> None:
    """Stages each source's figures for the manifest: its documents, tokens
    and copies made (`copies`: the weights the copies were drawn with), its
    planned weight, and what it made (`made`: (source, (instances or
    sentences, their tokens)), summed here)."""
    held = (tokenized_docs
            | "CountSources" >> beam.Map(document_figures, copies, seed)
            | "SumSources" >> beam.CombinePerKey(_sum_columns)
            | "CollectSources" >> beam.combiners.ToList()
            | "WithWeights" >> beam.Map(lambda pairs, weights: [
                {"source": source, "documents": documents, "tokens": tokens, "copies": made,
                 "weight": weights[source]} for source, (documents, tokens, made) in pairs],
                planned))
    staging.list(held, output, MIXTURE_SOURCES_NAME, "ListSources")
    made = (made
            | "SumOutput" >> beam.CombinePerKey(_sum_columns)
            | "CollectOutput" >> beam.combiners.ToList()
            | "OutputRows" >> beam.Map(lambda pairs: [
                {"source": source, "instances": instances, "tokens": tokens}
                for source, (instances, tokens) in pairs]))
    staging.list(made, output, MIXTURE_OUTPUT_NAME, "ListOutput")


def indexed_sources(tokenized_docs: beam.PCollection, *, config: Config, stages: StageSettings,
                    output: OutputPaths, seed: int, mixture: Mixture, staging: _Staging
                    ) -> beam.PCollection:
    """A by_source mixture's tokenized corpus as Megatron-LM's indexed
    datasets, each source's prefixes in its folder (one copy of each
    document: a blend weighs them at training time), and the sources'
    figures, their sentences counted as what they made; returns the
    length of the sources' shard lists."""
    count = len(mixture.sources)
    parts = tokenized_docs | "BySource" >> beam.Partition(
        lambda document, count: source_of(document[0]), count)
    lists, made = [], []
    for index, (part, source) in enumerate(zip(parts, mixture.sources)):
        paths, label = output.part(source.name), f"{source.name}-"
        shards = staging.counted(part | f"{label}WriteIndexed" >> WriteIndexedDatasets(
            staging_dir=paths.staging_dir, shard_names=paths.shard_names,
            dtype=stages.indexed_dtype, seed=seed), SHARDS)
        lists.append(list_shards(shards, paths, label))
        made.append(shards | f"{label}CountOutput" >> beam.Map(
            lambda shard, index: (index, (shard.records, shard.tokens)), index))
    source_figures(tokenized_docs, made | "MadeBySources" >> beam.Flatten(), mixture=mixture,
                   output=output, seed=seed, copies=(1.0,) * count,
                   planned=mixture_weights(tokenized_docs, mixture), staging=staging)
    return _listed_sources(lists)


def _sum_columns(rows: Iterable[tuple[int, ...]]) -> tuple[int, ...]:
    """Tuples of counts summed column by column."""
    return tuple(map(sum, zip(*rows)))


def split_instances(documents: beam.PCollection, *, name: str, config: Config,
                    stages: StageSettings, output: OutputPaths, progress_dir: str | None,
                    counted: bool, staging: _Staging, mixture: Mixture | None = None
                    ) -> beam.PCollection:
    """One split's documents -> its shards; returns the length of their
    staged list. Training's steps keep their names; a held-out split's are
    prefixed with its own (Validation..., Test...), and it is made with its
    own seed, once per document, its random-next sample drawn from its own
    documents, so no split holds another's text. `counted`: the split's
    documents and tokens go to its staging list. `mixture`: each instance is
    stamped with its source; training's copies are the sources' weights,
    each source's figures are staged, and its sources may be written each in
    its folder (a held-out split is one part of the output)."""
    prefix = "" if name == TRAIN else name.title()
    seed = split_seed(config.random_seed, name)
    training_mixture = mixture if name == TRAIN else None
    tokenized_docs = tokenize_split(documents, prefix=prefix, config=config, stages=stages,
                                    output=output, progress_dir=progress_dir, counted=counted,
                                    staging=staging, mixture=mixture)
    if not output_format(config.output_format).makes_instances:  # a tokenized corpus
        if training_mixture is not None:  # each source's prefixes
            return indexed_sources(tokenized_docs, config=config, stages=stages, output=output,
                                   seed=seed, mixture=training_mixture, staging=staging)
        shards = staging.counted(tokenized_docs | f"{prefix}WriteIndexed" >> WriteIndexedDatasets(
            staging_dir=output.staging_dir, shard_names=output.shard_names,
            dtype=stages.indexed_dtype, seed=seed), SHARDS)
        return list_shards(shards, output, prefix)
    entries = split_entries(tokenized_docs, prefix=prefix, seed=seed, config=config,
                            stages=stages, output=output, progress_dir=progress_dir,
                            staging=staging, mixture=mixture, training_mixture=training_mixture,
                            dupe_factor=config.dupe_factor if name == TRAIN and not mixture else 1)
    if training_mixture is not None and config.mixture_layout == "by_source":
        parts = entries | "BySource" >> beam.Partition(
            lambda batch, count: entry_source(batch), len(training_mixture.sources))
        return _listed_sources([write_shards(part, config=config, stages=stages,
                                             output=output.part(source.name),
                                             prefix=f"{source.name}-", staging=staging)
                                for part, source in zip(parts, training_mixture.sources)])
    return write_shards(entries, config=config, stages=stages, output=output, prefix=prefix,
                        staging=staging)


def tokenize_split(documents: beam.PCollection, *, prefix: str, config: Config,
                   stages: StageSettings, output: OutputPaths, progress_dir: str | None,
                   counted: bool, staging: _Staging, mixture: Mixture | None
                   ) -> beam.PCollection:
    """A split's documents, tokenized (each mixture source's with its own
    sentence splitter); `counted`: their figures staged as the split's."""
    tokenized_docs = staging.counted(documents | f"{prefix}Tokenize" >> beam.ParDo(
        TokenizeDocument(
            tokenizer=stages.tokenizer, whole_word_segmenter=config.whole_word_segmenter,
            sentence_splitter=(tuple(source.sentence_splitter for source in mixture.sources)
                               if mixture else config.sentence_splitter),
            progress_dir=progress_dir)).with_outputs(FIGURES, main=DOCUMENTS), DOCUMENTS)
    if counted:
        staging.list(tokenized_docs | f"{prefix}CountSplit" >> beam.CombineGlobally(SplitFigures())
                     | f"{prefix}SplitRow" >> beam.Map(lambda figures: [figures]),
                     output, SPLIT_NAME, f"{prefix}ListSplit")
    return tokenized_docs


def sample_settings(config: Config, seed: int) -> SampleSettings:
    """The random-next sample of a split made with `seed`: its size and
    byte cap (the flags) and the leading sequences a document gives it."""
    return SampleSettings(seed=seed, size=config.nsp_sample_size,
                          max_bytes=config.nsp_sample_max_bytes,
                          max_tokens_per_document=SAMPLE_DOCUMENT_SEQUENCES
                          * config.max_seq_length)


def split_entries(tokenized_docs: beam.PCollection, *, prefix: str, seed: int, config: Config,
                  stages: StageSettings, output: OutputPaths, progress_dir: str | None,
                  staging: _Staging, mixture: Mixture | None,
                  training_mixture: Mixture | None, dupe_factor: int) -> beam.PCollection:
    """A split's tokenized documents -> its instances' shuffle entries: its
    random-next sample, its documents in batches spread over the workers,
    fanned out to their copies (`dupe_factor` each, or with a mixture
    layout of mixed, `training_mixture`'s weights; its sources' figures are
    staged) and made into instances (stamped with their source with a
    `mixture`)."""
    # In batches: the runner's work per element would cost more than a short
    # document's own. Through the runner's shuffle (Dataflow), the batches are
    # spread over workers, zstd-compressed on the way (BatchDocuments), before
    # the fan-out multiplies the work. On the DirectRunner (`--shuffle=files`),
    # whose GroupByKey would hold the tokenized corpus decoded in memory (the
    # cost: docs/design-notes.md, pipeline.build), they go through files and
    # only their paths through its GroupByKey (SpreadBatchFiles). The sample's
    # candidates are taken as the documents are batched: CreateInstances' side
    # input (the sample) needs all of them before any instance is made.
    sample = sample_settings(config, seed)
    batched = tokenized_docs | f"{prefix}BatchDocuments" >> beam.ParDo(
        BatchDocuments(by_source=mixture is not None, compress=config.shuffle == "runner",
                       sample=sample)).with_outputs(CANDIDATES, main=BATCHES)
    nsp_sample = batched[CANDIDATES] | f"{prefix}SampleRandomDocuments" >> SampleDocuments(sample)
    spread = batched[BATCHES]
    if config.shuffle == "runner":
        spread = spread | f"{prefix}SpreadDocuments" >> beam.Reshuffle()
    else:
        spread = spread | f"{prefix}SpreadDocuments" >> SpreadBatchFiles(
            FileSystems.join(output.staging_dir, TOKENIZED_BATCHES_NAME))
    weighted = training_mixture is not None and config.mixture_layout == "mixed"
    if training_mixture is not None:
        planned = mixture_weights(tokenized_docs, training_mixture)
        copies = planned if weighted else tuple(1.0 for _ in training_mixture.sources)
    if weighted:
        fanned = spread | "FanOutSources" >> beam.FlatMap(fan_out_mixture, planned, seed)
    else:
        fanned = spread | f"{prefix}FanOutDupes" >> beam.FlatMap(fan_out_batch, dupe_factor)
    entries = staging.counted(fanned | f"{prefix}CreateInstances" >> beam.ParDo(
        CreateInstances(instances=stages.instances, seed=seed, masking=stages.instance_masking,
                        progress_dir=progress_dir, stamp_sources=mixture is not None),
        nsp_sample=beam.pvalue.AsSingleton(nsp_sample)).with_outputs(FIGURES, main=ENTRIES),
        ENTRIES)
    if training_mixture is not None:
        made = entries | "CountOutput" >> beam.Map(
            lambda batch: (entry_source(batch), (len(batch), entry_tokens(batch))))
        source_figures(tokenized_docs, made, mixture=training_mixture, output=output, seed=seed,
                       copies=copies, planned=planned, staging=staging)
    return entries


def _listed_sources(lengths: list[beam.PCollection]) -> beam.PCollection:
    """The lengths of each source's staged shard list, summed."""
    return (lengths | "ListedSources" >> beam.Flatten()
            | "CountSourceShards" >> beam.CombineGlobally(sum))


def _read(p: beam.Pipeline, label: str, *, input_format: str, patterns: list[str],
          text_field: str, split_bytes: int | None) -> dict[str, beam.PCollection]:
    """One corpus's documents, problems and figures, read as its format says."""
    if input_format == "text":
        return p | label >> ReadDocuments(patterns=patterns, split_bytes=split_bytes)
    if input_format == "wikipedia":
        return p | label >> ReadDump(patterns=patterns)
    if input_format == "warc":
        return p | label >> ReadWarc(patterns=patterns)
    return p | label >> ReadTables(patterns=patterns, input_format=input_format,
                                   text_field=text_field)


def read_corpus(p: beam.Pipeline, *, config: Config, patterns: list[str],
                mixture: Mixture | None, staging: _Staging
                ) -> tuple[beam.PCollection, beam.PCollection]:
    """(documents, problems) of --input_file, or of each mixture source, its
    documents keyed by source (transforms.read.mixture.source_key)."""
    if mixture is None:
        read = _read(p, "ReadDocuments", input_format=config.input_format, patterns=patterns,
                     text_field=config.text_field, split_bytes=config.input_split_bytes)
        return staging.counted(read, DOCUMENTS), read[PROBLEMS]
    documents, problems = [], []
    for index, source in enumerate(mixture.sources):
        read = _read(p, f"Read-{source.name}", input_format=source.input_format,
                     patterns=comma_separated(source.input_file), text_field=source.text_field,
                     split_bytes=config.input_split_bytes)
        documents.append(staging.counted(read, DOCUMENTS) | f"Key-{source.name}" >> beam.Map(
            lambda document, index=index, name=source.name: (
                source_key(index, name, document[0]), document[1])))
        problems.append(read[PROBLEMS])
    return (tuple(documents) | "Sources" >> beam.Flatten(),
            tuple(problems) | "SourceProblems" >> beam.Flatten())


def build_pipeline(p: beam.Pipeline, *, config: Config, stages: StageSettings,
                   patterns: list[str], output: OutputPaths,
                   progress_dir: str | None = None,
                   input_bytes: int = 0,
                   documents: DocumentPlan | None = None,
                   benchmarks: Sequence[str] = (),
                   mixture: Mixture | None = None,
                   filters: Sequence[QualityFilters] | None = None) -> StagedRun:
    """The pipeline's graph, and what it stages for publishing;
    `progress_dir` (local runs): where the Tokenize and CreateInstances
    stages report their progress (transforms.progress_sink); `input_bytes`
    sizes the dedup stage's partitions; `documents`: where the documents'
    hashes go (a refresh's runs); `benchmarks`: --decontaminate's files;
    `mixture`: its sources, read in place of `patterns`; `filters`: each
    source's --quality_filters and --languages (None: none)."""
    forget_names()
    staging = _Staging()
    documents_read, problems = read_corpus(p, config=config, patterns=patterns,
                                           mixture=mixture, staging=staging)
    docs_by_key = documents_read
    sources = input_sources(config, mixture)
    if filters:  # first: dedup and the splits see the text the rules leave
        filtered = docs_by_key | "FilterQuality" >> FilterQuality(
            filters, by_source=mixture is not None)
        docs_by_key = staging.counted(filtered, DOCUMENTS)
        staging.list(filtered[REMOVED], output, QUALITY_NAME, "ListQuality")
    if config.dedup != "none":  # before anything else, so nothing sees a document twice
        deduped = docs_by_key | "Deduplicate" >> Deduplicate(fingerprints=Fingerprints(
            mode=config.dedup, ngram=config.dedup_ngram, threshold=config.dedup_threshold,
            partitions=dedup_partitions(input_bytes),
            unique_keys=all(source.input_format == "text" for source in sources),
            by_source=mixture is not None), compress=config.shuffle == "runner",
            batch_folder=None if config.shuffle == "runner" else FileSystems.join(
                output.staging_dir, DEDUP_BATCHES_NAME))
        docs_by_key = staging.counted(deduped, DOCUMENTS)
        staging.list(deduped[SUMMARY] | "DedupRow" >> beam.Map(lambda summary: [summary]),
                     output, DEDUP_NAME, "ListDedup")
    if benchmarks:  # after dedup: each text is looked up once
        cleaned = docs_by_key | "Decontaminate" >> Decontaminate(
            paths=benchmarks, field=config.decontaminate_field, ngram=config.decontaminate_ngram)
        docs_by_key = staging.counted(cleaned, DOCUMENTS)
        staging.list(cleaned[MATCHES], output, AUDIT_NAME, "ListMatches")
        staging.list(cleaned[SUMMARY] | "SummaryRow" >> beam.Map(lambda summary: [summary]),
                     output, DECONTAMINATION_NAME, "ListSummary")
    splits = {TRAIN: docs_by_key}
    if config.split_fractions.active:
        splits = dict(docs_by_key | "SplitDocuments" >> SplitDocuments(
            fractions=config.split_fractions, ngram=config.dedup_ngram,
            threshold=config.dedup_threshold))
        staging.figures.append(splits.pop(FIGURES))
        staging.list(splits.pop(NEAR_COPIES) | "NearCopyRow" >> beam.Map(
            lambda dropped: [{"near_copies_dropped": dropped}]),
            output, NEAR_COPY_NAME, "ListNearCopies")
    shard_lists = {name: split_instances(
        split_documents, name=name, config=config,
        stages=stages.held_out if name != TRAIN else stages, output=output.part(name),
        progress_dir=None if name != TRAIN else progress_dir,
        counted=config.split_fractions.active, staging=staging, mixture=mixture)
        for name, split_documents in splits.items()}
    problem_list = (problems
                    | "CollectInputProblems" >> beam.combiners.ToList()
                    | "ListInputProblems" >> beam.Map(stage_list, output, PROBLEM_LIST_NAME))
    hash_list = None
    if documents is not None:  # the documents as read, whatever comes after
        hash_list = (documents_read
                     | "RecordDocuments" >> WriteDocumentHashes(
                         paths=documents.staged, previous=documents.previous_hash_files)
                     | "CollectHashFiles" >> beam.combiners.ToList()
                     | "ListHashFiles" >> beam.Map(stage_list, output, HASH_LIST_NAME))
    # Last: every counting step is in the graph, and so is every counter's name.
    figures = (tuple(staging.figures)
               | "AllFigures" >> beam.Flatten()
               | "CollectFigures" >> CollectFigures(known_names()))
    staging.list(figures | "FigureRow" >> beam.Map(lambda counts: [counts]),
                 output, FIGURES_NAME, "ListFigures")
    return StagedRun(shards=shard_lists.pop(TRAIN), problems=problem_list,
                     lists=(*staging.lists, *shard_lists.values()), hashes=hash_list)
