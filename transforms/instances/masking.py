"""Masked-LM predictions: the original's `create_masked_lm_predictions`, on
token ids, compiled, and the one definition of masking in this project.

The instance kernels call `mask_instance` as soon as an instance is built,
where the original draws its masking randomness; dynamic masking and the d2l
recipe call `mask_tokens`, the same function with a `random.Random`. BERT's,
ALBERT's n-gram and the Model Garden's policies each follow their script
(`_bert`, `_albert_ngrams`, `_model_garden`). Outside `reference` mode,
per-token masking draws the chosen positions with `random.sample` instead of
shuffling every candidate: the same distribution at a fraction of the draws.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from typing import NamedTuple, Sequence

import numpy as np
from numba import njit

from bert_pretraining_data.transforms.mersenne_twister import (generator_state, randint, sample_into,
                                                         sample_set_size, shuffle)
from bert_pretraining_data.transforms.mersenne_twister import random as uniform
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """What masking needs from the flags and the vocabulary."""

    masked_lm_prob: float
    max_predictions_per_seq: int
    vocab_size: int
    mask_id: int
    cls_id: int
    sep_id: int
    # Per vocabulary id, True for `##` pieces; set only for whole-word masking.
    continuation: tuple[bool, ...] | None = None
    # ALBERT's n-gram masking (--ngram): spans of up to `ngram` candidates.
    ngram: int = 0
    favor_shorter_ngram: bool = True
    # The Model Garden's masking (--max_ngram_size): spans of up to N grams.
    max_ngram_size: int = 0


@dataclasses.dataclass(frozen=True)
class Masked:
    """Masked token ids, and the sorted positions with their original ids."""

    tokens: list[int]
    positions: list[int]
    labels: list[int]


class MaskingTables(NamedTuple):
    """A MaskingConfig as the compiled code reads it (`tables`)."""

    budgets: np.ndarray  # num_to_predict per sequence length
    set_sizes: np.ndarray  # random.sample's threshold per number of picks
    cls_id: int
    sep_id: int
    mask_id: int
    vocab_size: int
    continuation: np.ndarray  # per id: a `##` piece (whole-word masking only)
    whole_word: bool
    reference: bool  # the original's draws (a shuffle of every candidate)
    policy: int  # BERT, ALBERT_NGRAMS or MODEL_GARDEN
    ngram_cdf: np.ndarray  # ALBERT: np.random.choice's cdf over n-gram lengths 1..N
    cum_weights: np.ndarray  # Model Garden: random.choices' cum_weights over lengths 1..N


class MaskingScratch(NamedTuple):
    """Scratch arrays of `mask_instance`, allocated once (`scratch`)."""

    candidates: np.ndarray
    chosen: np.ndarray
    group_starts: np.ndarray
    order: np.ndarray
    work: np.ndarray
    labels: np.ndarray
    covered: np.ndarray
    gram_begin: np.ndarray  # Model Garden: grams, spans of grams, lists of spans per length
    gram_end: np.ndarray
    span_begin: np.ndarray
    span_end: np.ndarray
    span_order: np.ndarray
    list_start: np.ndarray
    list_length: np.ndarray


# Masking policies, each its anchor's create_masked_lm_predictions.
BERT, ALBERT_NGRAMS, MODEL_GARDEN = range(3)


def ngram_cdf(ngram: int, favor_shorter: bool) -> np.ndarray:
    """The cdf `np.random.choice(ngrams, p=pvals)` searches in ALBERT's
    script, computed with the same numpy operations so that every float is
    the script's: weights 1/n, normalized, reversed unless favoring shorter
    n-grams."""
    pvals = 1. / np.arange(1, ngram + 1)
    pvals /= pvals.sum(keepdims=True)
    if not favor_shorter:
        pvals = pvals[::-1]
    p = pvals[:ngram] / pvals[:ngram].sum(keepdims=True)
    cdf = p.cumsum()
    cdf /= cdf[-1]
    return cdf


def num_to_predict(length: int, config: MaskingConfig) -> int:
    """The original's budget: 15% of the length, Python's round, at least 1."""
    return min(config.max_predictions_per_seq,
               max(1, int(round(length * config.masked_lm_prob))))


def masking_config(vocab: Vocabulary, *, masked_lm_prob: float,
                   max_predictions_per_seq: int, do_whole_word_mask: bool, ngram: int = 0,
                   favor_shorter_ngram: bool = True, max_ngram_size: int = 0) -> MaskingConfig:
    """Masking as the flags ask: the pipeline builds it from its flags, the
    loaders' dynamic masking from the manifest's, through this one function."""
    return MaskingConfig(
        masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions_per_seq,
        vocab_size=len(vocab), mask_id=vocab.mask_id, cls_id=vocab.cls_id,
        sep_id=vocab.sep_id,
        continuation=tuple(vocab.continuation_flags()) if do_whole_word_mask else None,
        ngram=ngram, favor_shorter_ngram=favor_shorter_ngram, max_ngram_size=max_ngram_size)


def tables(config: MaskingConfig, max_seq_length: int, *, reference: bool = False
           ) -> MaskingTables:
    """The compiled code's view of `config`, for sequences up to max_seq_length."""
    continuation = np.zeros(1, dtype=np.bool_)
    if config.continuation is not None:
        continuation = np.array(config.continuation, dtype=np.bool_)
    return MaskingTables(
        budgets=np.array([num_to_predict(n, config) for n in range(max_seq_length + 1)],
                         dtype=np.int64),
        set_sizes=np.array([sample_set_size(k)
                            for k in range(config.max_predictions_per_seq + 1)], dtype=np.int64),
        cls_id=int(config.cls_id), sep_id=int(config.sep_id), mask_id=int(config.mask_id),
        vocab_size=int(config.vocab_size), continuation=continuation,
        whole_word=config.continuation is not None, reference=bool(reference),
        policy=(ALBERT_NGRAMS if config.ngram else MODEL_GARDEN if config.max_ngram_size
                else BERT),
        ngram_cdf=ngram_cdf(config.ngram, config.favor_shorter_ngram) if config.ngram
        else np.ones(1),
        # itertools.accumulate's float sums, as the Model Garden computes them.
        cum_weights=np.array(list(itertools.accumulate(
            1. / n for n in range(1, max(1, config.max_ngram_size) + 1)))))


