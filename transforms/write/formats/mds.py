"""MosaicML Streaming's MDS shard sets (transforms.write.mds, mds_rows): one
per shard, under one index.json per folder of shards, for StreamingDataset
and the ModernBERT family's trainers."""

from __future__ import annotations

import json
from typing import Any, BinaryIO, Callable, Iterator

import numpy as np

from bert_pretraining_data.transforms.write.formats.output_format import (Features, Flags,
                                                                         ShardsNotReadHere,
                                                                         UnpaddedFormat)
from bert_pretraining_data.transforms.write.mds import (INDEX_NAME, LENGTH, encode_index,
                                                        merge_indexes, read_samples,
                                                        shard_file_name)


class MDSFormat(UnpaddedFormat):
    def shard_files(self, flags: Flags) -> tuple[str, ...]:
        return f"/{shard_file_name(flags['mds_compression'])}", f"/{INDEX_NAME}"

    def data_file(self, flags: Flags) -> tuple[str, str]:
        data = f"/{shard_file_name(flags.get('mds_compression', 'none'))}"
        return data, data  # a shard set is read as its one shard file

    def index_files(self, folders: list[str]) -> list[str]:
        return [f"{folder}/{INDEX_NAME}" for folder in folders]

    def index_bytes(self, shard_paths: list[str], read: Callable[[str], bytes]) -> bytes:
        """One index.json of a folder's shard sets, each under its folder's
        name, as StreamingDataset reads a dataset of several."""
        return encode_index(merge_indexes([(path.rsplit("/", 1)[-1],
                                            json.loads(read(f"{path}/{INDEX_NAME}")))
                                           for path in shard_paths]))

    def compressed(self, flags: Flags) -> bool:
        return flags.get("mds_compression") == "zstd"

    def row_writer(self, rows: Any, vocab_size: int, config: Any) -> Any:
        from bert_pretraining_data.transforms.write.mds_rows import MDSRows

        return MDSRows(rows, vocab_size, config.mds_layout, config.mds_compression)

    def records(self, handle: BinaryIO, path: str, start: int
                ) -> Iterator[tuple[int, Features]]:
        """A shard's samples: `bytes` columns as the int64 values they hold,
        ints and arrays as int64 arrays, as a record decodes; `len` (the
        modernbert layout's token count) left out."""
        data = handle.read()
        if path.endswith(".zstd"):
            try:
                import zstandard
            except ImportError:
                raise ShardsNotReadHere("reading zstd MDS shards needs zstandard: pip "
                                        "install zstandard") from None
            data = zstandard.ZstdDecompressor().decompress(data)
        for position, sample in enumerate(read_samples(data)):
            sample.pop(LENGTH, None)
            yield position, {name: (np.frombuffer(value, "<i8") if isinstance(value, bytes)
                                    else np.asarray(value, np.int64).reshape(-1))
                             for name, value in sample.items()}


MDS = MDSFormat("mds", unpadded=True, own_flags=("mds_layout", "mds_compression"),
                label="MDS", empty_masked_lm=False)
