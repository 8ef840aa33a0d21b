"""A shard as an MDS shard set (`--output_format=mds`): the rows the TFRecord
shard holds, in its order, unpadded, as one `shard.00000.mds` (or
`.mds.zstd`) and its `index.json` (transforms.write.mds has the format).

The columns are the features the Parquet shard has, named alike, and in
the `modernbert` layout also `len`, each row's token count:

- `compact`: every list column as an `ndarray` of the smallest type that
  holds its values (token ids uint16 up to 65,536 ids, else uint32; the
  rest as Parquet's), as Ettin stores its ids;
- `modernbert`: the same, but the token id columns (`input_ids`,
  `masked_lm_ids`) as raw little-endian int64 (`bytes`), what ModernBERT's
  tokenized reader takes as it is
  (`np.frombuffer(sample["input_ids"], dtype=np.int64)`, with `len`).

An unpacked row's label and source are `int`s. The shard's samples are
sized from the instances' headers first, so the offsets the format puts
first are written before any sample, and the samples stream out a row
group at a time: a worker holds the shard's entries, not its file. One
shard per output shard: its size limit is the format's largest, 4 GiB.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterator

import numpy as np
from numba import njit

from bert_pretraining_data.transforms.handoff.shuffle.entries import ENTRY_HEADER
from bert_pretraining_data.transforms.handoff.shuffle.instances import instance_header
from bert_pretraining_data.transforms.write.columns import (flat_columns, token_id_dtype,
                                                           unpadded_features)
from bert_pretraining_data.transforms.write.mds import (FORMAT, INDEX_NAME, LENGTH, VERSION,
                                                        encode_index, shard_file_name, zstd_level)
from bert_pretraining_data.transforms.write.parquet_rows import ROW_GROUP_ROWS
from bert_pretraining_data.transforms.write.rows import InstanceRows, PackedRows, ShardRows
from bert_pretraining_data.transforms.write.tf_example import Field

LAYOUTS = ("modernbert", "compact")
COMPRESSIONS = ("none", "zstd")
SIZE_LIMIT = (1 << 32) - 1  # offsets are uint32: one shard holds up to 4 GiB
# How a column's bytes sit in a sample.
_FIXED, _BYTES, _ARRAY = 0, 1, 2
# What each feature holds one value per: a row's token, prediction or sequence.
_TOKENS, _PREDICTIONS, _SEQUENCES = 0, 1, 2
_UNIT = {Field.INPUT_IDS: _TOKENS, Field.SEGMENT_IDS: _TOKENS, Field.TOKEN_BOUNDARY: _TOKENS,
         Field.INPUT_MASK: _TOKENS, Field.POSITIONS: _TOKENS,
         Field.MASKED_LM_POSITIONS: _PREDICTIONS, Field.MASKED_LM_IDS: _PREDICTIONS,
         Field.NEXT_SENTENCE_LABELS: _SEQUENCES, Field.SOURCE: _SEQUENCES,
         Field.NEXT_SENTENCE_POSITIONS: _SEQUENCES}
_INT64 = np.dtype("<i8")
# The columns of token ids: int64 bytes in the modernbert layout.
_TOKEN_IDS = (Field.INPUT_IDS, Field.MASKED_LM_IDS)


@njit(cache=True)
def _row_counts(entries, bounds, members, member_bounds):
    """Tokens and predictions of each row, from its instances' headers."""
    rows = len(member_bounds) - 1
    tokens = np.zeros(rows, dtype=np.int64)
    predictions = np.zeros(rows, dtype=np.int64)
    for r in range(rows):
        for j in range(member_bounds[r], member_bounds[r + 1]):
            n, _, k, _ = instance_header(entries, bounds[members[j]] + ENTRY_HEADER)
            tokens[r] += n
            predictions[r] += k
    return tokens, predictions


@njit(cache=True)
def _shape_size(count):
    """Bytes of a 1-D ndarray's shape: the smallest unsigned type holding it."""
    if count < 1 << 8:
        return 1
    if count < 1 << 16:
        return 2
    if count < 1 << 32:
        return 4
    return 8


