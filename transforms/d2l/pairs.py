"""The d2l recipe's paragraphs and sentence pairs (d2l.ai's `_read_wiki`,
`_get_nsp_data_from_paragraph`, `_pad_bert_inputs`), as plain functions; the
recipe's pipeline is pipeline.d2l_recipe, its Beam steps transforms.d2l.beam.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable, Iterator, Sequence

import numpy as np

from bert_pretraining_data.transforms.d2l.example import encode_features
from bert_pretraining_data.transforms.handoff.shuffle.entries import EntryBatch
from bert_pretraining_data.transforms.handoff.tokenized_documents import (CompactDocument,
                                                                          expand_document)
from bert_pretraining_data.transforms.instances.masking import Masked, MaskingConfig
from bert_pretraining_data.transforms.seeds import document_seed, shuffle_key
@dataclasses.dataclass
class SentencePair:
    """One training pair of a recipe built in Python (the d2l recipe's); the
    masked_lm fields are empty until it is masked."""

    tokens: list[int]
    segment_ids: list[int]
    is_random_next: bool
    masked_lm_positions: list[int] = dataclasses.field(default_factory=list)
    masked_lm_labels: list[int] = dataclasses.field(default_factory=list)

    def with_mask(self, masked: Masked) -> "SentencePair":
        return dataclasses.replace(self, tokens=masked.tokens,
                                   masked_lm_positions=masked.positions,
                                   masked_lm_labels=masked.labels)


# ((doc_key, dupe_index), the instances of that document copy, in order)
InstanceBatch = tuple[tuple[str, int], list[SentencePair]]


def fan_out(element: tuple[str, CompactDocument],
            dupe_factor: int) -> Iterator[tuple[tuple[str, int], list[list[int]]]]:
    """One (doc_key, dupe_index) copy per dupe index, for steps that walk lists
    (the d2l recipe's): the document is expanded once and the copies share it
    (they only read it)."""
    document = expand_document(element[1])
    for dupe_index in range(dupe_factor):
        yield (element[0], dupe_index), document


def pair_entries(batch: InstanceBatch, *, seed: int,
           to_record: Callable[[SentencePair], bytes]) -> EntryBatch:
    """The shuffle entries of one document copy: each instance's record
    (`to_record`) under its shuffle key (derived from (doc_key, dupe,
    index)), which orders the global shuffle."""
    (doc_key, dupe_index), instances = batch
    seed_lo, seed_hi = map(np.uint64, document_seed(seed, doc_key))
    return EntryBatch.of([(int(shuffle_key(seed_lo, seed_hi, dupe_index, index)),
                            to_record(instance))
                           for index, instance in enumerate(instances)])


UNK = "<unk>"


RESERVED_TOKENS = (UNK, "<pad>", "<mask>", "<cls>", "<sep>")  # ids 0..4, as d2l's Vocab
UNK_ID, PAD_ID, MASK_ID, CLS_ID, SEP_ID = range(len(RESERVED_TOKENS))


MIN_FREQUENCY = 5


Paragraph = list[list[str]]


def split_paragraph(line: str, *, lower: bool = True) -> Paragraph | None:
    """d2l's `_read_wiki` for one line: its sentences as word lists, or None.

    The test is on the raw line, as d2l's: a line whose only period ends it
    (" ... end . ") passes, and its single sentence counts for the
    vocabulary even though it makes no pair.
    """
    if " . " not in line:
        return None
    text = line.strip()
    if lower:
        text = text.lower()
    return [sentence.split() for sentence in text.split(" . ")]


def encode_paragraph(paragraph: Paragraph, ids: dict[str, int]) -> list[list[int]]:
    """A paragraph's sentences of words as ids, <unk> for words not in `ids`."""
    return [[ids.get(word, UNK_ID) for word in sentence] for sentence in paragraph]


def nsp_pairs(paragraph: Sequence[Sequence[int]], *, max_len: int,
              random_sentence: Callable[[random.Random], Sequence[int] | None],
              rng: random.Random) -> tuple[list[SentencePair], int]:
    """d2l's `_get_nsp_data_from_paragraph`: (instances, pairs dropped as too long).

    When no other paragraph exists, the actual next sentence is kept.
    """
    instances = []
    dropped = 0
    for a, b in zip(paragraph, paragraph[1:]):
        is_next = True
        if rng.random() >= 0.5:
            other = random_sentence(rng)
            if other is not None:
                b, is_next = other, False
        if len(a) + len(b) + 3 > max_len:
            dropped += 1
            continue
        instances.append(SentencePair(tokens=[CLS_ID, *a, SEP_ID, *b, SEP_ID],
                                  segment_ids=[0] * (len(a) + 2) + [1] * (len(b) + 1),
                                  is_random_next=not is_next))
    return instances, dropped


def d2l_masking_config(vocab_size: int, *, masked_lm_prob: float,
                       max_predictions: int) -> MaskingConfig:
    """d2l's MLM is BERT's masking on word ids: max(1, round(len * 0.15))
    predictions (capped by the padded width), never <cls>/<sep>, 80/10/10."""
    return MaskingConfig(masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions,
                         vocab_size=vocab_size, mask_id=MASK_ID, cls_id=CLS_ID, sep_id=SEP_ID)


def d2l_example(instance: SentencePair, *, max_len: int, max_predictions: int) -> bytes:
    """d2l's `_pad_bert_inputs` for one masked instance, as tf.train.Example bytes."""
    tokens, predictions = len(instance.tokens), len(instance.masked_lm_positions)
    return encode_features(
        int64={
            "tokens": [*instance.tokens, *[PAD_ID] * (max_len - tokens)],
            "segments": [*instance.segment_ids, *[0] * (max_len - tokens)],
            "valid_lens": [tokens],
            "pred_positions": [*instance.masked_lm_positions,
                               *[0] * (max_predictions - predictions)],
            "mlm_labels": [*instance.masked_lm_labels, *[0] * (max_predictions - predictions)],
            "nsp_labels": [int(not instance.is_random_next)],
        },
        float32={"mlm_weights": [1.0] * predictions + [0.0] * (max_predictions - predictions)})


def vocabulary_from_asset(data: bytes) -> list[str]:
    """tf.Transform's text vocabulary file: one token per line, reserved first."""
    return data.decode("utf-8").rstrip("\n").split("\n")
