"""Randomness per unit of work: every draw comes from an RNG derived from keys.

Seeding from (random_seed, doc_key, dupe_index, ...) instead of one global
stream is what makes the output independent of runner, worker count, bundle
sizes and element order. Builtin `hash()` is salted per process, so hashlib.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Callable, Iterable
from typing import Any


def _encode_part(part: object) -> bytes:
    """Type-tagged bytes of one key part; independent of process and Python version.

    Not repr(): repr of a str depends on the Unicode database's idea of
    printable characters, which changes between Python versions.
    """
    # The common types first (this runs for every document); bool before int,
    # which it subclasses.
    if isinstance(part, str):
        return b"s" + part.encode("utf-8", "surrogatepass")
    if isinstance(part, bool):
        return b"?1" if part else b"?0"
    if isinstance(part, int):
        return b"i" + str(part).encode("ascii")
    if part is None:
        return b"n"
    if isinstance(part, (bytes, bytearray)):
        return b"b" + bytes(part)
    if isinstance(part, float):
        return b"f" + part.hex().encode("ascii")
    if isinstance(part, (tuple, list)):
        return b"t" + encode_parts(part)
    raise TypeError(
        f"stable_hash parts must be None, bool, int, str, bytes, float, tuple or list; "
        f"got {type(part).__name__}")


def _framed(encoded: bytes) -> bytes:
    return len(encoded).to_bytes(8, "big") + encoded


def encode_parts(parts: Iterable[object]) -> bytes:
    """Each part length-prefixed, so ('ab', 'c') and ('a', 'bc') differ."""
    return b"".join([_framed(e) for e in map(_encode_part, parts)])


@functools.lru_cache(maxsize=None)
def prefixed_digest(new_hash: Callable[[], Any], *prefix: object) -> Callable[[object], bytes]:
    """`key -> new_hash()` digest of encode_parts((*prefix, key)), the same
    bytes as hashing the parts whole, with the constant prefix encoded and
    hashed once: per-document hashes (a seed, a sample rank) run a million
    times a run on short documents, and hashing the prefix each time was a
    large part of their cost (docs/design-notes.md, transforms.randomness).
    One hasher per prefix (cached), so callers ask for it per key."""
    base = new_hash()
    base.update(encode_parts(prefix))

    def digest(key: object) -> bytes:
        hasher = base.copy()
        hasher.update(_framed(_encode_part(key)))
        return hasher.digest()
    return digest


def _blake2b_64() -> Any:
    return hashlib.blake2b(digest_size=8)


def _hash_key(digest: bytes) -> int:
    return int.from_bytes(digest, "big") >> 1


STABLE_HASH_RANGE = 1 << 63  # stable_hash's keys are below it


def stable_hash(*parts: object) -> int:
    """A uniform key in [0, 2**63), stable across processes, from the given parts.

    Never builtin hash(): it is salted per process, so shuffle orders and
    samples would change from run to run. 63 bits, not 64: Beam's
    VarIntCoder (inferred for int elements) only encodes signed 64-bit ints.
    """
    hasher = _blake2b_64()
    hasher.update(encode_parts(parts))
    return _hash_key(hasher.digest())


@functools.lru_cache(maxsize=None)
def stable_hasher(*prefix: object) -> Callable[[object], int]:
    """`key -> stable_hash(*prefix, key)`, the prefix hashed once (prefixed_digest)."""
    digest = prefixed_digest(_blake2b_64, *prefix)
    return lambda key: _hash_key(digest(key))


def hashed_rng(*parts: object) -> random.Random:
    """A `random.Random` seeded from the parts (128 bits of their sha256): one
    hash a generator, for draws outside a document's compiled stream
    (transforms.seeds.position_rng derives those without hashing)."""
    digest = hashlib.sha256(encode_parts(parts)).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))
