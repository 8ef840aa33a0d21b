"""Instance creation and masking rule by rule, on the readable oracle
(tests/oracle_bert.py, which test_instance_units ties to the compiled
definition), and the sample's chooser and bounds."""

from __future__ import annotations

import random

import pytest

from helpers.oracle_bert import (create_instances, mask_tokens, random_document_from_sample,
                         truncate_seq_pair)
from bert_pretraining_data.transforms.instances import sample as sample_module
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig
from bert_pretraining_data.transforms.instances.masking import MaskingConfig, num_to_predict
from bert_pretraining_data.transforms.handoff.tokenized_documents import (
    CompactView, compact_arrays, compact_document, compact_token_count, expand_document)
from bert_pretraining_data.transforms.instances.sample import (SampleCandidates, SampleSettings,
                                                               bound_sample, cap_document,
                                                               smallest_candidates)

CLS, SEP, MASK = 101, 102, 103
CONFIG = InstanceConfig(max_seq_length=16, short_seq_prob=0.0, cls_id=CLS, sep_id=SEP)


def masking(**overrides) -> MaskingConfig:
    values = dict(masked_lm_prob=0.15, max_predictions_per_seq=20, vocab_size=1000,
                  mask_id=MASK, cls_id=CLS, sep_id=SEP)
    values.update(overrides)
    return MaskingConfig(**values)


class ScriptedRandom(random.Random):
    """A Random whose random() returns scripted values (then falls back)."""

    def __init__(self, values):
        super().__init__(0)
        self._values = list(values)

    def random(self):
        return self._values.pop(0) if self._values else super().random()

    def getrandbits(self, k):  # keeps randint() off the scripted values
        return super().getrandbits(k)


def test_truncation_trims_the_longer_side_front_or_back():
    a, b = [1, 2, 3, 4, 5], [6, 7]
    removed = truncate_seq_pair(a, b, 4, ScriptedRandom([0.1, 0.9, 0.1]))
    assert removed == 3
    assert (a, b) == ([3, 4], [6, 7])  # front, back, then front again
    a, b = [1, 2], [3, 4, 5, 6]
    truncate_seq_pair(a, b, 4, ScriptedRandom([0.9, 0.9]))
    assert (a, b) == ([1, 2], [3, 4])


def test_layout_is_cls_a_sep_b_sep_with_segment_ids():
    document = [[1, 2, 3], [4, 5], [6, 7, 8]]
    instances, _ = create_instances(document, config=CONFIG, rng=random.Random(3),
                                    random_document=lambda rng: [[900, 901, 902]])
    for instance in instances:
        tokens, segments = instance.tokens, instance.segment_ids
        first_sep = tokens.index(SEP)
        assert tokens[0] == CLS and tokens[-1] == SEP and tokens.count(SEP) == 2
        assert segments == [0] * (first_sep + 1) + [1] * (len(tokens) - first_sep - 1)
        assert len(tokens) <= CONFIG.max_seq_length


def test_random_next_takes_b_from_the_other_document_and_puts_segments_back():
    # A long target forces one chunk of all three sentences; random() < 0.5
    # chooses random-next, so the unused sentences after a_end are put back.
    document = [[1, 2], [3, 4], [5, 6]]
    other = [[900, 901], [902]]
    rng = ScriptedRandom([0.99, 0.0])  # not short; then random next
    instances, _ = create_instances(document, config=CONFIG, rng=rng,
                                    random_document=lambda r: other)
    first = instances[0]
    assert first.is_random_next
    b = first.tokens[first.tokens.index(SEP) + 1:-1]
    assert set(b) <= {900, 901, 902}
    # Put back: the sentences after a_end were not used, so the next
    # instance's segment A starts right after the first one's.
    a_first = first.tokens[1:first.tokens.index(SEP)]
    second = instances[1]
    a_second = second.tokens[1:second.tokens.index(SEP)]
    assert a_second[0] == a_first[-1] + 1


