"""The compiled definition against the readable oracle (tests/oracle_bert.py):
the same (shuffle key, record) pairs and counters for every document copy,
sample and flag set. Fidelity to the original script itself is shown in
test_pipeline.py (compat mode runs the same kernels)."""

from __future__ import annotations

import functools
import io
import random

import numpy as np
import pytest
from hypothesis import given, strategies as st

from bert_pretraining_data.transforms.d2l.pairs import pair_entries
from bert_pretraining_data.transforms.handoff.shuffle.entries import ENTRY_HEADER
from bert_pretraining_data.transforms.handoff.tokenized_documents import (compact_document,
                                                                          expand_document)
from bert_pretraining_data.transforms.instances.masking import MaskingConfig
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig
from bert_pretraining_data.transforms.instances.units import (FlatSample, InstanceKernels,
                                                               unit_instances)
from bert_pretraining_data.transforms.seeds import INSTANCE_STREAM, document_seed, position_rng
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
from bert_pretraining_data.transforms.write.rows import InstanceRows
from bert_pretraining_data.transforms.write.tf_example import RecordLayout
from bert_pretraining_data.transforms.write.tfrecord import read_records
from conftest import DATA
from helpers.oracle_bert import (create_instances, encode_instance, mask_tokens,
                                 random_document_from_sample)

CLS, SEP, MASK, VOCAB = 2, 3, 4, 30522


def entries(batch):
    """(shuffle key, entry bytes) of every entry of a EntryBatch."""
    ends = batch.bounds.tolist()
    return list(zip(batch.keys.tolist(),
                    (batch.entries[a:b].tobytes() for a, b in zip(ends, ends[1:]))))


def records(batch, rows):
    """(shuffle key, record bytes) of every entry of a EntryBatch: the
    Python paths' payloads are records, the kernels' instances (written as
    records by the row writer `rows`)."""
    if rows is None:
        return [(key, entry[ENTRY_HEADER:]) for key, entry in entries(batch)]
    framed = rows.write(batch.entries, batch.bounds, np.arange(len(batch)),
                        np.arange(len(batch) + 1)).tobytes()
    return list(zip(batch.keys.tolist(), read_records(io.BytesIO(framed))))


def python_records(doc_key, dupes, packed, sample, instances, masking, *, seed,
                   max_predictions, padded):
    """The reference: the Python functions, copy after copy, seeded as the
    pipeline seeds them (transforms.seeds: one generator per copy, from
    (INSTANCE_STREAM, dupe), masking each instance as it is built; shuffle keys by
    (dupe, index))."""
    pairs = []
    for dupe in range(*dupes):
        rng = position_rng(document_seed(seed, doc_key), INSTANCE_STREAM, dupe)
        created, _ = create_instances(
            expand_document(packed), config=instances,
            random_document=random_document_from_sample(sample, doc_key), rng=rng,
            # --masking=none: no predictions
            mask=None if masking is None else functools.partial(
                mask_tokens, config=masking, rng=rng))
        batch = ((doc_key, dupe), created)
        pairs += records(pair_entries(batch, seed=seed, to_record=functools.partial(
            encode_instance, max_seq_length=instances.max_seq_length,
            max_predictions_per_seq=max_predictions, padded=padded)), None)
    return pairs


def compiled_records(doc_key, dupes, packed, sample, instances, masking, *, seed,
                     max_predictions, padded):
    kernels = InstanceKernels.of(instances, masking)
    batch, stats = unit_instances([(doc_key, packed, dupes)], sample=FlatSample.of(sample),
                                kernels=kernels, seed=seed)
    rows = InstanceRows(RecordLayout(padded=padded), instances.max_seq_length, max_predictions)
    return records(batch, rows), stats


sentences = st.lists(st.integers(5, VOCAB - 1), min_size=1, max_size=70)
documents = st.lists(sentences, min_size=1, max_size=25)


