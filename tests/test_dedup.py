"""The dedup stage: its functional core against independent definitions
(datasketch's MinHash, the tokenizer's cleanup, brute-force Jaccard), its
Beam shell on tiny inputs, its flags, and its quality on the labelled
evaluation set built from real documents (bench/dedup_eval.py)."""

from __future__ import annotations

import itertools
import unicodedata

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from bench.dedup_eval import build_eval_set, deduplicate, score
from hypothesis import given, strategies as st

from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.transforms.dedup.beam import Deduplicate
from bert_pretraining_data.transforms.dedup.clusters import (BandRows, CandidateIndex, ExactRows,
                                                             KeySet, Node, PairShingles,
                                                             candidate_pairs, digest_array,
                                                             digest_words, exact_groups,
                                                             near_clusters, verified_pairs)
from bert_pretraining_data.transforms.dedup.decisions import DOCUMENTS, SUMMARY, Fingerprints
from bert_pretraining_data.transforms.dedup.minhash import (band_keys, band_shape,
                                                            candidate_probability,
                                                            distinct_shingles, jaccard, jaccards,
                                                            shingle_hashes, shingle_set, signatures)
from bert_pretraining_data.transforms.dedup.normalise import normalised_text, text_digest
from bert_pretraining_data.transforms.handoff.words import split_words
from conftest import UNCASED_VOCAB


# --- normalisation ----------------------------------------------------------------

@given(st.lists(st.text(), min_size=1, max_size=4))
def test_the_fast_path_normalises_as_the_definition(lines):
    expected = " ".join(split_words(unicodedata.normalize("NFKC", " ".join(lines)).casefold()))
    assert normalised_text(lines) == expected


@pytest.mark.parametrize("lines", [
    ["The cat sat.", "On the mat."],
    ["the  CAT\tsat.  on", "the mat."],
    ["Ｔｈｅ cat sat.\u00a0On the mat."],  # full-width letters, a no-break space
    ["THE CAT SAT. ON THE MAT.\u200b"],  # a zero-width space (a format character)
])
def test_whitespace_case_and_compatibility_forms_give_the_same_digest(lines):
    assert normalised_text(lines) == "the cat sat. on the mat."
    assert text_digest(normalised_text(lines)) == text_digest("the cat sat. on the mat.")


@pytest.mark.parametrize("other", [["The cat sat, on the mat."], ["The cat sät. On the mat."],
                                   ["The cat sat. On a mat."]])
def test_punctuation_accents_and_words_make_a_different_text(other):
    assert normalised_text(other) != normalised_text(["The cat sat.", "On the mat."])


def test_cjk_ideographs_are_words_of_their_own():
    assert normalised_text(["中文字符 abc"]) == normalised_text(["中 文 字 符  ABC"]) == "中 文 字 符 abc"


# --- shingles, MinHash, bands -------------------------------------------------------

def _brute_shingles(text: str, ngram: int) -> list[tuple[str, ...]]:
    words = text.split(" ")
    return [tuple(words[i:i + ngram]) for i in range(max(1, len(words) - ngram + 1))]


@given(st.lists(st.lists(st.sampled_from("a b c d e f".split()), min_size=1, max_size=30),
                min_size=1, max_size=6), st.integers(1, 6))
def test_shingle_hashes_stand_for_the_word_ngrams(documents, ngram):
    texts = [" ".join(words) for words in documents]
    hashes, counts = shingle_hashes(texts, ngram)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    by_shingle: dict[tuple[str, ...], int] = {}
    for index, text in enumerate(texts):
        shingles = _brute_shingles(text, ngram)
        assert counts[index] == len(shingles)
        for shingle, value in zip(shingles, hashes[offsets[index]:offsets[index + 1]]):
            assert by_shingle.setdefault(shingle, int(value)) == int(value)
    assert len(set(by_shingle.values())) == len(by_shingle)  # no collision among these
    for first, second in itertools.combinations(texts, 2):
        a, b = set(_brute_shingles(first, ngram)), set(_brute_shingles(second, ngram))
        assert jaccard(shingle_set(first, ngram), shingle_set(second, ngram)) == pytest.approx(
            len(a & b) / len(a | b))


