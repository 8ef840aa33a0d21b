"""Which documents go: exact groups, candidate pairs, transitive clusters.

Plain functions on plain data, each decision made on texts and keys only.
Exact: documents with the same digest form a group that keeps its smallest
key (for text input the first copy in file order). Near: texts sharing an LSH
band key are candidate pairs (all pairs of a band of at most ALL_PAIRS_LIMIT
texts, else each with the band's first, so pairs stay linear in its size),
verified on the Jaccard similarity of their shingle sets and joined
transitively (union-find); each cluster keeps the text whose kept document
has the smallest key.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
from typing import Iterable, Iterator, Sequence

import numpy as np

from bert_pretraining_data.transforms.dedup.minhash import jaccards, ragged_positions
from bert_pretraining_data.transforms.dedup.normalise import DIGEST_BYTES
from bert_pretraining_data.transforms.handoff.compressed import compress, decompress
from bert_pretraining_data.transforms.handoff.varints import read_varints, varint
from bert_pretraining_data.transforms.read.mixture import source_of

ALL_PAIRS_LIMIT = 8


@dataclasses.dataclass(frozen=True)
class ExactRows:
    """Documents' digests ((n, 16) uint8) and keys, the input of exact_groups."""

    digests: np.ndarray
    keys: list[str]

    @classmethod
    def concatenate(cls, parts: Sequence["ExactRows"]) -> "ExactRows":
        return cls(np.concatenate([part.digests for part in parts]),
                   [key for part in parts for key in part.keys])

    @property
    def nbytes(self) -> int:
        """What the rows hold: 16 bytes and the key's characters a document."""
        return self.digests.nbytes + sum(map(len, self.keys))

    def encoded(self) -> bytes:
        """The rows as the shuffle carries them (_framed): the digests, each
        key's length in characters (varints), then the keys in UTF-8."""
        return _framed(len(self.keys), b"".join((
            self.digests.tobytes(), b"".join(map(varint, map(len, self.keys))),
            "".join(self.keys).encode("utf-8", "surrogatepass"))))

    @classmethod
    def decoded(cls, data: bytes) -> "ExactRows":
        """The rows that `encoded` gave `data` for."""
        count, body = _unframed(data)
        end = count * DIGEST_BYTES
        lengths, start = read_varints(body, end, count)
        text = body[start:].decode("utf-8", "surrogatepass")
        bounds = [0, *itertools.accumulate(lengths)]
        return cls(np.frombuffer(body, dtype=np.uint8, count=end).reshape(count, DIGEST_BYTES),
                   [text[first:last] for first, last in zip(bounds, bounds[1:])])


@dataclasses.dataclass(frozen=True)
class BandRows:
    """(band key, digest) of each band of each document: uint64 (m,), uint8 (m, 16)."""

    keys: np.ndarray
    digests: np.ndarray

    @classmethod
    def concatenate(cls, parts: Sequence["BandRows"]) -> "BandRows":
        return cls(np.concatenate([part.keys for part in parts]),
                   np.concatenate([part.digests for part in parts]))

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.digests.nbytes

    def encoded(self) -> bytes:
        """The rows as the shuffle carries them (_framed): the keys (uint64
        little-endian), then the digests."""
        return _framed(len(self.keys), self.keys.astype("<u8").tobytes() + self.digests.tobytes())

    @classmethod
    def decoded(cls, data: bytes) -> "BandRows":
        """The rows that `encoded` gave `data` for."""
        count, body = _unframed(data)
        digests = np.frombuffer(body, dtype=np.uint8, offset=8 * count)
        return cls(np.frombuffer(body, dtype="<u8", count=count),
                   digests.reshape(count, DIGEST_BYTES))


def _framed(count: int, body: bytes) -> bytes:
    """Rows on their way through the shuffle: a varint of count * 2 + 1 and
    the body as one zstd frame, or of count * 2 and the body as it is, when
    zstd would not make it smaller (a partition's one or two documents).
    A bundle's rows of a partition travel as one such element, ~20-60 bytes
    a document (bench/document_shuffle_bytes.py)."""
    packed = compress(body)
    if len(packed) < len(body):
        return varint(count << 1 | 1) + packed
    return varint(count << 1) + body


def _unframed(data: bytes) -> tuple[int, bytes]:
    """(count, body) of _framed's bytes."""
    (header,), start = read_varints(data, 0, 1)
    body = data[start:]
    return header >> 1, decompress(body) if header & 1 else body


def digest_array(digests: Sequence[bytes]) -> np.ndarray:
    """16-byte digests as an (n, 16) uint8 array."""
    return np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests), 16)


def digest_words(rows: np.ndarray) -> np.ndarray:
    """An (n, 16) uint8 digest array as (n, 2) uint64: DigestIndex's values,
    and the first word a partition's hash."""
    return np.ascontiguousarray(rows).view("<u8")


def partitions_of(values: np.ndarray, count: int) -> np.ndarray:
    """The partition (0..count-1) of each band key (uint64) or digest ((n, 16) uint8)."""
    if values.ndim == 2:
        values = digest_words(values)[:, 0]
    return (values % np.uint64(count)).astype(np.int64)


