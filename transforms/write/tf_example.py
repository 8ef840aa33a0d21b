"""The records' feature layout and its compiled `tf.train.Example` writer.

One definition of what a record holds: `layout` names each feature and the
field it carries (`Field`), and `encode` writes any layout, bytes equal to
`SerializeToString(deterministic=True)` of the Example the original builds
(tests/test_tf_example.py checks against TensorFlow), so shards are
byte-identical in every process and `run_pretraining.py` reads them
unchanged. A record is a *row*: one instance, or with `--pack_sequences`
whole instances side by side in MLPerf's packed features (`input_mask` the
1-based sequence index, `positions` restarting per sequence, one
`next_sentence_*` entry per sequence). `--padding=none` writes only the real
values, without `input_mask` and `masked_lm_weights` (the loaders rebuild them).
A mixture's records add `source`, each sequence's corpus index (one value per
sequence, as `next_sentence_labels`).
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np
from numba import njit

from bert_pretraining_data.transforms.handoff.varints import put_varint, varint_size

_TAG_1 = 0x0A  # Example.features, Features.feature, map key, *List.value
_TAG_MAP_VALUE = 0x12  # map entry value (field 2)
_TAG_FLOAT_LIST = 0x12  # Feature.float_list (field 2)
_TAG_INT64_LIST = 0x1A  # Feature.int64_list (field 3)
_FLOAT_ONE = (0x00, 0x00, 0x80, 0x3F)  # little-endian IEEE-754 1.0f
_NO_SOURCES = np.zeros(0, dtype=np.int64)  # `encode`'s sources for a layout without them


class Field(enum.IntEnum):
    """What a feature carries, whatever its name."""

    INPUT_IDS = 0
    INPUT_MASK = 1
    SEGMENT_IDS = 2
    MASKED_LM_POSITIONS = 3
    MASKED_LM_IDS = 4
    MASKED_LM_WEIGHTS = 5
    NEXT_SENTENCE_LABELS = 6
    TOKEN_BOUNDARY = 7  # ALBERT's: 1 where a word starts ([CLS], [SEP], not `##`)
    # Packed rows only (--pack_sequences):
    POSITIONS = 8  # each token's position within its sequence
    NEXT_SENTENCE_POSITIONS = 9  # each sequence's [CLS] position in the row
    NEXT_SENTENCE_WEIGHTS = 10  # 1.0 per sequence, 0.0 padding
    SOURCE = 11  # a mixture's: each sequence's source (transforms.handoff.shuffle.instances)


# The original's names; the Model Garden's v2 names (--use_v2_feature_names).
BERT_NAMES = {field: field.name.lower() for field in Field}
V2_NAMES = {**BERT_NAMES, Field.INPUT_IDS: "input_word_ids",
            Field.SEGMENT_IDS: "input_type_ids"}
# Features that only mark padding (all ones without it); a packed row's
# input_mask also says which sequence a token belongs to, so it stays.
_ONLY_WHEN_PADDED = (Field.INPUT_MASK, Field.MASKED_LM_WEIGHTS, Field.NEXT_SENTENCE_WEIGHTS)
_MASKED_LM = (Field.MASKED_LM_POSITIONS, Field.MASKED_LM_IDS, Field.MASKED_LM_WEIGHTS)
_PACKED_ONLY = (Field.POSITIONS, Field.NEXT_SENTENCE_POSITIONS, Field.NEXT_SENTENCE_WEIGHTS)
_PER_SEQUENCE = (Field.NEXT_SENTENCE_LABELS, Field.NEXT_SENTENCE_POSITIONS,
                 Field.NEXT_SENTENCE_WEIGHTS)


@dataclasses.dataclass(frozen=True)
class RecordLayout:
    """Which features a record has and their names."""

    padded: bool = True  # --padding=fixed
    v2_names: bool = False  # --use_v2_feature_names
    token_boundary: bool = False  # ALBERT's: 1 where a word starts
    # Without a sentence-pair task (ELECTRA's records): no label, and no
    # masked_lm features unless masked here.
    next_sentence_labels: bool = True
    masked_lm: bool = True
    packed: bool = False  # --pack_sequences: rows of several instances
    pad_id: int = 0  # what input_ids are padded with: the tokenizer's pad (RoBERTa's is 1)
    source: bool = False  # a mixture's: each sequence's source id

    def features(self) -> dict[str, Field]:
        """Feature name -> field, in the sorted order the writer writes them."""
        names = V2_NAMES if self.v2_names else BERT_NAMES
        fields = [f for f in Field
                  if (self.padded or f not in _ONLY_WHEN_PADDED
                      or (self.packed and f == Field.INPUT_MASK))
                  and (self.packed or f not in _PACKED_ONLY)
                  and (self.token_boundary or f != Field.TOKEN_BOUNDARY)
                  and (self.source or f != Field.SOURCE)
                  and (self.next_sentence_labels or f not in _PER_SEQUENCE)
                  and (self.masked_lm or f not in _MASKED_LM)]
        return dict(sorted((names[f], f) for f in fields))

    def roles(self) -> dict[str, str]:
        """Feature name -> what it holds (the original's name), for the
        manifest: the loaders read any layout by it."""
        return {name: BERT_NAMES[field] for name, field in self.features().items()}


def layout_arrays(names_to_fields: dict[str, Field]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A layout as the compiled writer reads it: the names as one uint8 array,
    their int64 bounds, and the int64 fields, in sorted name order."""
    items = sorted(names_to_fields.items())
    names = [name.encode() for name, _ in items]
    bounds = np.cumsum([0] + [len(n) for n in names]).astype(np.int64)
    return (np.frombuffer(b"".join(names), dtype=np.uint8).copy(), bounds,
            np.array([int(field) for _, field in items], dtype=np.int64))


def scratch_size(max_seq_length: int, max_predictions: int, max_sequences: int = 1) -> int:
    """Bytes of scratch `encode` needs: at most ~11 bytes per value of every
    feature (5 per token, 3 per prediction, 4 per sequence), plus headers."""
    return 11 * (5 * max_seq_length + 3 * max_predictions + 4 * max_sequences) + 1024


@njit(cache=True, inline="always")
def _entry_sizes(name_length: int, size: int):
    """(values field size, feature size, entry body size) of one map entry;
    an empty packed field is omitted, as protobuf does."""
    values = 1 + varint_size(size) + size if size else 0
    feature = 1 + varint_size(values) + values
    entry = 1 + varint_size(name_length) + name_length + 1 + varint_size(feature) + feature
    return values, feature, entry


@njit(cache=True, inline="always")
def _put_entry(out, pos, name, list_tag, packed):
    size = len(packed)
    values, feature, entry = _entry_sizes(len(name), size)
    out[pos] = _TAG_1
    pos = put_varint(out, pos + 1, entry)
    out[pos] = _TAG_1
    pos = put_varint(out, pos + 1, len(name))
    out[pos:pos + len(name)] = name
    pos += len(name)
    out[pos] = _TAG_MAP_VALUE
    pos = put_varint(out, pos + 1, feature)
    out[pos] = list_tag
    pos = put_varint(out, pos + 1, values)
    if size:
        out[pos] = _TAG_1
        pos = put_varint(out, pos + 1, size)
        out[pos:pos + size] = packed
        pos += size
    return pos


@njit(cache=True, inline="always")
def _pack_varints(scratch, values, pad) -> int:
    pos = 0
    for k in range(len(values)):
        pos = put_varint(scratch, pos, values[k])
    scratch[pos:pos + pad] = 0
    return pos + pad


@njit(cache=True, inline="always")
def _pack_ids(scratch, tokens, pad, pad_id) -> int:
    """The token ids, then `pad` times `pad_id`."""
    pos = _pack_varints(scratch, tokens, 0)
    if pad_id == 0:  # the original's padding: one zero byte a token
        scratch[pos:pos + pad] = 0
        return pos + pad
    for _ in range(pad):
        pos = put_varint(scratch, pos, pad_id)
    return pos


@njit(cache=True, inline="always")
def _pack_ones(scratch, count, pad) -> int:
    """`count` float 1.0 then `pad` float 0.0."""
    for c in range(count):
        scratch[4 * c] = _FLOAT_ONE[0]
        scratch[4 * c + 1] = _FLOAT_ONE[1]
        scratch[4 * c + 2] = _FLOAT_ONE[2]
        scratch[4 * c + 3] = _FLOAT_ONE[3]
    scratch[4 * count:4 * (count + pad)] = 0
    return 4 * (count + pad)


@njit(cache=True, inline="always")
def _pack_field(scratch, field, tokens, boundary, starts, b_starts, labels, sources, positions,
                ids, token_pad, prediction_pad, sequence_pad, pad_id) -> int:
    """Packs one field's values into scratch; returns their size. Sequence s
    of the row is tokens[starts[s]:starts[s + 1]] (the last one runs to the
    row's end), its segment B starting at b_starts[s]."""
    n = len(tokens)
    m = len(starts)
    if field == 0:  # INPUT_IDS
        return _pack_ids(scratch, tokens, token_pad, pad_id)
    if field == 3:  # MASKED_LM_POSITIONS
        return _pack_varints(scratch, positions, prediction_pad)
    if field == 4:  # MASKED_LM_IDS
        return _pack_varints(scratch, ids, prediction_pad)
    if field == 5:  # MASKED_LM_WEIGHTS
        return _pack_ones(scratch, len(positions), prediction_pad)
    if field == 6:  # NEXT_SENTENCE_LABELS
        return _pack_varints(scratch, labels, sequence_pad)
    if field == 9:  # NEXT_SENTENCE_POSITIONS
        return _pack_varints(scratch, starts, sequence_pad)
    if field == 10:  # NEXT_SENTENCE_WEIGHTS
        return _pack_ones(scratch, m, sequence_pad)
    if field == 11:  # SOURCE
        return _pack_varints(scratch, sources, sequence_pad)
    if field == 7:  # TOKEN_BOUNDARY
        scratch[:n] = boundary[:n]
        scratch[n:n + token_pad] = 0
        return n + token_pad
    pos = 0  # per token, sequence by sequence: INPUT_MASK, SEGMENT_IDS, POSITIONS
    for s in range(m):
        end = starts[s + 1] if s + 1 < m else n
        if field == 1:  # INPUT_MASK: the sequence's 1-based index
            if s < 127:  # a one-byte varint
                scratch[pos:pos + end - starts[s]] = s + 1
                pos += end - starts[s]
            else:
                for _ in range(end - starts[s]):
                    pos = put_varint(scratch, pos, s + 1)
        elif field == 2:  # SEGMENT_IDS
            scratch[pos:pos + b_starts[s] - starts[s]] = 0
            scratch[pos + b_starts[s] - starts[s]:pos + end - starts[s]] = 1
            pos += end - starts[s]
        else:  # POSITIONS
            for t in range(end - starts[s]):
                pos = put_varint(scratch, pos, t)
    scratch[pos:pos + token_pad] = 0
    return pos + token_pad


@njit(cache=True, inline="always")
def encode(out, pos, names, name_bounds, fields, padded, tokens, boundary, starts, b_starts,
           labels, positions, ids, max_seq_length, max_predictions, max_sequences, pad_id,
           scratch, field_starts, sources=_NO_SOURCES) -> int:
    """Writes one row as an Example at out[pos:]; returns its end. The
    features are those of (names, name_bounds, fields) (`layout_arrays`).

    The row's tokens are `tokens`, sequence s starting at starts[s] (one
    sequence: starts == [0]) with its segment B from b_starts[s], its
    sentence-pair label labels[s] and its source sources[s] (read only for
    SOURCE: optional); `boundary` (0/1 per token) is read only for
    TOKEN_BOUNDARY; the predictions are at row positions `positions`,
    their original ids `ids`. Padded (`padded`) to max_seq_length tokens
    (input_ids with `pad_id`, the rest with zeros), max_predictions
    predictions and max_sequences sequences. `scratch`
    (`scratch_size` bytes) and `field_starts` (one more than the features)
    are scratch space."""
    token_pad = max_seq_length - len(tokens) if padded else 0
    prediction_pad = max_predictions - len(positions) if padded else 0
    sequence_pad = max_sequences - len(starts) if padded else 0
    field_starts[0] = 0
    body = 0
    for f in range(len(fields)):
        start = field_starts[f]
        field_starts[f + 1] = start + _pack_field(
            scratch[start:], fields[f], tokens, boundary, starts, b_starts, labels, sources,
            positions, ids, token_pad, prediction_pad, sequence_pad, pad_id)
        _, _, entry = _entry_sizes(name_bounds[f + 1] - name_bounds[f],
                                   field_starts[f + 1] - start)
        body += 1 + varint_size(entry) + entry
    out[pos] = _TAG_1
    pos = put_varint(out, pos + 1, body)
    for f in range(len(fields)):
        tag = _TAG_FLOAT_LIST if fields[f] == 5 or fields[f] == 10 else _TAG_INT64_LIST
        pos = _put_entry(out, pos, names[name_bounds[f]:name_bounds[f + 1]], tag,
                         scratch[field_starts[f]:field_starts[f + 1]])
    return pos
