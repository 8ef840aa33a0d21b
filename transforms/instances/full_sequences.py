"""Full sequences without a sentence-pair task (`--next_sentence=none`): ELECTRA's
`build_pretraining_dataset.py` `ExampleBuilder`, compiled, the one definition of
it (RoBERTa-style inputs filled to the maximum length across a document's
sentences).

Read it beside `ExampleBuilder.add_line` and `_create_example` (`_example`,
`next_target` and `create_sequences` follow them step by step). The script
carries its length target across documents (reference mode does too); the
pipeline draws a copy's first target as the script draws one after an
example: the same distribution, without one document depending on another.
"""

from __future__ import annotations

from numba import njit

from bert_pretraining_data.transforms.instances.pairs import Stat, emit
from bert_pretraining_data.transforms.mersenne_twister import randint, random
from bert_pretraining_data.transforms.seeds import shuffle_key


@njit(cache=True)
def next_target(mt, max_seq_length: int) -> int:
    """The target after an example: the maximum, or a random length (p=0.05)."""
    if random(mt) < 0.05:
        return randint(mt, 5, max_seq_length)
    return max_seq_length


@njit(cache=True)
def _example(mt, tokens, bounds, first, last, target, s, w):
    """The example of sentences first..last - 1 into w.instance; returns
    (its length, where segment B starts (the length when there is no B),
    tokens dropped by the cut).

    `_create_example`: one segment with p=0.1; otherwise a sentence joins
    segment A while A is empty or under half the target, or, the first time
    it would cross it, with p=0.5; the others join B (A and B need not be
    contiguous). A is cut to max_seq_length - 2 tokens, B to what is left."""
    first_target = 100000 if random(mt) < 0.1 else (target - 3) // 2
    side = w.masking.work  # per sentence: 0 = A, 1 = B
    a_length = 0
    b_length = 0
    for i in range(first, last):
        size = bounds[i + 1] - bounds[i]
        if (a_length == 0 or a_length + size < first_target
                or (b_length == 0 and a_length < first_target and random(mt) < 0.5)):
            side[i - first] = 0
            a_length += size
        else:
            side[i - first] = 1
            b_length += size
    kept = (min(a_length, s.max_seq_length - 2), 0)
    kept = (kept[0], min(b_length, max(0, s.max_seq_length - kept[0] - 3)))
    instance = w.instance
    instance[0] = s.cls_id
    n = 1
    b_start = 0
    for segment in range(2):
        start = n
        if segment == 1:
            b_start = n
            if kept[1] == 0:
                break
        for i in range(first, last):
            if side[i - first] == segment:
                take = min(bounds[i + 1] - bounds[i], kept[segment] - (n - start))
                instance[n:n + take] = tokens[bounds[i]:bounds[i] + take]
                n += take
        instance[n] = s.sep_id
        n += 1
    return n, b_start, a_length + b_length - kept[0] - kept[1]


@njit(cache=True)
def create_sequences(mt, tokens, bounds, target, seed_lo, seed_hi, dupe, s, w, entries, stats):
    """Every example of one copy of a document (tokens, sentence bounds),
    starting with `target`; example i gets the shuffle key of (dupe, i).
    As `add_line`, sentences are added until their length reaches the target
    (the one that crossed it included), and the document's end makes an
    example of what is left. Returns (target after the last example, the
    EntryBuffer)."""
    num_sentences = len(bounds) - 1
    first = 0
    length = 0
    index = 0
    for i in range(num_sentences + 1):
        if i < num_sentences:
            length += bounds[i + 1] - bounds[i]
            if length < target:
                continue
            last = i + 1
        elif length == 0:  # the document's end, nothing left
            break
        else:
            last = num_sentences
        n, b_start, dropped = _example(mt, tokens, bounds, first, last, target, s, w)
        stats[Stat.TRUNCATED_TOKENS] += dropped
        target = next_target(mt, s.max_seq_length)
        entries = emit(mt, w.instance[:n], b_start, False,
                       shuffle_key(seed_lo, seed_hi, dupe, index), s, w, entries, stats)
        index += 1
        first = last
        length = 0
    return target, entries


@njit(cache=True)
def _emit_block(mt, n, index, seed_lo, seed_hi, dupe, s, w, entries, stats):
    """The block of n tokens at w.instance[1:n + 1], framed CLS block SEP, as
    one single-segment instance with the shuffle key of (dupe, index)."""
    w.instance[0] = s.cls_id
    w.instance[n + 1] = s.sep_id
    return emit(mt, w.instance[:n + 2], n + 2, False, shuffle_key(seed_lo, seed_hi, dupe, index),
                s, w, entries, stats)


@njit(cache=True)
def create_doc_sentences(mt, tokens, bounds, seed_lo, seed_hi, dupe, s, w, entries, stats):
    """RoBERTa's DOC-SENTENCES for one copy of a document (`--recipe=roberta`):
    blocks of whole consecutive sentences, each as long as fits max_seq_length
    with its CLS and SEP, never crossing into another document; a sentence
    longer than a block is cut into blocks of its own (fairseq's
    `TokenBlockDataset`, break_mode `complete_doc`, without dropping any
    token). Block i gets the shuffle key of (dupe, i). Returns the EntryBuffer."""
    block = s.max_seq_length - 2
    n = 0
    index = 0
    for i in range(len(bounds) - 1):
        start, end = bounds[i], bounds[i + 1]
        if n > 0 and n + end - start > block:
            entries = _emit_block(mt, n, index, seed_lo, seed_hi, dupe, s, w, entries, stats)
            index += 1
            n = 0
        while end - start > block:
            w.instance[1:block + 1] = tokens[start:start + block]
            entries = _emit_block(mt, block, index, seed_lo, seed_hi, dupe, s, w, entries, stats)
            index += 1
            start += block
        w.instance[1 + n:1 + n + end - start] = tokens[start:end]
        n += end - start
    if n > 0:
        entries = _emit_block(mt, n, index, seed_lo, seed_hi, dupe, s, w, entries, stats)
    return entries
