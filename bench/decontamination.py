"""What decontamination (transforms/decontaminate/) costs, and what dropping a
whole document loses beside lm-eval's janitor's cuts.

Not a test: it prints figures.

1. The index of a ~10 MB benchmark set: its build time and the bytes a
   worker holds. The set is real text: the paragraphs of the Wikipedia
   excerpt's articles, one item a line, then the same paragraphs again with
   every 7th word replaced (another word each round), until the size, so
   that every round adds new n-grams as a larger benchmark set would.
2. CPU seconds per MB of corpus on each shape (bench/corpus.py): reading
   (split_documents), making the words of each document, and the look-up of
   batches of documents as the Beam shell makes them, against an empty
   index (words and n-gram hashing) and against the 10 MB one.
3. On the Wikipedia excerpt's articles, with paragraphs of some of them as
   benchmark items (as SQuAD's passages are Wikipedia paragraphs): the
   documents and characters lost by dropping a whole document beside the
   janitor's cut (200 characters removed on each side of each matched
   n-gram, pieces under 200 characters dropped, a document with more than 10
   cuts dropped), its cuts counted per matched n-gram as its code does, and
   per run of overlapping matches.

    python bench/decontamination.py --size 10
"""

from __future__ import annotations

import argparse
import pathlib
import pickle
import re
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import CACHE_DIR, MB, SHAPES, corpus_path, read_documents  # noqa: E402
from bench.dedup_rates import dump_documents  # noqa: E402
from bert_pretraining_data.transforms.decontaminate.benchmarks import (  # noqa: E402
    DEFAULT_NGRAM, BenchmarkIndex, benchmark_words, ngram_hashes, read_benchmark_items)
from bert_pretraining_data.transforms.dedup.decisions import BATCH_CHARACTERS  # noqa: E402
from bert_pretraining_data.transforms.handoff.words import PUNCTUATION_AS_SPACE  # noqa: E402

WIKIPEDIA = ROOT.parent / "shared" / "data" / "wikipedia" / "enwiki-excerpt-pages-articles.xml.bz2"
# The janitor's defaults (lm_eval/decontamination/janitor.py).
WINDOW, MINIMUM_SLICE, TOO_DIRTY = 200, 200, 10
# Benchmark items of part 3: paragraphs of at least this many characters (as
# SQuAD's passages) of every CHOSEN-th article, at most PASSAGES of each.
PASSAGE_CHARACTERS, CHOSEN, PASSAGES = 500, 4, 3


def benchmark_file(paragraphs: list[str], size_mb: float) -> pathlib.Path:
    """The benchmark set of part 1, one item a line, cached beside the corpora."""
    path = CACHE_DIR / f"decontamination-benchmark-{size_mb:g}MB.txt"
    if path.exists():
        return path
    vocabulary = sorted({word for paragraph in paragraphs for word in paragraph.split()})
    lines, size, round_ = [], 0, 0
    while size < size_mb * MB:
        for number, paragraph in enumerate(paragraphs):
            words = paragraph.split()
            if round_:
                for i in range(round_ % 7, len(words), 7):
                    words[i] = vocabulary[(i * 7919 + number * 104729 + round_) % len(vocabulary)]
            line = " ".join(words)
            lines.append(line)
            size += len(line.encode("utf-8")) + 1
            if size >= size_mb * MB:
                break
        round_ += 1
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def build(path: pathlib.Path) -> tuple[BenchmarkIndex, float]:
    """The index of one benchmark file, and the CPU seconds reading and building took."""
    start = time.process_time()
    items = read_benchmark_items(str(path), path.read_bytes(), "text")
    index = BenchmarkIndex.build([str(path)], ((0, line, text) for line, text in items),
                                 DEFAULT_NGRAM)
    return index, time.process_time() - start


def batches(documents: list[tuple[str, list[str]]]) -> list[list[list[str]]]:
    """Documents' lines in batches of about BATCH_CHARACTERS, as the Beam shell makes them."""
    result, batch, characters = [], [], 0
    for _, lines in documents:
        batch.append(lines)
        characters += sum(map(len, lines))
        if characters >= BATCH_CHARACTERS:
            result.append(batch)
            batch, characters = [], 0
    return result + [batch] if batch else result


def shape_costs(path: pathlib.Path, index: BenchmarkIndex, empty: BenchmarkIndex) -> dict:
    """CPU seconds per MB of each step on one corpus, and the documents matched."""
    megabytes = path.stat().st_size / MB
    clock = time.process_time
    start = clock()
    documents = read_documents(path)
    read = clock() - start
    start = clock()
    for _, lines in documents:
        benchmark_words(" ".join(lines))
    words = clock() - start
    grouped = batches(documents)
    start = clock()
    for batch in grouped:
        empty.batch_matches(batch)
    hashed = clock() - start
    start = clock()
    matched = sum(bool(found) for batch in grouped for found in index.batch_matches(batch))
    looked_up = clock() - start
    return {"documents": len(documents), "matched": matched, "read": read / megabytes,
            "words": words / megabytes, "hashed": hashed / megabytes,
            "looked_up": looked_up / megabytes}


