"""Tokenize's work on one document, without Beam: the stage
(transforms.tokenize.beam) and the disk estimate (pipeline.disk_space) both
call it, so that the estimate measures the documents the run makes."""

from __future__ import annotations

import dataclasses
from itertools import chain
from typing import Callable, Iterable

from bert_pretraining_data.transforms.handoff.tokenized_documents import (TokenizedDocument,
                                                                          compact_ids)
from bert_pretraining_data.transforms.tokenize.chinese_words import lines_ids
from bert_pretraining_data.transforms.tokenize.sentences import sentence_splitter
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import Tokenizer


@dataclasses.dataclass(frozen=True)
class DocumentTokenizer:
    """A document's lines to its sentences' token ids: each line a sentence,
    or split into sentences (`splitter`: --sentence_splitter), with
    segmented words marked (`segmenter`: --whole_word_segmenter,
    transforms.tokenize.chinese_words). Built once (a worker's setup, an
    estimate), as building it loads models. `unk_ids` are the ids counted as
    unknown (with marked words, [UNK] marked too)."""

    lines_ids: Callable[[list[str]], list[list[int]]]
    sentences: Callable[[Iterable[str]], list[str]]
    unk_ids: tuple[int, ...]
    # The tokenizer's whole-document path (its compiled engine's: WordPiece's,
    # the Unigram kernel's, fastokens'), where words are not marked; it
    # returns None for a document the line-by-line path must take.
    compact_lines: Callable[[list[str]], TokenizedDocument | None] | None = None

    @classmethod
    def of(cls, tokenizer: Tokenizer, *, segmenter: str = "none", splitter: str = "none",
           unk_ids: tuple[int, ...] | None = None) -> "DocumentTokenizer":
        whole = getattr(tokenizer, "compact_lines", None) if segmenter == "none" else None
        return cls(lines_ids=lines_ids(tokenizer, segmenter),
                   sentences=sentence_splitter(splitter),
                   unk_ids=unk_ids or (tokenizer.vocabulary.unk_id,), compact_lines=whole)

    def __call__(self, lines: list[str]) -> TokenizedDocument:
        texts = self.sentences(lines)
        if self.compact_lines is not None:
            document = self.compact_lines(texts)
            if document is not None:
                return document
        sentences = [ids for ids in self.lines_ids(texts) if ids]
        if not sentences:
            return TokenizedDocument(None, 0, 0, 0, len(texts))
        ids = list(chain.from_iterable(sentences))
        return TokenizedDocument(compact_ids(ids, list(map(len, sentences))), len(sentences),
                                 len(ids), sum(map(ids.count, self.unk_ids)),
                                 len(texts) - len(sentences))
