"""A literal, character-by-character port of BERT's original tokenizer.

It is the slow reference the fast tokenizer is checked against (both must
also match the golden file produced by the original script itself). It keeps
the original's structure on purpose; do not optimise it.
"""

from __future__ import annotations

import unicodedata


def _is_whitespace(char: str) -> bool:
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in (
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
        (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
        (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)))


class OracleTokenizer:
    """BasicTokenizer + WordpieceTokenizer, one character at a time."""

    def __init__(self, vocab_tokens: list[str], do_lower_case: bool) -> None:
        self.vocab = {}
        for index, token in enumerate(vocab_tokens):
            self.vocab[token] = index
        self.do_lower_case = do_lower_case

    def tokenize(self, text: str) -> list[str]:
        out = []
        for word in self._basic(text):
            out.extend(self._wordpiece(word))
        return out

    def _basic(self, text: str) -> list[str]:
        cleaned = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or _is_control(char):
                continue
            cleaned.append(" " if _is_whitespace(char) else char)
        spaced = []
        for char in cleaned:
            spaced.append(f" {char} " if _is_cjk(ord(char)) else char)
        pieces = []
        for token in "".join(spaced).strip().split():
            if self.do_lower_case:
                token = token.lower()
                token = "".join(c for c in unicodedata.normalize("NFD", token)
                                if unicodedata.category(c) != "Mn")
            current: list[str] = []
            for char in token:
                if _is_punctuation(char):
                    if current:
                        pieces.append("".join(current))
                    pieces.append(char)
                    current = []
                else:
                    current.append(char)
            if current:
                pieces.append("".join(current))
        return " ".join(pieces).strip().split()

    def _wordpiece(self, word: str) -> list[str]:
        if len(word) > 200:
            return ["[UNK]"]
        out = []
        start = 0
        while start < len(word):
            end = len(word)
            match = None
            while start < end:
                candidate = word[start:end]
                if start > 0:
                    candidate = "##" + candidate
                if candidate in self.vocab:
                    match = candidate
                    break
                end -= 1
            if match is None:
                return ["[UNK]"]
            out.append(match)
            start = end
        return out
