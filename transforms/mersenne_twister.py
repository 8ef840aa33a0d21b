"""CPython's `random.Random`, draw for draw, compiled with numba.

The output bytes are defined by the draws of `random.Random` objects seeded
from keys, and the compiled kernels must make the same draws: so this is
CPython's Mersenne Twister with its int seeding (`init_by_array`), `random()`,
`getrandbits(k)` for k <= 32 and Lib/random.py's `_randbelow`, `randint`,
`shuffle` and `sample` (tests/test_mersenne_twister.py checks each). A state
is an int64 array of N + 1 values, the 624 words then the next word's index:
int64 because numba turns mixed unsigned/signed arithmetic into floats.
"""

from __future__ import annotations

import contextlib
import math
import random as _random
from typing import Iterator, NamedTuple

import numpy as np
from numba import njit

N = 624
_M = 397
_MATRIX_A = 0x9908B0DF
_UPPER = 0x80000000
_LOWER = 0x7FFFFFFF
_WORD = 0xFFFFFFFF
# Seed words of a 128-bit seed (transforms.seeds derives 128-bit seeds).
SEED_WORDS = 4


@contextlib.contextmanager
def generator_state(rng: _random.Random) -> Iterator[np.ndarray]:
    """`rng`'s state as a compiled generator's, for Python callers of the
    kernels; on exit `rng` continues after the draws made from it."""
    version, state, gauss = rng.getstate()
    mt = np.array(state, dtype=np.int64)  # the 624 words, then the index
    yield mt
    rng.setstate((version, tuple(mt.tolist()), gauss))


def seed_words(seed: int) -> tuple[np.ndarray, int]:
    """The key CPython's `random.seed(int)` feeds init_by_array: the 32-bit
    words of abs(seed), least significant first, at least one."""
    value = abs(seed)
    words = []
    while value:
        words.append(value & _WORD)
        value >>= 32
    words = words or [0]
    return np.array(words, dtype=np.int64), len(words)


@njit(cache=True)
def new_state() -> np.ndarray:
    return np.zeros(N + 1, dtype=np.int64)


def _genrand_base() -> np.ndarray:
    """init_genrand(19650218): where init_by_array starts, whatever the key."""
    mt = np.zeros(N, dtype=np.int64)
    mt[0] = 19650218
    for i in range(1, N):
        prev = int(mt[i - 1])
        mt[i] = (1812433253 * (prev ^ (prev >> 30)) + i) & _WORD
    return mt


_BASE = _genrand_base()


@njit(cache=True)
def seed_state(mt: np.ndarray, key: np.ndarray, key_length: int) -> None:
    """init_by_array(key[:key_length]), as `random.Random(int)` does."""
    mt[:N] = _BASE
    i, j = 1, 0
    for _ in range(max(N, key_length)):
        prev = mt[i - 1]
        mt[i] = ((mt[i] ^ ((prev ^ (prev >> 30)) * 1664525)) + key[j] + j) & _WORD
        i += 1
        j += 1
        if i >= N:
            mt[0] = mt[N - 1]
            i = 1
        if j >= key_length:
            j = 0
    for _ in range(N - 1):
        prev = mt[i - 1]
        mt[i] = ((mt[i] ^ ((prev ^ (prev >> 30)) * 1566083941)) - i) & _WORD
        i += 1
        if i >= N:
            mt[0] = mt[N - 1]
            i = 1
    mt[0] = 0x80000000
    mt[N] = N


def seed_genrand(mt: np.ndarray, seed: int) -> None:
    """init_genrand(seed): numpy's legacy `np.random.seed(seed)` for a 32-bit
    seed, whose `random_sample()` is then `random(mt)` (the same 53-bit
    double); the ALBERT script draws its n-gram lengths from it."""
    if not 0 <= seed < 2**32:
        raise ValueError(f"numpy's legacy seed must be in [0, 2**32), got {seed}")
    mt[0] = seed
    for i in range(1, N):
        prev = int(mt[i - 1])
        mt[i] = (1812433253 * (prev ^ (prev >> 30)) + i) & _WORD
    mt[N] = N


_KEY_CYCLE = 12  # a multiple of every key length (1-4 words of a 128-bit seed)
_BASE_LANE = _BASE.astype(np.uint32)
_M1, _M2, _S30 = np.uint32(1664525), np.uint32(1566083941), np.uint32(30)
_TRANSPOSE_ROWS = 16  # 64 bytes of a key's words


class Lanes(NamedTuple):
    """Scratch of `seed_lanes`: `steps` (uint32, N rows, a column a key), where
    the keys' chains advance side by side, and `seeded` (a row a key), the
    words they end with, which `twisted_state` reads."""

    steps: np.ndarray
    seeded: np.ndarray


def lanes(count: int) -> Lanes:
    """Scratch of `seed_lanes` for up to `count` keys at once."""
    return Lanes(np.empty((N, count), dtype=np.uint32), np.empty((count, N), dtype=np.uint32))


