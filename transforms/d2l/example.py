"""Any `tf.train.Example` of int64 and float features as deterministic bytes,
in Python: for recipes built in Python (the d2l recipe) and tests.

Protobuf's default serialization orders the `Features.feature` map
differently per process, and shards must be byte-identical on every run, so
this writes the wire format by hand with map entries in sorted key order,
exactly `SerializeToString(deterministic=True)`, and keeps TensorFlow out of
the workers. The BERT records' compiled writer is transforms.write.tf_example.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Iterable, Mapping, Sequence

from bert_pretraining_data.transforms.handoff.varints import varint

_FAST_VARINT_LIMIT = 1 << 15
_VARINT_CACHE_LIMIT = 1 << 18


# Varint bytes of the ids that occur in practice: every BERT vocabulary but the
# multilingual one fits below 2**15 (a small table); larger ids are added as they are
# seen. A dict, not a list, so that a negative id misses instead of silently
# indexing from the end.
_VARINT: dict[int, bytes] = {i: varint(i) for i in range(_FAST_VARINT_LIMIT)}


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
        encoded = varint(value)
        if len(_VARINT) < _VARINT_CACHE_LIMIT:
            _VARINT[value] = encoded
    return encoded


def _varint_size_prefix(size: int) -> bytes:
    return _VARINT[size] if size < _FAST_VARINT_LIMIT else varint(size)


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
