"""The pipeline, narrated as the design card draws it.

    ReadDocuments -> Deduplicate -> Tokenize -> SampleRandomDocuments (side input)
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

import apache_beam as beam

from bert_pretraining_data.pipeline.changes import HASH_LIST_NAME, DocumentPlan
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.publish import (DEDUP_NAME, PROBLEM_LIST_NAME, SHARD_LIST_NAME,
                                                    OutputPaths, write_staging_json)
from bert_pretraining_data.pipeline.stages import Stages
from bert_pretraining_data.transforms.dedup.beam import Deduplicate
from bert_pretraining_data.transforms.dedup.decisions import SUMMARY, Fingerprints, dedup_partitions
from bert_pretraining_data.transforms.hashes.beam import WriteDocumentHashes
from bert_pretraining_data.transforms.instances.beam import (BatchDocuments, CreateInstances,
                                                             SampleDocuments)
from bert_pretraining_data.transforms.instances.units import fan_out_batch
from bert_pretraining_data.transforms.read.beam import ReadDocuments, ReadDump, ReadTables
from bert_pretraining_data.transforms.read.documents import DOCUMENTS, PROBLEMS
from bert_pretraining_data.transforms.tokenize.beam import TokenizeDocument
from bert_pretraining_data.transforms.write.beam import WriteShards

# A sampled document keeps about this many tokens per max_seq_length.
SAMPLE_DOCUMENT_SEQUENCES = 8


def stage_list(items: list[dict], output: OutputPaths, name: str) -> int:
    """Stages a list for the publisher (a step's last element); returns its length."""
    write_staging_json(output, name, items)
    return len(items)


def build_pipeline(p: beam.Pipeline, *, config: Config, stages: Stages,
                   patterns: list[str], output: OutputPaths,
                   progress_dir: str | None = None,
                   input_bytes: int = 0,
                   documents: DocumentPlan | None = None) -> dict[str, beam.PCollection]:
    """The pipeline's graph; `progress_dir` (local runs): where the Tokenize
    and CreateInstances stages report their progress (transforms.progress_sink);
    `input_bytes` sizes the dedup stage's partitions; `documents`: where the
    documents' hashes go (a refresh's runs)."""
    seed = config.random_seed
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
    tokenized_docs = docs_by_key | "Tokenize" >> beam.ParDo(TokenizeDocument(
        tokenizer=config.tokenizer, whole_word_segmenter=config.whole_word_segmenter,
        sentence_splitter=config.sentence_splitter, progress_dir=progress_dir))
    nsp_sample = tokenized_docs | "SampleRandomDocuments" >> SampleDocuments(
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
    spread = tokenized_docs | "BatchDocuments" >> beam.ParDo(BatchDocuments())
    if config.shuffle == "runner":
        spread = spread | "SpreadDocuments" >> beam.Reshuffle()
    entries = (spread
               | "FanOutDupes" >> beam.FlatMap(fan_out_batch, config.dupe_factor)
               | "CreateInstances" >> beam.ParDo(
                   CreateInstances(
                       instances=stages.instances, seed=seed,
                       masking=stages.instance_masking,
                       progress_dir=progress_dir),
                   nsp_sample=beam.pvalue.AsSingleton(nsp_sample)))
    shards = entries | "WriteShards" >> WriteShards(
        staging_dir=output.staging_dir, shard_names=output.shard_names,
        compression=config.compression, shuffle=config.shuffle, rows=stages.rows)
    shard_list = (shards
                  | "CollectShards" >> beam.combiners.ToList()
                  | "ListShards" >> beam.Map(stage_list, output, SHARD_LIST_NAME))
    problem_list = (read[PROBLEMS]
                    | "CollectInputProblems" >> beam.combiners.ToList()
                    | "ListInputProblems" >> beam.Map(stage_list, output, PROBLEM_LIST_NAME))
    pcollections.update({"docs_by_key": docs_by_key, "tokenized_docs": tokenized_docs,
                    "nsp_sample": nsp_sample, "entries": entries, "shards": shards,
                    "shard_list": shard_list, "problem_list": problem_list})
    if documents is not None:  # the documents as read, whatever comes after
        pcollections["hash_list"] = (
            read[DOCUMENTS]
            | "RecordDocuments" >> WriteDocumentHashes(
                paths=documents.staged, previous=documents.previous_hash_files)
            | "CollectHashFiles" >> beam.combiners.ToList()
            | "ListHashFiles" >> beam.Map(stage_list, output, HASH_LIST_NAME))
    return pcollections
