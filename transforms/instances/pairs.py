"""Sentence-pair instances of one document: the original's
`create_instances_from_document`, compiled, and the one definition of it, for
BERT's next sentence prediction and ALBERT's sentence order prediction
(`--next_sentence=sop`; ALBERT's function is BERT's with that branch).

Read it beside the original, step by step. Each instance is masked with the
same generator as soon as it is built, where the original draws its masking
randomness, then appended as a shuffle entry (`emit`). The pipeline and
`--reference_compatible` differ only in the generator passed in (one per
document copy, or one for the run) and in `random_document`. `s` and `w` are
transforms.instances.units_kernel's Settings and Workspace, `entries` the
shuffle entries' EntryBuffer (transforms.handoff.shuffle.entries) and `stats`
the counts by `Stat`.
"""

from __future__ import annotations

import dataclasses
from enum import IntEnum

from numba import njit

from bert_pretraining_data.transforms.handoff.shuffle.entries import (ENTRY_HEADER, commit_entry,
                                                                      reserve_entry)
from bert_pretraining_data.transforms.handoff.shuffle.instances import (max_instance_size,
                                                                       put_instance)
from bert_pretraining_data.transforms.instances.masking import mask_instance
from bert_pretraining_data.transforms.mersenne_twister import randint, random
from bert_pretraining_data.transforms.seeds import shuffle_key
from bert_pretraining_data.transforms.tokenize.chinese_words import ID_BITS, MARK

MARK_BIT = MARK.bit_length() - 1


class Stat(IntEnum):
    """What the kernels count, each at its value's place in their stats
    array: the one list of CreateInstances' counts, by name and place."""

    INSTANCES = 0
    RANDOM_NEXT_INSTANCES = 1
    TRUNCATED_TOKENS = 2
    RANDOM_NEXT_UNAVAILABLE = 3
    MASKED_TOKENS = 4

    @property
    def counter(self) -> str:
        """The name CreateInstances counts it under (the manifest's)."""
        return self.name.lower()


# The sentence-pair objectives (--next_sentence): BERT's next sentence
# prediction, ALBERT's sentence order prediction.
# (`none`, full sequences without a pair task, is transforms.instances.full_sequences.)
NEXT_SENTENCE_OBJECTIVES = {"nsp": 0, "sop": 1, "none": 2}
NSP, SOP, NONE = NEXT_SENTENCE_OBJECTIVES.values()


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    """What instance creation needs from the flags and the vocabulary."""

    max_seq_length: int
    short_seq_prob: float
    cls_id: int
    sep_id: int
    next_sentence: str = "nsp"  # a key of NEXT_SENTENCE_OBJECTIVES
    # Per vocabulary id, True for `##` pieces (ALBERT's token_boundary).
    continues: tuple[bool, ...] | None = None
    segmented: bool = False  # ids carry segmented words' marks (transforms.tokenize.chinese_words)
    # With next_sentence "none": RoBERTa's DOC-SENTENCES (one segment of whole
    # sentences) instead of ELECTRA's two-segment full sequences.
    single_segment: bool = False


@njit(cache=True)
def random_document(mt, num_documents: int, own: int, reference: bool) -> int:
    """The original's chooser: up to 10 tries to avoid the own document. Then
    the original keeps the last try (`reference`); the pipeline, whose sample
    may hold the own document among few others, draws uniformly from the
    others instead. -1 when there is no document to choose."""
    if num_documents == 0:
        return -1
    index = own
    for _ in range(10):
        index = randint(mt, 0, num_documents - 1)
        if index != own:
            return index
    if reference:
        return index
    if num_documents == 1:
        return -1
    index = randint(mt, 0, num_documents - 2)
    return index if index < own else index + 1


# Inlined (numba IR): a call would copy the settings and scratch tuples per instance.
@njit(cache=True, inline="always")
def emit(mt, instance, segment_b_start, random_next, key, s, w, entries, stats):
    """Masks one instance with `mt` (not at all with --masking=none) and
    appends its shuffle entry (key, then the instance) to `entries`; returns
    the EntryBuffer."""
    n = len(instance)
    marks = w.marks[:n]
    if s.segmented:  # segmented words' marks (transforms.tokenize.chinese_words) leave the ids
        for t in range(n):
            marks[t] = instance[t] >> MARK_BIT
            instance[t] &= ID_BITS
    k = 0
    if s.mask:
        # ALBERT and the Model Garden draw n-gram lengths from a global
        # generator: its own in reference mode, this copy's otherwise.
        lengths = w.lengths if s.reference else mt
        k = mask_instance(mt, lengths, instance, marks, w.output, s.masking, w.masking)
    else:
        w.output[:n] = instance
    if s.token_boundary:  # ALBERT's, of the unmasked tokens
        for t in range(n):
            token = instance[t]
            w.boundary[t] = token == s.cls_id or token == s.sep_id or not (
                s.continues[token] or marks[t])
    stats[Stat.MASKED_TOKENS] += k
    entries = reserve_entry(entries, max_instance_size(n, k))
    start = entries.end + ENTRY_HEADER
    end = put_instance(entries.data, start, w.output[:n], segment_b_start,
                       1 if random_next else 0, w.masking.chosen[:k], w.masking.labels[:k],
                       w.boundary, s.token_boundary, s.masking.mask_id)
    stats[Stat.INSTANCES] += 1
    return commit_entry(entries, key, end - start)


