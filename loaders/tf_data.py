"""tf.data loading, as BERT's run_pretraining.py `input_fn_builder` reads the data.

    dataset = loaders.tf_dataset("gs://b/bert-data/", batch_size=32)
    held_out = loaders.tf_dataset("gs://b/bert-data/", batch_size=32, split="validation",
                                  training=False)

Shapes come from the dataset's manifest, and training reads like the
original (file list shuffled and repeated, records interleaved, a small
record shuffle, whole batches, int64 cast to int32); `--padding=none` data is
padded back to the original's fixed shapes (input_mask and masked_lm_weights
rebuilt), so a model written for run_pretraining.py sees the same tensors.
d2l datasets and packed rows yield their own features (MLPerf's, for packed).
"""

from __future__ import annotations

import tensorflow as tf

from bert_pretraining_data.loaders.manifest import (DatasetError, Manifest, find_manifest,
                                                    pad_id, read_manifest)
from bert_pretraining_data.transforms.handoff import files
from bert_pretraining_data.transforms.split.held_out import TRAIN
from bert_pretraining_data.transforms.write.formats import output_format
from bert_pretraining_data.transforms.write.formats.tfrecord import TFRECORD
from bert_pretraining_data.transforms.write.tf_example import RecordLayout


# What each feature holds -> its per-record shape: tokens, predictions or one
# value per sequence (next_sentence_*, a mixture's source; one sequence a
# record unless packed).
_TOKEN_ROLES = ("input_ids", "input_mask", "segment_ids", "token_boundary", "positions")
_PREDICTION_ROLES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
_FLOAT_ROLES = ("masked_lm_weights", "next_sentence_weights")


def _width(role: str, seq_len: int, predictions: int, sequences: int) -> int:
    return (seq_len if role in _TOKEN_ROLES else predictions if role in _PREDICTION_ROLES
            else sequences)


def _bert_spec(roles: dict[str, str], seq_len: int, predictions: int, sequences: int) -> dict:
    """run_pretraining.py's name_to_features, for the features the records have
    (under their names on disk: v2 names, token_boundary, ELECTRA's three,
    packed rows')."""
    return {name: tf.io.FixedLenFeature([_width(role, seq_len, predictions, sequences)],
                                        tf.float32 if role in _FLOAT_ROLES else tf.int64)
            for name, role in roles.items()}


def _d2l_spec(seq_len: int, predictions: int) -> dict:
    return {
        "tokens": tf.io.FixedLenFeature([seq_len], tf.int64),
        "segments": tf.io.FixedLenFeature([seq_len], tf.int64),
        "valid_lens": tf.io.FixedLenFeature([], tf.int64),
        "pred_positions": tf.io.FixedLenFeature([predictions], tf.int64),
        "mlm_weights": tf.io.FixedLenFeature([predictions], tf.float32),
        "mlm_labels": tf.io.FixedLenFeature([predictions], tf.int64),
        "nsp_labels": tf.io.FixedLenFeature([], tf.int64),
    }


def _parse_unpadded(serialized: tf.Tensor, roles: dict[str, str], seq_len: int,
                    predictions: int, sequences: int, pad: int) -> dict:
    """A batch of --padding=none records, padded to the original's shapes
    (input_ids with `pad`, as --padding=fixed records hold them; input_mask,
    unless a packed row has it, and the weights rebuilt)."""
    name_of = {role: name for name, role in roles.items()}
    parsed = tf.io.parse_example(serialized, {
        name: tf.io.RaggedFeature(tf.int64) for name in roles})
    features = {name: value.to_tensor(
                    default_value=pad if roles[name] == "input_ids" else 0,
                    shape=[None, _width(roles[name], seq_len, predictions, sequences)])
                for name, value in parsed.items()}
    if "input_mask" not in name_of:
        features["input_mask"] = tf.sequence_mask(
            parsed[name_of["input_ids"]].row_lengths(), seq_len, tf.int64)
    for weights, values, width in (("masked_lm_weights", "masked_lm_positions", predictions),
                                   ("next_sentence_weights", "next_sentence_positions",
                                    sequences)):
        if values in name_of:
            features[weights] = tf.sequence_mask(parsed[name_of[values]].row_lengths(), width,
                                                 tf.float32)
    return features


def _to_int32(features: dict) -> dict:
    """run_pretraining.py casts every int64 to int32 (TPUs have no int64)."""
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in features.items()}


