"""Word n-gram shingles, MinHash signatures and LSH band keys of a batch of documents.

Shingles are runs of n normalised words hashed to 32 bits; MinHash is
datasketch's `affine32` scheme value for value (the tests compare with
`datasketch.MinHash`), computed for a whole batch in a few numpy operations
rather than datasketch's Python loop per document (docs/duplicates.md has the
figures). Candidates sharing a band are verified afterwards on their shingle
sets (transforms.dedup.clusters), so the bands only need to find nearly every
pair at the threshold: a pair of similarity s shares one of b bands of r rows
with probability 1 - (1 - s^r)^b (`band_shape`).
"""

from __future__ import annotations

import functools
import math
import zlib
from typing import Sequence

import numpy as np

from bert_pretraining_data.transforms.handoff.word_hashes import mix64, multipliers

# datasketch's default seed: the permutations are datasketch's own.
MINHASH_SEED = 1
# A pair at the threshold becomes a candidate with at least this probability.
CANDIDATE_RECALL = 0.99
# A pair half as similar as the threshold is a candidate at most this often.
FAR_CANDIDATES = 0.2
# The most permutations band_shape may use.
MAX_PERMUTATIONS = 256
# Rows of shingles x permutations computed at once (memory: rows * P * 4 bytes).
_CHUNK_ROWS = 1 << 14
_U32 = np.uint32(0xFFFFFFFF)