@dataclasses.dataclass
class ExactGroups:
    """What the exact groups of some documents decide, and their sizes."""

    drops: list[str] = dataclasses.field(default_factory=list)  # keys that are not kept
    repeated: list[str] = dataclasses.field(default_factory=list)  # kept keys several copies share
    groups: int = 0  # texts with more than one document
    duplicates: int = 0  # documents beyond the first of their text
    largest: int = 0  # documents of the largest group
    # (source of the kept key, source of a dropped one) -> documents: a mixture's
    across: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def sources_of(kept: str, dropped: Iterable[str]) -> collections.Counter:
    """(kept's source, dropped's source) of a mixture's copies, for every
    dropped key of another source than the kept one."""
    return collections.Counter((source_of(kept), source_of(key)) for key in dropped
                               if source_of(key) != source_of(kept))


def exact_groups(rows: ExactRows, by_source: bool = False) -> ExactGroups:
    """Groups documents by digest; each group keeps its smallest key once
    (`by_source`: a mixture's keys, whose copies across sources are counted)."""
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
        if by_source:
            found.across.update(sources_of(keys[0], keys[1:]))
        if keys[1] == keys[0]:
            found.repeated.append(keys[0])
    return found


# (digest, copies, digest, copies), the first digest the smaller.
Pair = tuple[bytes, int, bytes, int]


def candidate_pairs(rows: BandRows) -> set[Pair]:
    """Pairs of distinct texts that share a band key, each with its number
    of documents (every copy of a text has the same bands)."""
    digests = digest_words(rows.digests)
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


