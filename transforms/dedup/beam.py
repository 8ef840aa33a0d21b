"""Deduplicate: the Beam shell of the dedup stage (`--dedup=exact|near`).

    documents -> FingerprintDocuments -> batches of documents (with digests)
                                      -> exact rows (digest, key) per partition
                                      -> band rows (band key, digest) per partition (near)
    exact rows -> GroupByKey -> GroupCopies -> one ExactGroups (keys to drop, counts)
    band rows  -> GroupByKey -> FindCandidates -> candidate pairs (a side input)
    batches + candidates -> ShareShingles -> (pair partition, shingle sets)
               -> GroupByKey -> VerifyPairs -> edges -> GroupByKey (one key)
               -> ClusterNearCopies
    ExactGroups + near clusters -> Decide -> Decisions (a side input)
    batches + Decisions -> DropCopies -> documents, each text once (identical
               texts under one key, possible with hash-keyed formats, meet in a
               GroupByKey and one is kept)

What is shuffled: the exact rows (16 bytes and the key per document), the
band rows (24 bytes per band per document, near only), both in per-bundle
numpy batches split by partition, not one element per document; the shingle
sets of candidate texts only, once per pair, in one element per batch and
partition of pairs (one partition per ~8 MiB of input), all of a partition's
pairs verified at once in numpy; the verified pairs. The batches of documents
are read twice (fingerprints, then the drops), so the runner materializes them
once. What a worker holds: a batch of documents (~1 MiB of text) and its
rows; one partition's rows (the input is split into one partition per
~64 MiB); one partition of pairs' shingle sets; the side inputs (16 bytes
per dropped document, ~50 bytes per candidate pair, numpy arrays only);
and, on one worker, the verified pairs to cluster.

Every decision depends on texts and keys only (transforms.dedup.clusters), so
the output does not depend on bundles, workers or runner.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Iterable, Iterator

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindows

from bert_pretraining_data.transforms.counters import counter
from bert_pretraining_data.transforms.dedup.clusters import (BandRows, CandidateIndex,
                                                             ExactGroups, ExactRows, KeySet,
                                                             NearClusters, Node, Pair,
                                                             PairShingles, candidate_pairs,
                                                             digest_array, digest_words,
                                                             exact_groups,
                                                             groups_of, near_clusters,
                                                             partitions_of, verified_pairs)
from bert_pretraining_data.transforms.dedup.minhash import (band_keys, band_shape,
                                                            distinct_shingles, shingle_hashes,
                                                            signatures)
from bert_pretraining_data.transforms.dedup.normalise import normalised_text, text_digest
from bert_pretraining_data.transforms.worker_memory import tune_worker_memory

DEDUP_MODES = ("none", "exact", "near")
DOCUMENTS = "documents"
SUMMARY = "summary"
# A batch of documents holds about this many characters of text.
BATCH_CHARACTERS = 1 << 20
# One partition of fingerprint rows per this many bytes of input.
PARTITION_INPUT_BYTES = 64 << 20
# One partition of the shingle sets exchanged to verify candidate pairs per
# this many bytes of input (at most a few times its text in shingles).
PAIR_PARTITION_INPUT_BYTES = 8 << 20
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
    # Text documents are keyed file:offset, so no two share a key; JSONL,
    # Parquet and Wikipedia documents are keyed by a hash of their text.
    unique_keys: bool = False

    @property
    def bands(self) -> tuple[int, int]:
        return band_shape(self.threshold)

    @property
    def pair_partitions(self) -> int:
        """Partitions of the candidate pairs' verification."""
        return self.partitions * (PARTITION_INPUT_BYTES // PAIR_PARTITION_INPUT_BYTES)


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
    for partition, members in groups_of(partitions_of(digest_rows, fingerprints.partitions)):
        exact[partition] = ExactRows(digest_rows[members], [keys[i] for i in members])
    if fingerprints.mode == "near":
        band_count, rows = fingerprints.bands
        shingles, counts = shingle_hashes([texts[i] for i in present], fingerprints.ngram)
        keys_by_band = band_keys(signatures(shingles, counts, band_count * rows), band_count, rows)
        flat_keys = keys_by_band.reshape(-1)
        flat_digests = np.repeat(digest_rows, band_count, axis=0)
        for partition, members in groups_of(partitions_of(flat_keys, fingerprints.partitions)):
            bands[partition] = BandRows(flat_keys[members], flat_digests[members])
    return batch, exact, bands


class FingerprintDocuments(beam.DoFn):
    """(key, lines) -> batches of documents with digests (main output), and
    per batch one element of rows per partition (`exact`, `bands`)."""

    def __init__(self, *, fingerprints: Fingerprints) -> None:
        self._fingerprints = fingerprints

    def setup(self) -> None:
        tune_worker_memory()

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


def group_copies(element: tuple[int, Iterable[ExactRows]]) -> ExactGroups:
    """One partition's exact groups."""
    return exact_groups(_exact_rows(element[1]))


def merge_groups(parts: Iterable[ExactGroups]) -> ExactGroups:
    """Every partition's exact groups as one."""
    merged = ExactGroups()
    for part in parts:
        merged.drops.extend(part.drops)
        merged.repeated.extend(part.repeated)
        merged.groups += part.groups
        merged.duplicates += part.duplicates
        merged.largest = max(merged.largest, part.largest)
    return merged


def find_candidates(element: tuple[int, Iterable[BandRows]]) -> set[Pair]:
    """One partition's candidate pairs, as one element."""
    return candidate_pairs(_band_rows(element[1]))


def index_candidates(parts: Iterable[set[Pair]], partitions: int) -> CandidateIndex:
    """Every partition's candidate pairs as one index."""
    return CandidateIndex.of(itertools.chain.from_iterable(parts), partitions)


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


class VerifyPairs(beam.DoFn):
    """(partition, its PairShingles) -> an edge for each pair whose texts'
    Jaccard similarity reaches the threshold."""

    def __init__(self, *, threshold: float) -> None:
        self._threshold = threshold
        self._candidates = counter("near_duplicate_candidate_pairs")
        self._verified = counter("near_duplicate_verified_pairs")

    def process(self, element: tuple[int, Iterable[PairShingles]]
                ) -> Iterator[tuple[None, tuple[Node, Node]]]:
        candidates, edges = verified_pairs(PairShingles.concatenate(list(element[1])),
                                           self._threshold)
        self._candidates.inc(candidates)
        self._verified.inc(len(edges))
        for edge in edges:
            yield None, edge


class DropCopies(beam.DoFn):
    """A batch -> its documents but those to drop; a kept key that identical
    copies share goes to `repeated`, where one of them is kept."""

    def process(self, batch: list[BatchedDocument], decisions: "Decisions") -> Iterator[object]:
        keys = [key for key, _, _ in batch]
        dropped, repeated = decisions.drops.holds(keys), decisions.repeated.holds(keys)
        for (key, lines, _), drop, shared in zip(batch, dropped, repeated):
            if drop:
                continue
            if shared:
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


@dataclasses.dataclass(frozen=True)
class Decisions:
    """What the workers that drop documents hold (a side input): the keys to
    drop, the kept keys that identical copies share, and the summary."""

    drops: KeySet
    repeated: KeySet
    summary: DedupSummary


def decide(exact: ExactGroups, fingerprints: Fingerprints,
           near: NearClusters | None) -> Decisions:
    """The exact and near decisions as one; exact groups that sit inside a
    near cluster count once, as the cluster."""
    near = near or NearClusters()
    if fingerprints.unique_keys and exact.repeated:
        raise ValueError(f"document key {exact.repeated[0]!r} names several documents; "
                         "keys of text input are file:offset and must be unique")
    bands, rows = fingerprints.bands if fingerprints.mode == "near" else (0, 0)
    summary = DedupSummary(
        mode=fingerprints.mode, duplicate_documents=exact.duplicates,
        near_duplicate_documents=len(near.drops),
        duplicate_clusters=exact.groups - near.texts_with_copies + near.clusters,
        largest_duplicate_cluster=max(near.largest, exact.largest),
        lsh_bands=bands, lsh_rows=rows)
    return Decisions(KeySet(exact.drops + near.drops), KeySet(exact.repeated), summary)


class _CountSummary(beam.DoFn):
    """Adds the summary's figures to Beam's counters, once per run."""

    NAMES = ("duplicate_documents", "near_duplicate_documents", "duplicate_clusters",
             "largest_duplicate_cluster")

    def __init__(self) -> None:
        self._counters = {name: counter(name) for name in self.NAMES}

    def process(self, decisions: Decisions) -> Iterator[dict]:
        for name, counted in self._counters.items():
            counted.inc(getattr(decisions.summary, name))
        yield dataclasses.asdict(decisions.summary)


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
        # Global combines without defaults: Beam would otherwise pass each
        # result through a side input and walk its objects to size it (0.17 s
        # for 130,000 dropped keys). The empty groups make exactly one result.
        partitions = (fingerprinted[_EXACT]
                      | "GroupExactRows" >> beam.GroupByKey()
                      | "GroupCopies" >> beam.Map(group_copies))
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
            near = beam.pvalue.AsSingleton(
                batches
                | "ShareShingles" >> beam.ParDo(
                    ShareShingles(ngram=fingerprints.ngram),
                    candidates=beam.pvalue.AsSingleton(
                        candidates, default_value=CandidateIndex.of([], pair_partitions)),
                    exact_drops=beam.pvalue.AsSingleton(exact_drops))
                | "GroupPairPartitions" >> beam.GroupByKey()
                | "VerifyPairs" >> beam.ParDo(VerifyPairs(threshold=fingerprints.threshold))
                | "GatherEdges" >> beam.GroupByKey()
                | "ClusterNearCopies" >> beam.Map(lambda element: near_clusters(element[1])),
                default_value=None)
        decisions = exact | "Decide" >> beam.Map(decide, fingerprints, near)
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
        summary = decisions | "CountDuplicates" >> beam.ParDo(_CountSummary())
        return {DOCUMENTS: survivors, SUMMARY: summary}
