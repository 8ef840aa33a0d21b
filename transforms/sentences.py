"""Paragraphs to sentences (`--sentence_splitter`), inside the Tokenize worker.

BERT's instances are built from whole sentences, so a corpus of documents
(JSONL, Parquet, Wikipedia) needs its paragraphs split. A document's lines
are paragraphs and stay boundaries; each is cut after CJK sentence-final
punctuation (。！？ and their fullwidth forms, a closing quote or bracket
kept with its sentence), then by the English splitter chosen by measurement
(bench/SENTENCE_SPLITTERS.md). `none` keeps a line as one sentence, the
original's text format. Every splitter here is deterministic and needs no
download at run time.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

SPLITTERS = ("none", "syntok")
DEFAULT_SPLITTER = "syntok"

# After 。！？ (and ！？ fullwidth, ｡ halfwidth) and any closing quotes or
# brackets, a new sentence starts.
_CJK_END = re.compile(r"([。！？｡！？][”’」』）》〉】\"')\]]*)")


def cjk_pieces(paragraph: str) -> list[str]:
    """A paragraph cut after each CJK sentence end (closing marks kept)."""
    parts = _CJK_END.split(paragraph)
    pieces = [body + end for body, end in zip(parts[0::2], parts[1::2] + [""])]
    return [piece.strip() for piece in pieces if piece.strip()]


def _syntok() -> Callable[[str], list[str]]:
    from syntok import segmenter

    def split(text: str) -> list[str]:
        return ["".join(token.spacing + token.value for token in sentence).strip()
                for paragraph in segmenter.process(text) for sentence in paragraph]

    return split


def sentence_splitter(name: str) -> Callable[[Iterable[str]], list[str]]:
    """Lines -> sentences: the lines themselves (`none`) or each line split."""
    if name == "none":
        return list
    english = {"syntok": _syntok}[name]()

    def split(lines: Iterable[str]) -> list[str]:
        return [sentence for line in lines for piece in cjk_pieces(line)
                for sentence in english(piece) if sentence]

    return split