def test_signatures_are_datasketchs_minhash_value_for_value():
    from datasketch import MinHash

    long_text = " ".join(f"w{i % 5000}" for i in range(40_000))  # spans several chunks
    texts = ["a b c", "one two three four five six seven", long_text, "x"]
    hashes, counts = shingle_hashes(texts, 5)
    ours = signatures(hashes, counts, 60)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    for index in range(len(texts)):
        theirs = MinHash(num_perm=60, seed=1, scheme="affine32", hashfunc=int)
        theirs.update_batch([int(v) for v in hashes[offsets[index]:offsets[index + 1]]])
        assert np.array_equal(ours[index], theirs.hashvalues), texts[index][:20]


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0])
def test_bands_find_a_pair_at_the_threshold_and_few_far_below(threshold):
    bands, rows = band_shape(threshold)
    assert candidate_probability(threshold, bands, rows) >= 0.99
    assert bands * rows <= 256
    if threshold >= 0.7:  # below, a sharper curve needs more than 256 permutations
        assert candidate_probability(threshold / 2, bands, rows) <= 0.2


def test_band_keys_agree_exactly_where_signature_bands_agree():
    signature = np.arange(60, dtype=np.uint32).reshape(1, 60)
    other = signature.copy()
    other[0, 7] += 1  # band 1 of 12 x 5
    keys = band_keys(np.concatenate([signature, other]), 12, 5)
    assert (keys[0] == keys[1]).tolist() == [i != 1 for i in range(12)]
    assert len(set(keys[0].tolist())) == 12  # equal rows in other bands: other keys


# --- groups, pairs, clusters --------------------------------------------------------

def _digest(name: str) -> bytes:
    return text_digest(name)


def test_exact_groups_keep_the_smallest_key_and_count_every_copy():
    rows = [("b", "x.txt:2"), ("a", "x.txt:9"), ("b", "x.txt:1"), ("b", "y.txt:0"),
            ("c", "sha:c"), ("c", "sha:c"), ("a", "x.txt:3")]
    found = exact_groups(ExactRows(digest_array([_digest(t) for t, _ in rows]),
                                   [key for _, key in rows]))
    assert sorted(found.drops) == ["x.txt:2", "x.txt:9", "y.txt:0"]
    assert found.repeated == ["sha:c"]  # identical texts under one key: kept once
    assert (found.groups, found.duplicates, found.largest) == (3, 4, 3)


def test_candidate_pairs_are_the_texts_sharing_a_band_with_their_copies():
    a, b, c, d = map(_digest, "abcd")
    rows = [(1, a), (1, a), (1, b), (2, c), (2, d), (3, a), (3, c), (4, d)]
    pairs = candidate_pairs(BandRows(np.array([k for k, _ in rows], dtype=np.uint64),
                                     digest_array([x for _, x in rows])))
    expected = {tuple(sorted([(a, 2), (b, 1)])), tuple(sorted([(c, 1), (d, 1)])),
                tuple(sorted([(a, 1), (c, 1)]))}
    assert pairs == {(x, cx, y, cy) for (x, cx), (y, cy) in expected}


def test_a_crowded_band_pairs_each_text_with_its_first():
    texts = [_digest(str(i)) for i in range(20)]
    pairs = candidate_pairs(BandRows(np.zeros(20, dtype=np.uint64), digest_array(texts)))
    (first,) = set.intersection(*({p[0], p[2]} for p in pairs))
    assert len(pairs) == 19 and {p[0] for p in pairs} | {p[2] for p in pairs} == set(texts)


def test_clusters_are_transitive_and_keep_the_smallest_key():
    nodes = {name: Node(_digest(name), key, copies) for name, key, copies in
             [("a", "k3", 1), ("b", "k1", 2), ("c", "k7", 1), ("d", "k5", 1), ("e", "k2", 4)]}
    found = near_clusters([(nodes["a"], nodes["c"]), (nodes["c"], nodes["b"]),
                           (nodes["d"], nodes["e"])])
    assert sorted(found.drops) == ["k3", "k5", "k7"]
    assert (found.clusters, found.texts_with_copies, found.largest) == (2, 2, 5)


def test_key_set_holds_exactly_its_keys():
    keys = [f"file.txt:{i:012d}" for i in range(0, 3000, 3)]
    held = KeySet(keys)
    assert len(held) == 1000 and len(KeySet([])) == 0
    assert all(key in held for key in keys)
    assert not any(f"file.txt:{i:012d}" in held for i in range(1, 3000, 3))


