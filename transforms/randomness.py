"""Randomness per unit of work: every draw comes from an RNG derived from keys.

Seeding from (random_seed, doc_key, dupe_index, ...) instead of one global
stream is what makes the output independent of runner, worker count, bundle
sizes and element order. Builtin `hash()` is salted per process, so hashlib.
"""

from __future__ import annotations

import hashlib
import random


def _digest(parts: tuple[object, ...]) -> bytes:
    text = "\x1f".join(f"{type(p).__name__}:{p}" for p in parts)
    return hashlib.sha256(text.encode("utf-8")).digest()


def stable_hash64(*parts: object) -> int:
    """An unsigned 64-bit hash of the parts, equal in every process."""
    return int.from_bytes(_digest(parts)[:8], "big")


def derive_rng(*parts: object) -> random.Random:
    """A `random.Random` seeded from the parts (128 bits of their hash)."""
    return random.Random(int.from_bytes(_digest(parts)[:16], "big"))
