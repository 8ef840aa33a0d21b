"""WordPiece vocabulary: loading, validation and the ids the pipeline needs.

The original `load_vocab` accepts any file and fails much later (a KeyError
deep inside instance creation, or silently wrong ids when a token appears
twice). Here a vocabulary is validated once, before any work starts, and every
problem is reported as one line naming the file and the fix.
"""

from __future__ import annotations

import dataclasses
import hashlib
from contextlib import AbstractContextManager
from typing import BinaryIO, Callable

from bert_pretraining_data.transforms.handoff.files import open_binary

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[MASK]", "[UNK]")


class VocabularyError(ValueError):
    """A vocabulary file that cannot be used; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class Framing:
    """How a tokenizer frames one segment (`cls A sep`) and two
    (`cls A sep*separators B sep`, B's type id `b_type_id`): the shapes the
    instance kernels write. BERT's vocab.txt and SentencePiece models frame
    as the original, [CLS] A [SEP] B [SEP]."""

    cls_id: int
    sep_id: int
    separators: int = 1  # between A and B: 1 (BERT's), 2 (RoBERTa's </s></s>)
    b_type_id: int = 1  # B's segment id: 1 (BERT's), 0 (RoBERTa's single type)

    @property
    def bert_pairs(self) -> bool:
        """Whether pairs are framed `[CLS] A [SEP] B [SEP]` with B of type 1,
        the only pair framing the sentence-pair objectives write."""
        return self.separators == 1 and self.b_type_id == 1


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """Tokens in id order plus the special ids; ids are line numbers from 0."""

    tokens: tuple[str, ...]
    sha256: str
    ids: dict[str, int] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", {t: i for i, t in enumerate(self.tokens)})

    def own_flags(self) -> dict[str, object]:
        """The settings a vocabulary decides itself, by the flags' names, that
        a manifest records in place of the flags (a tokenizer.json's); none
        for a vocab.txt, which the flags describe."""
        return {}

    @property
    def cls_id(self) -> int:
        return self.ids["[CLS]"]

    @property
    def sep_id(self) -> int:
        return self.ids["[SEP]"]

    @property
    def mask_id(self) -> int:
        return self.ids["[MASK]"]

    @property
    def unk_id(self) -> int:
        return self.ids["[UNK]"]

    @property
    def framing(self) -> Framing:
        return Framing(self.cls_id, self.sep_id)

    @property
    def pad_id(self) -> int:
        """What padding holds: 0, as the original pads, whatever [PAD]'s id."""
        return 0

    def __len__(self) -> int:
        return len(self.tokens)

    def continuation_flags(self) -> list[bool]:
        """Per id: does the token start with `##` (a word continuation)?"""
        return [t.startswith("##") for t in self.tokens]


def parse_vocabulary(data: bytes, *, source: str = "vocabulary") -> Vocabulary:
    """Parses vocabulary bytes the way the original reads them, and validates.

    The original reads line by line (newline only), strips each line and
    numbers the lines from 0; a final newline does not add an entry.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise VocabularyError(
            f"{source}: not valid UTF-8 at byte {err.start}; "
            "re-save the vocabulary file as UTF-8") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    tokens = tuple(line.strip() for line in lines)
    if not tokens:
        raise VocabularyError(
            f"{source}: the vocabulary file is empty; pass the vocab.txt "
            "of the BERT model you will train")
    first_seen: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token in first_seen:
            raise VocabularyError(
                f"{source}: duplicate entry {token!r} on lines "
                f"{first_seen[token] + 1} and {index + 1}; every token must "
                "appear once (ids are line numbers)")
        first_seen[token] = index
    missing = [t for t in SPECIAL_TOKENS if t not in first_seen]
    if missing:
        raise VocabularyError(
            f"{source}: missing special token(s) {' '.join(missing)}; add them "
            "(a BERT vocabulary has [PAD] [UNK] [CLS] [SEP] [MASK])")
    return Vocabulary(tokens=tokens, sha256=hashlib.sha256(data).hexdigest())


# How a vocabulary's file is opened, for reading bytes. The tokenizers compute
# without Beam (the loaders import them), so they take the filesystem from the
# caller: the pipeline passes Beam's FileSystems.open; anyone else gets the
# Beam-free one (transforms.handoff.files.open_binary: a local file, or a URL
# through fsspec or TensorFlow's gfile, as the original's tf.gfile read gs://).
Opener = Callable[[str], AbstractContextManager[BinaryIO]]


def read_vocabulary_file(path: str, open_file: Opener = open_binary, *,
                         what: str = "the vocabulary file", flags: str = "--vocab_file") -> bytes:
    """The bytes of a file, or a VocabularyError naming the flags."""
    try:
        with open_file(path) as handle:
            return handle.read()
    except Exception as err:  # filesystems (Beam's) wrap missing files in several types
        raise VocabularyError(
            f"{path}: cannot read {what} ({type(err).__name__}); check {flags}") from None


def load_vocabulary(path: str, open_file: Opener = open_binary) -> Vocabulary:
    """Reads (with `open_file`) and validates a vocabulary."""
    return parse_vocabulary(read_vocabulary_file(path, open_file), source=path)
