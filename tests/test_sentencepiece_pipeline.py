"""SentencePiece through the whole tool: the flags, a refused model, a dataset that
carries its model, load-time masking and inspection with it, packed rows, and create-vocab
learning a model on Beam, compared with spm_train run directly on the same
sentences and then used end to end (pipeline -> PyTorch loader)."""

from __future__ import annotations

import hashlib
import io
import json
import pathlib
import shutil

import numpy as np
import pytest
import sentencepiece

from bert_pretraining_data.loaders.torch_data import make_dataloader
from bert_pretraining_data.pipeline import create_vocab
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.inspect_data import report
from bert_pretraining_data.pipeline.main import main, run
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.transforms.tokenize.sentencepiece_model import parse_model
from bert_pretraining_data.transforms.tokenize.sentencepiece_text import (SentencePieceTokenizer,
                                                                          preprocess_text)
from bert_pretraining_data.transforms.vocab.sentencepiece import SentencePieceLearning, line_stats
from conftest import DATA
from helpers.records import decode_records
from helpers.vocab_baselines import split_lines, spm_train_directly

MODEL = DATA / "sentencepiece-8k.model"
WIKITEXT = DATA / "wikitext2_valid.txt"
EWT = DATA / "en_ewt-ud-test.sentences.txt"


def _flags(**flags) -> list[str]:
    return [f"--{name}={value}" for name, value in flags.items()]


@pytest.mark.parametrize("flags, message", [
    (["--spm_model_file=m", "--tokenization=SentencePiece", "--sp_model_file=m"], "give one"),
    (["--tokenization=SentencePiece"], "needs --sp_model_file"),
    (["--sp_model_file=m"], "is read with --tokenization=SentencePiece"),
    (["--spm_model_file=m", "--do_whole_word_mask", "--whole_word_segmenter=jieba"],
     "SentencePiece's pieces and a tokenizer.json's word ids are words already"),
    (["--spm_model_file=m", "--recipe=d2l"], "drop --vocab_file, --spm_model_file"),
])
def test_sentencepiece_flags_that_cannot_work_fail_in_one_line(flags, message):
    with pytest.raises(ConfigError, match=message):
        parse_args(["--input_file=x", "--output_dir=o", *flags])


def test_a_model_is_the_vocabulary_so_no_vocab_file_is_needed():
    config, _ = parse_args(["--input_file=x", "--output_dir=o", "--spm_model_file=m.model"])
    assert (config.tokenizer.path, config.tokenizer.anchor) == ("m.model", "albert")
    config, _ = parse_args(["--input_file=x", "--output_dir=o", "--tokenization=SentencePiece",
                            "--sp_model_file=g.model"])
    assert (config.tokenizer.path, config.tokenizer.anchor) == ("g.model", "model_garden")
    with pytest.raises(ConfigError, match="--vocab_file is required"):
        parse_args(["--input_file=x", "--output_dir=o"])


def test_a_model_without_cls_sep_mask_stops_the_run_before_any_work(tmp_path, capsys):
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(EWT.read_text().splitlines()), model_writer=model,
        vocab_size=500, minloglevel=2)
    (tmp_path / "plain.model").write_bytes(model.getvalue())
    with pytest.raises(SystemExit) as exit_info:
        main(_flags(input_file=EWT, output_dir=tmp_path / "out",
                    spm_model_file=tmp_path / "plain.model"))
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "has no [CLS] [SEP] [MASK] piece" in error[0]
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.mark.slow
def test_an_albert_dataset_carries_its_model_and_reads_as_pieces(tmp_path):
    out = tmp_path / "albert"
    manifest = run(_flags(input_file=EWT, output_dir=out, spm_model_file=MODEL,
                          vocab_file=DATA / "sentencepiece-8k.vocab", next_sentence="sop",
                          ngram=3, do_whole_word_mask="true", dupe_factor=1))
    assert (out / "sentencepiece.model").read_bytes() == MODEL.read_bytes()
    assert not (out / "vocab.txt").exists()
    assert manifest["vocab_sha256"] == hashlib.sha256(MODEL.read_bytes()).hexdigest()
    records = decode_records(str(next(out.glob("part-*"))))
    vocab = parse_model(MODEL.read_bytes())
    assert len(records) == manifest["total_instances"] > 300
    for record in records:
        ids = record["input_ids"][:sum(record["input_mask"])]
        assert ids[0] == vocab.cls_id and ids[-1] == vocab.sep_id
        assert max(ids) < len(vocab)  # no mark leaks into the records
    boundary = [b for r in records for b, m in zip(r["token_boundary"], r["input_mask"]) if m]
    assert 0.6 < sum(boundary) / len(boundary) < 0.95  # pieces that continue words exist
    # The dataset alone (copied elsewhere) is enough to read it as text.
    moved = tmp_path / "copy"
    shutil.copytree(out, moved)
    text = report(str(moved), num_instances=1, max_records=10)
    assert "[CLS] " in text and "▁" in text and "n-grams of up to 3 whole words" in text


