"""Units of work to keyed, masked instances: the compiled driver of the instance
(transforms.instances.pairs, .full_sequences) and masking definitions.

Two drivers, one algorithm: `unit_entries` (the pipeline) seeds each copy of
each document from the document's key and the copy's index, so instances do
not depend on the order documents arrive in; `reference_entries`
(`--reference_compatible`) consumes one generator in the original's order.
Data is flat numpy: a document is int32 token ids and int64 sentence bounds
(sentence s is tokens[bounds[s]:bounds[s + 1]]), a sample adds int64 document
bounds over its sentences, a unit of work is its documents' compact bytes
(transforms.handoff.tokenized_documents) with their seeds and dupe ranges,
and the output shuffle entries (transforms.handoff.shuffle.entries.EntryBuffer).
"""

from __future__ import annotations

import random
from typing import NamedTuple

import numpy as np
from numba import njit

from bert_pretraining_data.transforms.handoff.borrowed import borrowed
from bert_pretraining_data.transforms.handoff.shuffle.entries import EntryBatch, entry_buffer
from bert_pretraining_data.transforms.handoff.tokenized_documents import read_compact
from bert_pretraining_data.transforms.instances import masking
from bert_pretraining_data.transforms.instances.full_sequences import (create_doc_sentences,
                                                                       create_sequences,
                                                                       next_target)
from bert_pretraining_data.transforms.instances.pairs import (NEXT_SENTENCE_OBJECTIVES, NONE,
                                                              InstanceConfig, Stat,
                                                              create_instances)
from bert_pretraining_data.transforms.mersenne_twister import (SEED_WORDS, Lanes,
                                                               generator_state, lanes,
                                                               new_state, seed_genrand,
                                                               seed_lanes, seed_state,
                                                               seed_words, shuffle,
                                                               twisted_state)
from bert_pretraining_data.transforms.seeds import INSTANCE_STREAM, seed_key

# Generators seeded together (transforms.mersenne_twister.seed_lanes), the
# copies of many documents: a document's 10 copies alone vectorise worse
# (the costs: docs/design-notes.md, transforms.instances.units_kernel).
_SEED_BATCH = 64
_STATS = len(Stat)


class Settings(NamedTuple):
    """Everything the kernels need besides the documents and the sample."""

    max_seq_length: int
    short_seq_prob: float
    cls_id: int
    sep_id: int
    mask: bool  # false: --masking=none
    masking: masking.MaskingTables
    reference: bool  # the original's draws (--reference_compatible)
    next_sentence: int  # instances.NSP or SOP
    token_boundary: bool  # ALBERT's token_boundary goes with each instance
    continues: np.ndarray  # per id: a `##` piece (for token_boundary)
    segmented: bool  # ids may carry segmented words' marks (--whole_word_segmenter)
    single_segment: bool  # RoBERTa's DOC-SENTENCES (--recipe=roberta), with NONE


class Workspace(NamedTuple):
    """Scratch arrays, allocated once per worker (`workspace`)."""

    instance: np.ndarray
    output: np.ndarray
    masking: masking.MaskingScratch
    keys: np.ndarray
    key_lengths: np.ndarray
    lanes: Lanes
    state: np.ndarray
    lengths: np.ndarray  # reference mode: the n-gram lengths' global generator
    boundary: np.ndarray
    marks: np.ndarray


def settings(instances: InstanceConfig, masking_config: masking.MaskingConfig | None, *,
             reference: bool = False) -> Settings:
    """The kernels' settings from the flags' configs; no masking config:
    --masking=none (instances without predictions). Instances carry ALBERT's
    token_boundary when the config has its `continues` table."""
    continues = instances.continues
    if masking_config is None:  # tables of a config that is never used
        masking_config = masking.MaskingConfig(
            masked_lm_prob=0.0, max_predictions_per_seq=0, vocab_size=0, mask_id=0,
            cls_id=instances.cls_id, sep_id=instances.sep_id)
        mask = False
    else:
        mask = True
    return Settings(
        max_seq_length=int(instances.max_seq_length),
        short_seq_prob=float(instances.short_seq_prob),
        cls_id=int(instances.cls_id), sep_id=int(instances.sep_id), mask=mask,
        masking=masking.tables(masking_config, instances.max_seq_length, reference=reference),
        reference=bool(reference),
        next_sentence=NEXT_SENTENCE_OBJECTIVES[instances.next_sentence],
        token_boundary=continues is not None,
        continues=np.array(continues if continues is not None else [False], dtype=np.bool_),
        segmented=instances.segmented, single_segment=instances.single_segment)


