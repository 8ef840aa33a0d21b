"""SentencePiece tokenization (transforms.subword) against ALBERT's and the Model
Garden's own tokenization.py and word-start rules, run with the real library
(tests/data/sentencepiece_golden.jsonl.gz, made by
tests/golden/make_sentencepiece_golden.py), and the models it refuses."""

from __future__ import annotations

import gzip
import io
import json

import pytest
import sentencepiece

from conftest import DATA
from bert_pretraining_data.transforms.tokenize.chinese_words import ID_BITS, MARK
from bert_pretraining_data.transforms.tokenize.sentencepiece_model import parse_model
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec
from bert_pretraining_data.transforms.tokenize.word_starts import albert_starts_word
from bert_pretraining_data.transforms.tokenize.vocabulary import VocabularyError

MODEL = DATA / "sentencepiece-8k.model"
GOLDEN = [json.loads(line) for line in
          gzip.open(DATA / "sentencepiece_golden.jsonl.gz", "rt", encoding="utf-8")]
CASES = [(anchor, lower) for anchor in ("albert", "model_garden") for lower in (True, False)]


def word_starts(continues: list[bool], ids: list[int]) -> list[bool]:
    """Where words start, as the record kernels read it: the vocabulary's
    continuation table, or a position's mark."""
    return [not (continues[i & ID_BITS] or i & MARK) for i in ids]


def grams(starts: list[bool]) -> list[list[int]]:
    """[begin, end) of each whole word (the Model Garden's _tokens_to_grams)."""
    bounds = [i for i, start in enumerate(starts) if start or i == 0] + [len(starts)]
    return [list(pair) for pair in zip(bounds, bounds[1:])] if starts else []


@pytest.mark.parametrize("anchor,lower", CASES, ids=lambda v: str(v))
def test_pieces_ids_and_word_starts_are_the_anchors_on_every_line(anchor, lower):
    tokenizer = TokenizerSpec(None, lower, str(MODEL), anchor).tokenizer()
    variant = "lower" if lower else "cased"
    continues = tokenizer.vocabulary.continuation_flags()
    for row in GOLDEN:
        expected = row[anchor][variant]
        ids = tokenizer.tokenize_to_ids(row["line"])
        where = f"{row['source']}: {row['line'][:60]!r}"
        assert tokenizer.preprocess(row["line"]) == expected["text"], where
        assert tokenizer.tokenize(row["line"]) == expected["pieces"], where
        assert [i & ID_BITS for i in ids] == expected["ids"], where
        if anchor == "albert":
            assert word_starts(continues, ids) == expected["starts"], where
        else:
            assert grams(word_starts(continues, ids)) == expected["grams"], where


def test_the_golden_lines_reach_every_rule():
    """The digit-comma re-encoding (where the anchors differ), unknown pieces
    that continue a word (marked), accents, Chinese and blank lines."""
    differ = [r for r in GOLDEN if r["albert"]["cased"]["pieces"]
              != r["model_garden"]["cased"]["pieces"]]
    unknown_continues = [r for r in GOLDEN for i, s in zip(r["albert"]["cased"]["ids"],
                                                           r["albert"]["cased"]["starts"])
                         if i == 1 and not s]
    assert len(differ) > 50 and len(unknown_continues) >= 5
    assert any(r["albert"]["cased"]["text"] == "" and r["line"].strip() for r in GOLDEN)


def test_word_starts_albert_rule():
    assert [albert_starts_word(p) for p in ("▁the", "s", "<unk>", ",", "90", "'s", "ü",
                                            "我", "^|", "s.", "€")] == [
        True, False, True, True, True, True, True, True, False, False, True]


def test_blank_lines_are_the_anchors_document_breaks():
    albert = TokenizerSpec(None, True, str(MODEL), "albert")
    garden = TokenizerSpec(None, True, str(MODEL), "model_garden")
    wordpiece = TokenizerSpec(str(DATA / "bert-base-uncased-vocab.txt"))
    # NFKD makes "¨" a space and a combining mark: ALBERT keeps the space,
    # the Model Garden strips it; a line of combining marks empties for both.
    assert [albert.is_blank(s) for s in ("", " \t", "¨", "\u0301", "a")] == [
        True, True, False, True, False]
    assert [garden.is_blank(s) for s in ("¨", "\u0301")] == [True, True]
    assert [wordpiece.is_blank(s) for s in ("¨", "\u0301", " ")] == [False, False, True]


def _model(**settings) -> bytes:
    model = io.BytesIO()
    sentences = (DATA / "sample_text.txt").read_text().splitlines()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=200,
        minloglevel=2, **settings)
    return model.getvalue()


def test_a_model_without_cls_sep_mask_is_refused_in_one_line():
    with pytest.raises(VocabularyError) as err:
        parse_model(_model(control_symbols=["[CLS]"]), source="plain.model")
    assert str(err.value).startswith("plain.model: the model has no [SEP] [MASK] piece")
    assert "\n" not in str(err.value)
    for data in (b"", b"not a model", (DATA / "sentencepiece-8k.vocab").read_bytes()):
        with pytest.raises(VocabularyError, match="not a SentencePiece model"):
            parse_model(data, source="x")


def test_ids_are_the_models_and_specials_come_from_it():
    vocabulary = parse_model(MODEL.read_bytes())
    processor = sentencepiece.SentencePieceProcessor(model_file=str(MODEL))
    assert len(vocabulary) == processor.get_piece_size() == 8000
    assert (vocabulary.cls_id, vocabulary.sep_id, vocabulary.mask_id, vocabulary.unk_id) == (
        2, 3, 4, processor.unk_id())
    model = parse_model(_model(control_symbols=["[MASK]", "[SEP]", "[CLS]"], unk_id=3,
                               pad_id=0, bos_id=1, eos_id=2))
    assert (model.mask_id, model.sep_id, model.cls_id, model.unk_id) == (4, 5, 6, 3)
