"""The output formats, one adapter each (transforms.write.formats.output_format),
registered here: a new format is a module and a line of FORMATS."""

from __future__ import annotations

from bert_pretraining_data.transforms.write.formats.mds import MDS
from bert_pretraining_data.transforms.write.formats.megatron import MEGATRON
from bert_pretraining_data.transforms.write.formats.output_format import OutputFormat
from bert_pretraining_data.transforms.write.formats.parquet import PARQUET
from bert_pretraining_data.transforms.write.formats.tfrecord import TFRECORD

FORMATS: dict[str, OutputFormat] = {f.name: f for f in (TFRECORD, PARQUET, MDS, MEGATRON)}


def output_format(name: str) -> OutputFormat:
    """The adapter of the format `name` (--output_format, a manifest's)."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown output format {name!r}: one of "
                         f"{', '.join(FORMATS)}") from None
