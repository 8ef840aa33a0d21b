"""Packed sequences (--pack_sequences): the row planner, the rows' contents
against the unpacked records of the same instances, the pipeline end to end
(determinism, the manifest), and the flags that cannot pack."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import io
import itertools
import json
import random

import numpy as np
import pytest
from hypothesis import given, strategies as st

from bert_pretraining_data.loaders.manifest import read_manifest
from bert_pretraining_data.loaders.records import InstanceDecoder, decoded_records, sequences_of
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.inspect_data import report
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.transforms.handoff.shuffle.entries import EntryBatch, scan_entries
from bert_pretraining_data.transforms.handoff.shuffle.instances import put_instance
from bert_pretraining_data.transforms.handoff.tokenized_documents import compact_document
from bert_pretraining_data.transforms.instances.masking import MaskingConfig, num_to_predict
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig
from bert_pretraining_data.transforms.instances.units import (FlatSample, InstanceKernels,
                                                               unit_instances)
from bert_pretraining_data.transforms.pack.histogram import pack_histogram
from bert_pretraining_data.transforms.pack.plan import plan_rows, prediction_budget
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
from bert_pretraining_data.transforms.write.rows import InstanceRows, PackedRows
from bert_pretraining_data.transforms.write.tf_example import RecordLayout
from bert_pretraining_data.transforms.write.tfrecord import read_records
from conftest import DATA, UNCASED_VOCAB

# --- the planner -------------------------------------------------------------------------


@st.composite
def histograms(draw):
    max_length = draw(st.sampled_from([4, 16, 64, 128]))
    counts = draw(st.lists(st.integers(0, 50), min_size=max_length, max_size=max_length))
    return max_length, np.array([0] + counts, dtype=np.int64), draw(st.integers(1, 6))


@pytest.mark.slow
@given(histograms())
def test_every_sequence_is_in_one_row_that_it_fits(case):
    max_length, histogram, depth = case
    shapes, counts = pack_histogram(histogram, max_length, depth)
    used = np.zeros_like(histogram)
    for shape, count in zip(shapes, counts):
        lengths = shape[shape > 0]
        assert 1 <= len(lengths) <= depth and lengths.sum() <= max_length and count > 0
        np.add.at(used, lengths, count)
    assert (used == histogram).all()
    # At least as many rows as the lengths force (tokens, depth, halves).
    bound = max(-(-int((np.arange(max_length + 1) * histogram).sum()) // max_length),
                -(-int(histogram.sum()) // depth), int(histogram[max_length // 2 + 1:].sum()))
    assert counts.sum() >= bound


def test_rows_of_real_lengths_are_nearly_full():
    """BERT-like lengths (most full, a tail of short ones, as short_seq_prob
    and document ends make them): within 0.5% of the token bound at depth 3,
    where filling the emptiest row first (Krell et al.'s SPFHP) would not be."""
    rng = np.random.default_rng(7)
    lengths = np.where(rng.random(200_000) < 0.55, 512, rng.integers(8, 512, 200_000))
    histogram = np.bincount(lengths, minlength=513)
    shapes, counts = pack_histogram(histogram, 512, 3)
    filled = lengths.sum() / (counts.sum() * 512)
    bound = lengths.sum() / (max(lengths.sum() / 512, (lengths > 256).sum()) * 512)
    assert filled > bound - 0.005 and filled > 0.98, (filled, bound)


def test_a_rows_plan_is_a_function_of_its_instances():
    rng = np.random.default_rng(3)
    lengths = rng.integers(3, 129, 5000)
    keys = rng.integers(0, 2**63 - 1, 5000)
    members, bounds = plan_rows(lengths, keys, max_length=128, depth=3)
    assert sorted(members.tolist()) == list(range(5000))
    rows = [members[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
    assert all(row == sorted(row) and 1 <= len(row) <= 3 and lengths[row].sum() <= 128
               for row in rows)
    again_members, again_bounds = plan_rows(lengths, keys, max_length=128, depth=3)
    assert (members == again_members).all() and (bounds == again_bounds).all()
    # The rows' order owes nothing to their shape: full rows and rows of three mix.
    depths = np.diff(bounds)
    half = len(depths) // 2
    assert abs(depths[:half].mean() - depths[half:].mean()) < 0.1


@pytest.mark.parametrize("max_length, max_predictions", [(16, 3), (64, 10), (128, 20)])
@pytest.mark.parametrize("depth", [2, 3])
def test_the_row_budget_is_the_most_predictions_a_row_can_need(max_length, max_predictions,
                                                               depth):
    config = MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=max_predictions,
                           vocab_size=10, mask_id=1, cls_id=2, sep_id=3)
    most = max(sum(num_to_predict(length, config) for length in lengths)
               for count in range(1, depth + 1)
               for lengths in itertools.combinations_with_replacement(
                   range(1, max_length + 1), count)
               if sum(lengths) <= max_length)
    assert prediction_budget(config, max_length, depth) == most


def test_mlperfs_budget_at_512_is_one_more_than_needed():
    config = MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=76, vocab_size=10,
                           mask_id=1, cls_id=2, sep_id=3)
    assert prediction_budget(config, 512, 3) == 76 + 3 - 1


# --- rows against the unpacked records of the same instances ------------------------------

_WIKI = (DATA / "wikitext2_valid.txt").read_text(encoding="utf-8").split("\n\n")
MODES = {  # flags of the instances and their layout
    "nsp_static": dict(next_sentence="nsp", masking=True),
    "sop_ngram_boundary": dict(next_sentence="sop", masking=True, ngram=3),
    "nsp_dynamic": dict(next_sentence="nsp", masking=False),
    "full_sequences_dynamic": dict(next_sentence="none", masking=False),
}


def _entries(vocab, mode: dict, max_seq_length: int, documents: int = 40):
    """Entries of real WikiText-2 documents (2 copies each), as CreateInstances
    makes them, and the layout their records have."""
    tokenizer = FullTokenizer(vocab)
    docs = [(f"wiki:{i}", compact_document([tokenizer.tokenize_to_ids(line)
                                            for line in doc.splitlines() if line.strip()]))
            for i, doc in enumerate(_WIKI[:documents])]
    boundary = mode["next_sentence"] == "sop" or mode.get("ngram", 0) > 0
    instances = InstanceConfig(
        max_seq_length=max_seq_length, short_seq_prob=0.1, cls_id=vocab.cls_id,
        sep_id=vocab.sep_id, next_sentence=mode["next_sentence"],
        continues=tuple(vocab.continuation_flags()) if boundary else None)
    masking = MaskingConfig(
        masked_lm_prob=0.15, max_predictions_per_seq=20, vocab_size=len(vocab),
        mask_id=vocab.mask_id, cls_id=vocab.cls_id, sep_id=vocab.sep_id,
        continuation=tuple(vocab.continuation_flags()) if boundary else None,
        ngram=mode.get("ngram", 0)) if mode["masking"] else None
    batch, _ = unit_instances([(key, doc, (0, 2)) for key, doc in docs],
                            sample=FlatSample.of(docs[::3]),
                            kernels=InstanceKernels.of(instances, masking),
                            seed=11)
    layout = RecordLayout(token_boundary=boundary, next_sentence_labels=mode["next_sentence"]
                          != "none", masked_lm=masking is not None)
    return batch, layout, masking


def _decoded(rows, layout, batch, roles) -> list:
    """Every record the row writer writes of the batch, decoded by the loaders."""
    result = rows.rows(*scan_entries(batch.entries))
    decode = InstanceDecoder("packed" if layout.packed else "bert", roles)
    framed = b"".join(bytes(chunk) for chunk in result.chunks)
    records = list(read_records(io.BytesIO(framed)))
    assert len(records) == result.records
    return [decode(record, index) for index, record in enumerate(records)], result.stats


def _comparable(instance) -> tuple:
    """Every feature of an instance, hashable."""
    boundary = None if instance.token_boundary is None else tuple(instance.token_boundary)
    return (tuple(instance.input_ids), tuple(instance.segment_ids),
            tuple(instance.masked_lm_positions), tuple(instance.masked_lm_ids),
            instance.next_sentence_label, boundary)


@pytest.mark.parametrize("padding", ["fixed", "none"])
@pytest.mark.parametrize("mode", list(MODES))
def test_packed_rows_hold_exactly_the_unpacked_instances(uncased_vocab, mode, padding):
    max_seq_length = 64
    batch, layout, masking = _entries(uncased_vocab, MODES[mode], max_seq_length)
    layout = dataclasses.replace(layout, padded=padding == "fixed")
    packed_layout = dataclasses.replace(layout, packed=True)
    budget = prediction_budget(masking, max_seq_length, 3) if masking else 20
    unpacked, _ = _decoded(InstanceRows(layout, max_seq_length, 20), layout, batch,
                           layout.roles())
    rows, stats = _decoded(PackedRows(packed_layout, max_seq_length, budget, 3),
                           packed_layout, batch, packed_layout.roles())

    taken_apart = [instance for row in rows for instance in sequences_of(row)]
    assert collections.Counter(map(_comparable, taken_apart)) == collections.Counter(
        map(_comparable, unpacked))
    assert len(unpacked) == stats["instances"] > 300
    assert len(rows) == sum(stats["rows_by_depth"]) < len(unpacked)
    assert 2 <= max(len(row.sequences) for row in rows) <= 3
    tokens = sum(len(i.input_ids) for i in unpacked)
    assert stats["tokens"] == tokens and tokens / (len(rows) * max_seq_length) > 0.9


def test_rows_do_not_depend_on_the_order_entries_arrive_in(uncased_vocab):
    batch, layout, masking = _entries(uncased_vocab, MODES["nsp_static"], 64, documents=15)
    rows = PackedRows(RecordLayout(packed=True), 64, prediction_budget(masking, 64, 3), 3)
    entries, keys, bounds = scan_entries(batch.entries)
    order = list(range(len(keys)))
    random.Random(5).shuffle(order)
    shuffled = np.concatenate([entries[bounds[i]:bounds[i + 1]] for i in order])
    first = b"".join(bytes(c) for c in rows.rows(entries, keys, bounds).chunks)
    second = b"".join(bytes(c) for c in rows.rows(*scan_entries(shuffled)).chunks)
    assert first == second and len(first) > 1000


def test_real_text_fills_over_98_percent_of_a_row(uncased_vocab):
    """WikiText-2 articles at 128, the default depth (bench/packing.py measures
    every corpus shape at 128 and 512)."""
    batch, _, masking = _entries(uncased_vocab, MODES["nsp_static"], 128, documents=60)
    rows = PackedRows(RecordLayout(packed=True), 128, prediction_budget(masking, 128, 3), 3)
    stats = rows.rows(*scan_entries(batch.entries)).stats
    filled = stats["tokens"] / (sum(stats["rows_by_depth"]) * 128)
    assert filled > 0.98, stats


# --- the pipeline ----------------------------------------------------------------------------

SMALL_INPUTS = f"{DATA / 'sample_text.txt'},{DATA / 'wiki_small.txt'}"
FLAGS = [f"--input_file={SMALL_INPUTS}", f"--vocab_file={UNCASED_VOCAB}", "--dupe_factor=2",
         "--num_shards=3", "--max_seq_length=64", "--max_predictions_per_seq=10",
         "--do_whole_word_mask", "--progress=none"]


def _shard_bytes(directory) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.glob("part-*"))}


