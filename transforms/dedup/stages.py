"""Deduplicate: the Beam shell of the dedup stage (`--dedup=exact|near`).

    documents -> FingerprintDocuments -> batches of documents (with digests)
                                      -> exact rows (digest, key) per partition
                                      -> band rows (band key, digest) per partition (near)
    exact rows -> GroupByKey -> GroupCopies -> keys to drop, counts
    band rows  -> GroupByKey -> FindCandidates -> candidate pairs (a side input)
    batches + candidates -> ShareShingles -> (pair, shingle set) -> GroupByKey
               -> VerifyPairs -> edges -> GroupByKey (one key) -> ClusterNearCopies
    batches + keys to drop -> DropCopies -> documents, each text once

What is shuffled: the exact rows (16 bytes and the key per document), the
band rows (24 bytes per band per document, near only), both in per-bundle
numpy batches split by partition, not one element per document; the shingle
sets of candidate texts only; the verified pairs. The batches of documents
are read twice (fingerprints, then the drops), so the runner materializes them
once. What a worker holds: a batch of documents (~1 MiB of text) and its
rows; one partition's rows (the input is split into one partition per
~64 MiB); the side inputs (16 bytes per dropped document, the candidate
pairs); and, on one worker, the verified pairs to cluster.

Every decision depends on texts and keys only (transforms.dedup.clusters), so
the output does not depend on bundles, workers or runner.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Iterator

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindows

from bert_pretraining_data.transforms.counters import counter
from bert_pretraining_data.transforms.dedup.clusters import (BandRows, ExactGroups, ExactRows,
                                                             KeySet, NearClusters, Node, Pair,
                                                             candidate_pairs, digest_array,
                                                             exact_groups, near_clusters,
                                                             partitions_of)
from bert_pretraining_data.transforms.dedup.minhash import (band_keys, band_shape,
                                                            shingle_hashes, shingle_set,
                                                            signatures, jaccard)
from bert_pretraining_data.transforms.dedup.normalise import normalised_text, text_digest

DEDUP_MODES = ("none", "exact", "near")
DOCUMENTS = "documents"
SUMMARY = "summary"
# A batch of documents holds about this many characters of text.
BATCH_CHARACTERS = 1 << 20
# One partition of fingerprint rows per this many bytes of input.
PARTITION_INPUT_BYTES = 64 << 20
_EXACT, _BANDS, _REPEATED = "exact", "bands", "repeated"

# (key, lines, digest of the normalised text; None when it is empty)
BatchedDocument = tuple[str, list[str], "bytes | None"]


def dedup_partitions(input_bytes: int) -> int:
    """Partitions of the fingerprint rows for an input of this size."""
    return max(1, math.ceil(input_bytes / PARTITION_INPUT_BYTES))


@dataclasses.dataclass(frozen=True)
class Fingerprints:
    """How documents are compared: the mode and, for near, shingles and bands."""

    mode: str
    ngram: int = 5
    threshold: float = 0.8
    partitions: int = 1

    @property
    def bands(self) -> tuple[int, int]:
        return band_shape(self.threshold)


def fingerprint_batch(documents: list[tuple[str, list[str]]], fingerprints: Fingerprints
                      ) -> tuple[list[BatchedDocument], dict[int, ExactRows], dict[int, BandRows]]:
    """A batch of documents with their digests, and their rows by partition.
    A document whose normalised text is empty has no digest and no rows: it
    is never a duplicate (Tokenize counts it as an empty document)."""
    texts = [normalised_text(lines) for _, lines in documents]
    digests = [text_digest(text) if text else None for text in texts]
    batch = [(key, lines, digest) for (key, lines), digest in zip(documents, digests)]
    present = [i for i, digest in enumerate(digests) if digest]
    exact: dict[int, ExactRows] = {}
    bands: dict[int, BandRows] = {}
    if not present:
        return batch, exact, bands
    digest_rows = digest_array([digests[i] for i in present])
    keys = [documents[i][0] for i in present]
    for partition, members in _split(partitions_of(digest_rows, fingerprints.partitions)):
        exact[partition] = ExactRows(digest_rows[members], [keys[i] for i in members])
    if fingerprints.mode == "near":
        band_count, rows = fingerprints.bands
        shingles, counts = shingle_hashes([texts[i] for i in present], fingerprints.ngram)
        keys_by_band = band_keys(signatures(shingles, counts, band_count * rows), band_count, rows)
        flat_keys = keys_by_band.reshape(-1)
        flat_digests = np.repeat(digest_rows, band_count, axis=0)
        for partition, members in _split(partitions_of(flat_keys, fingerprints.partitions)):
            bands[partition] = BandRows(flat_keys[members], flat_digests[members])
    return batch, exact, bands


def _split(partitions: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(partition, row indices) of every partition that has rows."""
    order = np.argsort(partitions, kind="stable")
    values, starts = np.unique(partitions[order], return_index=True)
    ends = np.append(starts[1:], len(order))
    for value, start, end in zip(values, starts, ends):
        yield int(value), order[start:end]


