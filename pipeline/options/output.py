"""The records and where they are written."""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import AbstractSet, Any, Sequence

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag
from bert_pretraining_data.transforms.write.mds_rows import (COMPRESSIONS as MDS_COMPRESSIONS,
                                                             LAYOUTS as MDS_LAYOUTS)
from bert_pretraining_data.transforms.write.parquet_rows import (COMPRESSIONS as
                                                                 PARQUET_COMPRESSIONS)

TARGET_SHARD_BYTES = 256 << 20
OUTPUT_FORMATS = ("tfrecord", "parquet", "mds", "megatron")
# The formats of unpadded rows, one list of values per feature.
COLUMNAR_FORMATS = ("parquet", "mds")
# The flags that shape instances, which --output_format=megatron does not make:
# one set away from its default is refused.
INSTANCE_FLAGS = ("short_seq_prob", "masked_lm_prob", "do_whole_word_mask", "ngram",
                  "max_ngram_size", "pack_sequences", "padding", "use_v2_feature_names")
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
        choices=list(OUTPUT_FORMATS), default="tfrecord")
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
        return {"padding": "none" if args.output_format in COLUMNAR_FORMATS else "fixed"}

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
        if config.output_format == "megatron":
            defaults = {field.name: field.default for field in dataclasses.fields(config)}
            made_here = [flag for flag in INSTANCE_FLAGS if getattr(config, flag) != defaults[flag]]
            return checks + [
                (not made_here, f"--{made_here[0] if made_here else ''} makes instances, which "
                 "--output_format=megatron does not write (Megatron-LM makes its samples, "
                 "epochs and masks at training time); drop it"),
                (config.dupe_factor == 1 and config.masking == "none",
                 "--output_format=megatron writes each sentence once and unmasked; drop "
                 "--dupe_factor and --masking"),
                (config.compression is None, "Megatron-LM reads uncompressed .bin files; drop "
                 "--compression and --gzip_compress"),
                (config.recipe == "bert" and not config.reference_compatible,
                 "--output_format=megatron writes the bert recipe's tokenized corpus, without "
                 "--reference_compatible; drop one"),
                (not config.mixture or config.mixture_layout == "by_source",
                 "--output_format=megatron writes a mixture's sources apart, for a blend "
                 "(--data-path) to weigh at training time: add --mixture_layout=by_source"),
                (bool(config.output_dir), "--output_format=megatron writes a .bin and .idx "
                 "per shard: use --output_dir"),
            ]
        columnar = [(name, config.output_format == fmt) for fmt, names in
                    (("parquet", ("parquet_compression",)),
                     ("mds", ("mds_layout", "mds_compression"))) for name in names]
        checks += [(own or name not in given, f"--{name} applies to --output_format="
                    f"{name.partition('_')[0]}; add it or drop --{name}")
                   for name, own in columnar]
        if config.output_format not in COLUMNAR_FORMATS:
            return checks
        fmt = config.output_format
        return checks + [
            (not ("padding" in given and config.padding == "fixed"),
             f"--output_format={fmt} writes unpadded rows (their lengths imply input_mask "
             "and masked_lm_weights); drop --padding=fixed"),
            (config.compression is None, f"--output_format={fmt} compresses inside each "
             f"file (--{fmt}_compression); drop --compression and --gzip_compress"),
            (not config.reference_compatible, "--reference_compatible reproduces the "
             f"original's TFRecord files; drop --output_format={fmt}"),
            (config.recipe != "d2l", f"--recipe=d2l writes d2l's TFRecord features; drop "
             f"--output_format={fmt}"),
            (bool(config.output_dir), f"--output_format={fmt} writes part-NNNNN-of-NNNNN "
             "shards: use --output_dir"),
        ]


def default_num_shards(input_bytes: int, dupe_factor: int) -> int:
    """Enough shards that each holds ~TARGET_SHARD_BYTES of expected output."""
    expected = input_bytes * dupe_factor * OUTPUT_BYTES_PER_INPUT_BYTE_PER_DUPE
    return max(1, math.ceil(expected / TARGET_SHARD_BYTES))
