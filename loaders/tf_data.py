"""tf.data loading, as BERT's run_pretraining.py `input_fn_builder` reads the data.

    import loaders
    dataset = loaders.tf_dataset("gs://b/bert-data/", batch_size=32)
    features = next(iter(dataset))   # input_ids, input_mask, segment_ids,
                                     # masked_lm_positions, masked_lm_ids,
                                     # masked_lm_weights, next_sentence_labels

max_seq_length and max_predictions_per_seq come from the dataset's manifest.
Training reads like the original: the file list shuffled and repeated, records
interleaved from several files at once, a small record shuffle, whole batches
only, int64 cast to int32. `--padding=none` data is padded back to the
original's fixed shapes (with input_mask and masked_lm_weights rebuilt), so a
model written for run_pretraining.py sees the same tensors. A `--recipe=d2l`
dataset yields its own features (tokens, segments, valid_lens, ...).
"""

from __future__ import annotations

import tensorflow as tf

from loaders import files
from loaders.manifest import DatasetError, Manifest, find_manifest, read_manifest


def _bert_spec(seq_len: int, predictions: int) -> dict:
    """run_pretraining.py's name_to_features."""
    return {
        "input_ids": tf.io.FixedLenFeature([seq_len], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_len], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_len], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([predictions], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([predictions], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([predictions], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


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


def _parse_unpadded(serialized: tf.Tensor, seq_len: int, predictions: int) -> dict:
    """A batch of --padding=none records, padded to the original's shapes."""
    ragged = {name: tf.io.RaggedFeature(tf.int64) for name in
              ("input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids")}
    parsed = tf.io.parse_example(serialized, {
        **ragged, "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)})
    tokens, masked = parsed["input_ids"], parsed["masked_lm_positions"]
    padded = {name: parsed[name].to_tensor(shape=[None, seq_len])
              for name in ("input_ids", "segment_ids")}
    padded.update({name: parsed[name].to_tensor(shape=[None, predictions])
                   for name in ("masked_lm_positions", "masked_lm_ids")})
    return {
        **padded,
        "input_mask": tf.sequence_mask(tokens.row_lengths(), seq_len, tf.int64),
        "masked_lm_weights": tf.sequence_mask(masked.row_lengths(), predictions, tf.float32),
        "next_sentence_labels": parsed["next_sentence_labels"],
    }


def _to_int32(features: dict) -> dict:
    """run_pretraining.py casts every int64 to int32 (TPUs have no int64)."""
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in features.items()}


def _parser(manifest: Manifest | None, seq_len: int, predictions: int):
    recipe = manifest.recipe if manifest else "bert"
    padding = manifest.padding if manifest else "fixed"
    if manifest and manifest.masking == "none":
        raise DatasetError(f"{manifest.path}: written with --masking=none; dynamic "
                           "masking happens in the PyTorch collator (loaders.torch_data); "
                           "for tf.data write the data with --masking=static")
    if recipe == "d2l":
        return lambda batch: tf.io.parse_example(batch, _d2l_spec(seq_len, predictions))
    if padding == "none":
        return lambda batch: _to_int32(_parse_unpadded(batch, seq_len, predictions))
    return lambda batch: _to_int32(tf.io.parse_example(batch, _bert_spec(seq_len, predictions)))


def _files(pattern: str) -> list[str]:
    matched = sorted(tf.io.gfile.glob(pattern))
    if not matched:
        raise DatasetError(f"{pattern} matches no files; give a dataset directory, its "
                           "manifest.json, or a file pattern (local or gs://)")
    return matched


def _lengths(manifest: Manifest | None, max_seq_length: int | None,
             max_predictions_per_seq: int | None) -> tuple[int, int]:
    recorded = ((manifest.max_seq_length, manifest.max_predictions_per_seq)
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


def tf_dataset(data: str, *, batch_size: int, training: bool = True, seed: int | None = None,
               cycle_length: int = 4, shuffle_buffer: int = 100,
               max_seq_length: int | None = None,
               max_predictions_per_seq: int | None = None) -> tf.data.Dataset:
    """Batched features of a dataset directory, its manifest, or a file pattern.

    training=True: shuffled files, repeated forever, `cycle_length` files read
    at once, a `shuffle_buffer` record shuffle, whole batches only (as the
    original). training=False: every record once, in file order, the last
    batch possibly smaller. Gzip shards are read as such. The lengths are the
    manifest's; pass them only for files without one (the original script's).
    """
    # A dataset must have its manifest; a file pattern may come without one.
    is_dataset = data.endswith(".json") or files.is_dir(data)
    manifest = (read_manifest(data) if is_dataset or files.exists(find_manifest(data))
                else None)
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
