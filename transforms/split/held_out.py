"""Which split a document is in, and the near-copy guard that keeps held-out
text out of training.

A document's split is decided by a keyed hash of its normalised text (the
dedup stage's normalisation and digest), never by its file, position, key or
neighbours, so it is on the same side in every run, on every runner, in every
refresh, whatever else the corpus holds. Each held-out split takes the draws
at one end of [0, 1): raising a fraction only adds documents to its split.

The guard: a training document whose word n-gram Jaccard similarity with a
held-out document reaches the threshold (measured as `--dedup=near` measures
it: MinHash bands find candidates, their shingle sets verify them) is dropped
from training, never moved, so held-out membership still depends on the
document alone (docs/splits.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Iterable, Sequence

import numpy as np

from bert_pretraining_data.transforms.dedup.minhash import (band_keys, band_shape,
                                                            distinct_shingles, jaccards,
                                                            shingle_hashes, signatures)

TRAIN, VALIDATION, TEST = SPLITS = ("train", "validation", "test")
HELD_OUT = (VALIDATION, TEST)
# The key of the split's hash: changing it would move documents between splits.
_SPLIT_KEY = b"bert-pretraining-data/held-out-split/1"
_DRAWS = float(1 << 64)


@dataclasses.dataclass(frozen=True)
class SplitFractions:
    """The share of documents each held-out split draws (0: no such split)."""

    validation: float = 0.0
    test: float = 0.0

    @property
    def active(self) -> bool:
        return self.validation > 0 or self.test > 0

    @property
    def names(self) -> tuple[str, ...]:
        """The splits a run writes: training, and each held-out split drawn."""
        return (TRAIN,) + tuple(name for name in HELD_OUT if self.fraction(name) > 0)

    @property
    def held_out(self) -> tuple[str, ...]:
        return self.names[1:]

    def fraction(self, name: str) -> float:
        return {VALIDATION: self.validation, TEST: self.test}.get(name, 1.0 - self.validation
                                                                   - self.test)

    def split_of(self, digest: bytes | None) -> str:
        """The split of a document by its normalised text's digest (None: an
        empty text, which has no tokens and stays in training)."""
        if digest is None:
            return TRAIN
        draw = split_draw(digest)
        if draw < self.validation:
            return VALIDATION
        if draw >= 1.0 - self.test:
            return TEST
        return TRAIN


def split_draw(digest: bytes) -> float:
    """A uniform draw in [0, 1) from a text's digest, keyed: the same text
    draws the same value in every run."""
    keyed = hashlib.blake2b(digest, digest_size=8, key=_SPLIT_KEY).digest()
    return int.from_bytes(keyed, "big") / _DRAWS


def split_seed(random_seed: int, name: str) -> int:
    """The seed a held-out split's instances and masks are drawn with: its
    own, so that its masks are not training's (and training's unchanged)."""
    if name == TRAIN:
        return random_seed
    keyed = hashlib.blake2b(f"{random_seed}/{name}".encode(), digest_size=4).digest()
    return int.from_bytes(keyed, "big") & 0x7FFFFFFF


@dataclasses.dataclass(frozen=True)
class HeldOutShingles:
    """The held-out documents as the guard compares them (a side input):
    each one's LSH band keys, sorted, and its distinct shingle set. A worker
    holds 0.8 to 1.8 bytes per byte of held-out text, more for shorter
    documents (bench/held_out.py)."""

    ngram: int
    threshold: float
    band_keys: np.ndarray  # uint64, sorted
    band_texts: np.ndarray  # int32: the held-out text of each band key
    values: np.ndarray  # uint32: every held-out text's distinct shingles, concatenated
    counts: np.ndarray  # int32: distinct shingles of each held-out text

    @classmethod
    def of(cls, texts: Sequence[str], *, ngram: int, threshold: float) -> "HeldOutShingles":
        """The held-out documents' normalised texts (none empty)."""
        bands, rows = band_shape(threshold)
        if not texts:
            empty = np.zeros(0, dtype=np.uint64)
            return cls(ngram, threshold, empty, np.zeros(0, dtype=np.int32),
                       np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.int32))
        keys = _band_keys(texts, ngram, bands, rows)
        values, counts = distinct_shingles(texts, ngram)
        return cls(ngram, threshold, keys.reshape(-1),
                   np.repeat(np.arange(len(texts), dtype=np.int32), bands), values,
                   counts.astype(np.int32)).sorted()

    @classmethod
    def merge(cls, parts: Iterable["HeldOutShingles"], *, ngram: int,
              threshold: float) -> "HeldOutShingles":
        """Several workers' held-out documents as one index."""
        parts = [part for part in parts if len(part.counts)]
        if not parts:
            return cls.of([], ngram=ngram, threshold=threshold)
        offsets = np.cumsum([0] + [len(part.counts) for part in parts[:-1]])
        return cls(ngram, threshold, np.concatenate([p.band_keys for p in parts]),
                   np.concatenate([p.band_texts + o for p, o in zip(parts, offsets)]).astype(
                       np.int32),
                   np.concatenate([p.values for p in parts]),
                   np.concatenate([p.counts for p in parts])).sorted()

    def sorted(self) -> "HeldOutShingles":
        order = np.argsort(self.band_keys, kind="stable")
        return dataclasses.replace(self, band_keys=self.band_keys[order],
                                   band_texts=self.band_texts[order])

    def __len__(self) -> int:
        return len(self.counts)

    def near_copies(self, texts: Sequence[str]) -> np.ndarray:
        """Which of these normalised texts are near copies of a held-out
        text (booleans); an empty text never is."""
        found = np.zeros(len(texts), dtype=bool)
        present = np.array([i for i, text in enumerate(texts) if text], dtype=np.int64)
        if not len(self) or not len(present):
            return found
        bands, rows = band_shape(self.threshold)
        keys = _band_keys([texts[i] for i in present], self.ngram, bands, rows)
        flat = keys.reshape(-1)
        left = np.searchsorted(self.band_keys, flat, side="left")
        right = np.searchsorted(self.band_keys, flat, side="right")
        hits = np.flatnonzero(right > left)
        if not len(hits):
            return found
        # every (text, held-out text) pair sharing a band, once
        widths = right[hits] - left[hits]
        positions = np.repeat(left[hits], widths) + _within(widths)
        pairs = np.unique(np.stack([np.repeat(hits // bands, widths),
                                    self.band_texts[positions]], axis=1), axis=0)
        candidates = np.unique(pairs[:, 0])
        values, counts = distinct_shingles([texts[present[i]] for i in candidates], self.ngram)
        held = np.unique(pairs[:, 1])
        held_values, held_counts = self._sets(held)
        similarity = jaccards(np.concatenate([values, held_values]),
                              np.concatenate([counts, held_counts]),
                              np.searchsorted(candidates, pairs[:, 0]),
                              len(candidates) + np.searchsorted(held, pairs[:, 1]))
        near = np.unique(pairs[similarity >= self.threshold, 0])
        found[present[near]] = True
        return found

    def _sets(self, texts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The shingle sets of these held-out texts (indices), concatenated."""
        starts = np.cumsum(self.counts, dtype=np.int64) - self.counts
        counts = self.counts[texts].astype(np.int64)
        return self.values[np.repeat(starts[texts], counts) + _within(counts)], counts


def _within(widths: np.ndarray) -> np.ndarray:
    """0..w-1 for every width w, concatenated."""
    ends = np.cumsum(widths)
    return np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - widths, widths)


def _band_keys(texts: Sequence[str], ngram: int, bands: int, rows: int) -> np.ndarray:
    """(texts, bands) LSH band keys of non-empty normalised texts, as the
    dedup stage makes them."""
    shingles, counts = shingle_hashes(texts, ngram)
    return band_keys(signatures(shingles, counts, bands * rows), bands, rows)
