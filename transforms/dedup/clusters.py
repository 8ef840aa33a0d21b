"""Which documents go: exact groups, candidate pairs, transitive clusters.

Plain functions on plain data; transforms.dedup.stages runs them in Beam.

- Exact: documents with the same digest (transforms.dedup.normalise) form a
  group; the one with the smallest key is kept. For text input a key is
  `file:offset`, so that is the first copy in file order; JSONL, Parquet and
  Wikipedia documents are keyed by a hash of their text, so identical texts
  share a key, and one of them is kept.
- Near: texts (digests) that share an LSH band key are candidate pairs
  (every pair of a band's texts when it holds at most ALL_PAIRS_LIMIT,
  else each with the band's first, which keeps the pairs linear in the
  band's size); a candidate pair is verified on the Jaccard similarity of
  its shingle sets; verified pairs join their texts into clusters
  transitively (union-find), and each cluster keeps the text whose kept
  document has the smallest key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from typing import Iterable, Sequence

import numpy as np

ALL_PAIRS_LIMIT = 8


@dataclasses.dataclass(frozen=True)
class ExactRows:
    """Documents' digests ((n, 16) uint8) and keys, the input of exact_groups."""

    digests: np.ndarray
    keys: list[str]


@dataclasses.dataclass(frozen=True)
class BandRows:
    """(band key, digest) of each band of each document: uint64 (m,), uint8 (m, 16)."""

    keys: np.ndarray
    digests: np.ndarray


def digest_array(digests: Sequence[bytes]) -> np.ndarray:
    """16-byte digests as an (n, 16) uint8 array."""
    return np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests), 16)


def partitions_of(values: np.ndarray, count: int) -> np.ndarray:
    """The partition (0..count-1) of each band key (uint64) or digest ((n, 16) uint8)."""
    if values.ndim == 2:
        values = np.ascontiguousarray(values).view("<u8")[:, 0]
    return (values % np.uint64(count)).astype(np.int64)


@dataclasses.dataclass
class ExactGroups:
    """What the exact groups of some documents decide, and their sizes."""

    drops: list[str] = dataclasses.field(default_factory=list)  # keys that are not kept
    repeated: list[str] = dataclasses.field(default_factory=list)  # kept keys several copies share
    groups: int = 0  # texts with more than one document
    duplicates: int = 0  # documents beyond the first of their text
    largest: int = 0  # documents of the largest group


def exact_groups(rows: ExactRows) -> ExactGroups:
    """Groups documents by digest; each group keeps its smallest key once."""
    found = ExactGroups()
    order = sorted(range(len(rows.keys)),
                   key=lambda i: (rows.digests[i].tobytes(), rows.keys[i]))
    for _, members in itertools.groupby(order, key=lambda i: rows.digests[i].tobytes()):
        keys = [rows.keys[i] for i in members]
        if len(keys) == 1:
            continue
        found.groups += 1
        found.duplicates += len(keys) - 1
        found.largest = max(found.largest, len(keys))
        found.drops.extend(sorted(set(keys[1:]) - {keys[0]}))
        if keys[1] == keys[0]:
            found.repeated.append(keys[0])
    return found


# (digest, copies, digest, copies), the first digest the smaller.
Pair = tuple[bytes, int, bytes, int]


def candidate_pairs(rows: BandRows) -> set[Pair]:
    """Pairs of distinct texts that share a band key, each with its number
    of documents (every copy of a text has the same bands)."""
    digests = np.ascontiguousarray(rows.digests).view("<u8")
    order = np.lexsort((digests[:, 1], digests[:, 0], rows.keys))
    keys, digests = rows.keys[order], digests[order]
    # Distinct (band, text) rows and the documents of each.
    new_row = np.ones(len(keys), dtype=bool)
    new_row[1:] = (keys[1:] != keys[:-1]) | (digests[1:] != digests[:-1]).any(axis=1)
    starts = np.flatnonzero(new_row)
    copies = np.diff(np.append(starts, len(keys)))
    keys, digests = keys[starts], digests[starts]
    new_band = np.ones(len(keys), dtype=bool)
    new_band[1:] = keys[1:] != keys[:-1]
    band_starts = np.flatnonzero(new_band)
    band_sizes = np.diff(np.append(band_starts, len(keys)))
    pairs: set[Pair] = set()
    for start, size in zip(band_starts[band_sizes > 1], band_sizes[band_sizes > 1]):
        texts = [(digests[i].tobytes(), int(copies[i])) for i in range(start, start + size)]
        if size <= ALL_PAIRS_LIMIT:
            combos = itertools.combinations(texts, 2)
        else:
            combos = ((texts[0], other) for other in texts[1:])
        pairs.update(_pair(first, second) for first, second in combos)
    return pairs


