"""Records of a dataset as unpadded instances, without TensorFlow or Beam.

A PyTorch job reads the shards here: TFRecord framing comes from
`transforms.write.tfrecord` (CRCs checked) and `tf.train.Example` is decoded by
hand, with numpy doing the packed varints. Every layout the pipeline writes
(padded or not, bert or d2l) becomes the same `Instance`: the real tokens and
predictions only, which is what dynamic padding and dynamic masking start
from. A packed record (`--pack_sequences`) becomes a `Row` of the Instances
it holds, each exactly as the unpacked run writes it.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Callable, Iterator

import numpy as np

from bert_pretraining_data.loaders.manifest import DatasetError, Manifest, Shard
from bert_pretraining_data.transforms.handoff import files
from bert_pretraining_data.transforms.write.formats.output_format import ShardsNotReadHere

Features = dict[str, "np.ndarray | list[bytes]"]

_WIRE_VARINT, _WIRE_64BIT, _WIRE_LENGTH, _WIRE_32BIT = 0, 1, 2, 5


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of one message; length-delimited and
    fixed-width values are (start, end) spans into `data`."""
    pos = start
    while pos < end:
        key, pos = _varint_at(data, pos)
        wire = key & 7
        if wire == _WIRE_VARINT:
            value, pos = _varint_at(data, pos)
        elif wire == _WIRE_LENGTH:
            length, pos = _varint_at(data, pos)
            value = (pos, pos + length)
            pos += length
        elif wire in (_WIRE_32BIT, _WIRE_64BIT):
            width = 4 if wire == _WIRE_32BIT else 8
            value = (pos, pos + width)
            pos += width
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} at byte {pos}")
        yield key >> 3, wire, value
    if pos != end:
        raise ValueError("truncated protobuf message")


def decode_varints(data: bytes) -> np.ndarray:
    """Packed varints as int64 (negatives are 10-byte two's complement), vectorized."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size == 0 or raw.max() < 0x80:
        return raw.astype(np.int64)
    ends = np.flatnonzero(raw < 0x80)
    if ends.size == 0 or ends[-1] != raw.size - 1:
        raise ValueError("truncated packed varint")
    starts = np.concatenate(([0], ends[:-1] + 1))
    shifts = (np.arange(raw.size) - np.repeat(starts, ends - starts + 1)) * 7
    parts = (raw & 0x7F).astype(np.uint64) << shifts.astype(np.uint64)
    return np.add.reduceat(parts, starts).view(np.int64)


def _list_values(data: bytes, span: tuple[int, int], kind: int) -> np.ndarray | list[bytes]:
    """Values of a BytesList (1), FloatList (2) or Int64List (3), packed or not."""
    packed: list[np.ndarray] = []
    single: list = []
    for field, wire, value in _fields(data, *span):
        if field != 1:
            continue
        if kind == 1:
            single.append(data[value[0]:value[1]])
        elif wire == _WIRE_LENGTH:
            chunk = data[value[0]:value[1]]
            packed.append(np.frombuffer(chunk, "<f4") if kind == 2 else decode_varints(chunk))
        elif kind == 2:
            single.append(np.frombuffer(data[value[0]:value[1]], "<f4")[0])
        else:
            single.append(value - (1 << 64) if value >> 63 else value)  # two's complement
    if kind == 1:
        return single
    dtype = np.float32 if kind == 2 else np.int64
    return np.concatenate(packed + [np.asarray(single, dtype)]).astype(dtype, copy=False)


def decode_example(data: bytes) -> Features:
    """A serialized `tf.train.Example` as {name: int64 array | float32 array | [bytes]}."""
    features: Features = {}
    for field, _, span in _fields(data, 0, len(data)):
        if field != 1:  # Example.features
            continue
        for entry_field, _, entry in _fields(data, *span):
            if entry_field != 1:  # Features.feature map entry
                continue
            name, value = "", None
            for part, _, part_span in _fields(data, *entry):
                if part == 1:
                    name = data[part_span[0]:part_span[1]].decode("utf-8")
                elif part == 2:
                    value = part_span
            features[name] = np.zeros(0, np.int64)  # a Feature with no list set
            if value is not None:
                for kind, _, list_span in _fields(data, *value):
                    if kind in (1, 2, 3):
                        features[name] = _list_values(data, list_span, kind)
    return features


@dataclasses.dataclass
class Instance:
    """One training sequence, unpadded. `next_sentence_label` is 1 for a
    random next (or, with SOP, swapped) sentence, the original's convention
    whatever the layout on disk, and None without a pair task (ELECTRA's
    records); `token_boundary` is ALBERT's, when the records have it;
    `source` a mixture's: its corpus's index (the manifest names them)."""

    index: int  # global: shard order, then position in the shard
    input_ids: np.ndarray
    segment_ids: np.ndarray
    masked_lm_positions: np.ndarray
    masked_lm_ids: np.ndarray
    next_sentence_label: int | None
    epoch: int = 0
    token_boundary: np.ndarray | None = None
    sequence: int | None = None  # its place in a packed row (None: not packed)
    source: int | None = None  # its source in a mixture (None: not a mixture's)


@dataclasses.dataclass
class Row:
    """A packed record: the instances side by side in it (each unpadded, its
    positions its own), `index` the record's global index."""

    index: int
    sequences: list[Instance]
    epoch: int = 0


_NO_VALUES = np.zeros(0, np.int64)


