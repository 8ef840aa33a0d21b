"""--recipe=d2l: the WikiText-2 BERT dataset of d2l.ai, built once on Beam
(usage and d2l's rules: docs/loaders.md, "The d2l recipe").

    ReadParagraphs -> AnalyzeVocabulary -> EncodeParagraphs -> SampleParagraphs (side input)
                   -> CreatePairs -> MaskTokens -> Encode -> WriteShards; WriteVocabulary

Why tf.Transform: the vocabulary is a full pass over the corpus (every word
counted before any id exists), which is what its analyzers are for, on any
runner (on Dataflow it needs --temp_location); only the analyzer is used, so
no TensorFlow graph runs per element. Unlike d2l, equally frequent words are
in tf.Transform's order, and random next sentences come from a sample of
--nsp_sample_size paragraphs, never the paragraph itself, with randomness per
paragraph key: the output is deterministic.
"""

from __future__ import annotations

import functools
import hashlib

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.loaders.manifest import DatasetManifest
from bert_pretraining_data.pipeline.build import list_shards, sample_settings
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.prepare import Prepared, run_to_completion
from bert_pretraining_data.pipeline.publish import OutputPaths, publish, staged_shards
from bert_pretraining_data.pipeline.run_manifest import run_manifest
from bert_pretraining_data.transforms.d2l.beam import (AnalyzeVocabulary, CreatePairs,
                                                       EncodeParagraphs, LineSource, MaskTokens,
                                                       SplitParagraphs)
from bert_pretraining_data.transforms.d2l.pairs import (d2l_example, d2l_masking_config, fan_out,
                                                        pair_entries)
from bert_pretraining_data.transforms.instances.beam import SampleDocuments
from bert_pretraining_data.transforms.read.documents import key_root
from bert_pretraining_data.transforms.write.beam import SHARDS, WriteShards


def _write_vocabulary(tokens: list[str], path: str) -> int:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        handle.write("".join(f"{token}\n" for token in tokens).encode("utf-8"))
    return len(tokens)


def build_d2l_pipeline(p: beam.Pipeline, *, config: Config, patterns: list[str],
                       output: OutputPaths) -> None:
    """Adds the recipe to `p` (runs nothing): it stages the shard list and
    vocab.txt for run_d2l's publish."""
    seed, max_len = config.random_seed, config.max_seq_length
    root = key_root(patterns)
    lines = tuple(p | f"ReadLines{i}" >> beam.io.Read(LineSource(pattern, root))
                  for i, pattern in enumerate(patterns)) | "ReadParagraphs" >> beam.Flatten()
    paragraphs = lines | "SplitParagraphs" >> beam.ParDo(
        SplitParagraphs(lower=config.do_lower_case))
    vocabulary = paragraphs | "AnalyzeVocabulary" >> AnalyzeVocabulary(
        temp_dir=FileSystems.join(output.staging_dir, "tft"))
    encoded = paragraphs | "EncodeParagraphs" >> beam.ParDo(
        EncodeParagraphs(), vocabulary=beam.pvalue.AsSingleton(vocabulary))
    sample = encoded | "SampleParagraphs" >> SampleDocuments(sample_settings(config, seed),
                                                             per_document=True)
    dupes = (encoded
             | "FanOutDupes" >> beam.FlatMap(fan_out, config.dupe_factor)
             # The fan-out multiplies work by dupe_factor: spread it over workers.
             | "SpreadDupes" >> beam.Reshuffle())
    instances = dupes | "CreatePairs" >> beam.ParDo(
        CreatePairs(max_len=max_len, seed=seed), sample=beam.pvalue.AsSingleton(sample))
    # Masking draws random replacements from the vocabulary, known only now.
    masking = vocabulary | "MaskingConfig" >> beam.Map(
        lambda tokens: d2l_masking_config(len(tokens), masked_lm_prob=config.masked_lm_prob,
                                          max_predictions=config.max_predictions_per_seq))
    masked = instances | "MaskTokens" >> beam.ParDo(
        MaskTokens(config=None, seed=seed), config=beam.pvalue.AsSingleton(masking))
    entries = masked | "Encode" >> beam.Map(pair_entries, seed=seed, to_record=functools.partial(
        d2l_example, max_len=max_len, max_predictions=config.max_predictions_per_seq))
    shards = (entries | "WriteShards" >> WriteShards(
        staging_dir=output.staging_dir, shard_names=output.shard_names,
        compression=config.compression, shuffle=config.shuffle))[SHARDS]
    list_shards(shards, output, "")
    _ = vocabulary | "WriteVocabulary" >> beam.Map(_write_vocabulary, output.staged_vocab_path)


def _staged_vocabulary_sha256(output: OutputPaths) -> str:
    """The computed vocabulary's sha256; `publish` copies it beside the shards."""
    with FileSystems.open(output.staged_vocab_path,
                          compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def warnings(counters: dict[str, int]) -> list[str]:
    """Signs of an input that is not d2l's, in plain words."""
    if not counters.get("paragraphs"):
        return ["no line holds ' . ', so there is no paragraph: --recipe=d2l reads "
                "WikiText's raw text, one paragraph per line"]
    if not counters.get("instances"):
        return ["no sentence pair fits --max_seq_length; raise it"]
    return []


def run_d2l(prepared: Prepared) -> DatasetManifest:
    """`main.create_dataset` for --recipe=d2l: no vocabulary to load, one to
    publish; returns the manifest published."""
    config, output = prepared.config, prepared.output
    pipeline = prepared.new_pipeline()
    build_d2l_pipeline(pipeline, config=config, output=output, patterns=prepared.patterns)
    counters = run_to_completion(pipeline)
    manifest = run_manifest(config, output, vocab_sha256=_staged_vocabulary_sha256(output),
                            inputs=prepared.inputs,
                            shards=staged_shards(output),
                            counters=counters, warnings=warnings(counters))
    publish(output, manifest, replaces=prepared.replaces)
    return manifest