@njit(cache=True)
def create_instances(mt, tokens, bounds, sample_tokens, sample_bounds, sample_documents, own,
                     seed_lo, seed_hi, dupe, s, w, entries, stats):
    """Every instance of one copy of a document (tokens, sentence bounds),
    masked and appended as shuffle entries; instance i gets the shuffle key of
    (dupe, i). Random next segments come from the sample (flat tokens,
    sentence bounds, document bounds over the sentences), where the document
    itself is `own` (-1: not in it).

    The original's steps: a target length (shortened with `short_seq_prob`),
    chunks of whole sentences up to it, `a_end`, a random next segment when
    the chunk has one segment or (NSP) with p=0.5 (the unused segments put
    back); with SOP, B is the actual next segment and the two are swapped
    with p=0.5 (label 1 = swapped or random); `truncate_seq_pair`,
    `[CLS] A [SEP] B [SEP]`.

    Returns the EntryBuffer.
    """
    max_num_tokens = s.max_seq_length - 3
    target = max_num_tokens
    if random(mt) < s.short_seq_prob:
        target = randint(mt, 2, max_num_tokens)
    num_sentences = len(bounds) - 1
    num_documents = len(sample_documents) - 1
    instance = w.instance
    index = 0
    chunk_start = 0
    chunk_count = 0
    chunk_length = 0
    i = 0
    while i < num_sentences:
        if chunk_count == 0:
            chunk_start = i
        chunk_count += 1
        chunk_length += bounds[i + 1] - bounds[i]
        if i == num_sentences - 1 or chunk_length >= target:
            a_end = randint(mt, 1, chunk_count - 1) if chunk_count >= 2 else 1
            a_from, a_to = bounds[chunk_start], bounds[chunk_start + a_end]
            is_random = chunk_count == 1 or (s.next_sentence == NSP and random(mt) < 0.5)
            # SOP (ALBERT): the actual next segment, swapped with A half the time.
            swapped = not is_random and s.next_sentence == SOP and random(mt) < 0.5
            other = random_document(mt, num_documents, own, s.reference) if is_random else -1
            if is_random and other < 0:
                # No other document exists: never pair with our own text.
                stats[Stat.RANDOM_NEXT_UNAVAILABLE] += 1
                is_random = False
            b_length = 0
            b_source = tokens
            b_from = 0
            if is_random:
                target_b = target - (a_to - a_from)
                first = sample_documents[other]
                last = sample_documents[other + 1]
                start = first + randint(mt, 0, last - first - 1)
                b_from = sample_bounds[start]
                end = start
                while end < last:
                    end += 1
                    b_length = sample_bounds[end] - b_from
                    if b_length >= target_b:
                        break
                b_source = sample_tokens
                i -= chunk_count - a_end  # put the unused segments back
            else:
                b_from = bounds[chunk_start + a_end]
                b_length = bounds[chunk_start + chunk_count] - b_from
            if swapped:
                a_from, a_to, b_from, b_length = b_from, b_from + b_length, a_from, a_to - a_from
            if b_length > 0:
                # truncate_seq_pair: windows over A and B, one draw per token
                # removed (deleting from a list's front made the original quadratic).
                a_lo, a_hi, b_lo, b_hi = a_from, a_to, b_from, b_from + b_length
                while (a_hi - a_lo) + (b_hi - b_lo) > max_num_tokens:
                    trim_a = (a_hi - a_lo) > (b_hi - b_lo)
                    front = random(mt) < 0.5
                    if trim_a:
                        if front:
                            a_lo += 1
                        else:
                            a_hi -= 1
                    elif front:
                        b_lo += 1
                    else:
                        b_hi -= 1
                    stats[Stat.TRUNCATED_TOKENS] += 1
                n = 0
                instance[n] = s.cls_id
                n += 1
                for t in range(a_lo, a_hi):
                    instance[n] = tokens[t]
                    n += 1
                instance[n] = s.sep_id
                n += 1
                segment_b_start = n
                for t in range(b_lo, b_hi):
                    instance[n] = b_source[t]
                    n += 1
                instance[n] = s.sep_id
                n += 1
                entries = emit(mt, instance[:n], segment_b_start, is_random or swapped,
                               shuffle_key(seed_lo, seed_hi, dupe, index), s, w, entries, stats)
                index += 1
                stats[Stat.RANDOM_NEXT_INSTANCES] += is_random or swapped
            chunk_count = 0
            chunk_length = 0
        i += 1
    return entries
