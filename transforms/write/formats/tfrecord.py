"""TFRecord shards of tf.train.Example records, as the original writes them
(the default; gzip with --compression)."""

from __future__ import annotations

from typing import BinaryIO, Iterator

from bert_pretraining_data.transforms.write.formats.output_format import Flags, OutputFormat
from bert_pretraining_data.transforms.write.tfrecord import read_records


class TFRecordFormat(OutputFormat):
    def shard_suffix(self, flags: Flags) -> str:
        return ".tfrecord.gz" if flags.get("compression") == "gzip" else ".tfrecord"

    def compressed(self, flags: Flags) -> bool:
        return flags.get("compression") == "gzip"

    def records(self, handle: BinaryIO, path: str, start: int) -> Iterator[tuple[int, bytes]]:
        return enumerate(read_records(handle))


TFRECORD = TFRecordFormat("tfrecord")
