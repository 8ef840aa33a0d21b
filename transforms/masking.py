"""Masked-LM predictions: the original's `create_masked_lm_predictions`, on
token ids, compiled, and the one definition of masking in this project.

The pipeline's record kernels (transforms.instances) call `mask_instance`
for each instance as soon as it is built, where the original draws its
masking randomness; the loaders' dynamic masking and the d2l recipe call
`mask_tokens`, which runs the same function with a `random.Random` (its
state is handed to the compiled generator and back). Read it beside the
original: candidates are every position but [CLS]/[SEP], grouped into whole
words when `--do_whole_word_mask` (a `##` piece joins the previous
candidate, even across a [SEP]); the groups are shuffled and taken while
they fit the budget (15% of the length, Python's round, at least 1, at most
`max_predictions_per_seq`); each chosen position is replaced 80% [MASK], 10%
kept, 10% a random id; positions are returned sorted.

Per-token masking outside `reference` mode draws the chosen positions with
`random.sample` instead of shuffling every candidate: the same distribution
at a fraction of the draws. `reference` mode (`--reference_compatible`)
makes the original's draws exactly.
"""

from __future__ import annotations

import dataclasses
import random
from typing import NamedTuple, Sequence

import numpy as np
from numba import njit

from transforms.jit_random import (generator_state, randint, sample_into, sample_set_size,
                                   shuffle)
from transforms.jit_random import random as uniform
from transforms.vocabulary import Vocabulary


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
    policy: int  # BERT or ALBERT_NGRAMS
    ngram_cdf: np.ndarray  # ALBERT: np.random.choice's cdf over n-gram lengths 1..N


class MaskingScratch(NamedTuple):
    """Scratch arrays of `mask_instance`, allocated once (`scratch`)."""

    candidates: np.ndarray
    chosen: np.ndarray
    group_starts: np.ndarray
    order: np.ndarray
    work: np.ndarray
    labels: np.ndarray
    covered: np.ndarray


# Masking policies, each its anchor's create_masked_lm_predictions.
BERT, ALBERT_NGRAMS = range(2)


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
                   favor_shorter_ngram: bool = True) -> MaskingConfig:
    """Masking as the flags ask: the pipeline builds it from its flags, the
    loaders' dynamic masking from the manifest's, through this one function."""
    return MaskingConfig(
        masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions_per_seq,
        vocab_size=len(vocab), mask_id=vocab.mask_id, cls_id=vocab.cls_id,
        sep_id=vocab.sep_id,
        continuation=tuple(vocab.continuation_flags()) if do_whole_word_mask else None,
        ngram=ngram, favor_shorter_ngram=favor_shorter_ngram)


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
        policy=ALBERT_NGRAMS if config.ngram else BERT,
        ngram_cdf=ngram_cdf(config.ngram, config.favor_shorter_ngram) if config.ngram
        else np.ones(1))


def scratch(max_seq_length: int) -> MaskingScratch:
    return MaskingScratch(*(np.empty(max_seq_length + 1, dtype=np.int64) for _ in range(7)))


@njit(cache=True)
def _candidates(tokens, m, w) -> tuple[int, int]:
    """Every position but [CLS]/[SEP] into w.candidates, grouped (one each,
    or whole words: a `##` piece joins the previous candidate) with group g
    being w.candidates[w.group_starts[g]:w.group_starts[g + 1]]; returns
    (candidates, groups)."""
    count = 0
    groups = 0
    for index in range(len(tokens)):
        token = tokens[index]
        if token == m.cls_id or token == m.sep_id:
            continue
        w.candidates[count] = index
        if groups == 0 or not (m.whole_word and m.continuation[token]):
            w.group_starts[groups] = count
            groups += 1
        count += 1
    w.group_starts[groups] = count
    return count, groups


@njit(cache=True)
def _replace(mt, output, index, m) -> None:
    """The 80/10/10 rule: [MASK], kept, or a random id."""
    if uniform(mt) < 0.8:
        output[index] = m.mask_id
    elif uniform(mt) >= 0.5:
        output[index] = randint(mt, 0, m.vocab_size - 1)


@njit(cache=True)
def _bert(mt, tokens, output, m, w) -> int:
    """BERT's create_masked_lm_predictions: groups shuffled, taken while they
    fit the budget (a group that does not fit is skipped, a later smaller
    one may still fit), each position replaced as it is taken. Returns k,
    the positions being w.chosen[:k]."""
    budget = m.budgets[len(tokens)]
    count, groups = _candidates(tokens, m, w)
    if not m.whole_word and not m.reference:
        # Per token, `random.sample` of the chosen: the same distribution as
        # the original's shuffle of every candidate, at a fraction of the draws.
        k = min(budget, count)
        sample_into(mt, w.candidates[:count], k, m.set_sizes[k], w.chosen, w.work)
        for c in range(k):
            _replace(mt, output, w.chosen[c], m)
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
                _replace(mt, output, w.chosen[taken], m)
                taken += 1
    return taken


@njit(cache=True)
def _albert_ngrams(mt, lengths, tokens, output, m, w) -> int:
    """ALBERT's create_masked_lm_predictions (--ngram): an entry per group
    (the n-grams of groups starting there, clipped at the end), entries
    shuffled; for each, until the budget is full, a length n is drawn from
    `lengths` (np.random.choice with weights 1/n in ALBERT's script, a
    generator of its own) and the longest of the n..1-grams that fits the
    budget is taken unless it overlaps a taken one; then the entries are
    shuffled once more (for --do_permutation, unused, but drawn)."""
    budget = m.budgets[len(tokens)]
    _, groups = _candidates(tokens, m, w)
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
            _replace(mt, output, w.chosen[taken], m)
            taken += 1
    shuffle(mt, order)
    return taken


@njit(cache=True)
def mask_instance(mt, lengths, tokens, output, m, w) -> int:
    """Masks `tokens` into `output` (same length) with the generator `mt`
    (and `lengths` for ALBERT's n-gram lengths: its own generator in
    reference mode, `mt` otherwise); returns k, the sorted positions being
    w.chosen[:k] and their original ids w.labels[:k]."""
    output[:len(tokens)] = tokens
    if m.policy == ALBERT_NGRAMS:
        k = _albert_ngrams(mt, lengths, tokens, output, m, w)
    else:
        k = _bert(mt, tokens, output, m, w)
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
        _prepared[:] = [_Prepared(config, tables(config, length), scratch(length), length)]
    _, m, w, _ = _prepared[0]
    output = np.empty_like(tokens)
    with generator_state(rng) as mt:
        k = mask_instance(mt, mt, tokens, output, m, w)
    positions = w.chosen[:k].tolist()
    return Masked(tokens=output.tolist(), positions=positions, labels=w.labels[:k].tolist())
