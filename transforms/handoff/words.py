"""Words: how the stages cut text into words, folding it first where two texts
are compared.

One definition, `split_words`: the text, folded when it is compared with
another (`folded`: NFKC, then case folding), each character mapped by a rule,
then split at whitespace. Two rules, because two conventions are kept:

- BERT_CLEANUP, BERT's BasicTokenizer's first steps (NUL, U+FFFD, control and
  format characters dropped, tab, LF, CR and Zs a space, each CJK ideograph a
  word of its own). Tokenize segments text so (its compiled per-character
  table, transforms.tokenize.wordpiece, reads `cleaned_character`) and
  create-vocab counts these words, unfolded: a cased vocabulary needs the case,
  and the tokenizer lower-cases and strips accents its own way. Deduplicate and
  the held-out split compare documents on them folded, so a copy is text the
  tokenizer would see again: punctuation and accents make another text.
- PUNCTUATION_AS_SPACE, lm-eval's janitor's in spirit (whitespace and Unicode
  punctuation, category P*, a space; nothing dropped, a run of CJK one word).
  Decontaminate makes benchmark n-grams of these words, folded, so a
  benchmark item copied with other punctuation still matches.
"""

from __future__ import annotations

import unicodedata
from typing import Callable

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


def separated_character(cp: int) -> str:
    """Whitespace (str.isspace) and punctuation (category P*) a space,
    anything else itself."""
    char = chr(cp)
    return " " if char.isspace() or unicodedata.category(char).startswith("P") else char


class CharacterRule(dict):
    """A rule for each character as a `str.translate` map (its replacement,
    None to drop it), filled one character at its first sight.

    A corpus uses a few thousand of the 1.1 M code points; building the whole
    table would cost every process that splits words (each worker) its start-up.
    """

    def __init__(self, character: Callable[[int], str | None]) -> None:
        super().__init__()
        self._character = character

    def __missing__(self, cp: int) -> str | None:
        self[cp] = mapped = self._character(cp)
        return mapped


BERT_CLEANUP = CharacterRule(cleaned_character)
PUNCTUATION_AS_SPACE = CharacterRule(separated_character)


def folded(text: str) -> str:
    """NFKC, then case folding: the form two texts are compared in, so that
    letter case and compatibility forms (full-width letters, ligatures) do not
    tell them apart; accents do (NFKC composes them, it keeps them)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)  # returns at once when already NFKC
    return text.casefold()


def split_words(text: str, rule: CharacterRule = BERT_CLEANUP, *,
                fold: bool = False) -> list[str]:
    """The words of `text`: folded if `fold` (texts compared with each other),
    each character mapped by `rule`, split at whitespace."""
    return (folded(text) if fold else text).translate(rule).split()