def groups_of(labels: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(label, row indices) of every label that rows have, labels ascending."""
    order = np.argsort(labels, kind="stable")
    values, starts = np.unique(labels[order], return_index=True)
    ends = np.append(starts[1:], len(order))
    for value, start, end in zip(values, starts, ends):
        yield int(value), order[start:end]


@dataclasses.dataclass(frozen=True)
class PairShingles:
    """Shingle sets on their way to the pairs they verify: message i says
    that text row texts[i] is side sides[i] (0: the smaller digest) of pair
    pairs[i]; a text row is its digest, the key of its kept document, its
    documents and its shingle set (counts[row] values of `shingles`)."""

    pairs: np.ndarray  # int64 pair index (CandidateIndex's)
    sides: np.ndarray  # int8
    texts: np.ndarray  # int64 text row
    digests: np.ndarray  # (rows, 16) uint8
    keys: list[str]
    copies: np.ndarray  # int64
    shingles: np.ndarray  # uint32, each row's sorted distinct hashes
    counts: np.ndarray  # int64

    @classmethod
    def concatenate(cls, parts: Sequence["PairShingles"]) -> "PairShingles":
        rows = np.cumsum([0] + [len(part.keys) for part in parts])
        return cls(np.concatenate([part.pairs for part in parts]),
                   np.concatenate([part.sides for part in parts]),
                   np.concatenate([part.texts + row for part, row in zip(parts, rows)]),
                   np.concatenate([part.digests for part in parts]),
                   [key for part in parts for key in part.keys],
                   np.concatenate([part.copies for part in parts]),
                   np.concatenate([part.shingles for part in parts]),
                   np.concatenate([part.counts for part in parts]))


@dataclasses.dataclass(frozen=True)
class CandidateIndex:
    """Every candidate pair and the texts in them, numpy arrays only (the
    side input of the shingle exchange: ~50 bytes a pair): pair j joins text
    indices pair_texts[j] (the smaller digest first), text i has copies[i]
    documents and is in pairs pair_ids[offsets[i]:offsets[i + 1]], and pair
    j is verified in partition j % partitions. Pairs are numbered in digest
    order, so the numbering depends on the pairs only."""

    texts: DigestIndex
    copies: np.ndarray
    pair_texts: np.ndarray
    offsets: np.ndarray
    pair_ids: np.ndarray
    partitions: int

    @classmethod
    def of(cls, pairs: Iterable[Pair], partitions: int) -> "CandidateIndex":
        ordered = sorted(set(pairs))
        words = digest_words(digest_array([d for first, _, second, _ in ordered
                                           for d in (first, second)]))
        texts = DigestIndex(words)
        flat = texts.find(words)
        copies = np.zeros(len(texts), dtype=np.int64)
        copies[flat] = [count for _, first, _, second in ordered for count in (first, second)]
        offsets = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=len(texts)))])
        pair_ids = np.argsort(flat, kind="stable") // 2
        return cls(texts, copies, flat.reshape(-1, 2), offsets, pair_ids, partitions)

    def __len__(self) -> int:
        return len(self.pair_texts)

    def messages(self, texts: np.ndarray, digests: np.ndarray, keys: list[str],
                 shingles: np.ndarray, counts: np.ndarray) -> Iterator[tuple[int, PairShingles]]:
        """(partition, its messages) for candidate texts (indices here, their
        digests (n, 16) uint8, kept keys, and shingle sets as
        distinct_shingles gives them): one message per pair a text is in."""
        degree = self.offsets[texts + 1] - self.offsets[texts]
        pairs = self.pair_ids[ragged_positions(self.offsets[texts], degree)]
        senders = np.repeat(np.arange(len(texts)), degree)
        sides = (self.pair_texts[pairs, 1] == texts[senders]).astype(np.int8)
        starts = np.cumsum(counts) - counts
        for partition, members in groups_of(pairs % self.partitions):
            used, rows = np.unique(senders[members], return_inverse=True)
            yield partition, PairShingles(
                pairs[members], sides[members], rows.astype(np.int64), digests[used],
                [keys[i] for i in used], self.copies[texts[used]],
                shingles[ragged_positions(starts[used], counts[used])], counts[used])


def verified_pairs(messages: PairShingles, threshold: float
                   ) -> tuple[int, list[tuple["Node", "Node"]]]:
    """(candidate pairs, those whose texts' Jaccard similarity reaches the
    threshold as (Node, Node), the smaller digest first), from every message
    of their pairs. Identical texts under one key send a pair the same text
    twice: it counts once."""
    order = np.lexsort((messages.sides, messages.pairs))
    pairs, sides, texts = messages.pairs[order], messages.sides[order], messages.texts[order]
    once = np.ones(len(pairs), dtype=bool)
    once[1:] = (pairs[1:] != pairs[:-1]) | (sides[1:] != sides[:-1])
    pairs, sides, texts = pairs[once], sides[once], texts[once]
    if (len(pairs) % 2 or (sides[0::2] != 0).any() or (sides[1::2] != 1).any()
            or (pairs[0::2] != pairs[1::2]).any()):
        raise ValueError("a candidate pair's verification lacks one of its texts")
    similarity = jaccards(messages.shingles, messages.counts, texts[0::2], texts[1::2])

    def node(row: int) -> Node:
        return Node(messages.digests[row].tobytes(), messages.keys[row],
                    int(messages.copies[row]))

    return len(similarity), [(node(texts[2 * i]), node(texts[2 * i + 1]))
                             for i in np.flatnonzero(similarity >= threshold)]


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
    across: collections.Counter = dataclasses.field(default_factory=collections.Counter)


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


def near_clusters(edges: Iterable[tuple[Node, Node]], by_source: bool = False) -> NearClusters:
    """What the clusters of verified pairs decide: each keeps the text whose
    document has the smallest key (`by_source`: as exact_groups)."""
    clusters = clusters_of(edges)
    found = NearClusters(clusters=len(clusters))
    for cluster in clusters:
        found.drops.extend(node.key for node in cluster[1:])
        if by_source:
            found.across.update(sources_of(cluster[0].key, [node.key for node in cluster[1:]]))
        found.texts_with_copies += sum(node.copies > 1 for node in cluster)
        found.largest = max(found.largest, sum(node.copies for node in cluster))
    return found


class DigestIndex:
    """Distinct 128-bit values ((n, 2) uint64: digests, hashed keys), sorted
    and looked up many at once: numpy arrays only, so a side input of millions
    costs 16 bytes each and Beam's cache sizes it without walking objects."""

    def __init__(self, values: np.ndarray) -> None:
        ordered = np.unique(np.asarray(values, dtype=np.uint64).reshape(-1, 2), axis=0)
        self._first, self._second = ordered[:, 0].copy(), ordered[:, 1].copy()

    def __len__(self) -> int:
        return len(self._first)

    def find(self, values: np.ndarray) -> np.ndarray:
        """The index of each of `values` in sorted order, -1 where absent."""
        found = np.full(len(values), -1, dtype=np.int64)
        if not len(self) or not len(values):
            return found
        start = np.searchsorted(self._first, values[:, 0], side="left")
        end = np.searchsorted(self._first, values[:, 0], side="right")
        single = np.flatnonzero(end - start == 1)
        match = single[self._second[start[single]] == values[single, 1]]
        found[match] = start[match]
        for index in np.flatnonzero(end - start > 1):  # 64-bit halves that collide: ~never
            hits = np.flatnonzero(self._second[start[index]:end[index]] == values[index, 1])
            if hits.size:
                found[index] = start[index] + hits[0]
        return found


class KeySet:
    """A set of document keys held as 16 bytes each (blake2b of the key),
    sorted for lookup: the side input a worker holds is 16 bytes per key."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._index = DigestIndex(key_hashes(list(keys)))

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: str) -> bool:
        return bool(self.holds([key])[0])

    def holds(self, keys: Sequence[str]) -> np.ndarray:
        """Which of `keys` the set holds (booleans), looked up at once."""
        if not len(self):  # most batches of a corpus without copies: nothing to hash
            return np.zeros(len(keys), dtype=bool)
        return self._index.find(key_hashes(keys)) >= 0


def key_hashes(keys: Sequence[str]) -> np.ndarray:
    """128 bits of blake2b over each document key, as (n, 2) uint64."""
    digests = b"".join(hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
                       for key in keys)
    return np.frombuffer(digests, dtype="<u8").reshape(len(keys), 2)
