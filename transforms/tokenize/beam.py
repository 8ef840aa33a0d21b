"""Tokenize's Beam shell: a document's lines to its sentences' token ids
(transforms.tokenize.document), with the tokenizer built once per worker (its
vocabulary read through Beam's filesystems: local, gs://) and every drop
counted."""

from __future__ import annotations

from typing import Iterator

from apache_beam.io.filesystems import FileSystems
from apache_beam.pvalue import TaggedOutput

from bert_pretraining_data.transforms.counters import BundleCounters, CountingDoFn
from bert_pretraining_data.transforms.handoff.tokenized_documents import CompactDocument
from bert_pretraining_data.transforms.progress_sink import ProgressSink
from bert_pretraining_data.transforms.read.mixture import source_of
from bert_pretraining_data.transforms.tokenize.chinese_words import MARK
from bert_pretraining_data.transforms.tokenize.document import DocumentTokenizer
from bert_pretraining_data.transforms.tokenize.tokenizer_json import TextNotEncodable
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec
from bert_pretraining_data.transforms.tokenize.wordpiece import count_control_characters
from bert_pretraining_data.transforms.worker_memory import tune_worker_memory


class TokenizeDocument(CountingDoFn):
    """(doc_key, [line]) -> (doc_key, compact [[token id]]): each line a sentence,
    or split into sentences (--sentence_splitter); sentences without tokens dropped."""

    def __init__(self, *, vocab_file: str | None = None, do_lower_case: bool = True,
                 tokenizer: TokenizerSpec | None = None,
                 whole_word_segmenter: str = "none",
                 sentence_splitter: str | tuple[str, ...] = "none",
                 progress_dir: str | None = None) -> None:
        # `sentence_splitter`: one, or one per mixture source (by the key's source).
        # Any tokenizer (`tokenizer`), or WordPiece's by its vocab.txt.
        self._tokenizer = tokenizer or TokenizerSpec(vocab_file, do_lower_case)
        self._progress_dir = progress_dir
        self._segmenter = whole_word_segmenter
        self._splitter = sentence_splitter
        self._count = BundleCounters("sentences", "tokens", "unk_tokens", "empty_documents",
                                     "lines_without_tokens", "tokenized_documents",
                                     "control_characters")

    def setup(self) -> None:
        tune_worker_memory()
        tokenizer = self._tokenizer.tokenizer(self._tokenizer.load_vocabulary(FileSystems.open))
        per_source = not isinstance(self._splitter, str)
        splitters = self._splitter if per_source else (self._splitter,)
        unk = tokenizer.vocabulary.unk_id  # an unknown piece may be marked
        unk_ids = (unk, unk | MARK) if self._tokenizer.marks_continuations else (unk,)
        made = {splitter: DocumentTokenizer.of(tokenizer, segmenter=self._segmenter,
                                               splitter=splitter, unk_ids=unk_ids)
                for splitter in set(splitters)}
        tokenizers = [made[splitter] for splitter in splitters]
        self._tokenizer_of = ((lambda doc_key: tokenizers[source_of(doc_key)]) if per_source
                              else (lambda doc_key: tokenizers[0]))
        self._progress = ProgressSink(self._progress_dir)

    def finish_bundle(self) -> Iterator[TaggedOutput]:
        self._progress.write()
        yield from super().finish_bundle()

    def process(self, element: tuple[str, list[str]]) -> Iterator[tuple[str, CompactDocument]]:
        doc_key, lines = element
        count = self._count.counts
        count["control_characters"] += count_control_characters(lines)
        try:
            tokenized = self._tokenizer_of(doc_key)(lines)
        except TextNotEncodable as err:  # which document: its key names the file
            raise TextNotEncodable(f"document {doc_key}: {err}") from None
        document = tokenized.compact
        count["lines_without_tokens"] += tokenized.without_tokens
        if self._progress.active:  # text bytes: one encode per line, only when shown
            self._progress.add(documents=1, tokenized=int(document is not None),
                               bytes=sum(len(line.encode()) + 1 for line in lines))
        if document is None:
            count["empty_documents"] += 1
            return
        count["tokenized_documents"] += 1
        count["sentences"] += tokenized.sentences
        count["tokens"] += tokenized.tokens
        count["unk_tokens"] += tokenized.unk_tokens
        yield doc_key, document
