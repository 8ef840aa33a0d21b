"""Tokenize's work on one document, without Beam: the stage
(transforms.tokenize.beam) and the disk estimate (pipeline.disk_space) both
call it, so that the estimate measures the documents the run makes."""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, NamedTuple

from bert_pretraining_data.transforms.handoff.tokenized_documents import (CompactDocument,
                                                                          compact_document)
from bert_pretraining_data.transforms.tokenize.chinese_words import lines_ids
from bert_pretraining_data.transforms.tokenize.sentences import sentence_splitter
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import Tokenizer


class DocumentIds(NamedTuple):
    """A document's sentences as token ids, and how many sentences had no
    token (dropped from `sentences`)."""

    sentences: list[list[int]]
    without_tokens: int

    def compact(self) -> CompactDocument | None:
        """The document as Tokenize hands it on; None (dropped) when no
        sentence has a token."""
        return compact_document(self.sentences) if self.sentences else None


@dataclasses.dataclass(frozen=True)
class DocumentTokenizer:
    """A document's lines to its sentences' token ids: each line a sentence,
    or split into sentences (`splitter`: --sentence_splitter), with
    segmented words marked (`segmenter`: --whole_word_segmenter,
    transforms.tokenize.chinese_words). Built once (a worker's setup, an
    estimate), as building it loads models."""

    lines_ids: Callable[[list[str]], list[list[int]]]
    sentences: Callable[[Iterable[str]], list[str]]

    @classmethod
    def of(cls, tokenizer: Tokenizer, *, segmenter: str = "none",
           splitter: str = "none") -> "DocumentTokenizer":
        return cls(lines_ids=lines_ids(tokenizer, segmenter),
                   sentences=sentence_splitter(splitter))

    def __call__(self, lines: list[str]) -> DocumentIds:
        texts = self.sentences(lines)
        sentences = [ids for ids in self.lines_ids(texts) if ids]
        return DocumentIds(sentences, len(texts) - len(sentences))
