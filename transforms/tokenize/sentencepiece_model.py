"""A SentencePiece model as the pipeline's vocabulary: its pieces, its ids, its
special pieces and where words start, validated before any work.

ALBERT's and the Model Garden's scripts take their vocabulary from the model
(`{IdToPiece(i): i}`), so ids are the model's ids and a random replacement
draws among all its pieces. Both scripts append `[CLS]`, `[SEP]` and read
`[MASK]` by name and convert them with `PieceToId`, which answers the
unknown id for a model that lacks them: their records then silently hold
`<unk>` where `[CLS]` should be. Here such a model is refused in one line.
"""

from __future__ import annotations

import dataclasses
import hashlib

import sentencepiece

from bert_pretraining_data.transforms.handoff.files import open_binary
from bert_pretraining_data.transforms.tokenize.word_starts import WORD_STARTS
from bert_pretraining_data.transforms.tokenize.vocabulary import (Opener, Vocabulary,
                                                                  VocabularyError,
                                                                  read_vocabulary_file)

SPECIAL_PIECES = ("[CLS]", "[SEP]", "[MASK]")
ANCHORS = tuple(WORD_STARTS)


@dataclasses.dataclass(frozen=True)
class PieceVocabulary(Vocabulary):
    """A SentencePiece model's pieces in id order (`tokens`), its unknown id,
    the anchor whose rules apply (ALBERT's or the Model Garden's flags) and
    the serialized model, which the tokenizer loads."""

    unk: int = 0
    anchor: str = "albert"
    model: bytes = dataclasses.field(default=b"", repr=False, compare=False)

    @property
    def unk_id(self) -> int:
        return self.unk

    def continuation_flags(self) -> list[bool]:
        """Per id: does the piece continue a word (the anchor's rule)? The
        unknown id counts as a word start here; an unknown piece whose text
        continues a word is marked where it occurs
        (transforms.tokenize.sentencepiece_text)."""
        starts = WORD_STARTS[self.anchor]
        return [i != self.unk and not starts(piece) for i, piece in enumerate(self.tokens)]

    def processor(self) -> sentencepiece.SentencePieceProcessor:
        return sentencepiece.SentencePieceProcessor(model_proto=self.model)


def parse_model(data: bytes, *, anchor: str = "albert",
                source: str = "SentencePiece model") -> PieceVocabulary:
    """Reads and validates a serialized SentencePiece model."""
    try:  # empty bytes load as no model at all
        processor = sentencepiece.SentencePieceProcessor(model_proto=data) if data else None
    except (RuntimeError, TypeError, OSError):  # what the library raises on bad bytes
        processor = None
    if processor is None:
        raise VocabularyError(
            f"{source}: not a SentencePiece model (the library cannot load it); pass the "
            ".model file spm_train or create-vocab wrote, not its .vocab")
    pieces = tuple(processor.id_to_piece(i) for i in range(processor.get_piece_size()))
    missing = [p for p in SPECIAL_PIECES if p not in pieces]
    if missing:
        raise VocabularyError(
            f"{source}: the model has no {' '.join(missing)} piece; ALBERT's and the Model "
            "Garden's records need [CLS] [SEP] [MASK]: train it with "
            "--control_symbols=[CLS],[SEP],[MASK] (create-vocab --tokenization="
            "SentencePiece does)")
    return PieceVocabulary(tokens=pieces, sha256=hashlib.sha256(data).hexdigest(),
                           unk=processor.unk_id(), anchor=anchor, model=data)


def load_model(path: str, open_file: Opener = open_binary, *,
               anchor: str = "albert") -> PieceVocabulary:
    """Reads (with `open_file`) and validates a model."""
    data = read_vocabulary_file(path, open_file, what="the SentencePiece model",
                                flags="--spm_model_file / --sp_model_file")
    return parse_model(data, anchor=anchor, source=path)
