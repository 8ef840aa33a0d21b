"""Chinese whole words for whole-word masking (`--whole_word_segmenter=jieba`).

BERT's tokenizer splits Chinese into single characters, so its whole-word
masking masks characters. Chinese BERT-wwm masks words: a segmenter finds
them, and the characters that continue a word are grouped like `##` pieces
while their ids stay the characters' (Hugging Face's `run_chinese_ref.py`
with jieba for LTP). A marked id carries MARK (bit 30, far above any
vocabulary id) from Tokenize to the instance kernels, which strip it when an
instance is built (transforms.instances.pairs.emit).
"""

from __future__ import annotations

from typing import Sequence

from bert_pretraining_data.transforms.handoff.words import is_cjk

MARK = 1 << 30
ID_BITS = MARK - 1
SEGMENTERS = ("none", "jieba")


def chinese_words(words: Sequence[str]) -> set[str]:
    """HF's `get_chinese_word`: words of 2+ characters, all CJK ideographs."""
    return {word for word in words if len(word) > 1 and all(map(is_cjk, word))}


def continuation_marks(tokens: Sequence[str], words: set[str]) -> list[bool]:
    """HF's `add_sub_symbol`: per token, whether it continues a word. The
    tokens are scanned left to right; at a Chinese token the longest run of
    tokens that spells one of `words` is a match, its tokens after the first
    marked."""
    marks = [False] * len(tokens)
    longest = max(map(len, words), default=0)
    start = 0
    while start < len(tokens):
        step = 1
        if all(map(is_cjk, tokens[start])):
            for size in range(min(len(tokens) - start, longest), 1, -1):
                if "".join(tokens[start:start + size]) in words:
                    marks[start + 1:start + size] = [True] * (size - 1)
                    step = size
                    break
        start += step
    return marks


class JiebaMarker:
    """Line -> marked token ids. Build it once per process (jieba loads its
    dictionary when built); jieba's own cache file is not used."""

    def __init__(self, tokenizer) -> None:
        import jieba  # only runs with --whole_word_segmenter=jieba

        jieba.setLogLevel(30)  # its dictionary-loading chatter (WARNING and above only)
        self._segmenter = jieba.Tokenizer()
        self._tokenizer = tokenizer

    def __call__(self, line: str) -> list[int]:
        ids = self._tokenizer.tokenize_to_ids(line)
        if not ids:
            return ids
        words = chinese_words(self._segmenter.lcut(line.strip()))
        if not words:
            return ids
        marks = continuation_marks(self._tokenizer.convert_ids_to_tokens(ids), words)
        return [i | MARK if marked else i for i, marked in zip(ids, marks)]


def line_ids(tokenizer, segmenter: str):
    """The function from a line to its ids that --whole_word_segmenter asks
    for: the tokenizer's, or with jieba's whole words marked."""
    if segmenter == "jieba":
        return JiebaMarker(tokenizer)
    return tokenizer.tokenize_to_ids


def lines_ids(tokenizer, segmenter: str):
    """The function from a document's lines to their ids: one call of the
    tokenizer for all of them where it encodes in batches (a tokenizer.json's),
    else line by line (`line_ids`)."""
    batch = getattr(tokenizer, "lines_to_ids", None)
    if batch is not None and segmenter == "none":
        return batch
    one = line_ids(tokenizer, segmenter)
    return lambda lines: [one(line) for line in lines]
