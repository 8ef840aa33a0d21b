"""Deduplicate: the Beam shell of the dedup stage (`--dedup=exact|near`).

    documents -> FingerprintDocuments -> batches (with digests), exact rows, band rows (near)
    exact rows -> GroupByKey -> GroupCopies -> one ExactGroups (keys to drop, counts)
    band rows  -> GroupByKey -> FindCandidates -> candidate pairs (a side input)
    batches + candidates -> ShareShingles -> GroupByKey -> VerifyPairs -> edges
               -> GroupByKey (one key) -> ClusterNearCopies
    ExactGroups + near clusters -> Decide -> Decisions (a side input)
    batches + Decisions -> DropCopies -> documents, each text once

Rows travel as one compact element per bundle and partition, shingle sets
only for candidate texts, and the batches of documents zstd-compressed when
the runner encodes them, so what is shuffled and held stays bounded by the
partition sizes (docs/design-notes.md, transforms.dedup.beam).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator, Literal

import apache_beam as beam
import numpy as np
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindows

from bert_pretraining_data.transforms.counters import FIGURES, BundleCounters, CountingDoFn
from bert_pretraining_data.transforms.dedup.clusters import (BandRows, CandidateIndex, ExactGroups,
                                                             ExactRows, KeySet, Node, PairShingles,
                                                             digest_array, digest_words,
                                                             near_clusters, verified_pairs)
from bert_pretraining_data.transforms.dedup.decisions import (BATCH_CHARACTERS, DOCUMENTS, SUMMARY,
                                                              BatchedDocument, Decisions,
                                                              Fingerprints, decide, find_candidates,
                                                              fingerprint_batch, group_copies,
                                                              index_candidates, merge_groups)
from bert_pretraining_data.transforms.dedup.minhash import distinct_shingles
from bert_pretraining_data.transforms.dedup.normalise import normalised_text
from bert_pretraining_data.transforms.handoff.beam import SpreadBatchFiles
from bert_pretraining_data.transforms.handoff.compressed import Batch, CompressedList
from bert_pretraining_data.transforms.read.documents import Document
from bert_pretraining_data.transforms.worker_memory import tune_worker_memory

_EXACT, _BANDS, _REPEATED = "exact", "bands", "repeated"
_ROWS = {_EXACT: ExactRows, _BANDS: BandRows}
# A worker holds a bundle's rows up to this many bytes (16 and the key's
# characters a document, 24 a band) before it emits them.
ROW_BUFFER_BYTES = 16 << 20


class BatchByCharacters(beam.DoFn):
    """(key, lines) -> lists of documents of about BATCH_CHARACTERS within a
    bundle, so that numpy's cost per call is spread over many short
    documents (the document stages' work is per batch)."""

    def start_bundle(self) -> None:
        self._documents: list[tuple[str, list[str]]] = []
        self._characters = 0

    def process(self, document: tuple[str, list[str]]) -> Iterator[list[tuple[str, list[str]]]]:
        self._documents.append(document)
        self._characters += sum(map(len, document[1]))
        if self._characters >= BATCH_CHARACTERS:
            yield self._documents
            self.start_bundle()

    def finish_bundle(self) -> Iterator[object]:
        if self._documents:
            yield GlobalWindows.windowed_value(self._documents)


class FingerprintDocuments(CountingDoFn):
    """A batch of (key, lines) -> the batch with digests (main output; with
    `compress`, --shuffle=runner, a CompressedList: the runner materializes
    it for DropCopies), and the
    bundle's rows (`exact`, `bands`) as one encoded element per partition,
    emitted at the bundle's end and whenever they pass `max_buffer_bytes`:
    with hundreds of partitions, an element per batch and partition would
    hold one or two documents and cost more than their rows."""

    def __init__(self, *, fingerprints: Fingerprints, compress: bool = False,
                 max_buffer_bytes: int = ROW_BUFFER_BYTES) -> None:
        self._fingerprints = fingerprints
        self._batch = CompressedList if compress else list
        self._max_buffer_bytes = max_buffer_bytes
        self._count = BundleCounters("dedup_shuffle_bytes")  # the encoded rows

    def setup(self) -> None:
        tune_worker_memory()

    def start_bundle(self) -> None:
        super().start_bundle()
        self._rows: dict[tuple[str, int], list[ExactRows | BandRows]] = {}
        self._buffered = 0

    def process(self, documents: list[tuple[str, list[str]]]) -> Iterator[Batch]:
        batch, exact, bands = fingerprint_batch(documents, self._fingerprints)
        yield self._batch(batch)
        for tag, rows in ((_EXACT, exact), (_BANDS, bands)):
            for partition, part in rows.items():
                self._rows.setdefault((tag, partition), []).append(part)
                self._buffered += part.nbytes
        if self._buffered >= self._max_buffer_bytes:
            yield from self._flush()

    def finish_bundle(self) -> Iterator[object]:
        for rows in self._flush():
            yield TaggedOutput(rows.tag, GlobalWindows.windowed_value(rows.value))
        yield from super().finish_bundle()

    def _flush(self) -> Iterator[TaggedOutput]:
        buffered, self._rows, self._buffered = self._rows, {}, 0
        emitted = 0
        for (tag, partition), parts in sorted(buffered.items()):
            data = _ROWS[tag].concatenate(parts).encoded()
            emitted += len(data)
            yield TaggedOutput(tag, (partition, data))
        self._count.counts["dedup_shuffle_bytes"] += emitted


class ShareShingles(beam.DoFn):
    """A batch -> (partition, PairShingles): the shingle set of the kept
    document of each candidate text, to every pair it is in, one element
    per partition of pairs."""

    def __init__(self, *, ngram: int) -> None:
        self._ngram = ngram

    def process(self, batch: list[BatchedDocument], candidates: CandidateIndex,
                exact_drops: KeySet) -> Iterator[tuple[int, PairShingles]]:
        present = [document for document in batch if document[2]]
        if not present or not len(candidates):
            return
        digests = digest_array([digest for _, _, digest in present])
        texts = candidates.texts.find(digest_words(digests))
        chosen = np.flatnonzero(texts >= 0)
        chosen = chosen[~exact_drops.holds([present[i][0] for i in chosen])]
        if not len(chosen):
            return
        shingles, counts = distinct_shingles(
            [normalised_text(present[i][1]) for i in chosen], self._ngram)
        yield from candidates.messages(texts[chosen], digests[chosen],
                                       [present[i][0] for i in chosen], shingles, counts)


class VerifyPairs(CountingDoFn):
    """(partition, its PairShingles) -> an edge for each pair whose texts'
    Jaccard similarity reaches the threshold."""

    def __init__(self, *, threshold: float) -> None:
        self._threshold = threshold
        self._count = BundleCounters("near_duplicate_candidate_pairs",
                                     "near_duplicate_verified_pairs")

    def process(self, element: tuple[int, Iterable[PairShingles]]
                ) -> Iterator[tuple[None, tuple[Node, Node]]]:
        candidates, edges = verified_pairs(PairShingles.concatenate(list(element[1])),
                                           self._threshold)
        self._count.counts["near_duplicate_candidate_pairs"] += candidates
        self._count.counts["near_duplicate_verified_pairs"] += len(edges)
        for edge in edges:
            yield None, edge


class DropCopies(beam.DoFn):
    """A batch -> its documents but those to drop; a kept key that identical
    copies share goes to `repeated`, where one of them is kept."""

    def process(self, batch: list[BatchedDocument], decisions: Decisions
                ) -> Iterator[Document | TaggedOutput[Literal["repeated"], Document]]:
        keys = [key for key, _, _ in batch]
        dropped, repeated = decisions.drops.holds(keys), decisions.repeated.holds(keys)
        for (key, lines, _), drop, shared in zip(batch, dropped, repeated):
            if drop:
                continue
            if shared:
                yield TaggedOutput(_REPEATED, (key, lines))
            else:
                yield key, lines


class _CountSummary(CountingDoFn):
    """The decisions' summary, for the manifest; its figures counted, once per run."""

    def __init__(self) -> None:
        self._count = BundleCounters("duplicate_documents", "near_duplicate_documents",
                                     "duplicate_clusters", "largest_duplicate_cluster")

    def process(self, decisions: Decisions) -> Iterator[dict]:
        for name in self._count.counts:
            self._count.counts[name] += getattr(decisions.summary, name)
        yield {key: value for key, value in dataclasses.asdict(decisions.summary).items()
               if value is not None}


class Deduplicate(beam.PTransform):
    """(key, lines) documents -> {DOCUMENTS: each text once, SUMMARY: one
    dict for the manifest, FIGURES: its counts}. The batches wait for the
    decisions compressed (`compress`: through the runner's shuffle), or in
    files under `batch_folder` (the DirectRunner's way: SpreadBatchFiles)."""

    def __init__(self, *, fingerprints: Fingerprints, compress: bool = False,
                 batch_folder: str | None = None) -> None:
        super().__init__()
        if fingerprints.mode not in ("exact", "near"):
            raise ValueError(f"Deduplicate needs mode exact or near, got {fingerprints.mode!r}")
        self._fingerprints = fingerprints
        self._compress = compress
        self._batch_folder = batch_folder

    def expand(self, documents):
        fingerprints = self._fingerprints
        fingerprinted = (documents
                         | "BatchDocuments" >> beam.ParDo(BatchByCharacters())
                         | "FingerprintDocuments" >> beam.ParDo(
                             FingerprintDocuments(fingerprints=fingerprints,
                                                  compress=self._compress)).with_outputs(
                                 _EXACT, _BANDS, FIGURES, main=DOCUMENTS))
        figures = [fingerprinted[FIGURES]]
        batches = fingerprinted[DOCUMENTS]
        # Global combines without defaults: Beam would otherwise pass each
        # result through a side input and walk its objects to size it, slow
        # for many dropped keys. The empty groups make exactly one result.
        partitions = (fingerprinted[_EXACT]
                      | "GroupExactRows" >> beam.GroupByKey()
                      | "GroupCopies" >> beam.Map(group_copies, fingerprints.by_source))
        exact = ((partitions, documents.pipeline | "NoCopies" >> beam.Create([ExactGroups()]))
                 | "AllCopies" >> beam.Flatten()
                 | "MergeCopies" >> beam.CombineGlobally(merge_groups).without_defaults())
        near = None
        if fingerprints.mode == "near":
            pair_partitions = fingerprints.pair_partitions
            candidates = (fingerprinted[_BANDS]
                          | "GroupBandRows" >> beam.GroupByKey()
                          | "FindCandidates" >> beam.Map(find_candidates)
                          | "CollectCandidates" >> beam.combiners.ToList().without_defaults()
                          | "IndexCandidates" >> beam.Map(index_candidates, pair_partitions))
            exact_drops = exact | "ExactDrops" >> beam.Map(lambda groups: KeySet(groups.drops))
            verified = (
                batches
                | "ShareShingles" >> beam.ParDo(
                    ShareShingles(ngram=fingerprints.ngram),
                    candidates=beam.pvalue.AsSingleton(
                        candidates, default_value=CandidateIndex.of([], pair_partitions)),
                    exact_drops=beam.pvalue.AsSingleton(exact_drops))
                | "GroupPairPartitions" >> beam.GroupByKey()
                | "VerifyPairs" >> beam.ParDo(VerifyPairs(
                    threshold=fingerprints.threshold)).with_outputs(FIGURES, main="edges"))
            figures.append(verified[FIGURES])
            near = beam.pvalue.AsSingleton(
                verified["edges"]
                | "GatherEdges" >> beam.GroupByKey()
                | "ClusterNearCopies" >> beam.Map(
                    lambda element: near_clusters(element[1], fingerprints.by_source)),
                default_value=None)
        decisions = exact | "Decide" >> beam.Map(decide, fingerprints, near)
        if self._batch_folder is not None:
            batches = batches | "SpreadBatches" >> SpreadBatchFiles(self._batch_folder)
        kept = batches | "DropCopies" >> beam.ParDo(
            DropCopies(), decisions=beam.pvalue.AsSingleton(decisions)).with_outputs(
                _REPEATED, main=DOCUMENTS)
        survivors = kept[DOCUMENTS]
        if not fingerprints.unique_keys:  # identical texts under one key: keep one
            once = (kept[_REPEATED]
                    | "GroupRepeatedKeys" >> beam.GroupByKey()
                    | "KeepOneCopy" >> beam.Map(lambda element: (element[0],
                                                                 next(iter(element[1])))))
            survivors = (survivors, once) | "KeptDocuments" >> beam.Flatten()
        summary = decisions | "CountDuplicates" >> beam.ParDo(_CountSummary()).with_outputs(
            FIGURES, main=SUMMARY)
        figures.append(summary[FIGURES])
        return {DOCUMENTS: survivors, SUMMARY: summary[SUMMARY],
                FIGURES: tuple(figures) | "DedupFigures" >> beam.Flatten()}