@pytest.fixture(scope="module")
def packed_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("packed") / "out"
    manifest = run([*FLAGS, f"--output_dir={out}", "--pack_sequences"])
    return out, manifest


@pytest.mark.slow
@pytest.mark.parametrize("extra", [
    ["--direct_running_mode=multi_processing", "--direct_num_workers=2", "--shuffle=runner"],
    ["--input_split_bytes=997", "--direct_running_mode=in_memory"],
], ids=["runner_shuffle_two_workers", "files_shuffle_small_splits"])
def test_packed_shards_are_byte_identical_across_runners_and_shuffles(packed_run, tmp_path,
                                                                      extra):
    out = tmp_path / "out"
    run([*FLAGS, f"--output_dir={out}", "--pack_sequences", *extra])
    assert _shard_bytes(out) == _shard_bytes(packed_run[0])
    assert len(_shard_bytes(out)) == 3


@pytest.mark.slow
def test_the_pipelines_packed_rows_are_its_unpacked_instances(packed_run, tmp_path):
    out, manifest = packed_run
    plain = tmp_path / "plain"
    plain_manifest = run([*FLAGS, f"--output_dir={plain}"])
    packed = list(decoded_records(read_manifest(str(out))))
    instances = [i for row in packed for i in sequences_of(row)]
    unpacked = list(decoded_records(read_manifest(str(plain))))
    assert collections.Counter(map(_comparable, instances)) == collections.Counter(
        map(_comparable, unpacked))

    packing = manifest["packing"]
    assert manifest["total_instances"] == plain_manifest["total_instances"] == len(unpacked)
    assert packing["instances"] == len(unpacked) and packing["rows"] == len(packed)
    assert sum(packing["rows_by_depth"].values()) == len(packed)
    assert packing["tokens"] == sum(len(i.input_ids) for i in unpacked)
    assert packing["filled"] == pytest.approx(packing["tokens"] / (len(packed) * 64), abs=1e-6)
    assert set(manifest["features"]) == {
        "input_ids", "input_mask", "segment_ids", "positions", "masked_lm_positions",
        "masked_lm_ids", "masked_lm_weights", "next_sentence_positions",
        "next_sentence_labels", "next_sentence_weights"}
    assert max(len(i.masked_lm_positions) for row in packed for i in row.sequences) <= 10
    assert max(sum(len(i.masked_lm_positions) for i in row.sequences) for row in packed) <= (
        packing["max_predictions_per_row"])
    assert json.loads((out / "manifest.json").read_text())["packing"] == packing


