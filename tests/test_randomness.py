"""Keys to seeds and hashes: the batch forms equal the one-at-a-time forms the
Python stages use (the compiled path relies on the batch forms)."""

from __future__ import annotations

import random

from transforms.randomness import Keyed, derive_rng, stable_hash


def test_keyed_prefix_equals_the_full_key():
    keyed = Keyed(12345, "mask", "wiki.txt:000000000042", 3)
    assert keyed.hash(7) == stable_hash(12345, "mask", "wiki.txt:000000000042", 3, 7)
    assert keyed.rng(7).random() == derive_rng(12345, "mask", "wiki.txt:000000000042",
                                               3, 7).random()
    seed = int.from_bytes(keyed.seed_digest(7), "big")
    assert keyed.rng(7).random() == random.Random(seed).random()


def test_batch_forms_equal_one_at_a_time():
    keyed = Keyed("shuffle", 5, "doc", 0)
    for count in (3, 0, 1200, 10):  # the index table grows, then is reused
        assert keyed.seed_digests(count) == b"".join(keyed.seed_digest(i) for i in range(count))
        assert keyed.hashes(count) == [keyed.hash(i) for i in range(count)]


def test_keys_differ_by_every_part():
    keys = {stable_hash(12345, "mask", "doc", dupe, index)
            for dupe in range(5) for index in range(200)}
    assert len(keys) == 1000 and all(0 <= k < 2**63 for k in keys)