@pytest.mark.slow
def test_load_time_masking_uses_the_models_mask_and_whole_words(tmp_path):
    out = tmp_path / "dynamic"
    run(_flags(input_file=EWT, output_dir=out, spm_model_file=MODEL, masking="none",
               padding="none", dupe_factor=1, do_whole_word_mask="true"))
    vocab = parse_model(MODEL.read_bytes())
    continues = np.array(vocab.continuation_flags())
    batches = list(make_dataloader(str(out), batch_size=16, shuffle=False))
    masked = as_mask = grouped = 0
    for batch in batches:
        for ids, labels in zip(batch["input_ids"].numpy(), batch["labels"].numpy()):
            positions = np.flatnonzero(labels != -100)
            original = np.where(labels != -100, labels, ids)
            assert len(positions)
            masked += len(positions)
            as_mask += int((ids[positions] == vocab.mask_id).sum())
            # Whole words: a masked piece that continues a word is masked with
            # the piece before it ([CLS] and [SEP] aside, as the original's;
            # a segment's first piece has none).
            special = (vocab.cls_id, vocab.sep_id)
            for p in positions[continues[labels[positions]]]:
                before = max((q for q in range(p) if original[q] not in special), default=None)
                if before is not None:
                    grouped += 1
                    assert labels[before] != -100
    assert masked > 1000 and grouped > 50 and 0.75 < as_mask / masked < 0.85


@pytest.mark.slow
def test_packed_rows_of_pieces_start_with_the_models_cls_and_mask_at_load_time(tmp_path):
    out = tmp_path / "packed"
    manifest = run(_flags(input_file=EWT, output_dir=out, spm_model_file=MODEL,
                          pack_sequences="true", masking="none", padding="none",
                          do_whole_word_mask="true", next_sentence="sop", ngram=3,
                          dupe_factor=1))
    assert manifest["packing"]["rows"] < manifest["packing"]["instances"]
    vocab = parse_model(MODEL.read_bytes())
    masked = as_mask = sequences = 0
    for batch in make_dataloader(str(out), batch_size=16, shuffle=False):
        ids, labels = batch["input_ids"], batch["labels"]
        for row in range(len(ids)):
            starts = batch["next_sentence_positions"][row][batch["next_sentence_label"][row]
                                                           != -100]
            assert (ids[row, starts] == vocab.cls_id).all()
            sequences += len(starts)
        masked += int((labels != -100).sum())
        as_mask += int(((labels != -100) & (ids == vocab.mask_id)).sum())
    assert sequences == manifest["packing"]["instances"]
    assert masked > 1000 and 0.75 < as_mask / masked < 0.85


# --- create-vocab --tokenization=SentencePiece ------------------------------------------


@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> dict:
    """create-vocab's unigram model at 4k on WikiText-2 (validation split)."""
    out = tmp_path_factory.mktemp("spm") / "wiki.model"
    return create_vocab.run(_flags(input_file=WIKITEXT, output_file=out, vocab_size=4000,
                                   tokenization="SentencePiece"))


