"""The records and where they are written."""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import AbstractSet, Any, Sequence

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag
from bert_pretraining_data.transforms.write.formats import FORMATS, output_format
from bert_pretraining_data.transforms.write.formats.tfrecord import TFRECORD
from bert_pretraining_data.transforms.write.mds_rows import (COMPRESSIONS as MDS_COMPRESSIONS,
                                                             LAYOUTS as MDS_LAYOUTS)
from bert_pretraining_data.transforms.write.parquet_rows import (COMPRESSIONS as
                                                                 PARQUET_COMPRESSIONS)

TARGET_SHARD_BYTES = 256 << 20
# Output bytes per input byte per dupe: ~2 (padded int64 features at the
# default max_seq_length, measured on WikiText-2).
OUTPUT_BYTES_PER_INPUT_BYTE_PER_DUPE = 2


@dataclasses.dataclass(frozen=True)
class _Spellings:
    """Flags that are not fields of `Config`: other tools' spellings of one."""

    gzip_compress: bool = flag(
        "the Model Garden's spelling of --compression=gzip", default=False,
        absl=True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutputFlags(FlagGroup):
    SECTION = ("output", "the records and where they are written")
    SPELLINGS = (_Spellings,)

    output_file: str | None = flag(
        "exact output file(s), comma-separated, as the original (or --output_dir)",
        default=None)
    output_dir: str | None = flag(
        "directory for part-NNNNN-of-NNNNN.tfrecord shards and manifest.json "
        "(or --output_file)", default=None)
    num_shards: int | None = flag(
        "with --output_dir: the number of shards", default=None,
        default_help=f"one per ~{TARGET_SHARD_BYTES >> 20} MiB of expected output")
    compression: str | None = flag(  # spelled(): None for "none", gzip for --gzip_compress
        "with --output_dir: gzip compresses the shards (tf.data "
        "compression_type='GZIP')", choices=["none", "gzip"], parser_default="none")
    overwrite: bool = flag(
        "replace a dataset already at the output location (only once this run "
        "has succeeded)", default=False)
    padding: str = flag(
        "fixed: pad to max_seq_length / max_predictions_per_seq, as the "
        "original; none: variable-length features, padded per batch at load time",
        choices=["fixed", "none"], default="fixed", parser_default=None,
        default_help="fixed; none with --output_format=parquet or mds, whose rows are unpadded")
    output_format: str = flag(
        "tfrecord: tf.train.Example records, as the original; parquet: the same "
        "instances in the same shards and order as unpadded Parquet rows (polars), for "
        "Hugging Face datasets, Spark, DuckDB; mds: the same rows as MosaicML Streaming's MDS "
        "shard sets (one per shard, under one index.json), for StreamingDataset and the "
        "ModernBERT family's trainers; megatron: the tokenized corpus, a sentence "
        "a sequence, as Megatron-LM's and NeMo's indexed datasets (.bin and .idx per "
        "shard), which make their samples at training time",
        choices=list(FORMATS), default=TFRECORD.name)
    parquet_compression: str = flag(
        "with --output_format=parquet: the codec inside each file",
        choices=list(PARQUET_COMPRESSIONS), default="zstd", parser_default=None)
    mds_layout: str = flag(
        "with --output_format=mds: compact writes each list column as an ndarray of the "
        "smallest type that holds it; modernbert, the same but the token id columns as int64 "
        "bytes with `len`, which ModernBERT's tokenized reader takes as it is",
        choices=list(MDS_LAYOUTS), default="modernbert", parser_default=None)
    mds_compression: str = flag(
        "with --output_format=mds: zstd compresses each shard file (StreamingDataset "
        "decompresses it on download)", choices=list(MDS_COMPRESSIONS), default="none",
        parser_default=None)
    use_v2_feature_names: bool = flag(
        "the Model Garden's names: input_word_ids and input_type_ids for "
        "input_ids and segment_ids", default=False, absl=True)

    @classmethod
    def defaults(cls, args: argparse.Namespace, beam_args: Sequence[str]) -> dict[str, Any]:
        return {"padding": "none" if output_format(args.output_format).unpadded else "fixed"}

    @classmethod
    def spelled(cls, args: argparse.Namespace) -> dict[str, Any]:
        return {"compression": "gzip" if args.gzip_compress else (
            None if args.compression == "none" else args.compression)}

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        checks = [
            (bool(config.output_file) != bool(config.output_dir),
             "give exactly one of --output_file (exact files, as the original) or "
             "--output_dir (sharded directory)"),
            (config.num_shards is None or config.num_shards >= 1,
             f"--num_shards must be at least 1, got {config.num_shards}"),
            (not (config.output_file and config.num_shards),
             "--num_shards applies to --output_dir only; with "
             "--output_file the number of files is the number of names given"),
        ]
        # each format's own flags, then what the chosen format refuses
        checks += [(config.output_format == fmt.name or name not in given,
                    f"--{name} applies to --output_format={fmt.name}; add it or drop --{name}")
                   for fmt in FORMATS.values() for name in fmt.own_flags]
        return checks + output_format(config.output_format).checks(config, given)


def default_num_shards(input_bytes: int, dupe_factor: int) -> int:
    """Enough shards that each holds ~TARGET_SHARD_BYTES of expected output."""
    expected = input_bytes * dupe_factor * OUTPUT_BYTES_PER_INPUT_BYTE_PER_DUPE
    return max(1, math.ceil(expected / TARGET_SHARD_BYTES))
