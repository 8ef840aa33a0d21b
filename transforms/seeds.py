"""The seeds of one document's random draws: one hash per document, the rest derived.

Every draw (a copy's instances, their masks, their places in the global
shuffle) comes from a generator seeded by (random seed, document key, stream,
dupe index, instance index). A cryptographic hash per copy or instance would
cost more than the compiled work it seeds, so the key is hashed once
(`document_seed`) and each position derived from those 128 bits by a bijective
mixer (`derive`), which the Python reference path and the compiled kernels
share. (What it replaced: docs/design-notes.md, transforms.seeds.)
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
from numba import njit

from bert_pretraining_data.transforms.randomness import prefixed_digest

# Streams of draws derived from a document's seed.
INSTANCE_STREAM, MASK_STREAM, SHUFFLE_STREAM = 0, 1, 2
# A position packs (stream, dupe, index) into 64 bits: 2 + 22 + 40.
MAX_DUPE_FACTOR = 1 << 22
_DUPE_SHIFT = np.uint64(40)
_STREAM_SHIFT = np.uint64(62)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_WORD = np.uint64(0xFFFFFFFF)


def document_seed(random_seed: int, doc_key: str) -> tuple[int, int]:
    """The document's 128-bit seed as two 64-bit words (lo, hi): sha256 of
    (random_seed, doc_key); every draw of the document's copies derives from
    it in compiled code (`seed_key`), so no further hash runs per copy."""
    digest = prefixed_digest(hashlib.sha256, "document", random_seed)(doc_key)
    return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:16], "little")


@njit(cache=True)
def mix64(z: np.uint64) -> np.uint64:
    """splitmix64's finalizer: a bijection of 64-bit words that spreads every
    input bit over every output bit."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def derive(seed_lo: np.uint64, seed_hi: np.uint64, stream: int, dupe: int,
           index: int) -> tuple[np.uint64, np.uint64]:
    """128 bits (lo, hi) for one position of a document's draws."""
    position = ((np.uint64(stream) << _STREAM_SHIFT) | (np.uint64(dupe) << _DUPE_SHIFT)
                | np.uint64(index))
    lo = mix64(np.uint64(seed_lo) ^ mix64(position))
    hi = mix64(np.uint64(seed_hi) ^ mix64(position ^ _GOLDEN))
    return lo, hi


@njit(cache=True)
def seed_key(seed_lo: np.uint64, seed_hi: np.uint64, stream: int, dupe: int, index: int,
             key: np.ndarray) -> int:
    """The key `random.Random(derived_int)` feeds init_by_array, written to
    key[:4] (32-bit words, least significant first); returns its length (the
    words up to the highest non-zero one, at least one)."""
    lo, hi = derive(seed_lo, seed_hi, stream, dupe, index)
    return key_words(lo, hi, key)


@njit(cache=True)
def key_words(lo: np.uint64, hi: np.uint64, key: np.ndarray) -> int:
    """seed_key's words for the 128-bit value (hi, lo)."""
    key[0] = np.int64(lo & _WORD)
    key[1] = np.int64(lo >> np.uint64(32))
    key[2] = np.int64(hi & _WORD)
    key[3] = np.int64(hi >> np.uint64(32))
    length = 4
    while length > 1 and key[length - 1] == 0:
        length -= 1
    return length


@njit(cache=True)
def shuffle_key(seed_lo: np.uint64, seed_hi: np.uint64, dupe: int, index: int) -> int:
    """The instance's place in the global shuffle: 63 bits (Beam's VarIntCoder
    encodes signed 64-bit ints)."""
    lo, _ = derive(seed_lo, seed_hi, SHUFFLE_STREAM, dupe, index)
    return np.int64(lo >> np.uint64(1))


def position_rng(seed: tuple[int, int], stream: int, dupe: int, index: int = 0
                 ) -> random.Random:
    """The `random.Random` of one position of a document's draws (its
    `document_seed` mixed, no hash), for the Python paths: the compiled
    kernels seed their generator from the same key, so both draw alike
    (transforms.randomness.hashed_rng hashes arbitrary parts instead)."""
    lo, hi = derive(np.uint64(seed[0]), np.uint64(seed[1]), stream, dupe, index)
    return random.Random((int(hi) << 64) | int(lo))
