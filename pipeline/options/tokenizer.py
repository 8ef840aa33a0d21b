"""How text becomes token ids: WordPiece, SentencePiece or a tokenizer.json."""

from __future__ import annotations

import dataclasses
from typing import AbstractSet, Any

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag
from bert_pretraining_data.transforms.tokenize.engines import CHECK_LINES, ENGINES
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import SENTENCEPIECE, WORDPIECE


def _path_or_none(text: str) -> str | None:
    """No path for an empty one (`--spm_model_file=`)."""
    return text or None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenizerFlags(FlagGroup):
    SECTION = ("tokenizer",
               "WordPiece (the original's) or SentencePiece (ALBERT's, the Model Garden's)")

    vocab_file: str | None = flag(
        "the WordPiece vocab.txt of the model to train (with "
        "--spm_model_file, ALBERT's .vocab beside it, which is not read)", default=None,
        default_help="none; required unless a SentencePiece model or --recipe=d2l gives "
                     "the vocabulary")
    do_lower_case: bool = flag(
        "lower-case and strip accents (uncased models); not with "
        "--tokenizer_file, whose normalizer decides", default=True, absl=True,
        parser_default=None)
    spm_model_file: str | None = flag(
        "ALBERT's flag: tokenize with this SentencePiece model (e.g. "
        "30k-clean.model) as ALBERT's script does; ids are the model's",
        type=_path_or_none, default=None)
    tokenization: str = flag(
        "the Model Garden's flag: WordPiece (--vocab_file) or SentencePiece "
        "(--sp_model_file), as its script tokenizes", choices=[WORDPIECE, SENTENCEPIECE],
        default=WORDPIECE)
    sp_model_file: str | None = flag(
        "the Model Garden's flag: with --tokenization=SentencePiece, the "
        "SentencePiece model", type=_path_or_none, default=None)
    tokenizer_file: str | None = flag(
        "a Hugging Face tokenizer.json (byte-level BPE, WordPiece, Unigram): "
        "each line encoded alone by the tokenizers library, framed by the file's "
        "post-processor, padded with its pad token (in place of --vocab_file)",
        type=_path_or_none, default=None)

    tokenizer_engine: str = flag(
        "with --tokenizer_file: auto encodes byte-level BPE with fastokens where the file "
        "is one it reproduces and its ids equal the tokenizers library's on "
        f"{CHECK_LINES:,} lines of this input (checked first, else the run takes "
        "tokenizers, with a warning); tokenizers always uses the library",
        choices=list(ENGINES), default="auto", parser_default=None)

    @property
    def sentencepiece_flags(self) -> bool:
        """ALBERT's or the Model Garden's flags name a SentencePiece model."""
        return bool(self.spm_model_file or self.sp_model_file
                    or self.tokenization == SENTENCEPIECE)

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        # The d2l recipe computes its vocabulary from the corpus; a SentencePiece
        # model or a tokenizer.json is the vocabulary.
        return [
            (bool(config.vocab_file or config.recipe == "d2l" or config.sentencepiece_flags
                  or config.tokenizer_file), "--vocab_file is required"),
            (not (config.spm_model_file and (config.sp_model_file or config.tokenization
                                              == SENTENCEPIECE)),
             "--spm_model_file (ALBERT's flag) and --tokenization=SentencePiece "
             "--sp_model_file (the Model Garden's) both name a SentencePiece model; give one"),
            (config.tokenization != SENTENCEPIECE or config.sp_model_file,
             "--tokenization=SentencePiece needs --sp_model_file, the model to tokenize with"),
            (not config.sp_model_file or config.tokenization == SENTENCEPIECE,
             "--sp_model_file is read with --tokenization=SentencePiece (the Model Garden's "
             "flags); add it, or give the model as --spm_model_file (ALBERT's)"),
            (not (config.tokenizer_file and (config.vocab_file or config.sentencepiece_flags)),
             "--tokenizer_file is the whole tokenizer (its vocabulary included); drop "
             "--vocab_file, --spm_model_file and --tokenization=SentencePiece"),
            (not (config.tokenizer_file and "do_lower_case" in given),
             "--do_lower_case does not apply to --tokenizer_file: the tokenizer.json's "
             "normalizer decides the case; drop it"),
            (config.tokenizer_file or "tokenizer_engine" not in given,
             "--tokenizer_engine applies to --tokenizer_file; add it or drop "
             "--tokenizer_engine"),
        ]