def _fmix32(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finalizer, datasketch's pre-mix of each input hash."""
    values = values ^ (values >> np.uint32(16))
    values = values * np.uint32(0x85EBCA6B)
    values = values ^ (values >> np.uint32(13))
    values = values * np.uint32(0xC2B2AE35)
    return values ^ (values >> np.uint32(16))


def word_counts(texts: Sequence[str]) -> np.ndarray:
    """Words of each normalised text (words are joined by single spaces)."""
    return np.fromiter((text.count(" ") + 1 if text else 0 for text in texts),
                       dtype=np.int64, count=len(texts))


def shingle_hashes(texts: Sequence[str], ngram: int) -> tuple[np.ndarray, np.ndarray]:
    """(hashes, counts): the 32-bit shingle hashes of every text, concatenated
    in text order (with repeats), and how many each text has (0 for an empty
    text, at least 1 otherwise)."""
    counts = word_counts(texts)
    words = " ".join(text for text in texts if text).encode("utf-8").split(b" ")
    hashes = np.fromiter(map(zlib.crc32, words), dtype=np.uint64, count=int(counts.sum()))
    total = len(hashes)
    ends = np.cumsum(counts)
    end_of_text = np.repeat(ends, counts)
    positions = np.arange(total)
    padded = np.concatenate([hashes, np.zeros(ngram, dtype=np.uint64)])
    weights = multipliers(ngram, 0)
    runs = np.zeros(total, dtype=np.uint64)
    for offset in range(ngram):  # the words after the end of a text weigh nothing
        inside = positions + offset < end_of_text
        runs += np.where(inside, padded[offset:offset + total], np.uint64(0)) * weights[offset]
    # A shingle starts at every word followed by ngram - 1 words of its text,
    # and at the first word of a text shorter than ngram.
    last_start = np.maximum(ends - counts, ends - ngram)
    starts = positions <= np.repeat(last_start, counts)
    mixed = mix64(runs[starts])
    shingles = ((mixed >> np.uint64(32)) ^ (mixed & np.uint64(_U32))).astype(np.uint32)
    return shingles, np.where(counts > 0, np.maximum(counts - ngram + 1, 1), 0)


def distinct_shingles(texts: Sequence[str], ngram: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, counts): the sorted distinct shingle hashes of every
    normalised text, concatenated in text order, and how many each has."""
    hashes, counts = shingle_hashes(texts, ngram)
    # One sort for the batch: (text index, hash) as one 64-bit value. Not
    # np.unique: NumPy 2.4's hashes first, much slower on these values.
    tagged = np.sort(np.repeat(np.arange(len(texts), dtype=np.uint64), counts) << np.uint64(32)
                     | hashes.astype(np.uint64))
    first = np.ones(len(tagged), dtype=bool)
    first[1:] = tagged[1:] != tagged[:-1]
    tagged = tagged[first]
    distinct = np.bincount((tagged >> np.uint64(32)).astype(np.int64), minlength=len(texts))
    return tagged.astype(np.uint32), distinct


def shingle_sets(texts: Sequence[str], ngram: int) -> list[np.ndarray]:
    """The sorted distinct shingle hashes of each normalised text."""
    values, counts = distinct_shingles(texts, ngram)
    return np.split(values, np.cumsum(counts)[:-1]) if len(texts) else []


def shingle_set(text: str, ngram: int) -> np.ndarray:
    """The sorted distinct shingle hashes of one normalised text."""
    return shingle_sets([text], ngram)[0]


@functools.lru_cache(maxsize=None)
def permutations(count: int, seed: int = MINHASH_SEED) -> np.ndarray:
    """datasketch's affine32 permutations (a, b) for `count` hash functions and
    `seed`, as a (2, count) uint32 array, drawn as `MinHash(num_perm=count,
    seed=seed, scheme="affine32")` draws them."""
    generator = np.random.RandomState(seed)
    a = generator.randint(0, 1 << 31, count, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = generator.randint(0, 1 << 32, count, dtype=np.uint32)
    return np.array([a, b])


def signatures(shingles: np.ndarray, counts: np.ndarray, count: int) -> np.ndarray:
    """(texts, count) uint32 MinHash signatures of texts given as
    `shingle_hashes` gives them; every count must be at least 1.

    Shingles are processed in chunks so that memory stays at _CHUNK_ROWS x
    `count` values whatever the documents' lengths.
    """
    if len(counts) and counts.min() < 1:
        raise ValueError("every text needs at least one shingle")
    a, b = (column[:, None] for column in permutations(count))
    mixed = _fmix32(shingles)
    ends = np.cumsum(counts)
    starts = ends - counts
    # (permutations, texts): each text's minimum is a reduction over contiguous values.
    result = np.full((count, len(counts)), _U32, dtype=np.uint32)
    for chunk_start in range(0, len(mixed), _CHUNK_ROWS):
        chunk_end = min(len(mixed), chunk_start + _CHUNK_ROWS)
        values = a * mixed[None, chunk_start:chunk_end]
        values += b
        first = int(np.searchsorted(ends, chunk_start, side="right"))
        last = int(np.searchsorted(starts, chunk_end, side="left"))
        segments = np.maximum(starts[first:last], chunk_start) - chunk_start
        np.minimum(result[:, first:last], np.minimum.reduceat(values, segments, axis=1),
                   out=result[:, first:last])
    return result.T.copy()


def band_shape(threshold: float) -> tuple[int, int]:
    """(bands, rows) for a Jaccard threshold: enough bands to find a pair at
    the threshold with CANDIDATE_RECALL, and the fewest permutations (each
    costs a multiply-add per shingle) with which a pair half as similar is a
    candidate at most FAR_CANDIDATES of the time; when no shape within
    MAX_PERMUTATIONS does (low thresholds), the one that comes closest."""
    shapes = []
    for rows in range(1, MAX_PERMUTATIONS + 1):
        miss = 1.0 - threshold ** rows
        bands = 1 if miss <= 0 else math.ceil(
            math.log(1.0 - CANDIDATE_RECALL) / math.log(miss))
        if bands * rows > MAX_PERMUTATIONS:
            break  # more rows need more bands still
        far = candidate_probability(threshold / 2, bands, rows)
        shapes.append((far > FAR_CANDIDATES, bands * rows if far <= FAR_CANDIDATES else far,
                       bands, rows))
    _, _, bands, rows = min(shapes)
    return bands, rows


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    """The probability that a pair of this Jaccard similarity shares a band."""
    return 1.0 - (1.0 - similarity ** rows) ** bands


def band_keys(signatures_: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(texts, bands) uint64: each band's rows and index hashed together."""
    cut = signatures_[:, :bands * rows].reshape(len(signatures_), bands, rows)
    weights = multipliers(rows, 1)
    keys = np.broadcast_to(multipliers(bands, 2), (len(signatures_), bands)).copy()
    for row in range(rows):
        keys += cut[:, :, row].astype(np.uint64) * weights[row]
    return mix64(keys)


def jaccard(first: np.ndarray, second: np.ndarray) -> float:
    """Jaccard similarity of two sorted sets of distinct shingle hashes."""
    values = np.concatenate([first, second])
    return float(jaccards(values, np.array([first.size, second.size]), np.array([0]),
                          np.array([1]))[0])


def jaccards(values: np.ndarray, counts: np.ndarray, firsts: np.ndarray,
             seconds: np.ndarray) -> np.ndarray:
    """Jaccard similarity of many pairs of sets at once: the sets are
    `values` cut into runs of `counts` (each run sorted and distinct), pair i
    is sets firsts[i] and seconds[i]. Each side's values tagged with their
    pair's index are sorted already, so one binary search of the first
    sides' values in the second sides' finds every shared value. Two empty
    sets are alike (1.0)."""
    firsts, seconds = np.asarray(firsts, dtype=np.int64), np.asarray(seconds, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    starts = np.cumsum(counts) - counts
    pair = np.arange(len(firsts), dtype=np.uint64)
    first, second = (np.repeat(pair, counts[side]) << np.uint64(32)
                     | values[ragged_positions(starts[side], counts[side])].astype(np.uint64)
                     for side in (firsts, seconds))
    found = np.minimum(np.searchsorted(second, first), max(len(second) - 1, 0))
    held = second[found] == first if len(second) else np.zeros(len(first), dtype=bool)
    shared = np.bincount((first[held] >> np.uint64(32)).astype(np.int64),
                         minlength=len(firsts))
    union = counts[firsts] + counts[seconds] - shared
    return np.divide(shared, union, out=np.ones(len(firsts)), where=union > 0)


def ragged_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions start..start+length-1 of every run, concatenated."""
    ends = np.cumsum(lengths)
    return np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(starts - (ends - lengths),
                                                                     lengths)
