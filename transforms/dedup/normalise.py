"""The text two documents are compared on, and its 128-bit digest.

Normalisation: NFKC, case folding, then the cleanup BERT's tokenizer applies
before it splits words (control and format characters dropped, every
whitespace character a space, each CJK ideograph a word of its own), words
joined by one space. So two documents are exact copies when they differ only
in whitespace (line breaks, runs of spaces, tabs, NBSP), letter case, or
Unicode compatibility forms (full-width letters, ligatures); any other change
(a word, a punctuation mark, an accent) makes them different.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Sequence

from bert_pretraining_data.transforms.handoff.words import split_words

DIGEST_BYTES = 16


def normalised_text(lines: Sequence[str]) -> str:
    """A document's lines as its normalised words joined by single spaces.

    Most text takes a fast path with the same result: when the case-folded
    text is printable (no control, format or whitespace character but the
    space) and holds no CJK ideograph, the tokenizer's cleanup changes
    nothing but runs of spaces.
    """
    text = " ".join(lines)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)  # returns at once when already NFKC
    text = text.casefold()
    if text.isprintable() and not _may_hold_cjk(text):
        spaced = "  " in text or text[:1] == " " or text[-1:] == " "
        return " ".join(text.split()) if spaced else text
    return " ".join(split_words(text))


# Every CJK ideograph (U+3400 and above) starts with one of these UTF-8 bytes.
_NOT_CJK_LEADS = bytes(byte for byte in range(256)
                       if not (0xE3 <= byte <= 0xE9 or 0xEF <= byte <= 0xF4))


def _may_hold_cjk(text: str) -> bool:
    """False when `text` surely holds no CJK ideograph (one C pass over its bytes)."""
    return not text.isascii() and bool(text.encode("utf-8").translate(None, _NOT_CJK_LEADS))


def text_digest(text: str) -> bytes:
    """128 bits of blake2b over the normalised text: equal texts, equal
    digests; distinct texts collide with probability ~2^-128 per pair."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=DIGEST_BYTES).digest()
