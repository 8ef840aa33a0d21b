"""The pipeline, narrated as the design card draws it.

    ReadDocuments -> Deduplicate -> Decontaminate -> SplitDocuments
    -> per split: Tokenize -> SampleRandomDocuments (side input)
                  -> BatchDocuments -> SpreadDocuments (--shuffle=runner) -> FanOutDupes
                  -> CreateInstances -> WriteShards -> ListShards

CreateInstances is the design card's CreateInstances, MaskTokens and Encode,
compiled into one step per unit of work (transforms.instances.units);
documents travel in batches, because the runner's work per element would
cost more than a short document's own. A refresh also writes the documents'
hashes (RecordDocuments, pipeline.changes). `build_pipeline` only adds
transforms to `p`; it runs nothing.
"""

from __future__ import annotations

from typing import Sequence

import apache_beam as beam

from bert_pretraining_data.pipeline.changes import HASH_LIST_NAME, DocumentPlan
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.publish import (AUDIT_NAME, DECONTAMINATION_NAME, DEDUP_NAME,
                                                    NEAR_COPY_NAME, PROBLEM_LIST_NAME,
                                                    SHARD_LIST_NAME, SPLIT_NAME, OutputPaths,
                                                    write_staging_json)
from bert_pretraining_data.pipeline.stages import Stages
from bert_pretraining_data.transforms.decontaminate.beam import Decontaminate
from bert_pretraining_data.transforms.decontaminate.benchmarks import MATCHES
from bert_pretraining_data.transforms.dedup.beam import Deduplicate
from bert_pretraining_data.transforms.dedup.decisions import SUMMARY, Fingerprints, dedup_partitions
from bert_pretraining_data.transforms.hashes.beam import WriteDocumentHashes
from bert_pretraining_data.transforms.instances.beam import (BatchDocuments, CreateInstances,
                                                             SampleDocuments)
from bert_pretraining_data.transforms.instances.units import fan_out_batch
from bert_pretraining_data.transforms.read.beam import ReadDocuments, ReadDump, ReadTables
from bert_pretraining_data.transforms.read.documents import DOCUMENTS, PROBLEMS
from bert_pretraining_data.transforms.split.beam import NEAR_COPIES, SplitDocuments, SplitFigures
from bert_pretraining_data.transforms.split.held_out import TRAIN, split_seed
from bert_pretraining_data.transforms.tokenize.beam import TokenizeDocument
from bert_pretraining_data.transforms.write.beam import WriteShards

# A sampled document keeps about this many tokens per max_seq_length.
SAMPLE_DOCUMENT_SEQUENCES = 8


def stage_list(items: list[dict], output: OutputPaths, name: str) -> int:
    """Stages a list for the publisher (a step's last element); returns its length."""
    write_staging_json(output, name, items)
    return len(items)


def split_instances(documents: beam.PCollection, *, name: str, config: Config, stages: Stages,
                    output: OutputPaths, progress_dir: str | None, counted: bool
                    ) -> dict[str, beam.PCollection]:
    """One split's documents -> its shards. Training's steps keep their names;
    a held-out split's are prefixed with its own (Validation..., Test...),
    and it is made with its own seed, once per document, its random-next
    sample drawn from its own documents, so no split holds another's text.
    `counted`: the split's documents and tokens go to its staging list."""
    prefix = "" if name == TRAIN else name.title()
    seed = split_seed(config.random_seed, name)
    tokenized_docs = documents | f"{prefix}Tokenize" >> beam.ParDo(TokenizeDocument(
        tokenizer=config.tokenizer, whole_word_segmenter=config.whole_word_segmenter,
        sentence_splitter=config.sentence_splitter, progress_dir=progress_dir))
    nsp_sample = tokenized_docs | f"{prefix}SampleRandomDocuments" >> SampleDocuments(
        seed=seed, size=config.nsp_sample_size, max_bytes=config.nsp_sample_max_bytes,
        max_tokens_per_document=SAMPLE_DOCUMENT_SEQUENCES * config.max_seq_length)
    # In batches: the runner's work per element would cost more than a short
    # document's own. Through the runner's shuffle (Dataflow), the batches are
    # spread over workers before the fan-out multiplies the work. Not on the
    # DirectRunner (`--shuffle=files`): its GroupByKey holds its input decoded
    # in memory, the tokenized corpus as Python objects (the cost:
    # docs/design-notes.md, pipeline.build), and the batches are materialized
    # anyway, since CreateInstances' side input (the sample) needs all of them
    # first; its workers share that buffer as they share a shuffle's.
    spread = tokenized_docs | f"{prefix}BatchDocuments" >> beam.ParDo(BatchDocuments())
    if config.shuffle == "runner":
        spread = spread | f"{prefix}SpreadDocuments" >> beam.Reshuffle()
    dupe_factor = config.dupe_factor if name == TRAIN else 1
    entries = (spread
               | f"{prefix}FanOutDupes" >> beam.FlatMap(fan_out_batch, dupe_factor)
               | f"{prefix}CreateInstances" >> beam.ParDo(
                   CreateInstances(
                       instances=stages.instances, seed=seed,
                       masking=stages.instance_masking,
                       progress_dir=progress_dir),
                   nsp_sample=beam.pvalue.AsSingleton(nsp_sample)))
    shards = entries | f"{prefix}WriteShards" >> WriteShards(
        staging_dir=output.staging_dir, shard_names=output.shard_names,
        compression=config.compression, shuffle=config.shuffle, rows=stages.rows)
    shard_list = (shards
                  | f"{prefix}CollectShards" >> beam.combiners.ToList()
                  | f"{prefix}ListShards" >> beam.Map(stage_list, output, SHARD_LIST_NAME))
    key = "" if name == TRAIN else f"{name}_"
    pcollections = {f"{key}tokenized_docs": tokenized_docs, f"{key}nsp_sample": nsp_sample,
                    f"{key}entries": entries, f"{key}shards": shards,
                    f"{key}shard_list": shard_list}
    if counted:
        pcollections[f"{name}_split_list"] = (
            tokenized_docs
            | f"{prefix}CountSplit" >> beam.CombineGlobally(SplitFigures())
            | f"{prefix}ListSplit" >> beam.Map(lambda figures: stage_list([figures], output,
                                                                      SPLIT_NAME)))
    return pcollections


