"""The readers of a dataset with held-out splits: each split through the
PyTorch loader, tf.data, Hugging Face `datasets` (Parquet) and
inspect-pretraining-data, every count checked against the manifest, and a
held-out split's static masks under a --masking=none training split."""

from __future__ import annotations

import pathlib
import re

import pytest

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.loaders.manifest import DatasetError, read_manifest
from bert_pretraining_data.loaders.tf_data import tf_dataset
from bert_pretraining_data.loaders.torch_data import PretrainingDataset, make_dataloader
from bert_pretraining_data.pipeline.inspect_data import main as inspect_main
from bert_pretraining_data.pipeline.inspect_data import report
from bert_pretraining_data.pipeline.main import run
from helpers.records import loader_rows, read_examples

SEQ, PREDICTIONS = 64, 10
IGNORE = -100
SPLIT_FLAGS = ("--validation_fraction=0.15", "--test_fraction=0.1")


def _build(out: pathlib.Path, *flags: str) -> tuple[str, dict]:
    manifest = run([f"--input_file={DATA / 'wikitext2_valid.txt'}", f"--output_dir={out}",
                    f"--vocab_file={UNCASED_VOCAB}", f"--max_seq_length={SEQ}",
                    f"--max_predictions_per_seq={PREDICTIONS}", "--dupe_factor=2",
                    "--num_shards=2", *flags])
    return str(out), manifest


@pytest.fixture(scope="module")
def unmasked(tmp_path_factory) -> tuple[str, dict]:
    """Training masked at load time; its held-out splits masked on disk, as asked."""
    return _build(tmp_path_factory.mktemp("splits") / "unmasked", *SPLIT_FLAGS,
                  "--masking=none", "--held_out_masking=static")


@pytest.fixture(scope="module")
def follows(tmp_path_factory) -> tuple[str, dict]:
    """Training masked at load time, and its held-out splits as training (the default)."""
    return _build(tmp_path_factory.mktemp("splits") / "follows", *SPLIT_FLAGS, "--masking=none")


@pytest.fixture(scope="module")
def parquet(tmp_path_factory) -> tuple[str, dict]:
    """Parquet shards, and a validation split only (no test split)."""
    return _build(tmp_path_factory.mktemp("splits") / "parquet", SPLIT_FLAGS[0],
                  "--output_format=parquet")


def _expected_instances(manifest: dict, split: str) -> int:
    """The split's instances as the manifest records them: training's at the
    top level (for readers that know no splits), a held-out split's in its entry."""
    return manifest["total_instances"] if split == "train" else (
        manifest["splits"][split]["instances"])


@pytest.mark.slow
def test_each_split_loads_exactly_its_own_instances(unmasked):
    path, manifest = unmasked
    assert set(manifest["splits"]) == {"train", "validation", "test"}
    assert manifest["splits"]["train"]["instances"] == manifest["total_instances"]
    for split in manifest["splits"]:
        count = len(loader_rows(make_dataloader(path, batch_size=16, split=split,
                                                  shuffle=False)))
        assert count == _expected_instances(manifest, split) > 0, split
        assert len(PretrainingDataset(path, split=split)) == count


@pytest.mark.slow
def test_a_held_out_loader_reads_the_files_in_its_folder(unmasked):
    path, _ = unmasked
    files = sorted(str(p) for p in (pathlib.Path(path) / "validation").glob("part-*"))
    written = read_examples(files, SEQ, PREDICTIONS)
    rows = loader_rows(make_dataloader(path, batch_size=len(written), split="validation",
                                 shuffle=False))
    assert len(rows) == len(written)
    for (ids, labels), record in zip(rows, written):
        n = sum(record["input_mask"])
        k = int(sum(record["masked_lm_weights"]))
        assert list(ids) == record["input_ids"][:n]
        assert [p for p, label in enumerate(labels) if label != IGNORE] == (
            record["masked_lm_positions"][:k])


