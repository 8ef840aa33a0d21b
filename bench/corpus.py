"""Benchmark corpora of a requested size, built from a real corpus.

A corpus of N MB is the source's documents repeated in seeded shuffled rounds
(a fresh permutation per round) until N * 10^6 bytes; the last document is
cut at a line so the size lands within one line of the target. The same
(source, size, seed) always gives the same bytes, and the file is cached
under a stable name outside the repository: document keys include the path,
so a stable name keeps every run on the same keys, hence the same draws.

    python bench/corpus.py --size 20     # prints the path of the 20 MB corpus
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import sys
import tempfile
from typing import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from transforms.documents import document_key, key_root, split_documents  # noqa: E402
from transforms.randomness import derive_rng  # noqa: E402

MB = 1_000_000
SOURCE = ROOT / "tests" / "data" / "wikitext2_valid.txt"
CACHE_DIR = pathlib.Path(tempfile.gettempdir()) / "bert-bench-cache"


def _lines_with_offsets(data: bytes) -> Iterator[tuple[int, bytes]]:
    offset = 0
    for line in data.split(b"\n"):
        yield offset, line
        offset += len(line) + 1


def read_documents(path: pathlib.Path) -> list[tuple[str, list[str]]]:
    """(doc_key, [lines]) of one file, split and keyed exactly as ReadDocuments
    does for an unsplit file, so draws match the pipeline's."""
    data = path.read_bytes()
    root = key_root([str(path)])
    return [(document_key(str(path), offset, root), lines)
            for offset, lines in split_documents(_lines_with_offsets(data))]


def corpus_bytes(documents: list[list[str]], *, size_bytes: int, seed: int) -> bytes:
    """Documents in shuffled rounds, one blank line between them, cut to size."""
    if size_bytes <= 0:
        raise ValueError(f"corpus size must be positive, got {size_bytes} bytes")
    if not documents:
        raise ValueError("the source corpus holds no document: give a text file with "
                         "one sentence per line and blank lines between documents")
    blocks = [[(line + "\n").encode("utf-8") for line in lines] for lines in documents]
    parts: list[bytes] = []
    total = 0
    round_index = 0
    while True:
        order = list(range(len(blocks)))
        derive_rng(seed, "bench-corpus", round_index).shuffle(order)
        for index in order:
            for line in blocks[index] + [b"\n"]:
                if total + len(line) > size_bytes:
                    return b"".join(parts)
                parts.append(line)
                total += len(line)
        round_index += 1


def corpus_path(size_mb: float, *, seed: int = 0, source: pathlib.Path = SOURCE,
                cache_dir: pathlib.Path = CACHE_DIR) -> pathlib.Path:
    """The cached corpus of `size_mb` MB (10^6 bytes), written on first use."""
    data = source.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:10]
    path = cache_dir / f"{source.stem}-{size_mb:g}MB-seed{seed}-{digest}.txt"
    if not path.exists():
        documents = [lines for _, lines in read_documents(source)]
        text = corpus_bytes(documents, size_bytes=round(size_mb * MB), seed=seed)
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_bytes(text)
        os.replace(partial, path)  # a concurrent or killed run never sees half a file
    return path.resolve()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, required=True, help="MB (10^6 bytes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source", type=pathlib.Path, default=SOURCE)
    args = parser.parse_args(argv)
    print(corpus_path(args.size, seed=args.seed, source=args.source))


if __name__ == "__main__":
    main()
