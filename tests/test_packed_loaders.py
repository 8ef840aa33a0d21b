"""Packed rows in training: the PyTorch collators (block-diagonal and flat),
load-time masking of packed rows, tf.data, and a real model (a tiny HF
`transformers` BERT) computing on packed rows exactly what it computes on
the same instances unpacked."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import torch
from transformers import BertConfig, BertForPreTraining

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.loaders.manifest import read_manifest
from bert_pretraining_data.loaders.records import decoded_records
from bert_pretraining_data.loaders.tf_data import tf_dataset
from bert_pretraining_data.loaders.torch_data import (Collator, additive_mask,
                                                      make_dataloader)
from bert_pretraining_data.pipeline.main import run

SEQ_LEN = 64
FLAGS = [f"--input_file={DATA / 'wiki_small.txt'}", f"--vocab_file={UNCASED_VOCAB}",
         "--dupe_factor=1", "--num_shards=2", f"--max_seq_length={SEQ_LEN}",
         "--max_predictions_per_seq=10", "--short_seq_prob=0.5", "--pack_sequences",
         "--progress=none"]


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    out = tmp_path_factory.mktemp("packed") / "out"
    return out, run([*FLAGS, f"--output_dir={out}"])


@pytest.fixture(scope="module")
def packed_dynamic(tmp_path_factory):
    """Unmasked, unpadded packed rows: masked by the collator at load time."""
    out = tmp_path_factory.mktemp("dynamic") / "out"
    return out, run([*FLAGS, f"--output_dir={out}", "--masking=none", "--padding=none"])


def _rows(dataset, depth_at_least: int = 2):
    return [row for row in decoded_records(read_manifest(str(dataset)))
            if len(row.sequences) >= depth_at_least]


@pytest.mark.slow
def test_block_batches_lay_out_the_rows_with_their_masks(packed):
    out, manifest = packed
    batch = next(iter(make_dataloader(str(out), batch_size=8, shuffle=False)))
    ids, sequence_ids = batch["input_ids"], batch["sequence_ids"]
    assert ids.shape == (8, SEQ_LEN) and batch["attention_mask"].shape == (8, 1, SEQ_LEN, SEQ_LEN)
    depth = manifest["packing"]["max_sequences_per_pack"]
    assert batch["next_sentence_positions"].shape[1] <= depth
    for r in range(8):
        seq = sequence_ids[r]
        mask = batch["attention_mask"][r, 0]
        real = seq > 0
        # Within a sequence everything, across sequences nothing; padding itself only.
        assert torch.equal(mask[real][:, real], (seq[real][:, None] == seq[real][None, :]))
        assert torch.equal(mask[~real][:, ~real], torch.eye(int((~real).sum()), dtype=torch.bool))
        starts = batch["next_sentence_positions"][r][batch["next_sentence_label"][r] != -100]
        assert (ids[r, starts] == 101).all()  # every sequence starts with [CLS]
        assert (batch["position_ids"][r, starts] == 0).all()
        assert int((batch["labels"][r] != -100).sum()) <= manifest["packing"][
            "max_predictions_per_row"]


@pytest.mark.slow
def test_flat_batches_are_the_sequences_side_by_side(packed):
    out, _ = packed
    rows = _rows(out)[:4]
    flat = Collator(style="flat")(rows)
    sequences = [i for row in rows for i in row.sequences]
    bounds = flat["cu_seq_lens_q"].tolist()
    assert bounds == [0, *np.cumsum([len(i.input_ids) for i in sequences]).tolist()]
    assert torch.equal(flat["cu_seq_lens_q"], flat["cu_seq_lens_k"])
    assert flat["cu_seq_lens_q"].dtype == torch.int32
    assert flat["max_length_q"] == max(len(i.input_ids) for i in sequences)
    assert flat["input_ids"].shape == (1, bounds[-1])
    for instance, start, end in zip(sequences, bounds, bounds[1:]):
        assert flat["input_ids"][0, start:end].tolist() == instance.input_ids.tolist()
        assert flat["position_ids"][0, start:end].tolist() == list(range(end - start))
    assert flat["next_sentence_positions"].tolist() == bounds[:-1]
    assert flat["next_sentence_label"].tolist() == [i.next_sentence_label for i in sequences]


@pytest.mark.slow
def test_packed_rows_are_masked_at_load_time_per_sequence(packed_dynamic):
    out, manifest = packed_dynamic
    assert "masked_lm_positions" not in manifest["features"]
    loader = make_dataloader(str(out), batch_size=16, shuffle=False)
    first, second = next(iter(loader)), next(iter(loader))  # epochs 0 and 1
    again = next(iter(make_dataloader(str(out), batch_size=16, shuffle=False)))
    assert torch.equal(first["labels"], again["labels"])  # an epoch is reproducible
    assert not torch.equal(first["labels"], second["labels"])  # each epoch masks anew
    masked = first["labels"] != -100
    assert masked.any() and (first["input_ids"][masked] != first["labels"][masked]).any()
    for r in range(16):  # each sequence gets its own budget (15% of it, at least 1)
        for s in range(1, int(first["sequence_ids"][r].max()) + 1):
            own = first["sequence_ids"][r] == s
            assert 1 <= int(masked[r][own].sum()) <= max(1, round(0.15 * int(own.sum())))


@pytest.mark.slow
@pytest.mark.parametrize("which", ["packed", "packed_dynamic"])
def test_tf_data_reads_packed_rows_at_fixed_shapes(which, request):
    out, manifest = request.getfixturevalue(which)
    if manifest["flags"]["masking"] == "none":
        with pytest.raises(ValueError, match="written with --masking=none"):
            tf_dataset(str(out), batch_size=4, training=False)
        return
    budget = manifest["packing"]["max_predictions_per_row"]
    batch = next(iter(tf_dataset(str(out), batch_size=4, training=False)))
    assert batch["input_ids"].shape == batch["positions"].shape == (4, SEQ_LEN)
    assert batch["masked_lm_positions"].shape == (4, budget)
    assert batch["next_sentence_positions"].shape == (4, 3)
    assert batch["next_sentence_weights"].dtype == tf.float32
    rows = list(decoded_records(read_manifest(str(out))))[:4]
    for r, row in enumerate(rows):
        cls = batch["next_sentence_positions"][r].numpy()[:len(row.sequences)]
        assert (batch["input_ids"][r].numpy()[cls] == 101).all()
        assert batch["next_sentence_weights"][r].numpy().sum() == len(row.sequences)
        assert batch["input_mask"][r].numpy().max() == len(row.sequences)


# --- a real model computes the same on packed rows ------------------------------------------


def _model(attention: str) -> BertForPreTraining:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=128,
                        max_position_embeddings=SEQ_LEN, attn_implementation=attention)
    return BertForPreTraining(config).eval()


def _packed_outputs(model, batch, *, mask=True, restart=True):
    """Per row: masked-LM logits at the masked positions and NSP logits at each
    sequence's [CLS] (the pooler run on the gathered [CLS] states), as a
    training loop on packed rows computes them."""
    attention = batch["attention_mask"]
    if not mask:
        # What a trainer that ignores packing passes: padding masked, sequences
        # not. (No mask at all is not this ablation: transformers 5 derives a
        # block-diagonal mask from restarted position_ids when given none.)
        real = batch["sequence_ids"] > 0
        attention = ((real[:, :, None] & real[:, None, :])
                     | torch.eye(real.shape[1], dtype=torch.bool))[:, None]
    if model.config._attn_implementation == "eager":
        attention = additive_mask(attention)
    with torch.no_grad():
        hidden = model.bert(
            input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
            attention_mask=attention,
            position_ids=batch["position_ids"] if restart else None).last_hidden_state
        mlm = model.cls.predictions(hidden)
        rows = torch.arange(len(hidden))[:, None]
        cls = hidden[rows, batch["next_sentence_positions"]]
        nsp = model.cls.seq_relationship(model.bert.pooler.activation(
            model.bert.pooler.dense(cls)))
    return mlm, nsp


def _difference(model, rows, **ablation) -> float:
    """The largest difference between the packed rows' outputs and the same
    instances run one by one, as the unpacked data trains."""
    batch = Collator(style="blocks")(rows)
    mlm, nsp = _packed_outputs(model, batch, **ablation)
    worst = 0.0
    for r, row in enumerate(rows):
        start = 0
        for s, instance in enumerate(row.sequences):
            alone = Collator(style="hf")([instance])
            with torch.no_grad():
                out = model(input_ids=alone["input_ids"], token_type_ids=alone["token_type_ids"],
                            attention_mask=alone["attention_mask"])
            positions = torch.as_tensor(instance.masked_lm_positions)
            worst = max(worst,
                        float((out.prediction_logits[0, positions]
                               - mlm[r, start + positions]).abs().max()),
                        float((out.seq_relationship_logits[0] - nsp[r, s]).abs().max()))
            start += len(instance.input_ids)
    return worst


@pytest.mark.slow
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_a_bert_computes_on_packed_rows_what_it_computes_unpacked(packed, attention):
    model = _model(attention)
    rows = _rows(packed[0])[:6]
    assert sum(len(row.sequences) for row in rows) >= 12
    # Float rounding only (measured: 2e-7 with sdpa, 1e-8 eager) ...
    assert _difference(model, rows) < 1e-5
    # ... where dropping the block-diagonal mask (7e-3) or the restarted
    # positions (0.7) changes every output.
    assert _difference(model, rows, mask=False) > 1e-3
    assert _difference(model, rows, restart=False) > 1e-3


@pytest.mark.slow
def test_flat_batches_give_the_same_as_blocks(packed):
    """The flat form's cu_seq_lens mark the same sequences: a block-diagonal
    mask built from them over the flat row gives the block form's outputs."""
    model = _model("sdpa")
    rows = _rows(packed[0])[:3]
    flat = Collator(style="flat")(rows)
    bounds = flat["cu_seq_lens_q"].long()
    total = int(bounds[-1])
    sequence = torch.bucketize(torch.arange(total), bounds[1:], right=True)
    mask = (sequence[:, None] == sequence[None, :])[None, None]
    with torch.no_grad():
        hidden = model.bert(input_ids=flat["input_ids"], token_type_ids=flat["token_type_ids"],
                            position_ids=flat["position_ids"],
                            attention_mask=mask).last_hidden_state[0]
        blocks = Collator(style="blocks")(rows)
        block_hidden = model.bert(
            input_ids=blocks["input_ids"], token_type_ids=blocks["token_type_ids"],
            position_ids=blocks["position_ids"],
            attention_mask=blocks["attention_mask"]).last_hidden_state
    real = blocks["sequence_ids"] > 0
    assert torch.allclose(hidden, block_hidden[real], atol=1e-5)
