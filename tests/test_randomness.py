"""Keys to seeds and hashes (sampling, the d2l recipe, the loaders)."""

from __future__ import annotations

import hashlib
import random

from bert_pretraining_data.transforms.randomness import derive_rng, stable_hash


def test_keys_are_the_documented_hashes_of_length_prefixed_typed_parts():
    # ("s" + utf-8 and "i" + decimal, each after its 8-byte big-endian length)
    encoded = (b"\x00" * 7 + b"\x06" + b"i12345" + b"\x00" * 7 + b"\x05" + b"sdoc:")
    assert stable_hash(12345, "doc:") == int.from_bytes(
        hashlib.blake2b(encoded, digest_size=8).digest(), "big") >> 1
    seed = int.from_bytes(hashlib.sha256(encoded).digest()[:16], "big")
    assert derive_rng(12345, "doc:").random() == random.Random(seed).random()
    assert stable_hash("ab", "c") != stable_hash("a", "bc")


def test_keys_differ_by_every_part():
    keys = {stable_hash(12345, "mask", "doc", dupe, index)
            for dupe in range(5) for index in range(200)}
    assert len(keys) == 1000 and all(0 <= k < 2**63 for k in keys)
