"""Invariants of the pure core under random documents, vocabularies and flags.

CI runs a fixed-seed profile in seconds; `HYPOTHESIS_PROFILE=long pytest
tests/test_properties.py` explores far more cases locally (profiles: conftest.py).
"""

from __future__ import annotations


import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from helpers.records import encode_example
from helpers.oracle_bert import _candidate_groups, create_instances
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig
from bert_pretraining_data.transforms.instances.masking import MaskingConfig, mask_tokens, num_to_predict
from bert_pretraining_data.transforms.randomness import hashed_rng

CLS, SEP, MASK = 2, 3, 4  # ids 0..4 are special in the generated vocabularies


@st.composite
def setups(draw):
    vocab_size = draw(st.integers(8, 400))
    sentence = st.lists(st.integers(5, vocab_size - 1), min_size=1, max_size=40)
    document = draw(st.lists(sentence, min_size=1, max_size=12))
    other = draw(st.none() | st.lists(sentence, min_size=1, max_size=6))
    whole_word = draw(st.booleans())
    continuation = (tuple(draw(st.lists(st.booleans(), min_size=vocab_size,
                                        max_size=vocab_size))) if whole_word else None)
    instance_config = InstanceConfig(
        max_seq_length=draw(st.integers(5, 80)),
        short_seq_prob=draw(st.floats(0, 1)), cls_id=CLS, sep_id=SEP)
    masking = MaskingConfig(
        masked_lm_prob=draw(st.floats(0.01, 1)),
        max_predictions_per_seq=draw(st.integers(1, 24)), vocab_size=vocab_size,
        mask_id=MASK, cls_id=CLS, sep_id=SEP, continuation=continuation)
    seed = draw(st.integers(0, 2**32))
    return document, other, instance_config, masking, seed


@given(setups())
def test_instances_and_masks_keep_every_invariant(setup):
    document, other, config, masking, seed = setup
    instances, stats = create_instances(
        document, config=config, rng=hashed_rng(seed, "instances"),
        random_document=lambda rng: other)
    document_tokens = {t for sentence in document for t in sentence}
    other_tokens = {t for sentence in other or [] for t in sentence}
    for index, instance in enumerate(instances):
        tokens, segments = instance.tokens, instance.segment_ids
        assert len(tokens) <= config.max_seq_length
        assert tokens[0] == CLS and tokens[-1] == SEP and tokens.count(SEP) == 2
        first_sep = tokens.index(SEP)
        assert first_sep >= 2 and len(tokens) - first_sep >= 3  # A and B non-empty
        assert segments == [0] * (first_sep + 1) + [1] * (len(tokens) - first_sep - 1)
        body_b = set(tokens[first_sep + 1:-1])
        if instance.is_random_next:
            assert other is not None and body_b <= other_tokens
        else:
            assert body_b <= document_tokens

        masked = mask_tokens(tokens, masking, hashed_rng(seed, "mask", index))
        positions = masked.positions
        assert positions == sorted(set(positions))
        assert all(tokens[p] not in (CLS, SEP) for p in positions)
        assert masked.labels == [tokens[p] for p in positions]
        budget = num_to_predict(len(tokens), masking)
        assert len(positions) <= budget
        groups = _candidate_groups(tokens, masking)
        if masking.continuation is None:
            assert len(positions) == min(budget, len(groups))
        chosen = set(positions)
        for group in groups:
            assert chosen.isdisjoint(group) or chosen.issuperset(group)
        unmasked = set(range(len(tokens))) - chosen
        assert all(masked.tokens[i] == tokens[i] for i in unmasked)
        assert all(0 <= masked.tokens[p] < masking.vocab_size for p in positions)

        example = tf.train.Example.FromString(encode_example(
            input_ids=masked.tokens, segment_ids=segments, masked_lm_positions=positions,
            masked_lm_ids=masked.labels, next_sentence_label=int(instance.is_random_next),
            max_seq_length=config.max_seq_length,
            max_predictions_per_seq=masking.max_predictions_per_seq))
        feature = example.features.feature
        ids = list(feature["input_ids"].int64_list.value)
        mask = list(feature["input_mask"].int64_list.value)
        weights = list(feature["masked_lm_weights"].float_list.value)
        n, k = len(tokens), len(positions)
        assert ids[n:] == [0] * (config.max_seq_length - n) and mask == [1] * n + [0] * (
            config.max_seq_length - n)
        assert weights == [1.0] * k + [0.0] * (masking.max_predictions_per_seq - k)
        assert list(feature["masked_lm_ids"].int64_list.value)[k:] == [0] * (
            masking.max_predictions_per_seq - k)
    assert stats.random_next_unavailable == 0 or other is None