def _parser(manifest: Manifest | None, seq_len: int, predictions: int):
    recipe = manifest.recipe if manifest else "bert"
    padding = manifest.padding if manifest else "fixed"
    roles = manifest.features if manifest else RecordLayout().roles()  # the original's
    sequences = manifest.max_sequences_per_record if manifest else 1
    if (manifest and manifest.masking == "none"
            and manifest.flags["next_sentence"] != "none"):
        raise DatasetError(f"{manifest.path}: written with --masking=none; dynamic "
                           "masking happens in the PyTorch collator (loaders.torch_data); "
                           "for tf.data write the data with --masking=static")
    if recipe == "d2l":
        return lambda batch: tf.io.parse_example(batch, _d2l_spec(seq_len, predictions))
    if padding == "none":
        pad = pad_id(manifest) if manifest else 0
        return lambda batch: _to_int32(_parse_unpadded(batch, roles, seq_len, predictions,
                                                       sequences, pad))
    spec = _bert_spec(roles, seq_len, predictions, sequences)
    return lambda batch: _to_int32(tf.io.parse_example(batch, spec))


def _files(pattern: str) -> list[str]:
    matched = sorted(tf.io.gfile.glob(pattern))
    if not matched:
        raise DatasetError(f"{pattern} matches no files; give a dataset directory, its "
                           "manifest.json, or a file pattern (local or gs://)")
    return matched


def _lengths(manifest: Manifest | None, max_seq_length: int | None,
             max_predictions_per_seq: int | None) -> tuple[int, int]:
    recorded = ((manifest.max_seq_length, manifest.max_predictions_per_record)
                if manifest else (None, None))
    given = (max_seq_length, max_predictions_per_seq)
    names = ("max_seq_length", "max_predictions_per_seq")
    for name, mine, theirs in zip(names, given, recorded):
        if mine is not None and theirs is not None and mine != theirs:
            raise DatasetError(f"{name}={mine} but the dataset was written with "
                               f"{name}={theirs} ({manifest.path}); drop the argument")
        if mine is None and theirs is None:
            raise DatasetError(f"no manifest.json found for these files: pass {name}")
    return tuple(theirs if mine is None else mine for mine, theirs in zip(given, recorded))


def tf_dataset(data: str, *, batch_size: int, split: str = TRAIN, training: bool = True,
               seed: int | None = None, cycle_length: int = 4, shuffle_buffer: int = 100,
               max_seq_length: int | None = None,
               max_predictions_per_seq: int | None = None) -> tf.data.Dataset:
    """Batched features of one split ("train", or a held-out "validation" or
    "test", masked on disk even when training is not) of a dataset directory
    or its manifest, or of a file pattern.

    training=True: shuffled files, repeated forever, `cycle_length` files read
    at once, a `shuffle_buffer` record shuffle, whole batches only (as the
    original). training=False: every record once, in file order, the last
    batch possibly smaller. Gzip shards are read as such. The lengths are the
    manifest's; pass them only for files without one (the original script's).
    """
    # A dataset must have its manifest; a file pattern may come without one.
    is_dataset = data.endswith(".json") or files.is_dir(data)
    has_manifest = is_dataset or files.exists(find_manifest(data))
    manifest = read_manifest(data, split=split) if has_manifest else None
    if manifest:
        manifest.check_records()
    fmt = output_format(manifest.output_format) if manifest else TFRECORD
    if fmt is not TFRECORD:
        raise DatasetError(f"{manifest.path}: {fmt.label} shards "
                           f"(--output_format={fmt.name}); "
                           "tf.data reads TFRecords: write the data with the default "
                           f"--output_format={TFRECORD.name}, or read it with the PyTorch loader")
    seq_len, predictions = _lengths(manifest, max_seq_length, max_predictions_per_seq)
    paths = ([shard.path for shard in manifest.shards] if is_dataset
             else _files(data))
    if len({path.endswith(".gz") for path in paths}) > 1:
        raise DatasetError(f"{data}: some files are gzipped (.gz) and some are not; "
                           "read them as two datasets")
    compression = "GZIP" if paths[0].endswith(".gz") else ""
    if training:
        dataset = (tf.data.Dataset.from_tensor_slices(paths)
                   .shuffle(len(paths), seed=seed).repeat()
                   .interleave(lambda path: tf.data.TFRecordDataset(
                                   path, compression_type=compression),
                               cycle_length=min(cycle_length, len(paths)),
                               num_parallel_calls=tf.data.AUTOTUNE,
                               deterministic=seed is not None)
                   .shuffle(shuffle_buffer, seed=seed))
    else:
        dataset = tf.data.TFRecordDataset(paths, compression_type=compression)
    return (dataset.batch(batch_size, drop_remainder=training)
            .map(_parser(manifest, seq_len, predictions), num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE))