@st.composite
def cases(draw):
    max_seq_length = draw(st.sampled_from([8, 16, 40, 128, 300]))
    whole_word = draw(st.booleans())
    continuation = None
    if whole_word:
        rng = random.Random(draw(st.integers(0, 2**32)))
        continuation = tuple(rng.random() < 0.3 for _ in range(VOCAB))
    max_predictions = draw(st.sampled_from([1, 3, 20, 80]))
    masking = MaskingConfig(masked_lm_prob=draw(st.sampled_from([0.15, 0.5, 1.0])),
                            max_predictions_per_seq=max_predictions, vocab_size=VOCAB,
                            mask_id=MASK, cls_id=CLS, sep_id=SEP, continuation=continuation)
    if draw(st.integers(0, 4)) == 0:
        masking = None
    instances = InstanceConfig(max_seq_length=max_seq_length,
                               short_seq_prob=draw(st.sampled_from([0.0, 0.1, 0.9])),
                               cls_id=CLS, sep_id=SEP)
    document = draw(documents)
    others = draw(st.lists(documents, max_size=4))
    sample = [(f"other:{i}", compact_document(d)) for i, d in enumerate(others)]
    if draw(st.booleans()):  # the document itself is in the sample
        sample.insert(draw(st.integers(0, len(sample))), ("doc:0", compact_document(document)))
    first = draw(st.integers(0, 9))
    return dict(doc_key="doc:0", dupes=(first, first + draw(st.integers(1, 3))),
                packed=compact_document(document),
                sample=sample, instances=instances, masking=masking,
                seed=draw(st.integers(0, 2**40)), max_predictions=max_predictions,
                padded=draw(st.booleans()))


@pytest.mark.slow
@given(cases())
def test_compiled_records_equal_the_python_paths(case):
    pairs, stats = compiled_records(**case)
    assert pairs == python_records(**case)
    assert stats["instances"] == len(pairs)
    if case["masking"] is None:
        assert stats["masked_tokens"] == 0


def wiki_documents(vocab, count: int) -> list[tuple[str, bytes]]:
    """The first `count` WikiText-2 articles, tokenized and packed."""
    tokenizer = FullTokenizer(vocab)
    text = (DATA / "wikitext2_valid.txt").read_text(encoding="utf-8").split("\n\n")[:count]
    return [(f"wiki:{i}", compact_document([tokenizer.tokenize_to_ids(line)
                                        for line in doc.splitlines() if line.strip()]))
            for i, doc in enumerate(text)]


@pytest.mark.parametrize("whole_word", [False, True, None])  # None: --masking=none
@pytest.mark.parametrize("padded", [True, False])
def test_real_documents_and_vocabulary(uncased_vocab, whole_word, padded):
    docs = wiki_documents(uncased_vocab, 12)
    instances = InstanceConfig(max_seq_length=128, short_seq_prob=0.1,
                               cls_id=uncased_vocab.cls_id, sep_id=uncased_vocab.sep_id)
    masking = MaskingConfig(
        masked_lm_prob=0.15, max_predictions_per_seq=20, vocab_size=len(uncased_vocab),
        mask_id=uncased_vocab.mask_id, cls_id=uncased_vocab.cls_id,
        sep_id=uncased_vocab.sep_id,
        continuation=tuple(uncased_vocab.continuation_flags()) if whole_word else None)
    if whole_word is None:
        masking = None
    total = 0
    for doc_key, packed in docs:
        case = dict(doc_key=doc_key, dupes=(0, 3), packed=packed, sample=docs[::2],
                    instances=instances, masking=masking, seed=12345,
                    max_predictions=20, padded=padded)
        pairs, stats = compiled_records(**case)
        assert pairs == python_records(**case), doc_key
        total += len(pairs)
        assert (stats["masked_tokens"] > 0) == (masking is not None)
    assert total > 300


def test_a_unit_of_many_documents_is_their_records_one_after_another(uncased_vocab):
    docs = wiki_documents(uncased_vocab, 6)
    instances = InstanceConfig(max_seq_length=64, short_seq_prob=0.1,
                               cls_id=uncased_vocab.cls_id, sep_id=uncased_vocab.sep_id)
    kernels = InstanceKernels.of(instances, None)
    sample = FlatSample.of(docs[1::2])
    unit = [(key, packed, (i % 3, 4)) for i, (key, packed) in enumerate(docs)]

    together, stats = unit_instances(unit, sample=sample, kernels=kernels, seed=9)
    one_by_one = [unit_instances([part], sample=sample, kernels=kernels, seed=9)
                  for part in unit]
    assert entries(together) == [pair for batch, _ in one_by_one for pair in entries(batch)]
    assert stats["instances"] == sum(s["instances"] for _, s in one_by_one) == len(together) > 20
