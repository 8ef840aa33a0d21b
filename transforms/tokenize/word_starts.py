"""Where a whole word starts among SentencePiece pieces: each anchor's rule, once.

Whole-word masking, n-gram masking and ALBERT's `token_boundary` need to know
which pieces begin a word. WordPiece marks the others (`##`), SentencePiece
the beginnings (`▁`), and the anchors read that differently: ALBERT by
`_is_start_piece_sp`, the Model Garden by `_tokens_to_grams` (only `##`
continues, so each SentencePiece piece is a word). Both read the piece's text
as the tokenizer produced it, for an unknown piece the text it covers.
"""

from __future__ import annotations

from typing import Callable

_ALBERT_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_ALBERT_WORD_CHARACTERS = _ALBERT_PUNCTUATION | frozenset("abcdefghijklmnopqrstuvwxyz")


def albert_starts_word(piece: str) -> bool:
    """ALBERT's `_is_start_piece_sp` (its create_pretraining_data.py): a piece
    starts a word if it starts with `▁` or `<`, is one punctuation character,
    or holds any character other than a-z (after lower-casing) and that
    punctuation: digits, accented letters, CJK and any other script always
    start a word. Its punctuation set is `!"#$%&()*+,-./:;?@[\\]^_`{|}~` (no
    apostrophe, `<`, `=` or `>`); its `€` and `£` entries are bytes, which no
    piece equals, so they start a word only as non-a-z characters."""
    return (piece.startswith(("▁", "<")) or piece in _ALBERT_PUNCTUATION
            or not all(char.lower() in _ALBERT_WORD_CHARACTERS for char in piece))


def model_garden_starts_word(piece: str) -> bool:
    """The Model Garden's `_tokens_to_grams`: only a `##` piece continues a word."""
    return not piece.startswith("##")


# Keyed by the anchor whose SentencePiece flags a run uses.
WORD_STARTS: dict[str, Callable[[str], bool]] = {
    "albert": albert_starts_word, "model_garden": model_garden_starts_word}