def workspace(max_seq_length: int, max_ngram_size: int = 1) -> Workspace:
    """Scratch arrays of the kernels, allocated once per worker."""
    return Workspace(
        instance=np.empty(max_seq_length, dtype=np.int32),
        output=np.empty(max_seq_length, dtype=np.int32),
        masking=masking.scratch(max_seq_length, max_ngram_size),
        keys=np.empty((_SEED_BATCH, SEED_WORDS), dtype=np.int64),
        key_lengths=np.empty(_SEED_BATCH, dtype=np.int64), lanes=lanes(_SEED_BATCH),
        state=new_state(), lengths=new_state(),
        boundary=np.zeros(max_seq_length, dtype=np.uint8),
        marks=np.zeros(max_seq_length, dtype=np.uint8))  # all 0 unless segmented


@njit(cache=True)
def _seed_generators(seeds, dupe_starts, dupe_ends, u, dupe, w):
    """Seeds the generators of the next copies from copy `dupe` of document
    u on, across documents, up to _SEED_BATCH of them, in w.lanes: copy d
    of a document draws from position (INSTANCE_STREAM, d, 0) of its draws
    (transforms.seeds). Returns how many."""
    count = 0
    while u < len(dupe_starts) and count < _SEED_BATCH:
        while dupe < dupe_ends[u] and count < _SEED_BATCH:
            w.key_lengths[count] = seed_key(seeds[u, 0], seeds[u, 1], INSTANCE_STREAM, dupe,
                                            0, w.keys[count])
            count += 1
            dupe += 1
        u += 1
        if u < len(dupe_starts):
            dupe = dupe_starts[u]
    seed_lanes(w.keys[:count], w.key_lengths[:count], w.lanes)
    return count


@njit(cache=True)
def _new_output(copies):
    """An EntryBuffer and stats (by Stat) for `copies` document copies."""
    return entry_buffer(2 * copies), np.zeros(_STATS, dtype=np.int64)


@njit(cache=True)
def unit_entries(documents, document_bounds, seeds, dupe_starts, dupe_ends, owns, sample_tokens,
                 sample_bounds, sample_documents, s, w):
    """A unit of work to shuffle entries: for each document u (compact bytes
    documents[document_bounds[u]:document_bounds[u + 1]], 128-bit seed seeds[u],
    position in the sample owns[u] or -1), copies dupe_starts[u] to
    dupe_ends[u] - 1, in that order.

    Copy d of a document creates and masks its instances with the generator
    of position (INSTANCE_STREAM, d, 0) of the document's draws; its instance i
    gets the shuffle key of (d, i). `s` is the Settings, `w` a Workspace.

    Returns (the entries' EntryBuffer, stats by transforms.instances.pairs.Stat).
    """
    documents, document_bounds, seeds, dupe_starts, dupe_ends, owns = borrowed(
        (documents, document_bounds, seeds, dupe_starts, dupe_ends, owns))
    sample_tokens, sample_bounds, sample_documents = borrowed(
        (sample_tokens, sample_bounds, sample_documents))
    s, w = borrowed(s), borrowed(w)
    entries, stats = _new_output(max(1, (dupe_ends - dupe_starts).sum()))
    mt = w.state
    seeded = taken = 0  # generators in w.lanes, and how many of them are used
    for u in range(len(owns)):
        tokens, bounds = read_compact(documents[document_bounds[u]:document_bounds[u + 1]])
        seed_lo, seed_hi = seeds[u, 0], seeds[u, 1]
        for dupe in range(dupe_starts[u], dupe_ends[u]):
            if taken == seeded:
                seeded, taken = _seed_generators(seeds, dupe_starts, dupe_ends, u, dupe, w), 0
            twisted_state(w.lanes, taken, mt)
            taken += 1
            if s.single_segment:
                entries = create_doc_sentences(mt, tokens, bounds, seed_lo, seed_hi, dupe, s, w,
                                               entries, stats)
            elif s.next_sentence == NONE:
                _, entries = create_sequences(
                    mt, tokens, bounds, next_target(mt, s.max_seq_length), seed_lo, seed_hi,
                    dupe, s, w, entries, stats)
            else:
                entries = create_instances(
                    mt, tokens, bounds, sample_tokens, sample_bounds, sample_documents, owns[u],
                    seed_lo, seed_hi, dupe, s, w, entries, stats)
    return entries, stats


