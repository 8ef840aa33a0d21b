"""The compiled writer (transforms.write.tf_example): the original writer's Example,
byte for byte."""

from __future__ import annotations

import random

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from helpers.records import encode_example, pretraining_feature_spec


def reference_bytes(*, input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
                    next_sentence_label, max_seq_length, max_predictions_per_seq):
    """The original write_instance_to_example_files, serialized deterministically."""
    input_ids = list(input_ids)
    input_mask = [1] * len(input_ids)
    segment_ids = list(segment_ids)
    while len(input_ids) < max_seq_length:
        input_ids.append(0)
        input_mask.append(0)
        segment_ids.append(0)
    masked_lm_positions = list(masked_lm_positions)
    masked_lm_ids = list(masked_lm_ids)
    masked_lm_weights = [1.0] * len(masked_lm_ids)
    while len(masked_lm_positions) < max_predictions_per_seq:
        masked_lm_positions.append(0)
        masked_lm_ids.append(0)
        masked_lm_weights.append(0.0)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    features = {
        "input_ids": ints(input_ids),
        "input_mask": ints(input_mask),
        "segment_ids": ints(segment_ids),
        "masked_lm_positions": ints(masked_lm_positions),
        "masked_lm_ids": ints(masked_lm_ids),
        "masked_lm_weights": tf.train.Feature(
            float_list=tf.train.FloatList(value=masked_lm_weights)),
        "next_sentence_labels": ints([next_sentence_label]),
    }
    example = tf.train.Example(features=tf.train.Features(feature=features))
    return example.SerializeToString(deterministic=True)


def random_instance(rng: random.Random, *, max_seq_length=128, max_predictions_per_seq=20,
                    num_tokens=None, num_predictions=None, max_id=30521):
    if num_tokens is None:
        num_tokens = rng.randint(0, max_seq_length)
    if num_predictions is None:
        num_predictions = rng.randint(0, min(max_predictions_per_seq, num_tokens))
    split = rng.randint(0, num_tokens)
    return dict(
        input_ids=[rng.randint(0, max_id) for _ in range(num_tokens)],
        segment_ids=[0] * split + [1] * (num_tokens - split),
        masked_lm_positions=sorted(rng.sample(range(max(num_tokens, num_predictions)),
                                              num_predictions)),
        masked_lm_ids=[rng.randint(0, max_id) for _ in range(num_predictions)],
        next_sentence_label=rng.randint(0, 1),
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
    )


SPECIAL_CASES = {
    "full_length_full_predictions": dict(num_tokens=128, num_predictions=20),
    "no_predictions": dict(num_predictions=0),
    "no_tokens": dict(num_tokens=0, num_predictions=0),
    "no_prediction_slots": dict(max_predictions_per_seq=0, num_predictions=0),
    "one_token_slot": dict(max_seq_length=1, num_tokens=1, num_predictions=1),
    "bert_large_shape": dict(max_seq_length=512, max_predictions_per_seq=80, num_tokens=512),
    "multilingual_ids": dict(max_id=119546),
    "ids_beyond_two_bytes": dict(max_id=2**40),
}


@pytest.mark.parametrize("case", sorted(SPECIAL_CASES))
@pytest.mark.parametrize("label", [0, 1])
def test_special_cases_equal_tf_deterministic_bytes(case, label):
    instance = random_instance(random.Random(case), **SPECIAL_CASES[case])
    instance["next_sentence_label"] = label
    assert encode_example(**instance) == reference_bytes(**instance)


def test_extreme_ids_equal_tf_deterministic_bytes():
    instance = dict(
        input_ids=[0, 1, 127, 128, 16383, 16384, 30521, 2**63 - 1],
        segment_ids=[0, 0, 0, 0, 1, 1, 1, 1],
        masked_lm_positions=[1, 3, 5], masked_lm_ids=[30521, 127, 128],
        next_sentence_label=1, max_seq_length=10, max_predictions_per_seq=4)
    assert encode_example(**instance) == reference_bytes(**instance)


def test_seeded_random_instances_equal_tf_deterministic_bytes():
    rng = random.Random(20240601)
    for _ in range(300):
        instance = random_instance(rng)
        assert encode_example(**instance) == reference_bytes(**instance)


@st.composite
def instances(draw):
    max_seq_length = draw(st.integers(1, 160))
    max_predictions_per_seq = draw(st.integers(0, 30))
    ids = st.integers(0, 30521) | st.integers(0, 2**31)
    input_ids = draw(st.lists(ids, max_size=max_seq_length))
    num_predictions = draw(st.integers(0, max_predictions_per_seq))
    segment_b_start = draw(st.integers(0, len(input_ids)))  # an instance's: A, then B
    return dict(
        input_ids=input_ids,
        segment_ids=[0] * segment_b_start + [1] * (len(input_ids) - segment_b_start),
        masked_lm_positions=draw(st.lists(st.integers(0, max_seq_length - 1),
                                          min_size=num_predictions, max_size=num_predictions)),
        masked_lm_ids=draw(st.lists(ids, min_size=num_predictions, max_size=num_predictions)),
        next_sentence_label=draw(st.integers(0, 1)),
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
    )


@given(instances())
def test_any_instance_equals_tf_deterministic_bytes(instance):
    assert encode_example(**instance) == reference_bytes(**instance)


def test_numpy_inputs_give_the_same_bytes():
    instance = random_instance(random.Random(7))
    as_arrays = {k: np.asarray(v, dtype=np.int32) if isinstance(v, list) else v
                 for k, v in instance.items()}
    assert encode_example(**as_arrays) == encode_example(**instance)


def test_run_pretraining_parse_spec_reads_the_padded_values():
    max_seq_length, max_predictions_per_seq = 16, 5
    instance = dict(
        input_ids=[101, 7592, 103, 102, 2088, 30521, 102],
        segment_ids=[0, 0, 0, 0, 1, 1, 1],
        masked_lm_positions=[2, 5], masked_lm_ids=[2088, 1012],
        next_sentence_label=1,
        max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq)
    name_to_features = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    parsed = tf.io.parse_single_example(encode_example(**instance), name_to_features)
    values = {k: v.numpy().tolist() for k, v in parsed.items()}
    assert values == {
        "input_ids": [101, 7592, 103, 102, 2088, 30521, 102] + [0] * 9,
        "input_mask": [1] * 7 + [0] * 9,
        "segment_ids": [0, 0, 0, 0, 1, 1, 1] + [0] * 9,
        "masked_lm_positions": [2, 5, 0, 0, 0],
        "masked_lm_ids": [2088, 1012, 0, 0, 0],
        "masked_lm_weights": [1.0, 1.0, 0.0, 0.0, 0.0],
        "next_sentence_labels": [1],
    }


def test_label_zero_is_read_back():
    instance = random_instance(random.Random(3), max_seq_length=8, max_predictions_per_seq=2)
    instance["next_sentence_label"] = 0
    parsed = tf.io.parse_single_example(
        encode_example(**instance),
        {"next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)})
    assert parsed["next_sentence_labels"].numpy().tolist() == [0]