@pytest.mark.slow
def test_unknown_splits_fail_in_one_line(unmasked, parquet):
    with pytest.raises(DatasetError, match="no split 'dev'") as err:
        make_dataloader(unmasked[0], batch_size=4, split="dev")
    assert "\n" not in str(err.value)
    with pytest.raises(DatasetError, match="it has train, validation$") as err:
        PretrainingDataset(parquet[0], split="test")  # drawn with --validation_fraction only
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_held_out_masks_are_static_while_training_masks_are_dynamic(unmasked):
    path, manifest = unmasked
    assert manifest["flags"]["masking"] == "none"
    assert manifest["splits"]["validation"]["masking"] == "static"
    assert read_manifest(path, split="validation").masking == "static"
    validation = make_dataloader(path, batch_size=16, split="validation", shuffle=False)
    epochs = [loader_rows(validation), loader_rows(validation),
              loader_rows(make_dataloader(path, batch_size=16, split="validation", shuffle=False))]
    assert epochs[0] == epochs[1] == epochs[2]
    assert all(any(label != IGNORE for label in labels) for _, labels in epochs[0])
    training = make_dataloader(path, batch_size=16, shuffle=False)
    first, second = loader_rows(training), loader_rows(training)
    assert [labels for _, labels in first] != [labels for _, labels in second]
    masked = [sum(label != IGNORE for label in labels) for _, labels in first]
    assert all(masked)  # dynamic masks, but masks: the collator did mask training


@pytest.mark.slow
def test_held_out_splits_follow_trainings_masking_with_one_set_of_masks(follows):
    """Issue 53: a held-out split masked on disk under a trainer that masks at
    load time was masked twice. By default it is written as training is,
    unmasked, and the loader masks it with the same masks at every
    evaluation, where training's change every epoch."""
    path, manifest = follows
    assert manifest["splits"]["validation"]["masking"] == "none"
    written = read_examples(sorted(str(p) for p in (pathlib.Path(path) / "validation")
                                   .glob("part-*")), SEQ, PREDICTIONS)
    assert written and not any(sum(record["masked_lm_weights"]) for record in written)
    validation = make_dataloader(path, batch_size=16, split="validation", shuffle=False)
    first, second = loader_rows(validation), loader_rows(validation)
    assert first == second and all(any(label != IGNORE for label in labels)
                                   for _, labels in first)
    training = make_dataloader(path, batch_size=16, shuffle=False)
    assert ([labels for _, labels in loader_rows(training)]
            != [labels for _, labels in loader_rows(training)])


@pytest.mark.slow
def test_tf_dataset_counts_each_held_out_split(unmasked):
    path, manifest = unmasked
    for split in ("validation", "test"):
        batches = list(tf_dataset(path, batch_size=16, split=split, training=False))
        assert sum(int(b["input_ids"].shape[0]) for b in batches) == (
            manifest["splits"][split]["instances"])
        weights = sum(float(b["masked_lm_weights"].numpy().sum()) for b in batches)
        assert weights > 0  # masked on disk
    with pytest.raises(DatasetError, match="--masking=none"):
        tf_dataset(path, batch_size=16)  # training is masked at load time: not for tf.data


@pytest.mark.slow
def test_the_datasets_recipe_reads_each_parquet_split(parquet):
    import datasets

    path, manifest = parquet
    rows = datasets.load_dataset("parquet", data_files={
        split: sorted(str(p) for p in (pathlib.Path(path) / split).glob("*.parquet"))
        for split in manifest["splits"]})
    assert set(rows) == set(manifest["splits"]) == {"train", "validation"}
    for split in rows:
        assert rows[split].num_rows == _expected_instances(manifest, split) > 0, split
    # the loaders read the same rows
    assert len(loader_rows(make_dataloader(path, batch_size=16, split="validation",
                                     shuffle=False))) == rows["validation"].num_rows


@pytest.mark.slow
def test_inspect_prints_a_row_per_split_and_reads_the_one_asked(unmasked, capsys):
    path, manifest = unmasked
    text = report(path, num_instances=0)
    table = re.findall(r"^  (train|validation|test) +(.*)$", text, re.M)
    assert [name for name, _ in table] == list(manifest["splits"])
    for name, cells in table:
        entry = manifest["splits"][name]
        shards = manifest["shards"] if name == "train" else entry["shards"]
        fraction, documents, tokens, instances, dropped, shard_count, masking, seed = (
            cells.split())
        assert float(fraction) == entry["fraction"]
        assert [int(v.replace(",", "")) for v in (documents, tokens, instances, dropped,
                                                   shard_count, seed)] == [
            entry["documents"], entry["tokens"], entry["instances"],
            entry["near_copies_dropped"], len(shards), entry["seed"]]
        assert masking == entry["masking"]
    inspect_main([path, "--split=validation", "--num_instances=1"])
    out = capsys.readouterr().out
    entry = manifest["splits"]["validation"]
    instances = entry["instances"]
    assert f"\n{instances:,} instances in {len(entry['shards'])} tfrecord shard(s);" in out
    assert "masking static" in out and "[MASK]" in out
    assert f"random_seed={entry['seed']}" in out
    counts = [int(m.replace(",", "")) for m in re.findall(r"\| #* *([\d,]+)$", out, re.M)]
    assert sum(counts) == instances  # the statistics are over the split's instances
