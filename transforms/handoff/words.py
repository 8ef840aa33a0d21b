"""Words as BERT's BasicTokenizer first splits text: its cleanup (NUL, U+FFFD,
control and format characters dropped, every whitespace character a space),
each CJK ideograph a word of its own, then a split at whitespace.

One definition for the stages that must agree on it: Deduplicate compares
documents on these words, Tokenize segments them (its compiled per-character
table, transforms.tokenize.wordpiece, reads `cleaned_character`) and
create-vocab counts them.
"""

from __future__ import annotations

import unicodedata

# The original's CJK blocks (Unified Ideographs, extensions A-E, compatibility).
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def is_cjk(char: str) -> bool:
    """A CJK ideograph, by the original's blocks (`_is_chinese_char`)."""
    cp = ord(char)
    return any(first <= cp <= last for first, last in _CJK_RANGES)


def cleaned_character(cp: int) -> str | None:
    """What the original's `_clean_text` and CJK spacing make of one character:
    NUL, U+FFFD, Cc and Cf dropped, whitespace (tab, LF, CR, Zs) a space, a CJK
    ideograph spaced, anything else itself."""
    char = chr(cp)
    if cp in (0, 0xFFFD):
        return None
    if char in "\t\n\r":
        return " "
    if is_cjk(char):
        return f" {char} "
    category = unicodedata.category(char)
    if category == "Zs":
        return " "
    return None if category in ("Cc", "Cf") else char


class _CharacterMap(dict):
    """The `str.translate` map, filled one character at its first sight.

    A corpus uses a few thousand of the 1.1 M code points; building the whole
    table would cost every process that splits words (each worker) its start-up.
    """

    def __missing__(self, cp: int) -> str | None:
        self[cp] = cleaned = cleaned_character(cp)
        return cleaned


_CHARACTERS = _CharacterMap()


def split_words(text: str) -> list[str]:
    """The original's text cleanup, CJK spacing and whitespace split."""
    return text.translate(_CHARACTERS).split()
