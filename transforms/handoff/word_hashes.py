"""The hashing of word n-grams that Deduplicate's shingles and Decontaminate's
benchmark n-grams share: each word's crc32, a run of n weighed by fixed odd
64-bit constants and summed, then splitmix64's finalizer over the sums.

The finalizer is transforms.seeds.mix64's, here on whole numpy arrays (that
one is compiled, for one value at a time in the kernels).
"""

from __future__ import annotations

import functools

import numpy as np


def mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on an array of uint64 (a bijection)."""
    values = (values ^ (values >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    values = (values ^ (values >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


@functools.lru_cache(maxsize=None)
def multipliers(count: int, salt: int) -> np.ndarray:
    """`count` fixed odd 64-bit constants (a multiply-add's weights); each use
    takes its own `salt` so that its weights are its own: 0 to 2 are MinHash's
    (shingles, band rows, band keys), 3 the benchmark n-grams'."""
    return mix64(np.arange(1, count + 1, dtype=np.uint64) + np.uint64(salt << 32)) | np.uint64(1)