@njit(cache=True)
def _column_size(nbytes, kind, item):
    """A column's bytes in a sample, its values `nbytes` long: an ndarray's
    with its header (ndim and shape type) and shape."""
    if kind == _ARRAY:
        return nbytes + 1 + _shape_size(nbytes // item)
    return nbytes


@njit(cache=True)
def _sample_sizes(starts, kinds, items):
    """Each row's sample size, its columns' bytes at starts[c, r]:starts[c, r + 1]
    (a variable column's behind its uint32 size)."""
    sizes = np.zeros(starts.shape[1] - 1, dtype=np.int64)
    for r in range(len(sizes)):
        for c in range(len(kinds)):
            sizes[r] += _column_size(starts[c, r + 1] - starts[c, r], kinds[c], items[c])
            if kinds[c] != _FIXED:
                sizes[r] += 4
    return sizes


@njit(cache=True)
def _write_samples(data, starts, kinds, items, out):
    """Each row's sample into `out`: the sizes of its variable columns
    (uint32), then each column's bytes, an ndarray's after its header (ndim
    1 and the shape's type code) and shape; returns the bytes written."""
    pos = 0
    for r in range(starts.shape[1] - 1):
        for c in range(len(kinds)):
            if kinds[c] != _FIXED:
                size = _column_size(starts[c, r + 1] - starts[c, r], kinds[c], items[c])
                for b in range(4):
                    out[pos + b] = (size >> (8 * b)) & 0xFF
                pos += 4
        for c in range(len(kinds)):
            nbytes = starts[c, r + 1] - starts[c, r]
            if kinds[c] == _ARRAY:
                count = nbytes // items[c]
                width = _shape_size(count)
                code = 0 if width == 1 else 1 if width == 2 else 2 if width == 4 else 3
                out[pos] = 1 << 2 | code
                for b in range(width):
                    out[pos + 1 + b] = (count >> (8 * b)) & 0xFF
                pos += 1 + width
            out[pos:pos + nbytes] = data[starts[c, r]:starts[c, r + 1]]
            pos += nbytes
    return pos


@dataclasses.dataclass(frozen=True)
class MDSRows:
    """The row writer of `--output_format=mds`: the rows `instances` would
    write as TFRecords (a row per instance, or packed rows), in its order, as
    one MDS shard set (unpadded, as Parquet's)."""

    instances: InstanceRows | PackedRows
    vocab_size: int
    layout: str = "modernbert"
    compression: str = "none"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown MDS layout {self.layout!r}: one of {', '.join(LAYOUTS)}")
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"MDS compression is one of {', '.join(COMPRESSIONS)}, "
                             f"not {self.compression!r}")
        if self.vocab_size > 1 << 32:  # the columns' flattening holds ids as uint32
            raise ValueError(f"a vocabulary of {self.vocab_size:,} ids does not fit uint32, the "
                             "widest id type MDS output holds; use a smaller vocabulary")

    @property
    def max_predictions(self) -> int:
        return self.instances.max_predictions

    def _dtypes(self) -> dict[Field, np.dtype]:
        """Each feature's value type in the compact layout (Parquet's, with
        uint32 for wide ids)."""
        ids = token_id_dtype(self.vocab_size, np.uint32)
        mask = np.uint8 if self.instances.max_sequences < 256 else np.uint16
        return {Field.INPUT_IDS: ids, Field.MASKED_LM_IDS: ids, Field.SEGMENT_IDS: np.uint8,
                Field.TOKEN_BOUNDARY: np.uint8, Field.NEXT_SENTENCE_LABELS: np.uint8,
                Field.INPUT_MASK: mask, Field.POSITIONS: np.uint16,
                Field.MASKED_LM_POSITIONS: np.uint16, Field.SOURCE: np.uint16,
                Field.NEXT_SENTENCE_POSITIONS: np.uint16}

    def _layout(self) -> list[tuple[str, Field | None, int, np.dtype]]:
        """(name, field (None: `len`), kind, value dtype) of each column, in name order."""
        packed = self.instances.layout.packed
        dtypes = self._dtypes()
        columns = []
        for name, field in unpadded_features(self.instances).items():
            if _UNIT[field] == _SEQUENCES and not packed:
                columns.append((name, field, _FIXED, _INT64))
            elif self.layout == "modernbert" and field in _TOKEN_IDS:
                columns.append((name, field, _BYTES, _INT64))
            else:
                columns.append((name, field, _ARRAY, np.dtype(dtypes[field]).newbyteorder("<")))
        if self.layout == "modernbert":
            columns.append((LENGTH, None, _FIXED, _INT64))
        return sorted(columns, key=lambda column: column[0])

    def columns(self) -> dict[str, str]:
        """Column name -> its MDS encoding, in name order."""
        names = {_FIXED: "int", _BYTES: "bytes"}
        return {name: names.get(kind, f"ndarray:{dtype.name}")
                for name, _, kind, dtype in self._layout()}

    def settings(self) -> dict[str, Any]:
        """The shard's settings: its config in the file and in the index."""
        encodings = self.columns()
        return {"column_encodings": list(encodings.values()),
                "column_names": list(encodings),
                "column_sizes": [8 if encoding == "int" else None
                                 for encoding in encodings.values()],
                "compression": None if self.compression == "none" else self.compression,
                "format": FORMAT, "hashes": [], "size_limit": SIZE_LIMIT, "version": VERSION}

    def _sizes(self, counts: dict[int, np.ndarray], rows: int) -> np.ndarray:
        """Each row's sample size, from its tokens, predictions and sequences."""
        layout = self._layout()
        starts = np.zeros((len(layout), rows + 1), np.int64)
        for c, (name, field, kind, dtype) in enumerate(layout):
            values = np.ones(rows, np.int64) if kind == _FIXED else counts[_UNIT[field]]
            if kind == _ARRAY and rows and values.min() == 0:
                raise ValueError(f"a row has no {name} values, which an MDS ndarray column "
                                 "cannot hold (a masked row has at least one prediction)")
            np.cumsum(values * dtype.itemsize, out=starts[c, 1:])
        return _sample_sizes(starts, *self._kinds(layout))

    @staticmethod
    def _kinds(layout) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([kind for _, _, kind, _ in layout], np.int64),
                np.array([dtype.itemsize for _, _, _, dtype in layout], np.int64))

    def _samples(self, entries: np.ndarray, bounds: np.ndarray, members: np.ndarray,
                 member_bounds: np.ndarray) -> np.ndarray:
        """Rows' samples, one after another (member_bounds starting at 0)."""
        layout = self._layout()
        data = flat_columns(self.instances, token_id_dtype(self.vocab_size, np.uint32), entries,
                            bounds, members, member_bounds)
        tokens = data[Field.INPUT_IDS].offsets
        pieces, starts, at = [], np.empty((len(layout), len(member_bounds)), np.int64), 0
        for c, (_, field, kind, dtype) in enumerate(layout):
            values, offsets = ((np.diff(tokens), np.arange(len(tokens)))
                               if field is None else data[field][:2])
            piece = values.astype(dtype, copy=False).view(np.uint8)
            starts[c] = at + offsets * dtype.itemsize
            pieces.append(piece)
            at += len(piece)
        kinds, items = self._kinds(layout)
        out = np.empty(int(_sample_sizes(starts, kinds, items).sum()), np.uint8)
        _write_samples(np.concatenate(pieces), starts, kinds, items, out)
        return out

    def rows(self, entries: np.ndarray, keys: np.ndarray, bounds: np.ndarray) -> ShardRows:
        plan = self.instances.plan(entries, keys, bounds)
        rows = len(plan.member_bounds) - 1
        tokens, predictions = _row_counts(entries, bounds, plan.members, plan.member_bounds)
        sizes = self._sizes({_TOKENS: tokens, _PREDICTIONS: predictions,
                             _SEQUENCES: np.diff(plan.member_bounds)}, rows)
        config = json.dumps(self.settings(), sort_keys=True).encode()
        header = 4 * (rows + 2) + len(config)
        offsets = np.cumsum([header, *sizes], dtype=np.int64)
        if offsets[-1] > SIZE_LIMIT:
            raise ValueError(f"an output shard of {offsets[-1]:,} bytes passes MDS's 4 GiB "
                             "shard limit: raise --num_shards")

        def raw() -> Iterator[memoryview]:
            yield memoryview(np.asarray([rows], "<u4").tobytes() + offsets.astype("<u4").tobytes()
                             + config)
            for start in range(0, rows, ROW_GROUP_ROWS):
                member_bounds = plan.member_bounds[start:start + ROW_GROUP_ROWS + 1]
                yield memoryview(self._samples(
                    entries, bounds, plan.members[member_bounds[0]:member_bounds[-1]],
                    member_bounds - member_bounds[0]))
        name = shard_file_name(self.compression)
        chunks = raw() if self.compression == "none" else _zstd(raw(), int(offsets[-1]))

        def index(written: dict[str, Any]) -> dict[str, bytes]:
            raw_data = {"basename": f"shard.00000.{FORMAT}", "bytes": int(offsets[-1]),
                        "hashes": {}}
            zipped = ({"basename": name, "bytes": written["bytes"], "hashes": {}}
                      if self.compression != "none" else None)
            shard = {**self.settings(), "samples": rows, "raw_data": raw_data,
                     "zip_data": zipped}
            return {INDEX_NAME: encode_index({"shards": [shard], "version": VERSION})}
        return ShardRows(rows, chunks, {**plan.stats, "columns": self.columns()},
                         file_name=name, after=index)


def _zstd(chunks: Iterator[memoryview], size: int) -> Iterator[memoryview]:
    """`chunks` (`size` bytes in all) as one zstd frame that records its
    content size, as the library's compressor writes it (single-threaded:
    the same bytes every time)."""
    import zstandard  # Apache Beam installs it

    compressor = zstandard.ZstdCompressor(level=zstd_level("zstd"), write_content_size=True
                                          ).compressobj(size=size)
    for chunk in chunks:
        if packed := compressor.compress(chunk):
            yield memoryview(packed)
    yield memoryview(compressor.flush())

