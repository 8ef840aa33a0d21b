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
unchanged. `--padding=none` writes the same features without padding (the
loaders pad each batch to its longest sequence), and recipes with their own
feature names use `encode_features`; all three share the writer below.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Iterable, Mapping, Sequence

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
    name = key.encode("utf-8")
    values_field = (_TAG_1 + _varint_size_prefix(size)) if size else b""
    list_size = len(values_field) + size
    feature = list_tag + _varint_size_prefix(list_size)
    feature_size = len(feature) + list_size
    entry = (_TAG_1 + _varint_size_prefix(len(name)) + name
             + _TAG_MAP_VALUE + _varint_size_prefix(feature_size))
    entry_size = len(entry) + feature_size
    return _TAG_1 + _varint_size_prefix(entry_size) + entry + feature + values_field


# (key, list tag, packed size) -> header; a few hundred entries per shape.
_HEADERS: dict[tuple[str, bytes, int], bytes] = {}


def _header(key: str, list_tag: bytes, size: int) -> bytes:
    header = _HEADERS.get((key, list_tag, size))
    if header is None:
        header = _make_header(key, list_tag, size)
        _HEADERS[(key, list_tag, size)] = header
    return header


def _serialize(features: Iterable[tuple[str, bytes, bytes]]) -> bytes:
    """Example bytes of (key, list tag, packed values) entries given in sorted
    key order, the order deterministic serialization writes map entries in."""
    parts = []
    for key, list_tag, values in features:
        parts.append(_header(key, list_tag, len(values)))
        parts.append(values)
    body = b"".join(parts)
    return _TAG_1 + _varint_size_prefix(len(body)) + body


def _as_list(values: Sequence[int]) -> Sequence[int]:
    """Numpy arrays become lists of Python ints (fast dict lookups)."""
    tolist = getattr(values, "tolist", None)
    return tolist() if tolist is not None else values


def _checked_lists(input_ids: Sequence[int], segment_ids: Sequence[int],
                   masked_lm_positions: Sequence[int], masked_lm_ids: Sequence[int],
                   max_seq_length: int, max_predictions_per_seq: int) -> tuple[list, ...]:
    """The four sequences as lists, after the checks both BERT layouts need."""
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
    return input_ids, segment_ids, masked_lm_positions, masked_lm_ids


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
    input_ids, segment_ids, masked_lm_positions, masked_lm_ids = _checked_lists(
        input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
        max_seq_length, max_predictions_per_seq)
    num_tokens = len(input_ids)
    num_predictions = len(masked_lm_positions)
    # Zero padding is one 0x00 byte per int64 and four per float.
    token_pad = b"\x00" * (max_seq_length - num_tokens)
    prediction_pad = b"\x00" * (max_predictions_per_seq - num_predictions)
    return _serialize((
        ("input_ids", _TAG_INT64_LIST, _packed_varints(input_ids) + token_pad),
        ("input_mask", _TAG_INT64_LIST, b"\x01" * num_tokens + token_pad),
        ("masked_lm_ids", _TAG_INT64_LIST, _packed_varints(masked_lm_ids) + prediction_pad),
        ("masked_lm_positions", _TAG_INT64_LIST,
         _packed_small(masked_lm_positions) + prediction_pad),
        ("masked_lm_weights", _TAG_FLOAT_LIST,
         _FLOAT_ONE * num_predictions + prediction_pad * 4),
        ("next_sentence_labels", _TAG_INT64_LIST, _packed_small((next_sentence_label,))),
        ("segment_ids", _TAG_INT64_LIST, _packed_small(segment_ids) + token_pad),
    ))


def encode_unpadded_example(
    *,
    input_ids: Sequence[int],
    segment_ids: Sequence[int],
    masked_lm_positions: Sequence[int],
    masked_lm_ids: Sequence[int],
    next_sentence_label: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
) -> bytes:
    """The same Example without padding (`--padding=none`), for dynamic padding.

    Each feature holds only its real values; `input_mask` and
    `masked_lm_weights`, all ones without padding, are left out (the loaders
    rebuild them). Unmasked instances (`--masking=none`) have empty
    masked_lm features. Deterministic bytes, like `encode_example`.

    Raises:
      ValueError: as `encode_example`.
    """
    input_ids, segment_ids, masked_lm_positions, masked_lm_ids = _checked_lists(
        input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
        max_seq_length, max_predictions_per_seq)
    return _serialize((
        ("input_ids", _TAG_INT64_LIST, _packed_varints(input_ids)),
        ("masked_lm_ids", _TAG_INT64_LIST, _packed_varints(masked_lm_ids)),
        ("masked_lm_positions", _TAG_INT64_LIST, _packed_small(masked_lm_positions)),
        ("next_sentence_labels", _TAG_INT64_LIST, _packed_small((next_sentence_label,))),
        ("segment_ids", _TAG_INT64_LIST, _packed_small(segment_ids)),
    ))


def encode_features(*, int64: Mapping[str, Sequence[int]],
                    float32: Mapping[str, Sequence[float]] | None = None) -> bytes:
    """Any Example of int64 and float features, with deterministic bytes.

    For recipes with their own feature names (the d2l recipe); equal to
    `SerializeToString(deterministic=True)` of the same Example.

    Raises:
      ValueError: a name is used for both an int64 and a float feature.
    """
    float32 = float32 or {}
    both = sorted(int64.keys() & float32.keys())
    if both:
        raise ValueError(f"feature {both[0]!r} is given as both int64 and float32")
    entries = [(key, _TAG_INT64_LIST, _packed_varints(_as_list(values)))
               for key, values in int64.items()]
    entries += [(key, _TAG_FLOAT_LIST, struct.pack(f"<{len(values)}f", *values))
                for key, values in float32.items()]
    return _serialize(sorted(entries))