class FingerprintDocuments(beam.DoFn):
    """(key, lines) -> batches of documents with digests (main output), and
    per batch one element of rows per partition (`exact`, `bands`)."""

    def __init__(self, *, fingerprints: Fingerprints) -> None:
        self._fingerprints = fingerprints

    def start_bundle(self) -> None:
        self._documents: list[tuple[str, list[str]]] = []
        self._characters = 0

    def process(self, document: tuple[str, list[str]]) -> Iterator[object]:
        self._documents.append(document)
        self._characters += sum(map(len, document[1]))
        if self._characters >= BATCH_CHARACTERS:
            yield from self._flush(lambda value: value)

    def finish_bundle(self) -> Iterator[object]:
        if self._documents:
            yield from self._flush(GlobalWindows.windowed_value)

    def _flush(self, wrap) -> Iterator[object]:
        batch, exact, bands = fingerprint_batch(self._documents, self._fingerprints)
        self._documents, self._characters = [], 0
        yield wrap(batch)
        for tag, rows in ((_EXACT, exact), (_BANDS, bands)):
            for partition, part in rows.items():
                yield beam.pvalue.TaggedOutput(tag, wrap((partition, part)))


def _exact_rows(parts: Iterable[ExactRows]) -> ExactRows:
    parts = list(parts)
    return ExactRows(np.concatenate([p.digests for p in parts]),
                     [key for p in parts for key in p.keys])


def _band_rows(parts: Iterable[BandRows]) -> BandRows:
    parts = list(parts)
    return BandRows(np.concatenate([p.keys for p in parts]),
                    np.concatenate([p.digests for p in parts]))


def group_copies(element: tuple[int, Iterable[ExactRows]]) -> Iterator[object]:
    """One partition's exact groups: the keys to drop (main output), the kept
    keys that identical copies share (`repeated`), and the counts."""
    found = exact_groups(_exact_rows(element[1]))
    yield from found.drops
    for key in found.repeated:
        yield beam.pvalue.TaggedOutput(_REPEATED, key)
    yield beam.pvalue.TaggedOutput(SUMMARY, dataclasses.replace(found, drops=[], repeated=[]))


def find_candidates(element: tuple[int, Iterable[BandRows]]) -> Iterator[Pair]:
    yield from candidate_pairs(_band_rows(element[1]))


@dataclasses.dataclass(frozen=True)
class CandidateIndex:
    """The side input of ShareShingles: each candidate text's documents and partners."""

    partners: dict[bytes, tuple[int, list[bytes]]]

    @classmethod
    def of(cls, pairs: Iterable[Pair]) -> "CandidateIndex":
        partners: dict[bytes, tuple[int, list[bytes]]] = {}
        for first, first_copies, second, second_copies in pairs:
            partners.setdefault(first, (first_copies, []))[1].append(second)
            partners.setdefault(second, (second_copies, []))[1].append(first)
        return cls(partners)


