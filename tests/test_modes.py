"""Every objective's output, end to end in the pipeline's distributed mode:
read by tf.data (as run_pretraining.py reads) and by the PyTorch loader, and
described by inspect-pretraining-data."""

from __future__ import annotations

import pytest
import tensorflow as tf

from conftest import CHINESE_VOCAB, DATA, UNCASED_VOCAB
from bert_pretraining_data.loaders.tf_data import tf_dataset
from bert_pretraining_data.loaders.torch_data import make_dataloader
from bert_pretraining_data.pipeline.inspect_data import report
from bert_pretraining_data.pipeline.main import run

SAMPLE = DATA / "wiki_small.txt"
# mode -> (flags, features on disk, objective line fragment, label meaning or None)
MODES = {
    "albert_sop_ngram": (
        ["--next_sentence=sop", "--ngram=3", "--do_whole_word_mask"],
        {"input_ids", "input_mask", "segment_ids", "token_boundary", "masked_lm_positions",
         "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"},
        "ALBERT's sentence order prediction (SOP); masking: ALBERT's n-grams of up to 3",
        "A and B in order"),
    "model_garden_v2_gzip": (
        ["--max_ngram_size=3", "--do_whole_word_mask", "--use_v2_feature_names",
         "--gzip_compress"],
        {"input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions",
         "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"},
        "masking: the Model Garden's n-grams of up to 3 whole words", "B follows A"),
    "electra": (
        ["--next_sentence=none", "--masking=none"],
        {"input_ids", "input_mask", "segment_ids"},
        "no pair task: full sequences (ELECTRA/RoBERTa); masking: none on disk", None),
    "roberta_static_unpadded": (
        ["--next_sentence=none", "--padding=none"],
        {"input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids"},
        "no pair task", None),
    "sop_unpadded": (
        ["--next_sentence=sop", "--padding=none"],
        {"input_ids", "segment_ids", "token_boundary", "masked_lm_positions", "masked_lm_ids",
         "next_sentence_labels"},
        "ALBERT's sentence order prediction (SOP); masking: BERT's, WordPieces",
        "A and B in order"),
    "chinese_wwm": (
        ["--do_whole_word_mask", "--whole_word_segmenter=jieba",
         f"--input_file={DATA / 'chinese_small.txt'}", f"--vocab_file={CHINESE_VOCAB}"],
        {"input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
         "masked_lm_weights", "next_sentence_labels"},
        "masking: BERT's, whole words (Chinese words by jieba)", "B follows A"),
}


@pytest.fixture(scope="module", params=list(MODES))
def dataset(request, tmp_path_factory):
    flags, features, objective, meaning = MODES[request.param]
    out = tmp_path_factory.mktemp(request.param) / "out"
    manifest = run([f"--input_file={SAMPLE}", f"--vocab_file={UNCASED_VOCAB}",
                    f"--output_dir={out}", "--dupe_factor=2", "--max_seq_length=64",
                    "--max_predictions_per_seq=10", "--num_shards=2", *flags])
    return out, manifest, features, objective, meaning


@pytest.mark.slow
def test_the_manifest_names_the_features_on_disk(dataset):
    out, manifest, features, _, _ = dataset
    assert set(manifest["features"]) == features
    record = next(iter(tf.data.TFRecordDataset(
        [s["path"] for s in manifest["shards"]],
        compression_type="GZIP" if manifest["shards"][0]["path"].endswith(".gz") else "")))
    assert set(tf.train.Example.FromString(record.numpy()).features.feature) == features


@pytest.mark.slow
def test_tf_data_reads_every_mode_at_the_originals_shapes(dataset):
    out, manifest, features, _, _ = dataset
    batch = next(iter(tf_dataset(str(out), batch_size=4, training=False)))
    ids = batch["input_word_ids" if "input_word_ids" in features else "input_ids"]
    assert ids.shape == (4, 64) and ids.dtype == tf.int32
    mask = batch["input_mask"].numpy()
    assert (mask.sum(axis=1) > 2).all()
    if "token_boundary" in features:
        boundary = batch["token_boundary"].numpy()
        assert (boundary <= mask).all() and boundary[:, 0].all()  # [CLS] starts a word
    if "masked_lm_positions" in features:
        assert batch["masked_lm_weights"].shape == (4, 10)
        assert batch["masked_lm_weights"].numpy().sum() > 0
    assert ("next_sentence_labels" in batch) == ("next_sentence_labels" in features)


@pytest.mark.slow
def test_the_pytorch_loader_reads_every_mode(dataset):
    out, manifest, features, _, _ = dataset
    batch = next(iter(make_dataloader(str(out), batch_size=4, shuffle=False)))
    assert batch["input_ids"].shape[0] == 4
    real = batch["attention_mask"].sum(dim=1)
    assert (real > 2).all() and (real <= 64).all()
    assert (batch["labels"] != -100).any()  # masked on disk, or by the collator
    assert ("next_sentence_label" in batch) == ("next_sentence_labels" in features)
    assert ("token_boundary" in batch) == ("token_boundary" in features)


@pytest.mark.slow
def test_inspect_describes_every_mode(dataset):
    out, manifest, features, objective, meaning = dataset
    text = report(str(out), num_instances=2, max_records=50)
    assert objective in text
    assert "features: " + ", ".join(sorted(features)) in text
    assert ("token_boundary: " in text) == ("token_boundary" in features)
    if meaning is None:
        assert "next_sentence_label" not in text and "label 1" not in text
    else:
        assert f"({meaning}" in text or "(A and B swapped" in text or "(B is a random" in text