@njit(cache=True)
def seed_lanes(keys: np.ndarray, key_lengths: np.ndarray, lanes: Lanes) -> None:
    """seed_state for many keys (rows of `keys`, at most SEED_WORDS words
    each) side by side: row c of `lanes.seeded` becomes the 624 words
    `random.Random` seeded with key c holds (its index is N);
    `twisted_state` makes a generator of a row.

    Seeding is a chain of ~1,250 dependent steps per key, so one key at a
    time costs as much compiled as in CPython; the chains of different keys
    are independent, so every step of all of them is one loop over a row of
    `lanes.steps`, which the compiler vectorises. Index `steps[i, c]`
    directly: through row views the loop does not vectorise as well. The
    words end transposed, a key's contiguous: read down a column, a
    generator's 624 words are 624 cache lines. (Costs: docs/design-notes.md,
    transforms.mersenne_twister.)
    """
    steps = lanes.steps
    count = len(key_lengths)
    terms = np.empty((_KEY_CYCLE, count), dtype=np.uint32)  # key[j] + j at step t
    for c in range(count):
        for r in range(_KEY_CYCLE):
            j = r % key_lengths[c]
            terms[r, c] = np.uint32(keys[c, j] + j)
    for k in range(N):
        base = _BASE_LANE[k]
        for c in range(count):
            steps[k, c] = base
    i = 1
    for t in range(N):
        r = t % _KEY_CYCLE
        for c in range(count):
            p = steps[i - 1, c]
            steps[i, c] = (steps[i, c] ^ ((p ^ (p >> _S30)) * _M1)) + terms[r, c]
        i += 1
        if i >= N:
            for c in range(count):
                steps[0, c] = steps[N - 1, c]
            i = 1
    for _ in range(N - 1):
        step = np.uint32(i)
        for c in range(count):
            p = steps[i - 1, c]
            steps[i, c] = (steps[i, c] ^ ((p ^ (p >> _S30)) * _M2)) - step
        i += 1
        if i >= N:
            for c in range(count):
                steps[0, c] = steps[N - 1, c]
            i = 1
    for c in range(count):
        steps[0, c] = np.uint32(0x80000000)
    for k0 in range(0, N, _TRANSPOSE_ROWS):  # a block of rows at a time, for the cache
        for c in range(count):
            for k in range(k0, min(N, k0 + _TRANSPOSE_ROWS)):
                lanes.seeded[c, k] = steps[k, c]


@njit(cache=True)
def twisted_state(lanes: Lanes, c: int, mt: np.ndarray) -> None:
    """mt = the generator of key c of `lanes` (seed_lanes), twisted as its
    first draw would twist it: the same draws."""
    for k in range(N):
        mt[k] = lanes.seeded[c, k]
    _twist(mt)


@njit(cache=True)
def _twist(mt: np.ndarray) -> None:
    for k in range(N - _M):
        y = (mt[k] & _UPPER) | (mt[k + 1] & _LOWER)
        mt[k] = mt[k + _M] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
    for k in range(N - _M, N - 1):
        y = (mt[k] & _UPPER) | (mt[k + 1] & _LOWER)
        mt[k] = mt[k + _M - N] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
    y = (mt[N - 1] & _UPPER) | (mt[0] & _LOWER)
    mt[N - 1] = mt[_M - 1] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
    mt[N] = 0


@njit(cache=True)
def genrand_uint32(mt: np.ndarray) -> int:
    if mt[N] >= N:
        _twist(mt)
    y = mt[mt[N]]
    mt[N] += 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y


@njit(cache=True)
def random(mt: np.ndarray) -> float:
    a = genrand_uint32(mt) >> 5
    b = genrand_uint32(mt) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def randbelow(mt: np.ndarray, n: int) -> int:
    """An int in [0, n), 0 < n < 2**32: getrandbits(n.bit_length()) until below n."""
    if n <= 0 or n > _WORD:
        raise ValueError("randbelow needs 0 < n < 2**32")
    k = 0
    while (n >> k) != 0:
        k += 1
    shift = 32 - k
    r = genrand_uint32(mt) >> shift
    while r >= n:
        r = genrand_uint32(mt) >> shift
    return r


@njit(cache=True)
def randint(mt: np.ndarray, a: int, b: int) -> int:
    return a + randbelow(mt, b - a + 1)


@njit(cache=True)
def shuffle(mt: np.ndarray, values: np.ndarray) -> None:
    for i in range(len(values) - 1, 0, -1):
        j = randbelow(mt, i + 1)
        values[i], values[j] = values[j], values[i]


def sample_set_size(k: int) -> int:
    """random.sample's threshold between its pool and set methods, for k picks."""
    size = 21
    if k > 5:
        size += 4 ** math.ceil(math.log(k * 3, 4))
    return size


@njit(cache=True)
def sample_into(mt: np.ndarray, population: np.ndarray, k: int, set_size: int,
                result: np.ndarray, work: np.ndarray) -> None:
    """random.sample(population, k) into result[:k]; `set_size` is
    sample_set_size(k). `work` (len(population) int64) serves as its pool or
    its set, so the per-instance loop allocates nothing; `population` is left
    unchanged."""
    n = len(population)
    if n <= set_size:
        pool = work[:n]
        pool[:] = population
        for i in range(k):
            j = randbelow(mt, n - i)
            result[i] = pool[j]
            pool[j] = pool[n - i - 1]
    else:
        selected = work[:n]
        selected[:] = 0
        for i in range(k):
            j = randbelow(mt, n)
            while selected[j]:
                j = randbelow(mt, n)
            selected[j] = 1
            result[i] = population[j]
