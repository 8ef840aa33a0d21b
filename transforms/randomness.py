"""Randomness per unit of work: every draw comes from an RNG derived from keys.

Seeding from (random_seed, doc_key, dupe_index, ...) instead of one global
stream is what makes the output independent of runner, worker count, bundle
sizes and element order. Builtin `hash()` is salted per process, so hashlib.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable


def _encode_part(part: object) -> bytes:
    """Type-tagged bytes of one key part; independent of process and Python version.

    Not repr(): repr of a str depends on the Unicode database's idea of
    printable characters, which changes between Python versions.
    """
    if part is None:
        return b"n"
    if isinstance(part, bool):
        return b"?1" if part else b"?0"
    if isinstance(part, int):
        return b"i" + str(part).encode("ascii")
    if isinstance(part, str):
        return b"s" + part.encode("utf-8", "surrogatepass")
    if isinstance(part, (bytes, bytearray)):
        return b"b" + bytes(part)
    if isinstance(part, float):
        return b"f" + part.hex().encode("ascii")
    if isinstance(part, (tuple, list)):
        return b"t" + _encode_parts(part)
    raise TypeError(
        f"stable_hash parts must be None, bool, int, str, bytes, float, tuple or list; "
        f"got {type(part).__name__}")


def _encode_parts(parts: Iterable[object]) -> bytes:
    """Each part length-prefixed, so ('ab', 'c') and ('a', 'bc') differ."""
    encoded = [_encode_part(p) for p in parts]
    return b"".join(len(e).to_bytes(8, "big") + e for e in encoded)


def stable_hash(*parts: object) -> int:
    """A uniform key in [0, 2**63), stable across processes, from the given parts.

    Never builtin hash(): it is salted per process, so shuffle orders and
    samples would change from run to run. 63 bits, not 64: Beam's
    VarIntCoder (inferred for int elements) only encodes signed 64-bit ints.
    """
    return Keyed().hash(*parts)


def derive_rng(*parts: object) -> random.Random:
    """A `random.Random` seeded from the parts (128 bits of their sha256)."""
    return Keyed().rng(*parts)


class Keyed:
    """`stable_hash` and `derive_rng` for many keys that share leading parts
    (every instance of one document): the shared parts are encoded once, and
    `Keyed(a, b).hash(c)` equals `stable_hash(a, b, c)`."""

    def __init__(self, *prefix: object) -> None:
        self._prefix = _encode_parts(prefix)

    def hash(self, *parts: object) -> int:
        digest = hashlib.blake2b(self._prefix + _encode_parts(parts), digest_size=8).digest()
        return int.from_bytes(digest, "big") >> 1

    def rng(self, *parts: object) -> random.Random:
        return random.Random(int.from_bytes(self.seed_digest(*parts), "big"))

    def seed_digest(self, *parts: object) -> bytes:
        """The 128-bit seed of `rng(*parts)`, big-endian (what the compiled
        generator of transforms.jit_random is seeded from)."""
        return hashlib.sha256(self._prefix + _encode_parts(parts)).digest()[:16]

    def seed_digests(self, count: int) -> bytes:
        """seed_digest(0) + ... + seed_digest(count - 1): one per instance."""
        sha256, prefix = hashlib.sha256, self._prefix
        return b"".join(sha256(prefix + part).digest()[:16] for part in _index_parts(count))

    def hashes(self, count: int) -> list[int]:
        """[hash(0), ..., hash(count - 1)]: one per instance."""
        blake2b, prefix = hashlib.blake2b, self._prefix
        return [int.from_bytes(blake2b(prefix + part, digest_size=8).digest(), "big") >> 1
                for part in _index_parts(count)]


_INDEX_PARTS: list[bytes] = []


def _index_parts(count: int) -> list[bytes]:
    """_encode_parts((i,)) for i < count, computed once per process."""
    while len(_INDEX_PARTS) < count:
        _INDEX_PARTS.append(_encode_parts((len(_INDEX_PARTS),)))
    return _INDEX_PARTS[:count]