class ShareShingles(beam.DoFn):
    """A batch -> (pair, (Node, shingle set)) for the kept document of each
    candidate text, one per candidate pair it is in."""

    def __init__(self, *, ngram: int) -> None:
        self._ngram = ngram

    def process(self, batch: list[BatchedDocument], candidates: CandidateIndex,
                exact_drops: KeySet) -> Iterator[tuple[tuple[bytes, bytes], tuple[Node, np.ndarray]]]:
        for key, lines, digest in batch:
            found = candidates.partners.get(digest) if digest else None
            if found is None or key in exact_drops:
                continue
            copies, partners = found
            node = Node(digest, key, copies)
            shingles = shingle_set(normalised_text(lines), self._ngram)
            for partner in partners:
                yield (min(digest, partner), max(digest, partner)), (node, shingles)


class VerifyPairs(beam.DoFn):
    """(pair, its two texts' shingle sets) -> an edge when their Jaccard
    similarity reaches the threshold."""

    def __init__(self, *, threshold: float) -> None:
        self._threshold = threshold
        self._candidates = counter("near_duplicate_candidate_pairs")
        self._verified = counter("near_duplicate_verified_pairs")

    def process(self, element) -> Iterator[tuple[None, tuple[Node, Node]]]:
        _, messages = element
        texts = {node.digest: (node, shingles) for node, shingles in messages}
        (first, first_set), (second, second_set) = sorted(texts.values(),
                                                          key=lambda text: text[0].digest)
        self._candidates.inc()
        if jaccard(first_set, second_set) >= self._threshold:
            self._verified.inc()
            yield None, (first, second)


class DropCopies(beam.DoFn):
    """A batch -> its documents but those to drop; a kept key that identical
    copies share goes to `repeated`, where one of them is kept."""

    def process(self, batch: list[BatchedDocument], drops: KeySet,
                repeated: KeySet) -> Iterator[object]:
        for key, lines, _ in batch:
            if key in drops:
                continue
            if key in repeated:
                yield beam.pvalue.TaggedOutput(_REPEATED, (key, lines))
            else:
                yield key, lines


@dataclasses.dataclass(frozen=True)
class DedupSummary:
    """The manifest's `dedup` section; the same figures are Beam counters."""

    mode: str
    duplicate_documents: int = 0  # exact copies removed
    near_duplicate_documents: int = 0  # near copies removed (beyond exact ones)
    duplicate_clusters: int = 0  # groups of documents kept once (exact or near)
    largest_duplicate_cluster: int = 0  # documents of the largest
    lsh_bands: int = 0
    lsh_rows: int = 0


def summarise(fingerprints: Fingerprints, exact: Iterable[ExactGroups],
              near: NearClusters | None) -> DedupSummary:
    """Exact groups that sit inside a near cluster count once, as the cluster."""
    exact = list(exact)
    near = near or NearClusters()
    bands, rows = fingerprints.bands if fingerprints.mode == "near" else (0, 0)
    return DedupSummary(
        mode=fingerprints.mode,
        duplicate_documents=sum(group.duplicates for group in exact),
        near_duplicate_documents=len(near.drops),
        duplicate_clusters=(sum(group.groups for group in exact) - near.texts_with_copies
                            + near.clusters),
        largest_duplicate_cluster=max([near.largest] + [group.largest for group in exact]),
        lsh_bands=bands, lsh_rows=rows)


class _CountSummary(beam.DoFn):
    """Adds the summary's figures to Beam's counters, once per run."""

    NAMES = ("duplicate_documents", "near_duplicate_documents", "duplicate_clusters",
             "largest_duplicate_cluster")

    def __init__(self) -> None:
        self._counters = {name: counter(name) for name in self.NAMES}

    def process(self, summary: DedupSummary) -> Iterator[dict]:
        for name, counted in self._counters.items():
            counted.inc(getattr(summary, name))
        yield dataclasses.asdict(summary)


