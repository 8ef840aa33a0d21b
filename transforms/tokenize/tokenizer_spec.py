"""The one tokenizer interface: which tokenizer the flags name, loaded alike by
the pipeline, reference mode, the loaders and the tools.

Four spellings, three as the anchors' scripts take them:

    --vocab_file=vocab.txt                          BERT's WordPiece (default)
    --spm_model_file=30k-clean.model                ALBERT's SentencePiece
    --tokenization=SentencePiece --sp_model_file=m  the Model Garden's SentencePiece
    --tokenizer_file=tokenizer.json                 any Hugging Face tokenizer

`TokenizerSpec.of(flags)` reads them from a run's flags or a manifest's.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Protocol, Sequence

from bert_pretraining_data.transforms.handoff.files import open_binary
from bert_pretraining_data.transforms.tokenize.sentencepiece_model import load_model, parse_model
from bert_pretraining_data.transforms.tokenize.sentencepiece_text import (SentencePieceTokenizer,
                                                                          preprocess_text)
from bert_pretraining_data.transforms.tokenize.engines import TOKENIZERS
from bert_pretraining_data.transforms.tokenize.tokenizer_json import (JsonTokenizer,
                                                                      load_tokenizer_json,
                                                                      parse_tokenizer_json)
from bert_pretraining_data.transforms.tokenize.vocabulary import (Opener, Vocabulary,
                                                                  load_vocabulary, parse_vocabulary)
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer

WORDPIECE, SENTENCEPIECE = "WordPiece", "SentencePiece"  # --tokenization's values


class Tokenizer(Protocol):
    """What every tokenizer offers, WordPiece's and SentencePiece's alike."""

    vocabulary: Vocabulary

    def tokenize_to_ids(self, text: str) -> list[int]: ...

    def tokenize(self, text: str) -> list[str]: ...

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]: ...

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]: ...


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """What to load: a WordPiece vocab.txt, a SentencePiece model with the
    text handling of the anchor whose flags named it ("albert" or
    "model_garden"), or a tokenizer.json. Small and picklable: a DoFn takes it
    and loads in setup."""

    vocab_file: str | None
    do_lower_case: bool = True
    sp_model_file: str | None = None
    anchor: str | None = None  # whose SentencePiece flags; None: WordPiece
    tokenizer_file: str | None = None  # a tokenizer.json: its normalizer decides the case
    # Whether a tokenizer.json's tokens are grouped into words (continuations
    # marked from its word ids): only whole-word masking and ALBERT's
    # token_boundary read them, and the library encodes faster without.
    words: bool = True
    # A tokenizer.json's engine, as the run chose it (transforms.tokenize.engines)
    engine: str = TOKENIZERS

    @classmethod
    def of(cls, flags: Mapping[str, object]) -> "TokenizerSpec":
        """From flags by the anchors' names (a Config's, a manifest's); flags
        recorded before SentencePiece existed are WordPiece's. ALBERT passes
        --vocab_file beside --spm_model_file; it is kept, and never read."""
        lower = bool(flags.get("do_lower_case", True))
        if flags.get("tokenizer_file"):
            return cls(None, lower, tokenizer_file=str(flags["tokenizer_file"]))
        if flags.get("spm_model_file"):
            return cls(flags.get("vocab_file"), lower, str(flags["spm_model_file"]), "albert")
        if flags.get("tokenization", WORDPIECE) == SENTENCEPIECE:
            return cls(flags.get("vocab_file"), lower, str(flags.get("sp_model_file") or ""),
                       "model_garden")
        return cls(flags.get("vocab_file"), lower)

    @property
    def sentencepiece(self) -> bool:
        return self.anchor is not None

    @property
    def marks_continuations(self) -> bool:
        """Whether ids carry MARK where a token continues a word (SentencePiece's
        unknown pieces, every continuation of a tokenizer.json's words)."""
        return self.sentencepiece or (self.tokenizer_file is not None and self.words)

    @property
    def path(self) -> str | None:
        """The file the vocabulary is read from: the model, tokenizer.json or vocab.txt."""
        if self.tokenizer_file:
            return self.tokenizer_file
        return self.sp_model_file if self.sentencepiece else self.vocab_file

    def parse_vocabulary(self, data: bytes, *, source: str) -> Vocabulary:
        """The vocabulary of these bytes (a model's, or a vocab.txt's), validated."""
        if self.tokenizer_file:
            return parse_tokenizer_json(data, source=source)
        if self.sentencepiece:
            return parse_model(data, anchor=self.anchor, source=source)
        return parse_vocabulary(data, source=source)

    def load_vocabulary(self, open_file: Opener = open_binary) -> Vocabulary:
        """Reads the vocabulary at `path` with `open_file` (a local file unless
        the caller passes its filesystem's, e.g. Beam's for gs://), validated."""
        if self.tokenizer_file:
            return load_tokenizer_json(self.path, open_file)
        if self.sentencepiece:
            return load_model(self.path, open_file, anchor=self.anchor)
        return load_vocabulary(self.path, open_file)

    def tokenizer(self, vocabulary: Vocabulary | None = None) -> Tokenizer:
        """The tokenizer, over `vocabulary` if it is loaded already."""
        vocabulary = vocabulary or self.load_vocabulary()
        if self.tokenizer_file:
            return JsonTokenizer(vocabulary, words=self.words, engine=self.engine)
        if self.sentencepiece:
            return SentencePieceTokenizer(vocabulary, do_lower_case=self.do_lower_case)
        return FullTokenizer(vocabulary, do_lower_case=self.do_lower_case)

    def is_blank(self, line: str) -> bool:
        """Whether the anchor's reader takes a line for a document break: BERT's
        (and a tokenizer.json's run's) when it strips to nothing, ALBERT's and
        the Model Garden's when `preprocess_text` leaves nothing (a line of
        combining marks does)."""
        if not self.sentencepiece:
            return not line.strip()
        text = preprocess_text(line, lower=False)
        return not (text.strip() if self.anchor == "model_garden" else text)