def test_actual_next_keeps_document_order_and_label_zero():
    document = [[1, 2], [3, 4], [5, 6]]
    rng = ScriptedRandom([0.99, 0.9])  # not short; not random next
    instances, _ = create_instances(document, config=CONFIG, rng=rng,
                                    random_document=lambda r: pytest.fail("not needed"))
    assert not instances[0].is_random_next
    body = [t for t in instances[0].tokens if t not in (CLS, SEP)]
    assert body == sorted(body)


def test_no_other_document_never_pairs_a_document_with_itself():
    document = [[1, 2, 3], [4, 5, 6], [7, 8], [9]]
    for seed in range(30):
        instances, stats = create_instances(document, config=CONFIG,
                                            rng=random.Random(seed),
                                            random_document=lambda r: None)
        assert all(not i.is_random_next for i in instances)
        if stats.random_next_unavailable == 0:
            continue
        for instance in instances:  # the fallback is the actual next, in order
            body = [t for t in instance.tokens if t not in (CLS, SEP)]
            assert body == sorted(body)


def test_chooser_from_sample_skips_the_own_document():
    sample = [("own", compact_document([[1]])), ("other", compact_document([[2]]))]
    def choose(sample, key, rng):
        own = sample_module.sample_positions(sample).get(key, -1)
        return sample_module.random_document_from_sample(sample, own, rng)

    assert all(list(choose(sample, "own", random.Random(s))[0:]) == [[2]] for s in range(50))
    alone = [("own", compact_document([[1]]))]
    assert choose(alone, "own", random.Random(0)) is None
    assert choose([], "own", random.Random(0)) is None


@pytest.mark.parametrize("own", ["d0", "d3", "elsewhere"])
def test_compiled_chooser_draws_as_the_readable_one(own):
    """Same choice and same generator state after it, over many seeds, with
    samples where the 10 tries often fail (2 documents) or never do."""
    for size in (2, 5):
        sample = [(f"d{i}", compact_document([[i + 1]])) for i in range(size)]
        for seed in range(200):
            ours, theirs = random.Random(seed), random.Random(seed)
            mine = sample_module.random_document_from_sample(
                sample, sample_module.sample_positions(sample).get(own, -1), ours)
            expected = random_document_from_sample(sample, own)(theirs)
            assert (None if mine is None else list(mine)) == (
                None if expected is None else list(expected))
            assert ours.random() == theirs.random()


def test_sample_is_bounded_by_bytes_in_rank_order():
    ranked = [(rank, key, compact_document([[1] * 10]))
              for rank, key in ((3, "c"), (1, "a"), (2, "b"))]
    assert [k for k, _ in bound_sample(ranked, max_bytes=80)] == ["a", "b"]
    assert [k for k, _ in bound_sample(ranked, max_bytes=1)] == ["a"]
    capped = cap_document(compact_document([[1] * 5, [2] * 5, [3] * 5]), 10)
    assert expand_document(capped) == [[1] * 5, [2] * 5]
    assert expand_document(cap_document(compact_document([[1] * 50]), 10)) == [[1] * 50]


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("size", [1, 7, 300])
def test_bundles_candidates_merge_to_the_k_smallest_ranks_of_all(size, ties, monkeypatch):
    """However the documents fall into bundles, the merged candidates are the
    K documents of smallest rank of them all, capped: what ranking every
    document and keeping the K smallest gives; equal ranks (`ties`: three
    ranks for all) ordered by key."""
    if ties:
        monkeypatch.setattr(sample_module, "sample_ranker",
                            lambda seed: lambda key: int(key[-3:]) % 3)
    settings = SampleSettings(seed=5, size=size, max_bytes=1 << 20, max_tokens_per_document=4)
    documents = [(f"f.txt:{i:012d}", compact_document([[i % 500] * (1 + i % 3)] * (1 + i % 4)))
                 for i in range(1000)]
    rank = sample_module.sample_ranker(5)
    expected = sorted((rank(key), key, cap_document(document, 4))
                      for key, document in documents)[:size]
    rng = random.Random(1)
    for _ in range(3):
        rng.shuffle(documents)
        cuts = sorted(rng.sample(range(1, len(documents)), 5))
        bundles = [documents[a:b] for a, b in zip([0, *cuts], [*cuts, len(documents)])]
        offered = []
        for bundle in bundles:
            candidates = SampleCandidates(settings)
            for key, document in bundle:
                candidates.add(key, document)
            offered.append(candidates.take())
            assert len(offered[-1]) == min(size, len(bundle))
        assert smallest_candidates(offered, size) == expected
        assert smallest_candidates([smallest_candidates(offered[:2], size), *offered[2:]],
                                   size) == expected


