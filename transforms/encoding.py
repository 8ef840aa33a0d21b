"""Encode one masked-LM instance as serialized `tf.train.Example` bytes.

The pipeline promises byte-identical shards on every run and runner, so the
serialization must not depend on the process: protobuf's default
serialization orders map entries (the `Features.feature` map) differently per
process. This module writes the protobuf wire format by hand, with the map
entries in sorted key order, which is exactly what
`tf.train.Example.SerializeToString(deterministic=True)` produces. Writing it
by hand also keeps TensorFlow out of the workers and is several times faster.

Feature names, types and padding follow the original
`write_instance_to_example_files`, so `run_pretraining.py` reads the records
unchanged.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

_FAST_VARINT_LIMIT = 1 << 15
_VARINT_CACHE_LIMIT = 1 << 18


def _varint(value: int) -> bytes:
    """Protobuf varint of an int64 (negatives as 10-byte two's complement)."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"value {value} does not fit in int64")
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Varint bytes of the ids that occur in practice: every BERT vocabulary but the
# multilingual one fits below 2**15 (~5 MB); larger ids are added as they are
# seen. A dict, not a list, so that a negative id misses instead of silently
# indexing from the end.
_VARINT: dict[int, bytes] = {i: _varint(i) for i in range(_FAST_VARINT_LIMIT)}

_FLOAT_ONE = b"\x00\x00\x80\x3f"  # little-endian IEEE-754 1.0f

# Wire tags (field_number << 3 | wire_type 2 = length-delimited).
_TAG_1 = b"\x0a"  # Example.features, Features.feature, map key, *List.value
_TAG_MAP_VALUE = b"\x12"  # map entry value (field 2)
_TAG_FLOAT_LIST = b"\x12"  # Feature.float_list (field 2)
_TAG_INT64_LIST = b"\x1a"  # Feature.int64_list (field 3)

# Sorted, as deterministic serialization orders map entries by key:
# input_ids, input_mask, masked_lm_ids, masked_lm_positions, masked_lm_weights,
# next_sentence_labels, segment_ids.
_FEATURE_KEYS = tuple(sorted((
    "input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
    "masked_lm_weights", "next_sentence_labels")))

# Per key: the map entry's key field, ready to prepend to the value field.
_KEY_FIELD = {
    key: _TAG_1 + _VARINT[len(key)] + key.encode("ascii") for key in _FEATURE_KEYS
}


def _packed_varints(values: Sequence[int]) -> bytes:
    """Concatenated varints; table lookups for the common small ids."""
    try:
        if len(values) > 1:
            return b"".join(operator.itemgetter(*values)(_VARINT))
        return b"".join(map(_VARINT.__getitem__, values))
    except (KeyError, TypeError):
        return b"".join(map(_uncommon_varint, values))


def _uncommon_varint(value: int) -> bytes:
    """A value missing from the table: large id (multilingual vocabulary) or not an int.

    Ids seen once are added to the table, so a large vocabulary warms it up;
    the table stops growing at _VARINT_CACHE_LIMIT entries.
    """
    encoded = _VARINT.get(value)
    if encoded is None:
        value = operator.index(value)
        encoded = _varint(value)
        if len(_VARINT) < _VARINT_CACHE_LIMIT:
            _VARINT[value] = encoded
    return encoded


def _packed_small(values: Sequence[int]) -> bytes:
    """Like _packed_varints, faster when every value is below 128 (one byte each)."""
    try:
        packed = bytes(values)
    except (ValueError, TypeError):
        return _packed_varints(values)
    return packed if packed.isascii() else _packed_varints(values)


def _varint_size_prefix(size: int) -> bytes:
    return _VARINT[size] if size < _FAST_VARINT_LIMIT else _varint(size)


def _make_header(key: str, list_tag: bytes, size: int) -> bytes:
    """Everything of one map entry that precedes its packed values.

    Example.features is not included; the entry is
    `Features.feature{ key, value=Feature{ <list_tag> *List{ value=[packed] } } }`.
    An empty packed field is omitted from the list, as protobuf does.
    """
    values_field = (_TAG_1 + _varint_size_prefix(size)) if size else b""
    list_size = len(values_field) + size
    feature = list_tag + _varint_size_prefix(list_size)
    feature_size = len(feature) + list_size
    entry = _KEY_FIELD[key] + _TAG_MAP_VALUE + _varint_size_prefix(feature_size)
    entry_size = len(entry) + feature_size
    return _TAG_1 + _varint_size_prefix(entry_size) + entry + feature + values_field


# (feature index, packed size) -> header; a few hundred entries per shape.
_HEADERS: dict[tuple[int, int], bytes] = {}
_LIST_TAGS = tuple(
    _TAG_FLOAT_LIST if key == "masked_lm_weights" else _TAG_INT64_LIST
    for key in _FEATURE_KEYS)


def _header(index: int, size: int) -> bytes:
    header = _HEADERS.get((index, size))
    if header is None:
        header = _make_header(_FEATURE_KEYS[index], _LIST_TAGS[index], size)
        _HEADERS[(index, size)] = header
    return header


def _as_list(values: Sequence[int]) -> Sequence[int]:
    """Numpy arrays become lists of Python ints (fast dict lookups)."""
    tolist = getattr(values, "tolist", None)
    return tolist() if tolist is not None else values


def encode_example(
    *,
    input_ids: Sequence[int],
    segment_ids: Sequence[int],
    masked_lm_positions: Sequence[int],
    masked_lm_ids: Sequence[int],
    next_sentence_label: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
) -> bytes:
    """Serialized `tf.train.Example`, padded as the original writer pads.

    The bytes equal `SerializeToString(deterministic=True)` of the Example the
    original script builds, so they are the same in every process.

    Raises:
      ValueError: a sequence is longer than its maximum, or the paired
        sequences (ids/segments, positions/ids) differ in length.
    """
    input_ids = _as_list(input_ids)
    segment_ids = _as_list(segment_ids)
    masked_lm_positions = _as_list(masked_lm_positions)
    masked_lm_ids = _as_list(masked_lm_ids)

    num_tokens = len(input_ids)
    if num_tokens > max_seq_length:
        raise ValueError(
            f"input_ids has {num_tokens} tokens, more than max_seq_length={max_seq_length}")
    if len(segment_ids) != num_tokens:
        raise ValueError(
            f"segment_ids has {len(segment_ids)} entries but input_ids has {num_tokens}")
    num_predictions = len(masked_lm_positions)
    if num_predictions > max_predictions_per_seq:
        raise ValueError(
            f"masked_lm_positions has {num_predictions} entries, more than "
            f"max_predictions_per_seq={max_predictions_per_seq}")
    if len(masked_lm_ids) != num_predictions:
        raise ValueError(
            f"masked_lm_ids has {len(masked_lm_ids)} entries but masked_lm_positions "
            f"has {num_predictions}")

    # Zero padding is one 0x00 byte per int64 and four per float.
    token_pad = b"\x00" * (max_seq_length - num_tokens)
    prediction_pad = b"\x00" * (max_predictions_per_seq - num_predictions)
    # Values of each feature in sorted key order (see _FEATURE_KEYS).
    packed = (
        _packed_varints(input_ids) + token_pad,
        b"\x01" * num_tokens + token_pad,
        _packed_varints(masked_lm_ids) + prediction_pad,
        _packed_small(masked_lm_positions) + prediction_pad,
        _FLOAT_ONE * num_predictions + prediction_pad * 4,
        _packed_small((next_sentence_label,)),
        _packed_small(segment_ids) + token_pad,
    )
    parts = []
    for index, values in enumerate(packed):
        parts.append(_header(index, len(values)))
        parts.append(values)
    body = b"".join(parts)
    return _TAG_1 + _varint_size_prefix(len(body)) + body