class Deduplicate(beam.PTransform):
    """(key, lines) documents -> {DOCUMENTS: each text once, SUMMARY: one
    dict for the manifest}."""

    def __init__(self, *, fingerprints: Fingerprints) -> None:
        super().__init__()
        if fingerprints.mode not in ("exact", "near"):
            raise ValueError(f"Deduplicate needs mode exact or near, got {fingerprints.mode!r}")
        self._fingerprints = fingerprints

    def expand(self, documents):
        fingerprints = self._fingerprints
        fingerprinted = documents | "FingerprintDocuments" >> beam.ParDo(
            FingerprintDocuments(fingerprints=fingerprints)).with_outputs(
                _EXACT, _BANDS, main=DOCUMENTS)
        batches = fingerprinted[DOCUMENTS]
        exact = (fingerprinted[_EXACT]
                 | "GroupExactRows" >> beam.GroupByKey()
                 | "GroupCopies" >> beam.FlatMap(group_copies).with_outputs(
                     _REPEATED, SUMMARY, main="drops"))
        exact_drops = exact["drops"]
        near_clusters_ = None
        drops = exact_drops
        if fingerprints.mode == "near":
            candidates = (fingerprinted[_BANDS]
                          | "GroupBandRows" >> beam.GroupByKey()
                          | "FindCandidates" >> beam.FlatMap(find_candidates)
                          | "CollectCandidates" >> beam.combiners.ToList()
                          | "IndexCandidates" >> beam.Map(CandidateIndex.of))
            near_clusters_ = (
                batches
                | "ShareShingles" >> beam.ParDo(
                    ShareShingles(ngram=fingerprints.ngram),
                    candidates=beam.pvalue.AsSingleton(candidates),
                    exact_drops=beam.pvalue.AsSingleton(_key_set(exact_drops, "Exact")))
                | "GroupPairs" >> beam.GroupByKey()
                | "VerifyPairs" >> beam.ParDo(VerifyPairs(threshold=fingerprints.threshold))
                | "GatherEdges" >> beam.GroupByKey()
                | "ClusterNearCopies" >> beam.Map(lambda element: near_clusters(element[1])))
            near_drops = near_clusters_ | "NearDrops" >> beam.FlatMap(lambda found: found.drops)
            drops = (exact_drops, near_drops) | "AllDrops" >> beam.Flatten()
        kept = batches | "DropCopies" >> beam.ParDo(
            DropCopies(), drops=beam.pvalue.AsSingleton(_key_set(drops, "Drop")),
            repeated=beam.pvalue.AsSingleton(_key_set(exact[_REPEATED], "Repeated"))
        ).with_outputs(_REPEATED, main=DOCUMENTS)
        once = (kept[_REPEATED]
                | "GroupRepeatedKeys" >> beam.GroupByKey()
                | "KeepOneCopy" >> beam.Map(lambda element: (element[0], next(iter(element[1])))))
        survivors = (kept[DOCUMENTS], once) | "KeptDocuments" >> beam.Flatten()
        exact_counts = exact[SUMMARY] | "CollectExactCounts" >> beam.combiners.ToList()
        near_side = (beam.pvalue.AsSingleton(near_clusters_, default_value=None)
                     if near_clusters_ is not None else None)
        summary = (documents.pipeline
                   | "StartSummary" >> beam.Create([fingerprints])
                   | "Summarise" >> beam.Map(summarise, beam.pvalue.AsSingleton(exact_counts),
                                             near_side)
                   | "CountDuplicates" >> beam.ParDo(_CountSummary()))
        return {DOCUMENTS: survivors, SUMMARY: summary}


def _key_set(keys: beam.PCollection, name: str) -> beam.PCollection:
    """The keys of a PCollection as one KeySet (a side input)."""
    return (keys
            | f"Collect{name}Keys" >> beam.combiners.ToList()
            | f"{name}KeySet" >> beam.Map(KeySet))