def _bert(f: Features, index: int) -> Instance:
    """Any bert layout, its features named by what they hold: padded or not
    (input_mask and masked_lm_weights give the real lengths), with or without
    predictions, label, token_boundary and source."""
    length = int(np.count_nonzero(f["input_mask"])) if "input_mask" in f else len(
        f["input_ids"])
    positions = f.get("masked_lm_positions", _NO_VALUES)
    predictions = (int(np.count_nonzero(f["masked_lm_weights"])) if "masked_lm_weights" in f
                   else len(positions))
    label = f.get("next_sentence_labels")
    boundary = f.get("token_boundary")
    source = f.get("source")
    return Instance(index, f["input_ids"][:length], f["segment_ids"][:length],
                    positions[:predictions], f.get("masked_lm_ids", _NO_VALUES)[:predictions],
                    None if label is None else int(label[0]),
                    token_boundary=None if boundary is None else boundary[:length],
                    source=None if source is None else int(source[0]))


def _packed(f: Features, index: int) -> Row:
    """A packed row taken apart: a sequence is a run of one input_mask index
    (1, 2, ...; 0 is padding); its predictions are those at its positions."""
    sequence_of = f["input_mask"][:np.count_nonzero(f["input_mask"])]
    starts = np.flatnonzero(np.diff(sequence_of, prepend=0))
    ends = np.append(starts[1:], len(sequence_of))
    positions = f.get("masked_lm_positions", _NO_VALUES)
    predictions = (int(np.count_nonzero(f["masked_lm_weights"])) if "masked_lm_weights" in f
                   else len(positions))
    positions, ids = positions[:predictions], f.get("masked_lm_ids", _NO_VALUES)[:predictions]
    labels = f.get("next_sentence_labels")
    boundary = f.get("token_boundary")
    sources = f.get("source")
    sequences = []
    for s, (start, end) in enumerate(zip(starts.tolist(), ends.tolist())):
        own = (positions >= start) & (positions < end)
        sequences.append(Instance(
            index, f["input_ids"][start:end], f["segment_ids"][start:end],
            positions[own] - start, ids[own], None if labels is None else int(labels[s]),
            token_boundary=None if boundary is None else boundary[start:end], sequence=s,
            source=None if sources is None else int(sources[s])))
    return Row(index, sequences)


def _d2l(f: Features, index: int) -> Instance:
    length = int(f["valid_lens"][0])
    predictions = int(np.count_nonzero(f["mlm_weights"]))
    return Instance(index, f["tokens"][:length], f["segments"][:length],
                    f["pred_positions"][:predictions], f["mlm_labels"][:predictions],
                    1 - int(f["nsp_labels"][0]))  # d2l stores 1 for "is next"


# roberta's records are bert's layout with one segment.
_RECIPES: dict[str, Callable[[Features, int], "Instance | Row"]] = {
    "bert": _bert, "roberta": _bert, "d2l": _d2l, "packed": _packed}


@dataclasses.dataclass(frozen=True)
class InstanceDecoder:
    """Record bytes -> Instance for one manifest's layout (picklable, for workers)."""

    recipe: str
    roles: dict[str, str]  # feature name on disk -> what it holds (bert)

    @classmethod
    def of(cls, manifest: Manifest) -> "InstanceDecoder":
        if manifest.recipe not in _RECIPES:
            raise DatasetError(f"{manifest.path}: unknown recipe={manifest.recipe}; "
                               "upgrade the loaders")
        if manifest.recipe == "d2l":
            return cls("d2l", {})
        return cls("packed" if manifest.packed else "bert", manifest.features)

    def __call__(self, record: "bytes | Features", index: int, epoch: int = 0
                 ) -> "Instance | Row":
        """The record's (a serialized Example's, or a Parquet row's features)
        Instance, or its Row for a packed dataset."""
        features = record if isinstance(record, dict) else decode_example(record)
        if self.roles:
            missing = sorted(set(self.roles) - set(features))
            if missing:
                raise DatasetError(f"record {index} has no feature {missing[0]!r}: not "
                                   "the dataset its manifest describes")
            features = {self.roles[name]: values for name, values in features.items()
                        if name in self.roles}
        try:
            instance = _RECIPES[self.recipe](features, index)
        except KeyError as err:
            raise DatasetError(f"record {index} has no feature {err}: not a "
                               f"{self.recipe} dataset") from None
        instance.epoch = epoch
        for sequence in sequences_of(instance):
            sequence.epoch = epoch
        return instance


def read_shard(shard: Shard, start: int = 0,
               stop: int | None = None) -> Iterator[tuple[int, "bytes | Features"]]:
    """(global index, record) of positions [start, stop) of one shard: a
    TFRecord's serialized Examples, a Parquet shard's rows or an MDS shard's
    samples as features."""
    stop = shard.records if stop is None else stop
    with files.open_binary(shard.path) as handle:
        try:
            for position, record in shard.format.records(handle, shard.path, start):
                if position >= stop:
                    return
                if position >= start:
                    yield shard.first_index + position, record
        except ShardsNotReadHere as err:
            raise DatasetError(str(err)) from None


def decoded_records(manifest: Manifest, limit: int | None = None
                    ) -> Iterator["Instance | Row"]:
    """Records in manifest order (shard by shard), at most `limit` of them,
    decoded: Instances, or Rows for a packed dataset."""
    manifest.check_records()
    decode = InstanceDecoder.of(manifest)
    remaining = manifest.total_records if limit is None else limit
    for shard in manifest.shards:
        if remaining <= 0:
            return
        for index, record in read_shard(shard, 0, min(shard.records, remaining)):
            yield decode(record, index)
        remaining -= shard.records


def sequences_of(item: "Instance | Row") -> list[Instance]:
    """The instances a decoded record holds."""
    return item.sequences if isinstance(item, Row) else [item]


def read_instances(manifest: Manifest, limit: int | None = None) -> Iterator[Instance]:
    """Instances in manifest order (shard by shard; a packed row's in the row's
    order), at most `limit` of them."""
    instances = (instance for item in decoded_records(manifest)
                 for instance in sequences_of(item))
    return itertools.islice(instances, limit)
