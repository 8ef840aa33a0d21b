"""Per-document seeds: one sha256 per document, positions derived from it
(transforms.seeds), checked against plain-integer oracles and CPython's
generator."""

from __future__ import annotations

import hashlib
import random

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from bert_pretraining_data.transforms import mersenne_twister as jr
from bert_pretraining_data.transforms import seeds
from bert_pretraining_data.transforms.randomness import encode_parts

MASK64 = (1 << 64) - 1


def oracle_mix64(z: int) -> int:
    """splitmix64's finalizer on Python ints (Steele, Lea and Flood 2014)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def oracle_derive(lo: int, hi: int, stream: int, dupe: int, index: int) -> tuple[int, int]:
    position = (stream << 62) | (dupe << 40) | index
    return (oracle_mix64(lo ^ oracle_mix64(position)),
            oracle_mix64(hi ^ oracle_mix64(position ^ 0x9E3779B97F4A7C15)))


words = st.integers(0, MASK64)


@given(words)
def test_mix64_is_splitmix64s_finalizer(z):
    assert int(seeds.mix64(np.uint64(z))) == oracle_mix64(z)


@given(words, words, st.sampled_from([seeds.INSTANCE_STREAM, seeds.MASK_STREAM,
                                   seeds.SHUFFLE_STREAM]),
       st.integers(0, seeds.MAX_DUPE_FACTOR - 1), st.integers(0, 2**40 - 1))
def test_derive_and_shuffle_key_follow_the_oracle(lo, hi, stream, dupe, index):
    derived = seeds.derive(np.uint64(lo), np.uint64(hi), stream, dupe, index)
    assert tuple(map(int, derived)) == oracle_derive(lo, hi, stream, dupe, index)
    key = seeds.shuffle_key(np.uint64(lo), np.uint64(hi), dupe, index)
    assert key == oracle_derive(lo, hi, seeds.SHUFFLE_STREAM, dupe, index)[0] >> 1 < 2**63


def test_every_position_of_a_document_gets_its_own_seed():
    lo, hi = map(np.uint64, seeds.document_seed(12345, "wiki.txt:42"))
    derived = {tuple(map(int, seeds.derive(lo, hi, stream, dupe, index)))
               for stream in range(3) for dupe in range(10) for index in range(100)}
    assert len(derived) == 3000


def test_document_seed_is_sha256_of_the_seed_and_key():
    digest = hashlib.sha256(encode_parts(("document", 7, "a.txt:0"))).digest()
    assert seeds.document_seed(7, "a.txt:0") == (int.from_bytes(digest[:8], "little"),
                                                  int.from_bytes(digest[8:16], "little"))
    assert seeds.document_seed(8, "a.txt:0") != seeds.document_seed(7, "a.txt:0")
    assert seeds.document_seed(7, "a.txt:1") != seeds.document_seed(7, "a.txt:0")


@given(st.sampled_from([0, 1, 5, 2**32 - 1, 2**32, 2**63, MASK64]) | words,
       st.sampled_from([0, 1, 2**40]) | words)
def test_key_words_are_the_ints_words(lo, hi):
    key = np.zeros(jr.SEED_WORDS, dtype=np.int64)
    length = seeds.key_words(np.uint64(lo), np.uint64(hi), key)
    expected, expected_length = jr.seed_words((hi << 64) | lo)
    assert (length, key[:length].tolist()) == (expected_length, expected.tolist())


def test_compiled_generator_and_position_rng_draw_alike():
    seed = seeds.document_seed(3, "doc:0")
    for stream, dupe, index in [(seeds.INSTANCE_STREAM, 0, 0), (seeds.MASK_STREAM, 9, 1234)]:
        key = np.zeros(jr.SEED_WORDS, dtype=np.int64)
        length = seeds.seed_key(np.uint64(seed[0]), np.uint64(seed[1]), stream, dupe, index, key)
        state = jr.new_state()
        jr.seed_state(state, key, length)
        theirs = seeds.position_rng(seed, stream, dupe, index)
        assert [jr.random(state) for _ in range(5)] == [theirs.random() for _ in range(5)]
        assert isinstance(theirs, random.Random)
