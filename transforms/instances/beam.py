"""The Beam shell around the functional core: one thin DoFn per stage.

Each DoFn builds its heavy objects in `setup` (never pickled), calls one pure
function per element, and counts in Beam Metrics everything it drops, cuts
or repairs. Every random draw comes from an RNG derived from the element's
keys (transforms.seeds), so retries and re-bundling change nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindows

from bert_pretraining_data.transforms.worker_memory import tune_worker_memory
from bert_pretraining_data.transforms.counters import BundleCounters, CountingDoFn, counter
from bert_pretraining_data.transforms.instances.units import (Engine, FlatSample, RecordStats,
                                                           WorkUnit, unit_records, warm_up)
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig
from bert_pretraining_data.transforms.instances.masking import Masked, MaskingConfig, mask_tokens
from bert_pretraining_data.transforms.tokenize.tokenized_documents import (
    CompactDocument, compact_document, compact_token_count, expand_document)
from bert_pretraining_data.transforms.tokenize.chinese_words import MARK, line_ids
from bert_pretraining_data.transforms.progress_sink import ProgressSink
from bert_pretraining_data.transforms.tokenize.sentences import sentence_splitter
from bert_pretraining_data.transforms.seeds import MASK, document_seed, derived_rng, shuffle_key
from bert_pretraining_data.transforms.write.shuffle_entries import RecordBatch
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec
from bert_pretraining_data.transforms.tokenize.wordpiece import count_control_characters

@dataclasses.dataclass
class Instance:
    """One training pair of a recipe built in Python (the d2l recipe's); the
    masked_lm fields are empty until it is masked."""

    tokens: list[int]
    segment_ids: list[int]
    is_random_next: bool
    masked_lm_positions: list[int] = dataclasses.field(default_factory=list)
    masked_lm_labels: list[int] = dataclasses.field(default_factory=list)

    def with_mask(self, masked: Masked) -> "Instance":
        return dataclasses.replace(self, tokens=masked.tokens,
                                   masked_lm_positions=masked.positions,
                                   masked_lm_labels=masked.labels)


# ((doc_key, dupe_index), the instances of that document copy, in order)
InstanceBatch = tuple[tuple[str, int], list[Instance]]


class TokenizeDocument(CountingDoFn):
    """(doc_key, [line]) -> (doc_key, compact [[token id]]): each line a sentence,
    or split into sentences (--sentence_splitter); sentences without tokens dropped."""

    def __init__(self, *, vocab_file: str | None = None, do_lower_case: bool = True,
                 tokenizer: TokenizerSpec | None = None,
                 whole_word_segmenter: str = "none", sentence_splitter: str = "none",
                 progress_dir: str | None = None) -> None:
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
        tokenizer = self._tokenizer.tokenizer()
        # A line's ids, with segmented words marked (transforms.tokenize.chinese_words).
        self._line_ids = line_ids(tokenizer, self._segmenter)
        unk = tokenizer.vocabulary.unk_id  # an unknown SentencePiece piece may be marked
        self._unk = (unk, unk | MARK) if self._tokenizer.sentencepiece else (unk,)
        # A document's lines as sentences: themselves, or split (paragraphs).
        self._sentences = sentence_splitter(self._splitter)
        self._progress = ProgressSink(self._progress_dir)

    def finish_bundle(self) -> None:
        super().finish_bundle()
        self._progress.write()

    def process(self, element: tuple[str, list[str]]) -> Iterator[tuple[str, CompactDocument]]:
        doc_key, lines = element
        count = self._count.counts
        count["control_characters"] += sum(map(count_control_characters, lines))
        texts = self._sentences(lines)
        sentences = [ids for ids in map(self._line_ids, texts) if ids]
        count["lines_without_tokens"] += len(texts) - len(sentences)
        if self._progress.active:  # text bytes: one encode per line, only when shown
            self._progress.add(documents=1, tokenized=int(bool(sentences)),
                               bytes=sum(len(line.encode()) + 1 for line in lines))
        if not sentences:
            count["empty_documents"] += 1
            return
        count["tokenized_documents"] += 1
        count["sentences"] += len(sentences)
        count["tokens"] += sum(map(len, sentences))
        count["unk_tokens"] += sum(s.count(unk) for s in sentences for unk in self._unk)
        yield doc_key, compact_document(sentences)


# A batch of documents, and a unit of work, hold about this many token ids:
# many short documents (so that the runner handles one element and the kernel
# is called once for all of them), or the copies of one long document (so
# that a huge document's copies spread over workers and no element's output
# grows without bound).
WORK_UNIT_TOKENS = 1 << 18


class BatchDocuments(beam.DoFn):
    """(doc_key, compact document) -> lists of them of about WORK_UNIT_TOKENS
    token ids, within a bundle. Which documents share a batch never changes
    the output: every draw is seeded by its document's key."""

    def start_bundle(self) -> None:
        self._batch: list[tuple[str, CompactDocument]] = []
        self._tokens = 0

    def process(self, element: tuple[str, CompactDocument]
                ) -> Iterator[list[tuple[str, CompactDocument]]]:
        self._batch.append(element)
        self._tokens += compact_token_count(element[1])
        if self._tokens >= WORK_UNIT_TOKENS:
            yield self._take()

    def finish_bundle(self) -> Iterator[object]:
        if self._batch:
            yield GlobalWindows.windowed_value(self._take())

    def _take(self) -> list[tuple[str, CompactDocument]]:
        batch, self._batch, self._tokens = self._batch, [], 0
        return batch


def fan_out_batch(batch: list[tuple[str, CompactDocument]], dupe_factor: int
                  ) -> Iterator[WorkUnit]:
    """A batch's `dupe_factor` copies of each document (each copy with its
    own seeds, hence its own instances) as units of work: the documents'
    copies together, except that a document whose copies hold over
    WORK_UNIT_TOKENS tokens is cut into units of fewer copies."""
    unit: WorkUnit = []
    for doc_key, document in batch:
        per_unit = max(1, WORK_UNIT_TOKENS // max(1, compact_token_count(document)))
        if per_unit >= dupe_factor:
            unit.append((doc_key, document, (0, dupe_factor)))
            continue
        for start in range(0, dupe_factor, per_unit):
            yield [(doc_key, document, (start, min(dupe_factor, start + per_unit)))]
    if unit:
        yield unit


def fan_out(element: tuple[str, CompactDocument],
            dupe_factor: int) -> Iterator[tuple[tuple[str, int], list[list[int]]]]:
    """One (doc_key, dupe_index) copy per dupe index, for steps that walk lists
    (the d2l recipe's): the document is expanded once and the copies share it
    (they only read it)."""
    document = expand_document(element[1])
    for dupe_index in range(dupe_factor):
        yield (element[0], dupe_index), document


class CreateRecords(CountingDoFn):
    """[(doc_key, compact document, (first dupe, end dupe))] + sample -> RecordBatch.

    Instance creation (transforms.instances.pairs) and masking (transforms.instances.masking;
    none when `masking` is None: `--masking=none`) of every copy in one
    compiled step (transforms.instances.units); the batch holds the instances,
    whose records are written with their shard (transforms.write.rows).
    """

    def __init__(self, *, instances: InstanceConfig, masking: MaskingConfig | None, seed: int,
                 progress_dir: str | None = None) -> None:
        self._configs = (instances, masking)
        self._progress_dir = progress_dir
        self._seed = seed
        names = [f.name for f in dataclasses.fields(RecordStats)]
        if masking is None:  # nothing is masked, so no masked_tokens counter
            names.remove("masked_tokens")
        self._count = BundleCounters(*names)

    def setup(self) -> None:
        tune_worker_memory()
        self._engine = Engine.of(*self._configs)
        warm_up(self._engine)
        self._sample_source: object = None
        self._progress = ProgressSink(self._progress_dir)

    def finish_bundle(self) -> None:
        super().finish_bundle()
        self._progress.write()

    def process(self, element: WorkUnit, nsp_sample) -> Iterator[RecordBatch]:
        if nsp_sample is not self._sample_source:  # materialized once per worker
            self._sample, self._sample_source = FlatSample.of(nsp_sample), nsp_sample
        batch, stats = unit_records(element, sample=self._sample, engine=self._engine,
                                    seed=self._seed)
        if self._progress.active:
            self._progress.add(instances=stats.instances,
                               copies=sum(end - first for _, _, (first, end) in element))
        count = self._count.counts
        for name in count:
            count[name] += getattr(stats, name)
        if len(batch):
            yield batch


class MaskTokens(beam.DoFn):
    """Masks each instance with an RNG of its own key (doc_key, dupe, index).

    The config is given here, or as the side input `config` when it depends
    on the data (the d2l recipe's vocabulary size is known only at run time).
    """

    def __init__(self, *, config: MaskingConfig | None, seed: int) -> None:
        self._config = config
        self._seed = seed
        self._masked = counter("masked_tokens")

    def process(self, batch: InstanceBatch, config: MaskingConfig | None = None
                ) -> Iterator[InstanceBatch]:
        (doc_key, dupe_index), instances = batch
        config = config or self._config
        seed = document_seed(self._seed, doc_key)
        masked = [instance.with_mask(mask_tokens(
                      instance.tokens, config, derived_rng(seed, MASK, dupe_index, index)))
                  for index, instance in enumerate(instances)]
        self._masked.inc(sum(len(m.masked_lm_positions) for m in masked))
        yield (doc_key, dupe_index), masked


def encode(batch: InstanceBatch, *, seed: int,
           to_record: Callable[[Instance], bytes]) -> RecordBatch:
    """The records of one document copy with their shuffle keys (derived from
    (doc_key, dupe, index)), which order the global shuffle."""
    (doc_key, dupe_index), instances = batch
    seed_lo, seed_hi = map(np.uint64, document_seed(seed, doc_key))
    return RecordBatch.of([(int(shuffle_key(seed_lo, seed_hi, dupe_index, index)),
                            to_record(instance))
                           for index, instance in enumerate(instances)])
