"""The PyTorch loader: every instance once across workers and ranks, batches
padded to their longest sequence, dynamic masks within the original budget,
reproducible per (seed, epoch) and different across epochs."""

from __future__ import annotations

import json
import pathlib
import random
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf
import torch
from torch.utils.data import DataLoader

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.loaders.manifest import DatasetError, read_manifest
from bert_pretraining_data.loaders.records import decode_example, read_instances
from bert_pretraining_data.loaders.torch_data import (Collator, PretrainingDataset, make_dataloader,
                                                      plan_reads, slice_bounds)
from bert_pretraining_data.pipeline.main import run
from helpers.records import loader_rows, read_examples

SEQ, PREDICTIONS, PROB = 64, 10, 0.15
CLS, SEP, MASK = 101, 102, 103
INPUTS = f"{DATA / 'sample_text.txt'},{DATA / 'wiki_small.txt'}"


# --- Pure parts -----------------------------------------------------------------


def test_decode_example_reads_what_tensorflow_writes():
    rng = random.Random(0)
    for _ in range(30):
        ints = [rng.choice([0, 1, 127, 128, 30521, 2**40, -1, -(2**63), 2**63 - 1])
                for _ in range(rng.randint(0, 50))]
        floats = [rng.uniform(-2, 2) for _ in range(rng.randint(0, 9))]
        example = tf.train.Example(features=tf.train.Features(feature={
            "ints": tf.train.Feature(int64_list=tf.train.Int64List(value=ints)),
            "floats": tf.train.Feature(float_list=tf.train.FloatList(value=floats)),
            "bytes": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a", b""])),
        }))
        decoded = decode_example(example.SerializeToString())
        assert decoded["ints"].tolist() == ints
        assert decoded["floats"].tolist() == pytest.approx(floats, rel=1e-6)
        assert decoded["bytes"] == [b"a", b""]


def test_decode_example_reads_unpacked_values():
    """Another writer may repeat scalar fields unpacked; protobuf allows both."""
    int64_list = b"\x08\x05" + b"\x08\xac\x02"  # value: 5, value: 300 (wire type 0)
    feature = b"\x1a" + bytes([len(int64_list)]) + int64_list
    entry = b"\x0a\x01x" + b"\x12" + bytes([len(feature)]) + feature
    features = b"\x0a" + bytes([len(entry)]) + entry
    data = b"\x0a" + bytes([len(features)]) + features
    parsed = tf.io.parse_single_example(data, {"x": tf.io.VarLenFeature(tf.int64)})
    assert tf.sparse.to_dense(parsed["x"]).numpy().tolist() == [5, 300]
    assert decode_example(data)["x"].tolist() == [5, 300]