@given(st.lists(st.sets(st.integers(0, 40)), min_size=1, max_size=12), st.data())
def test_jaccards_of_many_pairs_are_each_pairs_own(sets, data):
    arrays = [np.array(sorted(values), dtype=np.uint32) for values in sets]
    pairs = data.draw(st.lists(st.tuples(*[st.integers(0, len(sets) - 1)] * 2), max_size=20))
    found = jaccards(np.concatenate(arrays), np.array([len(a) for a in arrays]),
                     np.array([a for a, _ in pairs], dtype=np.int64),
                     np.array([b for _, b in pairs], dtype=np.int64))
    for (a, b), similarity in zip(pairs, found):
        union = sets[a] | sets[b]
        assert similarity == (len(sets[a] & sets[b]) / len(union) if union else 1.0)
        assert jaccard(arrays[a], arrays[b]) == similarity


def test_pairs_are_verified_from_their_partitions_messages_as_one_by_one():
    words = LONG + [f"w{i}" for i in range(40)]
    texts = [" ".join(words[i:i + 30]) for i in range(0, 48, 3)]  # overlapping windows
    digests = [_digest(text) for text in texts]
    keys = [f"doc:{i}" for i in range(len(texts))]
    pairs = {tuple(sorted([(digests[i], 1 + i % 2), (digests[j], 1 + j % 2)]))
             for i, j in itertools.combinations(range(len(texts)), 2) if j - i <= 3}
    index = CandidateIndex.of([(a, ca, b, cb) for (a, ca), (b, cb) in pairs], partitions=3)
    assert len(index) == len(pairs)
    by_partition: dict[int, list[PairShingles]] = {}
    for half in (slice(0, None, 2), slice(1, None, 2)):  # two batches, in any order
        rows = list(range(len(texts)))[half]
        shingles, counts = distinct_shingles([texts[i] for i in rows], 5)
        batch_digests = digest_array([digests[i] for i in rows])
        found = index.texts.find(digest_words(batch_digests))
        for partition, part in index.messages(found, batch_digests,
                                              [keys[i] for i in rows], shingles, counts):
            by_partition.setdefault(partition, []).insert(0, part)
    assert set(by_partition) == {0, 1, 2}
    candidates, edges = 0, []
    for parts in by_partition.values():
        count, verified = verified_pairs(PairShingles.concatenate(parts + parts[:1]), 0.6)
        candidates, edges = candidates + count, edges + verified  # (a part twice: one copy)
    node = {d: Node(d, keys[i], 1 + i % 2) for i, d in enumerate(digests)}
    expected = [(node[a], node[b]) for (a, _), (b, _) in pairs
                if jaccard(shingle_set(texts[digests.index(a)], 5),
                           shingle_set(texts[digests.index(b)], 5)) >= 0.6]
    assert candidates == len(pairs) and 0 < len(expected) < len(pairs)
    assert sorted(edges, key=repr) == sorted(expected, key=repr)


# --- the Beam stage -----------------------------------------------------------------

LONG = ("the committee met on tuesday to discuss the budget for the coming year and "
        "agreed that the new library would open in the spring after a long delay caused "
        "by the storm that damaged its roof in the autumn of last year").split()


def _run(documents, fingerprints):
    with TestPipeline() as p:
        out = p | beam.Create(documents) | Deduplicate(
            fingerprints=fingerprints)
        assert_that(out[DOCUMENTS], equal_to(EXPECTED[fingerprints.mode]), label="kept")
        assert_that(out[SUMMARY], equal_to([SUMMARIES[fingerprints.mode]]), label="summary")


EDITED = list(LONG)
EDITED[20] = "museum"  # one word of 45: Jaccard 36/46
DOCUMENTS_IN = [
    ("a.txt:0", [" ".join(LONG[:25]), " ".join(LONG[25:])]),
    ("a.txt:9", [" ".join(LONG).upper()]),  # a normalised copy
    ("b.txt:0", [" ".join(EDITED)]),  # a near copy
    ("sha:1", ["an unrelated text"]), ("sha:1", ["an unrelated text"]),  # identical, one key
    ("c.txt:0", ["\u200b"]),  # empty once normalised: never a duplicate
    ("c.txt:5", ["\u200b\u200b"]),
]
EXPECTED = {"exact": [DOCUMENTS_IN[i] for i in (0, 2, 3, 5, 6)],
            "near": [DOCUMENTS_IN[i] for i in (0, 3, 5, 6)]}