def scratch(max_seq_length: int, max_ngram_size: int = 1) -> MaskingScratch:
    """Scratch arrays for sequences up to max_seq_length (and, for the Model
    Garden's masking, n-grams up to max_ngram_size)."""
    per_token = [np.empty(max_seq_length + 1, dtype=np.int64) for _ in range(9)]
    spans = max(1, max_ngram_size) * (max_seq_length + 1)
    return MaskingScratch(*per_token, *(np.empty(spans, dtype=np.int64) for _ in range(3)),
                          np.empty(max_ngram_size + 2, dtype=np.int64),
                          np.empty(max_ngram_size + 2, dtype=np.int64))


# Inlined, as the per-instance steps below: a call would copy the tables and
# scratch tuples by value, a cost felt on short documents.
@njit(cache=True, inline="always")
def _candidates(tokens, marks, m, w) -> tuple[int, int]:
    """Every position but [CLS]/[SEP] into w.candidates, grouped (one each,
    or whole words: a `##` piece, or a position marked as continuing a
    segmented word, joins the previous candidate, even across a [SEP], as in
    the original) with group g being
    w.candidates[w.group_starts[g]:w.group_starts[g + 1]]; returns
    (candidates, groups)."""
    count = 0
    groups = 0
    for index in range(len(tokens)):
        token = tokens[index]
        if token == m.cls_id or token == m.sep_id:
            continue
        w.candidates[count] = index
        if groups == 0 or not (m.whole_word and (m.continuation[token] or marks[index])):
            w.group_starts[groups] = count
            groups += 1
        count += 1
    w.group_starts[groups] = count
    return count, groups


@njit(cache=True, inline="always")  # per masked token: no call, no tables passed
def _replace(mt, output, index, mask_id, vocab_size) -> None:
    """The 80/10/10 rule: [MASK], kept, or a random id."""
    if uniform(mt) < 0.8:
        output[index] = mask_id
    elif uniform(mt) >= 0.5:
        output[index] = randint(mt, 0, vocab_size - 1)