@pytest.mark.slow
def test_create_vocab_learns_albert_models_as_good_as_spm_train_on_the_same_sentences(
        learned, tmp_path):
    model = pathlib.Path(learned["vocab_file"]).read_bytes()
    vocab = parse_model(model)
    assert vocab.tokens[:13] == ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "(", ")", '"',
                                 "-", ".", "–", "£", "€")
    assert len(vocab) == learned["vocab_size"] == 4000
    pieces = pathlib.Path(learned["vocab_file"][:-len(".model")] + ".vocab").read_text()
    assert pieces.splitlines()[13].split("\t")[0] == vocab.tokens[13]
    training, held_out = split_lines(WIKITEXT)
    direct = spm_train_directly(training, tmp_path, SentencePieceLearning(vocab_size=4000))
    ours = line_stats(SentencePieceTokenizer(vocab), held_out)
    theirs = line_stats(SentencePieceTokenizer(parse_model(direct)), held_out)
    assert learned["held_out"]["words"] == ours.words > 10_000
    assert learned["held_out"]["tokens"] == ours.tokens
    assert learned["training"]["words"] == sum(len(preprocess_text(line, lower=True).split())
                                               for line in training)
    print(f"\nheld-out tokens/word: create-vocab {ours.rates()['tokens_per_word']}, "
          f"spm_train {theirs.rates()['tokens_per_word']}")
    assert ours.rates()["tokens_per_word"] <= 1.01 * theirs.rates()["tokens_per_word"]
    assert ours.unk_tokens <= theirs.unk_tokens + 2


@pytest.mark.slow
def test_a_learned_model_runs_end_to_end_into_the_pytorch_loader(learned, tmp_path):
    model = pathlib.Path(learned["vocab_file"])
    out = tmp_path / "data"
    manifest = run(_flags(input_file=DATA / "wiki_small.txt", output_dir=out,
                          spm_model_file=model, next_sentence="sop", ngram=3,
                          do_whole_word_mask="true", dupe_factor=1, max_seq_length=64,
                          max_predictions_per_seq=10))
    assert manifest["vocab_sha256"] == learned["vocab_sha256"]
    vocab = parse_model(model.read_bytes())
    tokenizer = SentencePieceTokenizer(vocab)
    corpus_ids = {i for line in (DATA / "wiki_small.txt").read_text().splitlines()
                  for i in tokenizer.tokenize_to_ids(line)}
    batches = list(make_dataloader(str(out), batch_size=32, shuffle=False))
    assert sum(len(b["input_ids"]) for b in batches) == manifest["total_instances"] > 100
    for batch in batches:
        assert (batch["input_ids"][:, 0] == vocab.cls_id).all()
        labels = batch["labels"].numpy()
        assert set(labels[labels != -100].tolist()) <= corpus_ids
        assert set(batch["token_boundary"].numpy().ravel().tolist()) <= {0, 1}


@pytest.mark.slow
def test_create_vocab_learns_bpe_too_and_a_small_corpus_gives_a_smaller_model(tmp_path, capsys):
    out = tmp_path / "small.model"
    create_vocab.main(_flags(input_file=DATA / "sample_text.txt", output_file=out,
                             vocab_size=5000, tokenization="SentencePiece", model_type="bpe",
                             held_out_fraction=0))
    printed = capsys.readouterr().out
    vocab = parse_model(out.read_bytes())
    assert 1000 < len(vocab) < 5000
    assert "the trainer found no more pieces in this corpus" in printed
    metrics = json.loads((tmp_path / "small.model.metrics.json").read_text())
    assert metrics["flags"]["model_type"] == "bpe" and metrics["held_out"]["words"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "small.model", "small.model.metrics.json", "small.vocab"]


@pytest.mark.parametrize("argv, message", [
    (["--tokenization=SentencePiece", "--max_words=5"], "--max_words applies to"),
    (["--tokenization=SentencePiece", "--model_type=word"], "invalid choice"),
    (["--tokenization=SentencePiece", "--vocab_size=10"], "vocab_size must exceed"),
    (["--tokenization=SentencePiece", "--input_sentence_size=0"], "input_sentence_size"),
])
def test_create_vocab_sentencepiece_flags_fail_in_one_line(argv, message):
    with pytest.raises(ConfigError, match=message):
        create_vocab.parse_args(["--input_file=x", "--output_file=m.model", *argv])