@njit(cache=True)
def _reference_entries(tokens, bounds, documents, dupe_factor, mt, s, w):
    order = np.arange(len(documents) - 1)
    if s.next_sentence != NONE:  # ELECTRA keeps its documents in order
        shuffle(mt, order)  # rng.shuffle(all_documents)
    # The corpus in the shuffled order, so that a sample index is a position.
    shuffled_bounds = np.zeros(len(bounds), dtype=np.int64)
    shuffled_documents = np.zeros(len(documents), dtype=np.int64)
    shuffled = np.empty(len(tokens), dtype=tokens.dtype)
    sentence = 0
    offset = 0
    for p in range(len(order)):
        d = order[p]
        for t in range(documents[d], documents[d + 1]):
            length = bounds[t + 1] - bounds[t]
            shuffled[offset:offset + length] = tokens[bounds[t]:bounds[t + 1]]
            offset += length
            sentence += 1
            shuffled_bounds[sentence] = offset
        shuffled_documents[p + 1] = sentence
    entries, stats = _new_output(max(1, dupe_factor * len(order)))
    target = s.max_seq_length  # ELECTRA's, carried from document to document
    for dupe in range(dupe_factor):
        for p in range(len(order)):
            first, last = shuffled_documents[p], shuffled_documents[p + 1]
            if s.next_sentence == NONE:
                target, entries = create_sequences(
                    mt, shuffled, shuffled_bounds[first:last + 1], target, 0, 0, dupe, s, w,
                    entries, stats)
            else:
                entries = create_instances(
                    mt, shuffled, shuffled_bounds[first:last + 1], shuffled, shuffled_bounds,
                    shuffled_documents, p, 0, 0, dupe, s, w, entries, stats)
    final = np.arange(entries.count)
    if s.next_sentence != NONE:  # ELECTRA writes its examples in order
        shuffle(mt, final)  # rng.shuffle(instances)
    return entries, final, stats


def reference_entries(tokens: np.ndarray, bounds: np.ndarray, documents: np.ndarray,
                      dupe_factor: int, rng: random.Random, random_seed: int, s: Settings,
                      w: Workspace) -> tuple[EntryBatch, np.ndarray, np.ndarray]:
    """Every instance of a corpus (flat tokens, sentence bounds, document
    bounds over the sentences, in the script's reading order) as the anchor's
    script makes them with `rng` (its `random.Random(random_seed)`, which
    continues after the draws), n-gram lengths (ALBERT, Model Garden) from
    the global generator its shim seeds with `random_seed`.

    Returns (entries, order, stats by Stat): entries in the order they were
    made, and the order the script writes them in (round-robin over the
    output files).
    """
    key, length = seed_words(random_seed)
    if s.masking.policy == masking.ALBERT_NGRAMS:
        seed_genrand(w.lengths, random_seed)  # the ALBERT script's np.random.seed (its shim's)
    elif s.masking.policy == masking.MODEL_GARDEN:
        seed_state(w.lengths, key, length)  # the Model Garden script's random.seed (its shim's)
    with generator_state(rng) as mt:
        entries, order, stats = _reference_entries(tokens, bounds, documents, dupe_factor, mt,
                                                   s, w)
    return EntryBatch.filled(entries), order, stats
