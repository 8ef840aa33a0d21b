"""Reading the pipeline's output back the way BERT's run_pretraining.py does."""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf


def pretraining_feature_spec(max_seq_length: int,
                             max_predictions_per_seq: int) -> dict[str, tf.io.FixedLenFeature]:
    """Exactly the `name_to_features` of run_pretraining.py's input_fn_builder."""
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def read_examples(paths: Sequence[str], max_seq_length: int, max_predictions_per_seq: int,
                  compression: str = "") -> list[dict[str, list]]:
    """Every record of the files, in file order, as plain lists."""
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    dataset = tf.data.TFRecordDataset(list(paths), compression_type=compression)
    records = []
    for serialized in dataset:
        parsed = tf.io.parse_single_example(serialized, spec)
        records.append({name: value.numpy().tolist() for name, value in parsed.items()})
    return records


def encode_example(*, input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
                   next_sentence_label, max_seq_length, max_predictions_per_seq,
                   padded=True) -> bytes:
    """One record written by the pipeline's compiled writer
    (transforms.write.tf_example) in the BERT layout; segment_ids must be
    zeros then ones, as every instance's are."""
    import numpy as np

    from bert_pretraining_data.transforms.write.tf_example import (RecordLayout, encode,
                                                                 layout_arrays, scratch_size)

    names, name_bounds, fields = layout_arrays(RecordLayout(padded=padded).features())
    segment_ids = list(segment_ids)
    segment_b_start = segment_ids.count(0)
    assert segment_ids == [0] * segment_b_start + [1] * (len(segment_ids) - segment_b_start)
    out = np.empty(scratch_size(max_seq_length, max_predictions_per_seq) + 64, dtype=np.uint8)
    one = np.zeros(1, dtype=np.int64)  # a record is the row of one sequence
    end = encode(out, 0, names, name_bounds, fields, padded,
                 np.asarray(input_ids, dtype=np.int64), np.zeros(0, np.uint8), one,
                 one + segment_b_start, one + next_sentence_label,
                 np.asarray(masked_lm_positions, dtype=np.int64),
                 np.asarray(masked_lm_ids, dtype=np.int64), max_seq_length,
                 max_predictions_per_seq, 1, 0,
                 np.empty(scratch_size(max_seq_length, max_predictions_per_seq), np.uint8),
                 np.empty(len(fields) + 1, dtype=np.int64))
    return out[:end].tobytes()


def decode_records(path: str, compression: str = "") -> list[dict[str, list]]:
    """Every record of a file with every feature it has, as plain lists (the
    anchors' golden files' form: int64 lists as ints, float lists as floats)."""
    records = []
    for raw in tf.data.TFRecordDataset(path, compression_type=compression).as_numpy_iterator():
        feature = tf.train.Example.FromString(raw).features.feature
        records.append({
            name: ([float(v) for v in value.float_list.value] if value.HasField("float_list")
                   else [int(v) for v in value.int64_list.value])
            for name, value in feature.items()})
    return records


def loader_rows(batches) -> list[tuple[tuple, tuple]]:
    """Every row of a PyTorch loader's batches: its real tokens (by the
    attention mask), and its labels there."""
    rows = []
    for batch in batches:
        for ids, mask, labels in zip(batch["input_ids"], batch["attention_mask"],
                                     batch["labels"]):
            n = int(mask.sum())
            rows.append((tuple(ids[:n].tolist()), tuple(labels[:n].tolist())))
    return rows
