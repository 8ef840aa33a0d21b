"""Text to SentencePiece ids as ALBERT's and the Model Garden's scripts make them,
through Google's `sentencepiece` library (the segmentation is the library's own).

Read it beside the anchors' tokenization.py (`preprocess_text`,
`encode_pieces`): their one difference is the `▁` the model puts before a
re-encoded piece that had none, which the Model Garden drops and ALBERT's
code means to drop but, under Python 3, never does. An unknown piece's text
is what it covers, not `<unk>`, and when it continues a word its id carries
MARK (transforms.tokenize.chinese_words), so whole-word masking groups it.
"""

from __future__ import annotations

import unicodedata
from typing import Sequence

import sentencepiece

from bert_pretraining_data.transforms.tokenize.chinese_words import MARK
from bert_pretraining_data.transforms.tokenize.sentencepiece_model import PieceVocabulary
from bert_pretraining_data.transforms.tokenize.word_starts import WORD_STARTS

SPIECE_UNDERLINE = "▁"


class _WithoutCombining(dict):
    """A `str.translate` map that drops combining characters, filled one
    character at its first sight (as transforms.tokenize.wordpiece's)."""

    def __missing__(self, cp: int) -> str | None:
        char = chr(cp)
        self[cp] = kept = None if unicodedata.combining(char) else char
        return kept


_WITHOUT_COMBINING = _WithoutCombining()


def preprocess_text(text: str, *, lower: bool) -> str:
    """The anchors' `preprocess_text` (remove_space=True): whitespace runs
    become one space, NFKD, combining characters dropped (accents stripped),
    lower-cased if asked. ASCII text is its own NFKD and holds no combining
    character, so it skips those steps."""
    text = " ".join(text.strip().split())
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text).translate(_WITHOUT_COMBINING)
    return text.lower() if lower else text


def reencoded(piece: str) -> bool:
    """Whether `encode_pieces` encodes this piece again (a digit, then a comma)."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def encode_pieces(processor: sentencepiece.SentencePieceProcessor, text: str, *,
                  drop_added_space: bool) -> list[str]:
    """The anchors' `encode_pieces` (sample=False): the model's pieces, but a
    piece ending in a digit and a comma ("1990,") is encoded again without
    its `▁` and comma, and the comma appended as a piece of its own.
    `drop_added_space`: the Model Garden's (True: "abc1990," gives "1990" and
    ","), or ALBERT's under Python 3 (False: the `▁` stays)."""
    pieces: list[str] = []
    for piece in processor.encode_as_pieces(text):
        if not reencoded(piece):
            pieces.append(piece)
            continue
        again = processor.encode_as_pieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
        if (drop_added_space and piece[0] != SPIECE_UNDERLINE
                and again[0][0] == SPIECE_UNDERLINE):
            again = again[1:] if len(again[0]) == 1 else [again[0][1:], *again[1:]]
        pieces += again
        pieces.append(piece[-1])
    return pieces


class SentencePieceTokenizer:
    """Text to ids with a SentencePiece model, as its anchor's script makes
    them (the vocabulary's `anchor`: ALBERT's `--spm_model_file`, or the
    Model Garden's `--tokenization=SentencePiece`). The interface of
    transforms.tokenize.wordpiece.FullTokenizer (transforms.tokenize.tokenizer_spec).

    Build it once per process, in `DoFn.setup` (it holds the loaded model).
    """

    def __init__(self, vocabulary: PieceVocabulary, do_lower_case: bool = True) -> None:
        self.vocabulary = vocabulary
        self.do_lower_case = do_lower_case
        self._processor = vocabulary.processor()
        self._model_garden = vocabulary.anchor == "model_garden"
        self._starts_word = WORD_STARTS[vocabulary.anchor]
        # The ids after which the model's own ids are not the answer: the
        # unknown id (its text decides the word start) and re-encoded pieces.
        self._special = frozenset([vocabulary.unk_id] + [
            i for i, piece in enumerate(vocabulary.tokens) if reencoded(piece)])

    def preprocess(self, line: str) -> str:
        """A line as the anchor's script hands it to `encode_pieces`."""
        text = preprocess_text(line, lower=self.do_lower_case)
        return text.strip() if self._model_garden else text

    def tokenize(self, line: str) -> list[str]:
        """The pieces of one line, as the anchor's tokenizer returns them."""
        return encode_pieces(self._processor, self.preprocess(line),
                             drop_added_space=self._model_garden)

    def tokenize_to_ids(self, line: str) -> list[int]:
        """Ids of one line (`PieceToId` of each piece: an unknown piece, or a
        re-encoded piece the model lacks, is the unknown id); an unknown piece
        that continues a word carries MARK. Most lines are the model's ids as
        they are, in one library call."""
        text = self.preprocess(line)
        ids = self._processor.encode_as_ids(text)
        if self._special.isdisjoint(ids):
            return ids
        unk, to_id, starts_word = self.vocabulary.unk_id, self._processor.piece_to_id, self._starts_word
        marked = []
        for piece in encode_pieces(self._processor, text, drop_added_space=self._model_garden):
            piece_id = to_id(piece)
            marked.append(piece_id | MARK if piece_id == unk and not starts_word(piece)
                          else piece_id)
        return marked

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        tokens = self.vocabulary.tokens
        return [tokens[i] for i in ids]

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self._processor.piece_to_id(t) for t in tokens]