def word_spans(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The benchmark words of `text`, each with the span of `text` it comes from."""
    words, spans = [], []
    for match in re.finditer(r"\S+", text.translate(PUNCTUATION_AS_SPACE)):
        for word in benchmark_words(match.group()):
            words.append(word)
            spans.append(match.span())
    return words, spans


def janitor_kept(text: str, cuts: list[tuple[int, int]]) -> int:
    """Characters of `text` the janitor keeps, given its cuts (start, end) in
    order: each widened by WINDOW, the pieces between them kept when longer
    than MINIMUM_SLICE, nothing when there are more than TOO_DIRTY cuts."""
    if len(cuts) > TOO_DIRTY:
        return 0
    kept, piece_start = 0, 0
    for start, end in cuts:
        start, end = max(0, start - WINDOW), min(len(text), end + WINDOW)
        if start - piece_start > MINIMUM_SLICE:
            kept += start - piece_start
        piece_start = max(piece_start, end)
    if len(text) - piece_start > MINIMUM_SLICE:
        kept += len(text) - piece_start
    return kept


def merged(cuts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping cuts as one."""
    runs: list[tuple[int, int]] = []
    for start, end in cuts:
        if runs and start <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(end, runs[-1][1]))
        else:
            runs.append((start, end))
    return runs


def policy_losses(documents: list[tuple[str, list[str]]], index: BenchmarkIndex) -> dict:
    """(documents lost, characters lost) of each policy on these documents."""
    losses = {"drop the document (ours)": [0, 0], "janitor, a cut per matched n-gram": [0, 0],
              "janitor, a cut per run of matches": [0, 0]}
    for _, lines in documents:
        text = " ".join(lines)
        words, spans = word_spans(text)
        assert words == benchmark_words(text)
        held = np.flatnonzero(np.isin(ngram_hashes(words, DEFAULT_NGRAM), index.hashes))
        assert bool(len(held)) == bool(index.matches(lines))
        if not len(held):
            continue
        cuts = [(spans[i][0], spans[i + DEFAULT_NGRAM - 1][1]) for i in held.tolist()]
        for name, kept in (("drop the document (ours)", 0),
                           ("janitor, a cut per matched n-gram", janitor_kept(text, cuts)),
                           ("janitor, a cut per run of matches",
                            janitor_kept(text, merged(cuts)))):
            losses[name][0] += kept == 0
            losses[name][1] += len(text) - kept
    return losses


def passages(documents: list[tuple[str, list[str]]]) -> list[list[str]]:
    """The benchmark items of part 3, per article: up to PASSAGES long
    paragraphs of every CHOSEN-th article."""
    return [[line for line in lines if len(line) >= PASSAGE_CHARACTERS][:PASSAGES]
            for _, lines in documents[::CHOSEN]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=10, help="corpus MB per shape")
    parser.add_argument("--benchmark-size", type=float, default=10, help="benchmark set MB")
    args = parser.parse_args(argv)
    articles = dump_documents(WIKIPEDIA)

    path = benchmark_file([line for _, lines in articles for line in lines], args.benchmark_size)
    index, seconds = build(path)
    arrays = (index.hashes.nbytes + index.item_files.nbytes + index.item_lines.nbytes
              + index.filter_bits.nbytes)
    print(f"1. index of {path.stat().st_size / MB:.1f} MB of benchmark text "
          f"({sum(index.items):,} items): {len(index.hashes):,} {DEFAULT_NGRAM}-grams, "
          f"built in {seconds:.2f} CPU s; arrays {arrays / MB:.1f} MB "
          f"(filter {index.filter_bits.nbytes / MB:.1f} MB), "
          f"pickled {len(pickle.dumps(index)) / MB:.1f} MB")

    empty = BenchmarkIndex.build(["none"], [], DEFAULT_NGRAM)
    print(f"\n2. CPU s per MB of corpus ({args.size:g} MB per shape)")
    print(f"{'shape':<10}{'documents':>11}{'matched':>9}{'read':>8}{'words':>8}"
          f"{'hashed':>8}{'look-up':>9}{'index':>8}")
    for shape in SHAPES:
        costs = shape_costs(corpus_path(args.size, shape=shape), index, empty)
        print(f"{shape:<10}{costs['documents']:>11,}{costs['matched']:>9,}{costs['read']:>8.3f}"
              f"{costs['words']:>8.3f}{costs['hashed']:>8.3f}{costs['looked_up']:>9.3f}"
              f"{costs['looked_up'] - costs['hashed']:>8.3f}", flush=True)

    chosen = passages(articles)
    items = [item for article in chosen for item in article]
    squad = BenchmarkIndex.build(["passages"], ((0, line, text) for line, text
                                               in enumerate(items, start=1)), DEFAULT_NGRAM)
    total = sum(len(" ".join(lines)) for _, lines in articles)
    print(f"\n3. {len(articles)} Wikipedia articles ({total / MB:.2f} MB), {len(items)} "
          f"benchmark passages from {sum(map(bool, chosen))} of them")
    print(f"{'policy':<36}{'documents lost':>16}{'characters lost':>17}{'share':>8}")
    for name, (lost, characters) in policy_losses(articles, squad).items():
        print(f"{name:<36}{lost:>16,}{characters:>17,}{characters / total:>8.1%}")


if __name__ == "__main__":
    main()