@pytest.mark.parametrize("seed", range(25))
def test_read_plans_cover_the_stream_exactly_once(seed):
    rng = random.Random(seed)
    records = [rng.randint(0, 9) for _ in range(rng.randint(1, 6))]
    order = rng.sample(range(len(records)), len(records))
    readers = rng.randint(1, 7)
    covered = []
    for reader in range(readers):
        start, stop = slice_bounds(sum(records), reader, readers)
        assert stop - start in (sum(records) // readers, -(-sum(records) // readers))
        covered += [(shard, position) for shard, first, last in
                    plan_reads(records, order, start, stop) for position in range(first, last)]
    stream = [(shard, position) for shard in order for position in range(records[shard])]
    assert covered == stream


def test_the_torch_side_loads_neither_beam_nor_tensorflow():
    code = ("import sys; from bert_pretraining_data import loaders; "
            "loaders.load_data_wiki; loaders.make_dataloader; "
            "import bert_pretraining_data.pipeline.inspect_data; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'apache_beam', 'tensorflow', 'tensorflow_transform'}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert proc.stdout.strip() == "[]"


# --- On a real dataset ----------------------------------------------------------


def _run(out, *extra: str) -> str:
    run([f"--input_file={INPUTS}", f"--vocab_file={UNCASED_VOCAB}", f"--output_dir={out}",
         "--dupe_factor=1", f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
         f"--masked_lm_prob={PROB}", *extra])
    return str(out)


@pytest.fixture(scope="module")
def unmasked(tmp_path_factory) -> str:
    return _run(tmp_path_factory.mktemp("torch") / "unmasked", "--num_shards=3",
                "--padding=none", "--masking=none")


@pytest.fixture(scope="module")
def static(tmp_path_factory) -> str:
    return _run(tmp_path_factory.mktemp("torch") / "static", "--num_shards=2")


def _budget(length: int) -> int:
    """The original's rule, written out independently of transforms.instances.masking."""
    return min(PREDICTIONS, max(1, int(round(length * PROB))))


@pytest.mark.slow
def test_two_workers_on_two_ranks_read_every_instance_exactly_once(unmasked):
    expected = {i.index: i.input_ids.tolist() for i in read_instances(read_manifest(unmasked))}
    seen = []
    for rank in range(2):
        dataset = PretrainingDataset(unmasked, rank=rank, world_size=2, seed=5)
        dataset.set_epoch(3)
        loader = DataLoader(dataset, batch_size=16, num_workers=2, collate_fn=list)
        rank_items = [item for batch in loader for item in batch]
        assert len(rank_items) == len(dataset)
        assert {item.epoch for item in rank_items} == {3}
        seen += rank_items
    assert sorted(item.index for item in seen) == list(range(len(expected)))
    for item in seen:
        assert item.input_ids.tolist() == expected[item.index]


@pytest.mark.slow
def test_collator_pads_to_the_batch_maximum_and_masks_within_the_budget(unmasked):
    instances = list(read_instances(read_manifest(unmasked)))
    collate = Collator.for_dataset(unmasked)
    masked_as = {"mask": 0, "kept": 0, "random": 0}
    for start in range(0, len(instances), 8):
        chunk = instances[start:start + 8]
        batch = collate(chunk)
        lengths = [len(i.input_ids) for i in chunk]
        assert batch["input_ids"].shape == (len(chunk), max(lengths))
        assert batch["attention_mask"].sum(1).tolist() == lengths
        assert batch["next_sentence_label"].tolist() == [i.next_sentence_label for i in chunk]
        for row, instance in enumerate(chunk):
            n = lengths[row]
            ids, labels = batch["input_ids"][row], batch["labels"][row]
            assert ids[n:].tolist() == [0] * (max(lengths) - n)
            assert batch["token_type_ids"][row, :n].tolist() == instance.segment_ids.tolist()
            original = instance.input_ids.tolist()
            positions = torch.nonzero(labels != -100).flatten().tolist()
            assert len(positions) == _budget(n)
            assert all(p < n and original[p] not in (CLS, SEP) for p in positions)
            assert [labels[p].item() for p in positions] == [original[p] for p in positions]
            unmasked_positions = [p for p in range(n) if p not in positions]
            assert [ids[p].item() for p in unmasked_positions] == [
                original[p] for p in unmasked_positions]
            for p in positions:
                token = ids[p].item()
                kind = "mask" if token == MASK else "kept" if token == original[p] else "random"
                masked_as[kind] += 1
    total = sum(masked_as.values())
    assert masked_as["mask"] / total == pytest.approx(0.8, abs=0.03)
    assert masked_as["kept"] / total == pytest.approx(0.1, abs=0.03)


@pytest.mark.slow
def test_dynamic_masks_are_reproducible_per_epoch_and_differ_across_epochs(unmasked):
    loader = make_dataloader(unmasked, batch_size=32, shuffle=False)
    epoch0, epoch1 = list(loader), list(loader)
    again = list(make_dataloader(unmasked, batch_size=32, shuffle=False))
    assert len(epoch0) == len(epoch1) == len(again) > 1
    for first, second, third in zip(epoch0, epoch1, again):
        for name in first:
            assert torch.equal(first[name], third[name]), name
        for name in ("attention_mask", "token_type_ids", "next_sentence_label"):
            assert torch.equal(first[name], second[name]), name
    labels0 = torch.cat([b["labels"].flatten() for b in epoch0])
    labels1 = torch.cat([b["labels"].flatten() for b in epoch1])
    masked0, masked1 = labels0 != -100, labels1 != -100
    overlap = (masked0 & masked1).sum() / masked0.sum()
    assert overlap < 0.5  # ~15% expected by chance: the masks are new, not shifted
    # The masks of an example depend on (seed, epoch, index) only: not on the
    # number of workers, so not on which worker or batch an example lands in.
    parallel = make_dataloader(unmasked, batch_size=32, shuffle=False, num_workers=2)
    assert sorted(loader_rows(parallel)) == sorted(loader_rows(epoch0))


@pytest.mark.slow
def test_shuffled_epochs_are_reproducible_with_a_seed(unmasked):
    first = list(make_dataloader(unmasked, batch_size=50, seed=9))
    second = list(make_dataloader(unmasked, batch_size=50, seed=9))
    plain = list(make_dataloader(unmasked, batch_size=50, shuffle=False, seed=9))
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(first, second))
    assert sorted(loader_rows(first)) == sorted(loader_rows(plain))
    assert loader_rows(first) != loader_rows(plain)


@pytest.mark.slow
def test_static_masks_pass_through_unchanged(static):
    written = read_examples(sorted(str(s.path) for s in read_manifest(static).shards),
                            SEQ, PREDICTIONS)
    (batch,) = list(make_dataloader(static, batch_size=len(written), shuffle=False))
    for row, record in enumerate(written):
        n = sum(record["input_mask"])
        k = int(sum(record["masked_lm_weights"]))
        assert batch["input_ids"][row, :n].tolist() == record["input_ids"][:n]
        labels = batch["labels"][row]
        positions = torch.nonzero(labels != -100).flatten().tolist()
        assert positions == record["masked_lm_positions"][:k]
        assert labels[positions].tolist() == record["masked_lm_ids"][:k]
        assert batch["next_sentence_label"][row].item() == record["next_sentence_labels"][0]


@pytest.mark.slow
def test_d2l_style_batches_from_bert_data(unmasked):
    instances = list(read_instances(read_manifest(unmasked)))[:16]
    tokens, segments, valid_lens, positions, weights, labels, nsp = Collator.for_dataset(
        unmasked, style="d2l")(instances)
    lengths = [len(i.input_ids) for i in instances]
    assert tokens.shape == segments.shape == (16, max(lengths))
    assert valid_lens.dtype == weights.dtype == torch.float32
    assert valid_lens.tolist() == lengths
    assert positions.shape == weights.shape == labels.shape == (16, max(map(_budget, lengths)))
    assert weights.sum(1).tolist() == [_budget(n) for n in lengths]
    assert nsp.tolist() == [1 - i.next_sentence_label for i in instances]  # d2l: 1 = is next
    fixed = Collator.for_dataset(unmasked, style="d2l", shape=(SEQ, PREDICTIONS))(instances)
    assert fixed[0].shape == (16, SEQ) and fixed[3].shape == (16, PREDICTIONS)
    assert torch.equal(fixed[5][:, :labels.shape[1]], labels)


@pytest.mark.slow
def test_bad_datasets_fail_in_one_line(unmasked, tmp_path):
    with pytest.raises(DatasetError, match="no manifest.json at") as err:
        PretrainingDataset(str(tmp_path))
    assert "\n" not in str(err.value)
    other_vocab = tmp_path / "vocab.txt"
    other_vocab.write_bytes(UNCASED_VOCAB.read_bytes() + b"extra\n")
    with pytest.raises(DatasetError, match="not the vocabulary this dataset was made with"):
        Collator.for_dataset(unmasked, vocab_file=str(other_vocab))
    moved = tmp_path / "moved"
    shutil.copytree(unmasked, moved)
    manifest = json.loads((moved / "manifest.json").read_text())
    for shard in manifest["shards"]:  # as if the original location were gone
        shard["path"] = str(tmp_path / "gone" / pathlib.Path(shard["path"]).name)
    manifest["flags"]["vocab_file"] = str(tmp_path / "gone" / "vocab.txt")
    (moved / "manifest.json").write_text(json.dumps(manifest))
    copy = PretrainingDataset(str(moved), shuffle=False)  # shards found beside it
    assert [i.index for i in copy] == list(range(len(PretrainingDataset(unmasked))))
    masks = Collator.for_dataset(str(moved), seed=1)(list(copy)[:4])  # its vocabulary too
    assert int((masks["labels"] != -100).sum()) > 0
    (moved / "vocab.txt").unlink()
    with pytest.raises(DatasetError, match="vocab.txt' not found; pass vocab_file="):
        Collator.for_dataset(str(moved))
    (moved / "part-00001-of-00003.tfrecord").unlink()
    with pytest.raises(DatasetError, match="shard part-00001-of-00003.tfrecord is missing"):
        PretrainingDataset(str(moved))
