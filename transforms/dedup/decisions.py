"""The dedup stage's decisions (`--dedup=exact|near`): fingerprints of a batch
of documents, exact groups and candidate pairs per partition, and which keys to
drop. Every decision depends on texts and keys only (transforms.dedup.clusters),
so the output does not depend on bundles, workers or runner.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Iterable

import numpy as np

from bert_pretraining_data.transforms.dedup.clusters import (BandRows, CandidateIndex, ExactGroups,
                                                             ExactRows, KeySet, NearClusters, Pair,
                                                             candidate_pairs, digest_array,
                                                             exact_groups, groups_of, partitions_of)
from bert_pretraining_data.transforms.dedup.minhash import (band_keys, band_shape, shingle_hashes,
                                                            signatures)
from bert_pretraining_data.transforms.dedup.normalise import normalised_text, text_digest

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
    # A mixture's keys name their source: copies across sources are counted.
    by_source: bool = False

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


def group_copies(element: tuple[int, Iterable[bytes]], by_source: bool = False
                 ) -> ExactGroups:
    """One partition's exact groups, from its encoded ExactRows."""
    return exact_groups(ExactRows.concatenate([ExactRows.decoded(data) for data in element[1]]),
                        by_source)


def merge_groups(parts: Iterable[ExactGroups]) -> ExactGroups:
    """Every partition's exact groups as one."""
    merged = ExactGroups()
    for part in parts:
        merged.drops.extend(part.drops)
        merged.repeated.extend(part.repeated)
        merged.groups += part.groups
        merged.duplicates += part.duplicates
        merged.largest = max(merged.largest, part.largest)
        merged.across.update(part.across)
    return merged


def find_candidates(element: tuple[int, Iterable[bytes]]) -> set[Pair]:
    """One partition's candidate pairs, as one element, from its encoded BandRows."""
    return candidate_pairs(BandRows.concatenate([BandRows.decoded(data) for data in element[1]]))


def index_candidates(parts: Iterable[set[Pair]], partitions: int) -> CandidateIndex:
    """Every partition's candidate pairs as one index."""
    return CandidateIndex.of(itertools.chain.from_iterable(parts), partitions)


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
    # a mixture's: {"kept", "dropped" (source indices), "documents"} per pair of sources
    across_sources: list[dict[str, int]] | None = None


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
        lsh_bands=bands, lsh_rows=rows,
        across_sources=[{"kept": kept, "dropped": dropped, "documents": documents}
                        for (kept, dropped), documents in sorted(
                            (exact.across + near.across).items())]
        if fingerprints.by_source else None)
    return Decisions(KeySet(exact.drops + near.drops), KeySet(exact.repeated), summary)