@njit(cache=True, inline="always")
def _bert(mt, tokens, marks, output, m, w) -> int:
    """BERT's create_masked_lm_predictions: groups shuffled, taken while they
    fit the budget (a group that does not fit is skipped, a later smaller
    one may still fit), each position replaced as it is taken. Returns k,
    the positions being w.chosen[:k]."""
    budget = m.budgets[len(tokens)]
    count, groups = _candidates(tokens, marks, m, w)
    if not m.whole_word and not m.reference:
        # Per token, `random.sample` of the chosen: the same distribution as
        # the original's shuffle of every candidate, at a fraction of the draws.
        k = min(budget, count)
        sample_into(mt, w.candidates[:count], k, m.set_sizes[k], w.chosen, w.work)
        for c in range(k):
            _replace(mt, output, w.chosen[c], m.mask_id, m.vocab_size)
        return k
    order = w.order[:groups]
    order[:] = np.arange(groups)
    shuffle(mt, order)
    taken = 0
    for g in order:
        if taken >= budget:
            break
        if taken + w.group_starts[g + 1] - w.group_starts[g] <= budget:
            for c in range(w.group_starts[g], w.group_starts[g + 1]):
                w.chosen[taken] = w.candidates[c]
                _replace(mt, output, w.chosen[taken], m.mask_id, m.vocab_size)
                taken += 1
    return taken


@njit(cache=True)
def _albert_ngrams(mt, lengths, tokens, marks, output, m, w) -> int:
    """ALBERT's create_masked_lm_predictions (--ngram): an entry per group
    (the n-grams of groups starting there, clipped at the end), entries
    shuffled; for each, until the budget is full, a length n is drawn from
    `lengths` (np.random.choice with weights 1/n in ALBERT's script, a
    generator of its own) and the longest of the n..1-grams that fits the
    budget is taken unless it overlaps a taken one; then the entries are
    shuffled once more (for --do_permutation, unused, but drawn)."""
    budget = m.budgets[len(tokens)]
    _, groups = _candidates(tokens, marks, m, w)
    order = w.order[:groups]
    order[:] = np.arange(groups)
    shuffle(mt, order)
    covered = w.covered[:len(tokens)]
    covered[:] = 0
    taken = 0
    for e in order:
        if taken >= budget:
            break
        u = uniform(lengths)
        n = 1
        while n < len(m.ngram_cdf) and m.ngram_cdf[n - 1] <= u:
            n += 1
        first = w.group_starts[e]
        while n > 0 and taken + w.group_starts[min(e + n, groups)] - first > budget:
            n -= 1
        if n == 0:
            continue
        last = w.group_starts[min(e + n, groups)]
        overlaps = False
        for c in range(first, last):
            overlaps = overlaps or covered[w.candidates[c]] != 0
        if overlaps:
            continue
        for c in range(first, last):
            covered[w.candidates[c]] = 1
            w.chosen[taken] = w.candidates[c]
            _replace(mt, output, w.chosen[taken], m.mask_id, m.vocab_size)
            taken += 1
    shuffle(mt, order)
    return taken


@njit(cache=True)
def _model_garden_grams(tokens, marks, m, w) -> int:
    """The Model Garden's `_tokens_to_grams` (whole words: a `##` piece
    extends the word before it, unless [CLS]/[SEP] comes between), or one
    gram per token other than [CLS]/[SEP]; returns the number of grams."""
    grams = 0
    start = -1
    for index in range(len(tokens)):
        token = tokens[index]
        special = token == m.cls_id or token == m.sep_id
        if m.whole_word:
            if start >= 0 and (m.continuation[token] or marks[index]):
                continue
            if start >= 0:
                w.gram_begin[grams], w.gram_end[grams] = start, index
                grams += 1
            start = -1 if special else index
        elif not special:
            w.gram_begin[grams], w.gram_end[grams] = index, index + 1
            grams += 1
    if start >= 0:
        w.gram_begin[grams], w.gram_end[grams] = start, len(tokens)
        grams += 1
    return grams


