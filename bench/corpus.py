"""Benchmark corpora of a requested size and shape, built from real text.

Users' corpora differ most in document length, and a pipeline's per-document
costs only show on short documents, so every benchmark runs on four shapes,
all made of real sentences (never synthetic words):

- `wikitext`: the 60 WikiText-2 validation articles (~18 KB each) repeated in
  seeded shuffled rounds (a fresh permutation per round);
- `web`: web-like documents (C4 and OpenWebText have a median of ~2 KB and
  a long tail): each a run of consecutive sentences of one real document
  (WikiText-2 articles, and the blog posts, e-mails, reviews and forum
  threads of the Universal Dependencies English Web Treebank) of a
  log-normally drawn length, median 2,000 bytes;
- `short`: 1 to 5 consecutive sentences of those sources (news snippets,
  forum posts, product reviews);
- `tiny`: 1 or 2 consecutive sentences (quotes, titles, one-line reviews
  and forum replies) of a source drawn uniformly, so two documents in three
  come from the web treebank's two files: a median of ~100 bytes, where
  per-document costs (and start-up) weigh most.

The last document is cut at a line so the size lands within one line of the
target. The same (shape, source, size, seed) always gives the same bytes, and
the file is cached outside the repository under a stable name (document keys
name the file, and seed every draw).

    python bench/corpus.py --size 20 --shape short   # prints the path of the corpus
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import pathlib
import sys
import tempfile
from typing import Iterator, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bert_pretraining_data.transforms.read.documents import (  # noqa: E402
    document_key, key_root, split_documents)
from bert_pretraining_data.transforms.randomness import hashed_rng  # noqa: E402

MB = 1_000_000
DATA = ROOT / "tests" / "data"
WIKITEXT = DATA / "wikitext2_valid.txt"
# Real web documents with their real sentence boundaries (UD English EWT).
WEB_SOURCES = (WIKITEXT, DATA / "en_ewt-ud-dev.sentences.txt",
               DATA / "en_ewt-ud-test.sentences.txt")
SHAPES = ("wikitext", "web", "short", "tiny")
CACHE_DIR = pathlib.Path(tempfile.gettempdir()) / "bert-bench-cache"
WEB_MEDIAN_BYTES = 2_000
WEB_SIGMA = 0.9  # log-normal spread: ~10% of documents under 630 bytes, ~10% over 6.3 KB
SHORT_SENTENCES = (1, 5)
TINY_SENTENCES = (1, 2)


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


def _encoded(documents: Sequence[Sequence[str]]) -> list[list[bytes]]:
    return [[(line + "\n").encode("utf-8") for line in lines] for lines in documents]


def _fill(documents: Iterator[list[bytes]], size_bytes: int) -> bytes:
    """Documents one blank line apart until `size_bytes`, cut at a line."""
    parts: list[bytes] = []
    total = 0
    for document in documents:
        for line in document + [b"\n"]:
            if total + len(line) > size_bytes:
                return b"".join(parts)
            parts.append(line)
            total += len(line)
    raise AssertionError("document streams are endless")


def _rounds(blocks: list[list[bytes]], seed: int) -> Iterator[list[bytes]]:
    """Every document once per round, each round in a new seeded order."""
    round_index = 0
    while True:
        order = list(range(len(blocks)))
        hashed_rng(seed, "bench-corpus", round_index).shuffle(order)
        yield from (blocks[index] for index in order)
        round_index += 1


def _excerpts(blocks: list[list[bytes]], seed: int, shape: str) -> Iterator[list[bytes]]:
    """Endless documents cut from the sources' sentences, read as one stream
    in source order: a random first sentence, then consecutive sentences until
    the drawn length (web) or count (short) is reached. An excerpt may run on
    into the next source document, as a web page runs on into its next post."""
    sentences = [line for block in blocks for line in block]
    rng = hashed_rng(seed, "bench-corpus", shape)
    while True:
        start = rng.randrange(len(sentences))
        if shape == "short":
            count = rng.randint(*SHORT_SENTENCES)
            yield [sentences[(start + i) % len(sentences)] for i in range(count)]
            continue
        target = WEB_MEDIAN_BYTES * math.exp(rng.gauss(0.0, WEB_SIGMA))
        document, size = [], 0
        while size < target:
            line = sentences[(start + len(document)) % len(sentences)]
            document.append(line)
            size += len(line)
        yield document


def _tiny(pools: list[list[bytes]], seed: int) -> Iterator[list[bytes]]:
    """Endless documents of 1 or 2 consecutive sentences of one source's
    sentences (`pools`, one per source), the source drawn uniformly."""
    rng = hashed_rng(seed, "bench-corpus", "tiny")
    while True:
        pool = pools[rng.randrange(len(pools))]
        start = rng.randrange(len(pool))
        count = rng.randint(*TINY_SENTENCES)
        yield [pool[(start + i) % len(pool)] for i in range(count)]


def corpus_bytes(sources: Sequence[list[list[str]]], *, size_bytes: int, seed: int,
                 shape: str = "wikitext") -> bytes:
    """A corpus of `shape` made from the documents (lists of sentence lines)
    of each source."""
    if size_bytes <= 0:
        raise ValueError(f"corpus size must be positive, got {size_bytes} bytes")
    if shape not in SHAPES:
        raise ValueError(f"unknown corpus shape {shape!r}: choose one of {', '.join(SHAPES)}")
    per_source = [[block for block in _encoded(documents) if block] for documents in sources]
    blocks = [block for source in per_source for block in source]
    if not blocks:
        raise ValueError("the source corpus holds no document: give a text file with "
                         "one sentence per line and blank lines between documents")
    if shape == "wikitext":
        stream = _rounds(blocks, seed)
    elif shape == "tiny":
        stream = _tiny([[line for block in source for line in block]
                        for source in per_source if source], seed)
    else:
        stream = _excerpts(blocks, seed, shape)
    return _fill(stream, size_bytes)


def jsonl_path(corpus: pathlib.Path) -> pathlib.Path:
    """The same documents as JSON lines (`{"text": lines joined by newlines}`),
    beside the text corpus: what --input_format=jsonl reads."""
    path = corpus.with_suffix(".jsonl")
    if not path.exists():
        records = "".join(json.dumps({"text": "\n".join(lines)}, ensure_ascii=False) + "\n"
                          for _, lines in read_documents(corpus))
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(records, encoding="utf-8")
        os.replace(partial, path)
    return path


def corpus_path(size_mb: float, *, shape: str = "wikitext", seed: int = 0,
                sources: Sequence[pathlib.Path] | None = None,
                cache_dir: pathlib.Path = CACHE_DIR) -> pathlib.Path:
    """The cached corpus of `size_mb` MB (10^6 bytes) and `shape`, written on first use."""
    if sources is None:
        sources = (WIKITEXT,) if shape == "wikitext" else WEB_SOURCES
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:10]
    path = cache_dir / f"{shape}-{size_mb:g}MB-seed{seed}-{digest}.txt"
    if not path.exists():
        documents = [[lines for _, lines in read_documents(source)] for source in sources]
        text = corpus_bytes(documents, size_bytes=round(size_mb * MB), seed=seed, shape=shape)
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_bytes(text)
        os.replace(partial, path)  # a concurrent or killed run never sees half a file
    return path.resolve()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, required=True, help="MB (10^6 bytes)")
    parser.add_argument("--shape", choices=SHAPES, default="wikitext")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(corpus_path(args.size, shape=args.shape, seed=args.seed))


if __name__ == "__main__":
    main()