def build_pipeline(p: beam.Pipeline, *, config: Config, stages: Stages,
                   patterns: list[str], output: OutputPaths,
                   progress_dir: str | None = None,
                   input_bytes: int = 0,
                   documents: DocumentPlan | None = None,
                   benchmarks: Sequence[str] = ()) -> dict[str, beam.PCollection]:
    """The pipeline's graph; `progress_dir` (local runs): where the Tokenize
    and CreateInstances stages report their progress (transforms.progress_sink);
    `input_bytes` sizes the dedup stage's partitions; `documents`: where the
    documents' hashes go (a refresh's runs); `benchmarks`: --decontaminate's
    files."""
    if config.input_format == "text":
        read = p | "ReadDocuments" >> ReadDocuments(
            patterns=patterns, split_bytes=config.input_split_bytes)
    elif config.input_format == "wikipedia":
        read = p | "ReadDocuments" >> ReadDump(patterns=patterns)
    else:
        read = p | "ReadDocuments" >> ReadTables(
            patterns=patterns, input_format=config.input_format, text_field=config.text_field)
    docs_by_key = read[DOCUMENTS]
    pcollections = {}
    if config.dedup != "none":  # before anything else, so nothing sees a document twice
        deduped = docs_by_key | "Deduplicate" >> Deduplicate(fingerprints=Fingerprints(
            mode=config.dedup, ngram=config.dedup_ngram, threshold=config.dedup_threshold,
            partitions=dedup_partitions(input_bytes),
            unique_keys=config.input_format == "text"))
        docs_by_key = deduped[DOCUMENTS]
        pcollections["dedup_list"] = deduped[SUMMARY] | "ListDedup" >> beam.Map(
            lambda summary: stage_list([summary], output, DEDUP_NAME))
    if benchmarks:  # after dedup: each text is looked up once
        cleaned = docs_by_key | "Decontaminate" >> Decontaminate(
            paths=benchmarks, field=config.decontaminate_field, ngram=config.decontaminate_ngram)
        docs_by_key = cleaned[DOCUMENTS]
        pcollections["decontamination_list"] = (
            cleaned[MATCHES]
            | "CollectMatches" >> beam.combiners.ToList()
            | "ListMatches" >> beam.Map(stage_list, output, AUDIT_NAME))
        pcollections["decontamination_summary_list"] = cleaned[SUMMARY] | "ListSummary" >> (
            beam.Map(lambda summary: stage_list([summary], output, DECONTAMINATION_NAME)))
    splits = {TRAIN: docs_by_key}
    if config.split_fractions.active:
        splits = dict(docs_by_key | "SplitDocuments" >> SplitDocuments(
            fractions=config.split_fractions, ngram=config.dedup_ngram,
            threshold=config.dedup_threshold))
        pcollections["near_copy_list"] = splits.pop(NEAR_COPIES) | "ListNearCopies" >> beam.Map(
            lambda dropped: stage_list([{"near_copies_dropped": dropped}], output,
                                       NEAR_COPY_NAME))
    for name, split_documents in splits.items():
        held_out = name != TRAIN
        pcollections.update(split_instances(
            split_documents, name=name, config=config,
            stages=stages.held_out if held_out else stages,
            output=output.split(name), progress_dir=None if held_out else progress_dir,
            counted=config.split_fractions.active))
    problem_list = (read[PROBLEMS]
                    | "CollectInputProblems" >> beam.combiners.ToList()
                    | "ListInputProblems" >> beam.Map(stage_list, output, PROBLEM_LIST_NAME))
    pcollections.update({"docs_by_key": docs_by_key, "problem_list": problem_list})
    if documents is not None:  # the documents as read, whatever comes after
        pcollections["hash_list"] = (
            read[DOCUMENTS]
            | "RecordDocuments" >> WriteDocumentHashes(
                paths=documents.staged, previous=documents.previous_hash_files)
            | "CollectHashFiles" >> beam.combiners.ToList()
            | "ListHashFiles" >> beam.Map(stage_list, output, HASH_LIST_NAME))
    return pcollections