@pytest.mark.slow
def test_inspect_shows_the_rows_by_depth_and_how_full_they_are(packed_run):
    out, manifest = packed_run
    text = report(str(out), num_instances=2, max_records=100)
    packing = manifest["packing"]
    assert (f"packed: {packing['instances']:,} instances in {packing['rows']:,} rows of up to "
            f"3; {packing['filled']:.2%} of the token slots filled") in text
    assert "rows by instances held:" in text and "*** Row 0, sequence 1 ***" in text


@pytest.mark.parametrize("flags, message", [
    (["--pack_sequences", "--reference_compatible", "--output_file=x"],
     "--reference_compatible writes the original's records, one instance each; drop "
     "--pack_sequences"),
    (["--pack_sequences", "--max_sequences_per_pack=1", "--output_dir=x"],
     "--max_sequences_per_pack must be at least 2, got 1"),
    (["--max_sequences_per_pack=4", "--output_dir=x"],
     "--max_sequences_per_pack sets the rows of --pack_sequences"),
    (["--pack_sequences", "--recipe=d2l", "--output_dir=x"],
     "--pack_sequences applies to --recipe=bert"),
])
def test_flags_that_cannot_pack_fail_in_one_line(flags, message):
    vocab = [] if "--recipe=d2l" in flags else [f"--vocab_file={UNCASED_VOCAB}"]
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_args([f"--input_file={DATA / 'sample_text.txt'}", *vocab, *flags])


def test_a_row_of_more_than_127_sequences_numbers_them_all():
    """input_mask's sequence index is a varint like every other value."""
    entries = []
    for i in range(150):  # [CLS] t [SEP], one prediction each
        out = np.zeros(64, dtype=np.uint8)
        end = put_instance(out, 0, np.array([101, 2000 + i, 102], dtype=np.int32), 3, i % 2,
                           np.array([1]), np.array([7]), np.zeros(3, np.uint8), False,
                           103)
        entries.append((i, out[:end].tobytes()))
    batch = EntryBatch.of(entries)
    rows = PackedRows(RecordLayout(packed=True), 512, 150, 200)
    [row], _ = _decoded(rows, RecordLayout(packed=True), batch, RecordLayout(packed=True).roles())
    assert [s.input_ids.tolist() for s in row.sequences] == [[101, 2000 + i, 102]
                                                             for i in range(150)]
    assert [s.next_sentence_label for s in row.sequences] == [i % 2 for i in range(150)]
