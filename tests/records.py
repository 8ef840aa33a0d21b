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
