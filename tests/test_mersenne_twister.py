"""The compiled generator against CPython's random.Random itself: same seeds,
same draws, in the same order."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bert_pretraining_data.transforms import mersenne_twister as jr

SEEDS = [0, 1, 12345, 2**32 - 1, 2**32, 2**64 + 7, 2**128 - 1, 2**96, -5,
         int.from_bytes(hashlib.sha256(b"x").digest()[:16], "big")]


def seeded(seed: int) -> np.ndarray:
    state = jr.new_state()
    jr.seed_state(state, *jr.seed_words(seed))
    return state


@pytest.mark.parametrize("seed", SEEDS)
def test_words_and_floats_equal_cpythons(seed):
    ours, theirs = seeded(seed), random.Random(seed)
    # 1,500 draws cross two twists of the state.
    assert [jr.genrand_uint32(ours) for _ in range(1500)] == \
        [theirs.getrandbits(32) for _ in range(1500)]
    assert [jr.random(ours) for _ in range(700)] == [theirs.random() for _ in range(700)]


@given(st.integers(0, 2**128 - 1), st.lists(st.integers(1, 2**32 - 2), min_size=1, max_size=40))
def test_randbelow_and_randint_equal_cpythons(seed, bounds):
    ours, theirs = seeded(seed), random.Random(seed)
    for n in bounds:
        assert jr.randbelow(ours, n) == theirs._randbelow(n)
        assert jr.randint(ours, 0, n - 1) == theirs.randint(0, n - 1)
        assert jr.randint(ours, 3, n + 3) == theirs.randint(3, n + 3)


@given(st.integers(0, 2**128 - 1), st.integers(0, 300))
def test_shuffle_equals_cpythons(seed, length):
    values = np.arange(length, dtype=np.int64)
    jr.shuffle(seeded(seed), values)
    expected = list(range(length))
    random.Random(seed).shuffle(expected)
    assert values.tolist() == expected


@given(st.integers(0, 2**128 - 1), st.integers(0, 300), st.integers(0, 40))
def test_sample_equals_cpythons_both_methods(seed, n, k):
    k = min(k, n)
    population = np.arange(100, 100 + n, dtype=np.int64)
    ours = np.full(k + 2, -1, dtype=np.int64)  # two spare slots stay untouched
    jr.sample_into(seeded(seed), population, k, jr.sample_set_size(k), ours,
                   np.empty(n, dtype=np.int64))
    assert ours[:k].tolist() == random.Random(seed).sample(population.tolist(), k)
    assert ours[k:].tolist() == [-1, -1]
    assert population.tolist() == list(range(100, 100 + n))


@pytest.mark.parametrize("count", [1, 5, 40, 64])
def test_seeding_many_keys_at_once_equals_one_at_a_time(count):
    digests = b"".join(hashlib.sha256(bytes([i, count])).digest()[:16] for i in range(count))
    digests = bytes(12) + digests[12:]  # a short key (one word) among them
    keys = np.zeros((count, jr.SEED_WORDS), dtype=np.int64)
    lengths = np.zeros(count, dtype=np.int64)
    for c in range(count):
        words, lengths[c] = jr.seed_words(int.from_bytes(digests[16 * c:16 * c + 16], "big"))
        keys[c, :lengths[c]] = words
    spare = count + 3  # spare keys' words stay untouched
    lanes = jr.Lanes(np.zeros((jr.N, spare), dtype=np.uint32),
                     np.zeros((spare, jr.N), dtype=np.uint32))
    jr.seed_lanes(keys, lengths, lanes)
    assert not lanes.seeded[count:].any()
    for c in range(count):
        seed = int.from_bytes(digests[16 * c:16 * c + 16], "big")
        assert (lanes.seeded[c] == seeded(seed)[:jr.N]).all()
        mt = jr.new_state()
        jr.twisted_state(lanes, c, mt)
        theirs = random.Random(seed)  # past the first twist too
        assert [jr.genrand_uint32(mt) for _ in range(jr.N + 5)] == [
            theirs.getrandbits(32) for _ in range(jr.N + 5)]
        assert [jr.random(mt) for _ in range(3)] == [theirs.random() for _ in range(3)]


def test_randbelow_refuses_what_needs_more_than_32_bits():
    with pytest.raises(ValueError, match="2\\*\\*32"):
        jr.randbelow(seeded(0), 2**32)


def test_sample_covers_both_methods():
    assert jr.sample_set_size(20) == 85  # 126 candidates -> set method, 60 -> pool
    assert jr.sample_set_size(3) == 21
