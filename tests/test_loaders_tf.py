"""loaders.tf_dataset yields what the pipeline wrote, in every on-disk layout;
the variable-length encoder writes what TensorFlow would."""

from __future__ import annotations

import random

import numpy as np
import pytest
import tensorflow as tf

from bert_pretraining_data.loaders.manifest import DatasetError
from bert_pretraining_data.loaders.tf_data import tf_dataset
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.transforms.d2l.example import encode_features
from conftest import DATA, UNCASED_VOCAB
from helpers.records import encode_example, read_examples

SEQ, PREDICTIONS = 64, 10
INPUTS = f"{DATA / 'sample_text.txt'},{DATA / 'wiki_small.txt'}"


def _example(int64: dict, float32: dict | None = None) -> bytes:
    feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
               for name, values in int64.items()}
    feature.update({name: tf.train.Feature(float_list=tf.train.FloatList(value=values))
                    for name, values in (float32 or {}).items()})
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString(deterministic=True)


@pytest.mark.parametrize("seed", range(20))
def test_unpadded_encoder_is_tensorflows_deterministic_serialization(seed):
    rng = random.Random(seed)
    tokens = rng.randint(0, 128)
    predictions = rng.randint(0, min(tokens, 20))
    fields = dict(
        input_ids=[rng.randint(0, 120_000) for _ in range(tokens)],
        segment_ids=[int(i > tokens // 2) for i in range(tokens)],
        masked_lm_positions=sorted(rng.sample(range(tokens), predictions)),
        masked_lm_ids=[rng.randint(0, 30_000) for _ in range(predictions)],
    )
    label = rng.randint(0, 1)
    expected = _example({**fields, "next_sentence_labels": [label]})
    assert encode_example(**fields, next_sentence_label=label, max_seq_length=128,
                          max_predictions_per_seq=20, padded=False) == expected


def test_encode_features_is_tensorflows_deterministic_serialization():
    int64 = {"tokens": [3, 1, 70_000, 0], "valid_lens": [4], "neg": [-5], "empty": []}
    float32 = {"mlm_weights": [1.0, 0.0, 0.5]}
    assert encode_features(int64=int64, float32=float32) == _example(int64, float32)
    with pytest.raises(ValueError, match="both int64 and float32"):
        encode_features(int64={"x": [1]}, float32={"x": [1.0]})


def _run(out, *extra: str) -> str:
    run([f"--input_file={INPUTS}", f"--vocab_file={UNCASED_VOCAB}", f"--output_dir={out}",
         "--dupe_factor=1", f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
         "--num_shards=2", *extra])
    return str(out)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("tf_loader")
    return {
        "padded": _run(root / "padded"),
        "unpadded": _run(root / "unpadded", "--padding=none"),
        "gzip": _run(root / "gzip", "--compression=gzip"),
        "unmasked": _run(root / "unmasked", "--padding=none", "--masking=none"),
    }


@pytest.fixture(scope="module")
def written(datasets) -> list[dict[str, list]]:
    """The padded run's records, read as run_pretraining.py reads them."""
    shards = sorted(tf.io.gfile.glob(f"{datasets['padded']}/part-*"))
    return read_examples(shards, SEQ, PREDICTIONS)


def _rows(dataset: tf.data.Dataset) -> list[dict[str, list]]:
    rows = []
    for batch in dataset:
        size = len(batch["input_ids"])
        rows += [{name: value[i].numpy().tolist() for name, value in batch.items()}
                 for i in range(size)]
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["padded", "unpadded", "gzip"])
def test_every_layout_yields_what_the_pipeline_wrote(datasets, written, layout):
    """Same flags and seed, so the same instances: the unpadded run padded back
    (input_mask and masked_lm_weights rebuilt) and the gzip run equal the
    padded run, value for value."""
    rows = _rows(tf_dataset(datasets[layout], batch_size=64, training=False))
    assert len(rows) == len(written) > 0
    assert rows == written


@pytest.mark.slow
def test_output_has_run_pretraining_shapes_and_int32(datasets):
    batch = next(iter(tf_dataset(datasets["unpadded"], batch_size=8, training=False)))
    shapes = {name: tuple(value.shape) for name, value in batch.items()}
    assert shapes == {"input_ids": (8, SEQ), "input_mask": (8, SEQ), "segment_ids": (8, SEQ),
                      "masked_lm_positions": (8, PREDICTIONS), "masked_lm_ids": (8, PREDICTIONS),
                      "masked_lm_weights": (8, PREDICTIONS), "next_sentence_labels": (8, 1)}
    assert batch["input_ids"].dtype == tf.int32
    assert batch["masked_lm_weights"].dtype == tf.float32


@pytest.mark.slow
def test_training_mode_shuffles_repeats_and_keeps_whole_batches(datasets, written):
    known = {tuple(record["input_ids"]) for record in written}
    seen = []
    for batch in tf_dataset(datasets["gzip"], batch_size=100, seed=3).take(12):
        assert batch["input_ids"].shape == (100, SEQ)
        seen += [tuple(row) for row in batch["input_ids"].numpy().tolist()]
    assert set(seen) <= known
    assert len(seen) > len(known)  # repeats past one epoch
    first_epoch = seen[:len(known)]
    assert first_epoch != [tuple(record["input_ids"]) for record in written]  # shuffled
    again = [tuple(row) for batch in tf_dataset(datasets["gzip"], batch_size=100, seed=3)
             .take(12) for row in batch["input_ids"].numpy().tolist()]
    assert again == seen  # a seed makes it reproducible


@pytest.mark.slow
def test_file_pattern_and_manifest_path_load_alike(datasets, written):
    pattern = f"{datasets['padded']}/part-*"
    manifest = f"{datasets['padded']}/manifest.json"
    assert _rows(tf_dataset(pattern, batch_size=200, training=False)) == written
    assert _rows(tf_dataset(manifest, batch_size=200, training=False)) == written


@pytest.mark.slow
def test_bad_requests_fail_in_one_line(datasets, tmp_path):
    with pytest.raises(DatasetError, match="max_seq_length=128 but the dataset was written "
                                           "with max_seq_length=64"):
        tf_dataset(datasets["padded"], batch_size=2, max_seq_length=128)
    with pytest.raises(DatasetError, match="--masking=none"):
        tf_dataset(datasets["unmasked"], batch_size=2)
    with pytest.raises(DatasetError, match="no manifest.json at"):
        tf_dataset(str(tmp_path), batch_size=2)  # a directory is a dataset: needs one
    with pytest.raises(DatasetError, match="matches no files"):
        tf_dataset(str(tmp_path / "nothing-*"), batch_size=2, max_seq_length=8,
                   max_predictions_per_seq=1)
    with pytest.raises(DatasetError, match="no manifest.json found for these files: pass "
                                           "max_seq_length"):
        tf_dataset(str(tmp_path / "x-*"), batch_size=2)


@pytest.mark.slow
def test_files_without_manifest_load_with_explicit_lengths(datasets, written, tmp_path):
    """The original script's output has no manifest: give the lengths."""
    for shard in sorted(tf.io.gfile.glob(f"{datasets['padded']}/part-*")):
        tf.io.gfile.copy(shard, str(tmp_path / shard.rsplit("/", 1)[1]))
    rows = _rows(tf_dataset(str(tmp_path / "part-*"), batch_size=300, training=False,
                            max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS))
    assert rows == written
    assert np.all([sum(r["input_mask"]) > 0 for r in rows])


@pytest.mark.parametrize("flags, fragment", [
    (["--output_dir=/tmp/x", "--masking=dynamic"],
     "argument --masking: invalid choice: 'dynamic'"),
    (["--output_dir=/tmp/x", "--padding=batch"], "argument --padding: invalid choice: 'batch'"),
    (["--output_file=/tmp/x", "--reference_compatible", "--padding=none"],
     "drop --masking and --padding"),
])
def test_layout_flags_are_validated_in_one_line(flags, fragment):
    from bert_pretraining_data.pipeline.options import parse_args
    from bert_pretraining_data.pipeline.beam_options import ConfigError

    base = [f"--input_file={INPUTS}", f"--vocab_file={UNCASED_VOCAB}"]
    with pytest.raises(ConfigError, match=fragment) as err:
        parse_args(base + flags)
    assert "\n" not in str(err.value)


def test_layout_flags_default_to_the_original_and_reach_the_manifest_flags():
    from bert_pretraining_data.pipeline.options import parse_args

    config, _ = parse_args([f"--input_file={INPUTS}", f"--vocab_file={UNCASED_VOCAB}",
                            "--output_dir=/tmp/x"])
    assert (config.recipe, config.masking, config.padding) == ("bert", "static", "fixed")
    assert {"recipe", "masking", "padding"} <= set(config.flags())
