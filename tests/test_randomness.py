"""Keys to seeds and hashes (sampling, the d2l recipe, the loaders)."""

from __future__ import annotations

import hashlib
import random

from bert_pretraining_data.transforms.randomness import (encode_parts, hashed_rng, prefixed_digest,
                                                         stable_hash, stable_hasher)
from bert_pretraining_data.transforms.instances.sample import sample_ranker
from bert_pretraining_data.transforms.seeds import document_seed


def test_keys_are_the_documented_hashes_of_length_prefixed_typed_parts():
    # ("s" + utf-8 and "i" + decimal, each after its 8-byte big-endian length)
    encoded = (b"\x00" * 7 + b"\x06" + b"i12345" + b"\x00" * 7 + b"\x05" + b"sdoc:")
    assert stable_hash(12345, "doc:") == int.from_bytes(
        hashlib.blake2b(encoded, digest_size=8).digest(), "big") >> 1
    seed = int.from_bytes(hashlib.sha256(encoded).digest()[:16], "big")
    assert hashed_rng(12345, "doc:").random() == random.Random(seed).random()
    assert stable_hash("ab", "c") != stable_hash("a", "bc")


def test_keys_differ_by_every_part():
    keys = {stable_hash(12345, "mask", "doc", dupe, index)
            for dupe in range(5) for index in range(200)}
    assert len(keys) == 1000 and all(0 <= k < 2**63 for k in keys)


def test_a_prefix_hashed_once_gives_the_whole_parts_hash():
    keys = ["", "doc:000000000012", "é\udc80 x", "一二", 7, None, b"\x00", ("a", 1)]
    by_key = stable_hasher("nsp-sample", 12345)
    sha = prefixed_digest(hashlib.sha256, "document", 12345)
    for key in keys:
        assert by_key(key) == stable_hash("nsp-sample", 12345, key)
        assert sha(key) == hashlib.sha256(encode_parts(("document", 12345, key))).digest()
    assert by_key("doc:") != stable_hasher("nsp-sample", 12346)("doc:")
    assert document_seed(12345, "doc:") != document_seed(12345, "doc:1")
    digest = hashlib.sha256(encode_parts(("document", 12345, "doc:"))).digest()
    assert document_seed(12345, "doc:") == (int.from_bytes(digest[:8], "little"),
                                             int.from_bytes(digest[8:16], "little"))
    assert sample_ranker(3)("doc:") == stable_hash("nsp-sample", 3, "doc:")
