"""MinHash signatures by library: time per document on each corpus shape, and
how well each estimates the Jaccard similarity of the evaluation set's pairs.

The same shingles (5-grams of the normalised words) and 60 permutations (the
default --dedup_threshold's 12 bands x 5 rows) for every candidate:

- `ours`: transforms.dedup.minhash, datasketch's affine32 scheme computed for a
  batch of documents in numpy (BATCH documents per call, as the stage does);
- `datasketch`: `MinHash(num_perm=60, scheme="affine32").update_batch` per
  document on the shingles' UTF-8 bytes (its default SHA-1 per shingle);
- `datasketch, our hashes`: the same on our 32-bit shingle hashes
  (`hashfunc=int`), so only its per-shingle Python loop differs from ours;
- `rensa`: `RMinHash(num_perm=60, seed=1).update` per document on the shingle
  strings (rensa's own R-MinHash algorithm; skipped if not installed).

    pip install datasketch rensa
    python bench/minhash_libraries.py          # prints the table bench/DEDUP.md holds
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import time
from typing import Callable

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from bench.corpus import SHAPES, corpus_path, read_documents  # noqa: E402
from bench.dedup_eval import build_eval_set  # noqa: E402
from bert_pretraining_data.transforms.dedup.minhash import (  # noqa: E402
    jaccard, permutations, shingle_hashes, shingle_set, signatures)
from bert_pretraining_data.transforms.dedup.normalise import normalised_text  # noqa: E402

PERMUTATIONS, NGRAM, BATCH = 60, 5, 256


def _shingle_strings(text: str) -> list[str]:
    words = text.split(" ")
    return [" ".join(words[i:i + NGRAM]) for i in range(max(1, len(words) - NGRAM + 1))]


def _ours(texts: list[str]) -> list[np.ndarray]:
    out = []
    for start in range(0, len(texts), BATCH):
        out.extend(signatures(*shingle_hashes(texts[start:start + BATCH], NGRAM), PERMUTATIONS))
    return out


def _datasketch(texts: list[str]) -> list[np.ndarray]:
    from datasketch import MinHash

    shared = permutations(PERMUTATIONS)
    out = []
    for text in texts:
        sketch = MinHash(num_perm=PERMUTATIONS, scheme="affine32", permutations=shared)
        sketch.update_batch([s.encode("utf-8") for s in _shingle_strings(text)])
        out.append(sketch.hashvalues)
    return out


def _datasketch_our_hashes(texts: list[str]) -> list[np.ndarray]:
    from datasketch import MinHash

    shared = permutations(PERMUTATIONS)
    out = []
    for text in texts:
        sketch = MinHash(num_perm=PERMUTATIONS, scheme="affine32", permutations=shared,
                         hashfunc=int)
        sketch.update_batch(shingle_hashes([text], NGRAM)[0].tolist())
        out.append(sketch.hashvalues)
    return out


def _rensa(texts: list[str]) -> list[np.ndarray]:
    import rensa

    out = []
    for text in texts:
        sketch = rensa.RMinHash(num_perm=PERMUTATIONS, seed=1)
        sketch.update(_shingle_strings(text))
        out.append(np.array(sketch.digest()))
    return out


CANDIDATES: dict[str, Callable[[list[str]], list[np.ndarray]]] = {
    "ours": _ours, "datasketch": _datasketch, "datasketch, our hashes": _datasketch_our_hashes,
    "rensa": _rensa}


def _available(name: str) -> bool:
    module = {"rensa": "rensa"}.get(name, "datasketch" if "datasketch" in name else None)
    if module is None:
        return True
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def main() -> None:
    names = [name for name in CANDIDATES if _available(name)]
    print(f"{PERMUTATIONS} permutations, {NGRAM}-grams; CPU µs per document (ns per word)")
    print(f"{'shape':<10}{'docs':>6}{'words':>7}" + "".join(f"{n:>24}" for n in names))
    for shape in SHAPES:
        texts = [normalised_text(lines) for _, lines in read_documents(corpus_path(1, shape=shape))]
        words = sum(text.count(" ") + 1 for text in texts)
        cells = []
        for name in names:
            start = time.process_time()
            CANDIDATES[name](texts)
            spent = time.process_time() - start
            cells.append(f"{spent / len(texts) * 1e6:.1f} ({spent / words * 1e9:.0f})")
        print(f"{shape:<10}{len(texts):>6}{words / len(texts):>7.0f}"
              + "".join(f"{c:>24}" for c in cells), flush=True)

    documents = build_eval_set()
    originals = {d.group: d for d in documents if d.kind == "original"}
    pairs = [(normalised_text(originals[d.group].lines), normalised_text(d.lines))
             for d in documents if d.group in originals and d.kind != "original"]
    true = [jaccard(shingle_set(a, NGRAM), shingle_set(b, NGRAM)) for a, b in pairs]
    print(f"\nJaccard estimates on the evaluation set's {len(pairs):,} (original, copy) pairs:")
    for name in names:
        firsts = CANDIDATES[name]([a for a, _ in pairs])
        seconds = CANDIDATES[name]([b for _, b in pairs])
        errors = [abs(float((x == y).mean()) - t) for x, y, t in zip(firsts, seconds, true)]
        print(f"  {name:<24} mean |estimate - true| {statistics.mean(errors):.4f}, "
              f"95th percentile {np.percentile(errors, 95):.4f}")
    ours, theirs = _ours([a for a, _ in pairs[:200]]), _datasketch_our_hashes(
        [a for a, _ in pairs[:200]])
    print("  ours == datasketch on our hashes, value for value:",
          all(np.array_equal(x, y) for x, y in zip(ours, theirs)))


if __name__ == "__main__":
    main()
