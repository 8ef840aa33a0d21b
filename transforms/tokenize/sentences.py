"""Paragraphs to sentences (`--sentence_splitter`), inside the Tokenize worker.

BERT's instances are built from whole sentences, so a corpus of documents
(JSONL, Parquet, Wikipedia) needs its paragraphs split. A document's lines
stay boundaries; each is cut after CJK sentence-final punctuation, then by the
English splitter chosen by measurement (bench/SENTENCE_SPLITTERS.md); `none`
keeps a line as one sentence, as the original's text format. Every splitter
is deterministic and needs no download at run time.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

SPLITTERS = ("none", "blingfire", "syntok")
DEFAULT_SPLITTER = "blingfire"

# After 。！？ (fullwidth ！？, halfwidth ｡) and any closing quotes or
# brackets, a new sentence starts.
_CLOSING = "”’」』）》〉】\"')]"
_CJK_END = re.compile(f"([。！？｡][{re.escape(_CLOSING)}]*)")


def cjk_pieces(paragraph: str) -> list[str]:
    """A paragraph cut after each CJK sentence end (closing marks kept)."""
    parts = _CJK_END.split(paragraph)
    pieces = [body + end for body, end in zip(parts[0::2], parts[1::2] + [""])]
    return [piece.strip() for piece in pieces if piece.strip()]


def _blingfire() -> Callable[[str], list[str]]:
    try:
        import blingfire
    except (ImportError, OSError) as err:  # its library is built for x86-64 only
        raise RuntimeError(f"blingfire cannot load here ({err}); pass "
                           "--sentence_splitter=syntok") from None

    def split(text: str) -> list[str]:
        # '' when its C call fails: the paragraph stays whole.
        return blingfire.text_to_sentences(text).split("\n") or [text]

    return split


def _syntok() -> Callable[[str], list[str]]:
    from syntok import segmenter

    def split(text: str) -> list[str]:
        # Sentences as slices of the text: `segmenter.process` would rewrite
        # it ("doesn't" -> "doesnot").
        return [text[sentence[0].offset:sentence[-1].offset + len(sentence[-1].value)]
                for paragraph in segmenter.analyze(text) for sentence in paragraph if sentence]

    return split


def sentence_splitter(name: str) -> Callable[[Iterable[str]], list[str]]:
    """Lines -> sentences: the lines themselves (`none`) or each line split,
    a piece that is only closing marks kept with the sentence before it."""
    if name == "none":
        return list
    english = {"blingfire": _blingfire, "syntok": _syntok}[name]()

    def split(lines: Iterable[str]) -> list[str]:
        sentences: list[str] = []
        for line in lines:
            first = len(sentences)  # a paragraph's sentences start here
            for piece in cjk_pieces(line):
                for sentence in english(piece):
                    sentence = sentence.strip()
                    if len(sentences) > first and sentence and not sentence.strip(_CLOSING):
                        sentences[-1] += sentence
                    elif sentence:
                        sentences.append(sentence)
        return sentences

    return split