SUMMARIES = {
    "exact": dict(mode="exact", duplicate_documents=2, near_duplicate_documents=0,
                  duplicate_clusters=2, largest_duplicate_cluster=2, lsh_bands=0, lsh_rows=0),
    "near": dict(mode="near", duplicate_documents=2, near_duplicate_documents=1,
                 duplicate_clusters=2, largest_duplicate_cluster=3,
                 lsh_bands=band_shape(0.75)[0], lsh_rows=band_shape(0.75)[1])}


@pytest.mark.parametrize("mode", ["exact", "near"])
@pytest.mark.parametrize("partitions", [1, 3])
def test_the_stage_keeps_each_text_once(mode, partitions):
    assert 0.8 > jaccard(*(shingle_set(normalised_text([" ".join(w)]), 5) for w in (LONG, EDITED))) > 0.75
    _run(DOCUMENTS_IN, Fingerprints(mode=mode, threshold=0.75, partitions=partitions))


# --- flags --------------------------------------------------------------------------

BASE = ["--input_file=x.txt", "--output_file=o.tfrecord", f"--vocab_file={UNCASED_VOCAB}"]


def test_dedup_defaults_to_exact_and_to_none_where_the_original_keeps_everything():
    assert parse_args(BASE)[0].dedup == "exact"
    assert parse_args(BASE + ["--reference_compatible"])[0].dedup == "none"
    config = parse_args(BASE + ["--dedup=near", "--dedup_threshold=0.7", "--dedup_ngram=3"])[0]
    assert (config.dedup, config.dedup_threshold, config.dedup_ngram) == ("near", 0.7, 3)


@pytest.mark.parametrize("flags, message", [
    (["--reference_compatible", "--dedup=exact"], "keeps every document"),
    (["--dedup_threshold=0.7"], "set --dedup=near"),
    (["--dedup=exact", "--dedup_ngram=3"], "set --dedup=near"),
    (["--dedup=near", "--dedup_threshold=1.5"], r"in \(0, 1\]"),
    (["--dedup=near", "--dedup_ngram=0"], "at least 1"),
])
def test_bad_dedup_flags_fail_in_one_line(flags, message):
    with pytest.raises(ConfigError, match=message):
        parse_args(BASE + flags)


# --- quality on the labelled set ----------------------------------------------------

@pytest.fixture(scope="module")
def eval_set():
    return build_eval_set(seed=0, originals=60)


def test_exact_finds_every_exact_and_normalised_copy_and_nothing_else(eval_set):
    decisions = deduplicate([(d.key, d.lines) for d in eval_set], mode="exact")
    removed = {d.key for d in eval_set if d.key not in decisions.kept}
    assert removed == {d.key for d in eval_set if d.kind in ("exact", "normalised")}


def test_near_meets_its_recall_and_precision_targets(eval_set):
    decisions = deduplicate([(d.key, d.lines) for d in eval_set], mode="near")
    levels, precision, removed, wrong, recall = score(eval_set, decisions)
    assert recall >= 0.95 and precision >= 0.99 and removed > 3 * 60
    found = {level.kind: level.found / level.copies for level in levels}
    assert found["exact"] == found["normalised"] == 1.0
    assert found["substitute-40"] == found["delete-20"] == 0.0  # far below the threshold
    quoted = [d.key for d in eval_set if d.kind == "quoted"]
    assert quoted and all(key in decisions.kept for key in quoted)


@pytest.mark.slow
def test_the_beam_stage_decides_as_the_evaluation(eval_set):
    documents = [(d.key, d.lines) for d in eval_set]
    expected = deduplicate(documents, mode="near").kept
    with TestPipeline() as p:
        out = p | beam.Create(documents) | Deduplicate(
            fingerprints=Fingerprints(mode="near", partitions=2))
        assert_that(out[DOCUMENTS] | beam.Keys(), equal_to(sorted(expected)))
