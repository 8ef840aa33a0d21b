"""The text two documents are compared on, and its 128-bit digest.

Normalisation: the words of transforms.handoff.words, folded (NFKC, case
folding) and cut by the cleanup BERT's tokenizer applies before it splits
words (control and format characters dropped, every whitespace character a
space, each CJK ideograph a word of its own), joined by one space. So two
documents are exact copies when they differ only in whitespace (line breaks,
runs of spaces, tabs, NBSP), letter case, or Unicode compatibility forms
(full-width letters, ligatures); any other change (a word, a punctuation
mark, an accent) makes them different. The held-out split draws on the same
text (transforms.split).
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from bert_pretraining_data.transforms.handoff.words import folded, split_words

DIGEST_BYTES = 16


def normalised_text(lines: Sequence[str]) -> str:
    """A document's words, folded (split_words(its lines joined, fold=True)),
    joined by single spaces.

    Most text takes a fast path with the same result: when the folded text
    is printable (no control, format or whitespace character but the space)
    and holds no CJK ideograph, the tokenizer's cleanup changes nothing but
    runs of spaces.
    """
    text = folded(" ".join(lines))
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
