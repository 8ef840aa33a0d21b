"""Keys to seeds and hashes (sampling, the d2l recipe, the loaders)."""

from __future__ import annotations

from transforms.randomness import Keyed, derive_rng, stable_hash


def test_keyed_prefix_equals_the_full_key():
    keyed = Keyed(12345, "mask", "wiki.txt:000000000042", 3)
    assert keyed.hash(7) == stable_hash(12345, "mask", "wiki.txt:000000000042", 3, 7)
    assert keyed.rng(7).random() == derive_rng(12345, "mask", "wiki.txt:000000000042",
                                               3, 7).random()
    assert keyed.rng(7).random() != keyed.rng(8).random()


def test_keys_differ_by_every_part():
    keys = {stable_hash(12345, "mask", "doc", dupe, index)
            for dupe in range(5) for index in range(200)}
    assert len(keys) == 1000 and all(0 <= k < 2**63 for k in keys)