def _pair(first: tuple[bytes, int], second: tuple[bytes, int]) -> Pair:
    (a, copies_a), (b, copies_b) = sorted((first, second))
    return a, copies_a, b, copies_b


@dataclasses.dataclass(frozen=True)
class Node:
    """A text in a near cluster: its digest, the key of its kept document, its documents."""

    digest: bytes
    key: str
    copies: int


@dataclasses.dataclass
class NearClusters:
    """What the verified pairs decide, and the clusters' sizes."""

    drops: list[str] = dataclasses.field(default_factory=list)  # kept keys of texts that go
    clusters: int = 0
    texts_with_copies: int = 0  # texts of the clusters that also have exact copies
    largest: int = 0  # documents (copies included) of the largest cluster


def clusters_of(edges: Iterable[tuple[Node, Node]]) -> list[list[Node]]:
    """The texts of verified pairs joined transitively (union-find), each
    cluster sorted by key, the one it keeps first."""
    parent: dict[bytes, bytes] = {}
    nodes: dict[bytes, Node] = {}

    def root(digest: bytes) -> bytes:
        while parent[digest] != digest:
            parent[digest] = parent[parent[digest]]  # path halving
            digest = parent[digest]
        return digest

    for first, second in edges:
        for node in (first, second):
            nodes.setdefault(node.digest, node)
            parent.setdefault(node.digest, node.digest)
        a, b = root(first.digest), root(second.digest)
        if a != b:
            parent[max(a, b)] = min(a, b)
    members: dict[bytes, list[Node]] = {}
    for digest, node in nodes.items():
        members.setdefault(root(digest), []).append(node)
    return [sorted(cluster, key=lambda node: node.key) for cluster in members.values()]


def near_clusters(edges: Iterable[tuple[Node, Node]]) -> NearClusters:
    """What the clusters of verified pairs decide: each keeps the text whose
    document has the smallest key."""
    clusters = clusters_of(edges)
    found = NearClusters(clusters=len(clusters))
    for cluster in clusters:
        found.drops.extend(node.key for node in cluster[1:])
        found.texts_with_copies += sum(node.copies > 1 for node in cluster)
        found.largest = max(found.largest, sum(node.copies for node in cluster))
    return found


class KeySet:
    """A set of document keys held as 16 bytes each (blake2b of the key),
    sorted for lookup: the side input a worker holds is 16 bytes per key."""

    def __init__(self, keys: Iterable[str]) -> None:
        hashed = np.unique(key_hashes(list(keys)), axis=0)
        self._first, self._second = hashed[:, 0].copy(), hashed[:, 1].copy()

    def __len__(self) -> int:
        return len(self._first)

    def __contains__(self, key: str) -> bool:
        return bool(self.holds([key])[0])

    def holds(self, keys: Sequence[str]) -> np.ndarray:
        """Which of `keys` the set holds (booleans), looked up at once."""
        if not len(self) or not keys:
            return np.zeros(len(keys), dtype=bool)
        hashed = key_hashes(keys)
        start = np.searchsorted(self._first, hashed[:, 0], side="left")
        end = np.searchsorted(self._first, hashed[:, 0], side="right")
        found = end > start
        single = found & (end - start == 1)
        found[single] = self._second[start[single]] == hashed[single, 1]
        for index in np.flatnonzero(end - start > 1):  # 64-bit halves that collide: ~never
            found[index] = (self._second[start[index]:end[index]] == hashed[index, 1]).any()
        return found


def key_hashes(keys: Sequence[str]) -> np.ndarray:
    """128 bits of blake2b over each document key, as (n, 2) uint64."""
    digests = b"".join(hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
                       for key in keys)
    return np.frombuffer(digests, dtype="<u8").reshape(len(keys), 2)