@njit(cache=True)
def _model_garden(mt, lengths, tokens, marks, output, m, w) -> int:
    """The TF Model Garden's create_masked_lm_predictions (`_masking_ngrams`):
    for each length n, the spans of n touching grams, each list shuffled;
    until the budget is full or no span is left, a length is drawn from
    `lengths` (`random.choices` with cum_weights of 1/n: the global generator
    in the script) and that list's last span is popped and taken unless it
    overflows or overlaps (a length that cannot fit empties its list); each
    taken span is then replaced as one: all [MASK], all kept, or each token
    a random id."""
    budget = m.budgets[len(tokens)]
    grams = _model_garden_grams(tokens, marks, m, w)
    max_n = len(m.cum_weights)
    count = 0
    for n in range(1, max_n + 1):
        w.list_start[n] = count
        for g in range(grams - n + 1):
            touching = True
            for j in range(g, g + n - 1):
                touching = touching and w.gram_end[j] == w.gram_begin[j + 1]
            if touching:
                w.span_begin[count], w.span_end[count] = w.gram_begin[g], w.gram_end[g + n - 1]
                count += 1
        w.list_length[n] = count - w.list_start[n]
        order = w.order[:w.list_length[n]]  # rng.shuffle(ngrams[n])
        order[:] = np.arange(w.list_length[n])
        shuffle(mt, order)
        w.span_order[w.list_start[n]:count] = order + w.list_start[n]
    covered = w.covered[:len(tokens)]
    covered[:] = 0
    masked = 0
    left = count
    spans = 0
    total = m.cum_weights[max_n - 1]
    while masked < budget and left > 0:
        x = uniform(lengths) * total
        n = 1
        while n < max_n and m.cum_weights[n - 1] <= x:  # bisect_right, hi = N - 1
            n += 1
        if masked + n > budget:
            left -= w.list_length[n]
            w.list_length[n] = 0
            continue
        if w.list_length[n] == 0:
            continue
        w.list_length[n] -= 1
        left -= 1
        span = w.span_order[w.list_start[n] + w.list_length[n]]
        begin, end = w.span_begin[span], w.span_end[span]
        if masked + end - begin > budget:
            continue
        overlaps = False
        for index in range(begin, end):
            overlaps = overlaps or covered[index] != 0
        if overlaps:
            continue
        covered[begin:end] = 1
        masked += end - begin
        w.group_starts[spans] = span  # taken spans, in order
        spans += 1
    taken = 0
    for s in range(spans):
        begin, end = w.span_begin[w.group_starts[s]], w.span_end[w.group_starts[s]]
        action = 0 if uniform(mt) < 0.8 else 1 if uniform(mt) < 0.5 else 2
        for index in range(begin, end):
            if action == 0:
                output[index] = m.mask_id
            elif action == 2:
                output[index] = randint(mt, 0, m.vocab_size - 1)
            w.chosen[taken] = index
            taken += 1
    return taken


@njit(cache=True, inline="always")
def mask_instance(mt, lengths, tokens, marks, output, m, w) -> int:
    """Masks `tokens` into `output` (same length) with the generator `mt`
    (and `lengths` for the n-gram lengths of ALBERT and the Model Garden,
    drawn from a global generator in their scripts: its own in reference
    mode, `mt` otherwise); `marks` flags the positions that continue a
    segmented word (transforms.tokenize.chinese_words). Returns k, the sorted positions being
    w.chosen[:k] and their original ids w.labels[:k]."""
    output[:len(tokens)] = tokens
    if m.policy == ALBERT_NGRAMS:
        k = _albert_ngrams(mt, lengths, tokens, marks, output, m, w)
    elif m.policy == MODEL_GARDEN:
        k = _model_garden(mt, lengths, tokens, marks, output, m, w)
    else:
        k = _bert(mt, tokens, marks, output, m, w)
    w.chosen[:k].sort()
    for c in range(k):
        w.labels[c] = tokens[w.chosen[c]]
    return k


class _Prepared(NamedTuple):
    config: MaskingConfig
    tables: MaskingTables
    scratch: MaskingScratch
    max_length: int


_prepared: list[_Prepared] = []  # the last config's tables: callers reuse one config


def mask_tokens(tokens: Sequence[int], config: MaskingConfig, rng: random.Random) -> Masked:
    """`mask_instance` for Python callers (dynamic masking, the d2l recipe),
    drawing from `rng`, which is left as if it had made the draws itself."""
    tokens = np.asarray(tokens, dtype=np.int64)
    if not _prepared or _prepared[0].config is not config or _prepared[0].max_length < len(tokens):
        length = max(len(tokens), 512)
        _prepared[:] = [_Prepared(config, tables(config, length),
                                  scratch(length, config.max_ngram_size), length)]
    _, m, w, _ = _prepared[0]
    output = np.empty_like(tokens)
    with generator_state(rng) as mt:
        k = mask_instance(mt, mt, tokens, np.zeros(len(tokens), np.uint8), output, m, w)
    positions = w.chosen[:k].tolist()
    return Masked(tokens=output.tolist(), positions=positions, labels=w.labels[:k].tolist())