@pytest.mark.parametrize("document, bytes_per_token", [
    ([], 2), ([[]], 2), ([[1, 2, 3], [30521], [], [7] * 5], 2), ([[0, 65535]], 2),
    ([[1, 2], [65536, 3]], 4), ([[119546, 0]] * 3, 4), ([[5]] * 70_000, 2),
])
def test_compact_documents_round_trip(document, bytes_per_token):
    compact = compact_document(document)
    tokens = sum(map(len, document))
    assert expand_document(compact) == document
    assert compact_token_count(compact) == tokens
    assert len(compact) == 1 + 4 * (1 + len(document)) + bytes_per_token * tokens
    ids, bounds = compact_arrays(compact)
    assert [ids[bounds[s]:bounds[s + 1]].tolist() for s in range(len(document))] == document
    view = CompactView(compact)
    assert len(view) == len(document)
    assert [view[i] for i in range(len(view))] == document
    assert list(view[len(document) // 2:]) == document[len(document) // 2:]


@pytest.mark.parametrize("length, prob, cap, expected", [
    (128, 0.15, 20, 19), (10, 0.15, 20, 2), (3, 0.15, 20, 1), (17, 0.15, 20, 3),
    (128, 0.5, 20, 20), (30, 0.05, 20, 2),
])
def test_budget_uses_pythons_round(length, prob, cap, expected):
    assert num_to_predict(length, masking(masked_lm_prob=prob,
                                          max_predictions_per_seq=cap)) == expected


def test_masking_never_touches_cls_sep_and_labels_are_originals():
    tokens = [CLS] + list(range(200, 260)) + [SEP] + list(range(300, 330)) + [SEP]
    for seed in range(40):
        masked = mask_tokens(tokens, masking(), random.Random(seed))
        assert masked.positions == sorted(set(masked.positions))
        assert len(masked.positions) == num_to_predict(len(tokens), masking())
        assert all(tokens[p] not in (CLS, SEP) for p in masked.positions)
        assert masked.labels == [tokens[p] for p in masked.positions]
        unmasked = set(range(len(tokens))) - set(masked.positions)
        assert all(masked.tokens[i] == tokens[i] for i in unmasked)


def test_replacement_split_is_80_10_10():
    tokens = [CLS] + list(range(200, 326)) + [SEP]
    outcome = {"mask": 0, "kept": 0, "random": 0}
    for seed in range(2000):
        masked = mask_tokens(tokens, masking(vocab_size=30000), random.Random(seed))
        for p in masked.positions:
            new = masked.tokens[p]
            outcome["mask" if new == MASK else "kept" if new == tokens[p] else "random"] += 1
    total = sum(outcome.values())
    assert abs(outcome["mask"] / total - 0.8) < 0.01
    assert abs(outcome["kept"] / total - 0.1) < 0.01
    assert abs(outcome["random"] / total - 0.1) < 0.01


def test_whole_word_groups_are_masked_whole_within_budget():
    continuation = tuple(i >= 500 for i in range(1000))  # ids >= 500 are ## pieces
    config = masking(continuation=continuation, max_predictions_per_seq=4,
                     masked_lm_prob=1.0)
    # words: [200 500 501] [201] [202 502] [203 503 504 505]
    tokens = [CLS, 200, 500, 501, 201, 202, 502, SEP, 203, 503, 504, 505, SEP]
    words = [[1, 2, 3], [4], [5, 6], [8, 9, 10, 11]]
    for seed in range(200):
        masked = mask_tokens(tokens, config, random.Random(seed))
        chosen = set(masked.positions)
        assert len(chosen) <= 4
        for word in words:
            assert chosen.isdisjoint(word) or chosen.issuperset(word)
