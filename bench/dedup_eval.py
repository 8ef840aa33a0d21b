"""A labelled evaluation set for the dedup stage, and its precision and recall.

Real documents (tests/data: the web documents of UD English EWT, dev and
test, and the WikiText-2 validation articles) with planted duplicates. For
each of ORIGINALS documents:

- `exact`: the same lines;
- `normalised`: the same words with other line breaks, runs of spaces and
  tabs, and other letter case (upper-cased sentences, title-cased words);
- `substitute|insert|delete-P`: P% of its words (at least one) replaced by,
  or preceded by, a word drawn from the corpus, or deleted, for P in
  EDIT_LEVELS;
- `prepend|append`: the same boilerplate block (the first sentences of one
  EWT e-mail) before or after it.

The documents not copied are unrelated negatives, and QUOTES groups of
HOSTS_PER_QUOTE of them share a long quotation (QUOTE_WORDS words of another
document, inserted in the middle): they must stay apart. Keys sort an
original before its copies.

`evaluate` runs the stage's functions (transforms.dedup) in one process and
scores each copy: found when it ends in its original's cluster; precision is
the share of removed documents removed for a copy of their own original. It
also reports each level's true Jaccard (of the shingle sets) and the MinHash
estimate (equal signature values) against the original.

    python bench/dedup_eval.py            # the table docs/duplicates.md shows
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import pathlib
import statistics
import sys
from typing import Iterator

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.corpus

from bench.corpus import read_documents  # noqa: E402
from bert_pretraining_data.transforms.dedup.clusters import (  # noqa: E402
    BandRows, ExactRows, Node, candidate_pairs, clusters_of, digest_array, exact_groups)
from bert_pretraining_data.transforms.dedup.minhash import (  # noqa: E402
    band_keys, band_shape, jaccard, shingle_hashes, shingle_set, signatures)
from bert_pretraining_data.transforms.dedup.normalise import (  # noqa: E402
    normalised_text, text_digest)
from bert_pretraining_data.transforms.randomness import hashed_rng  # noqa: E402

DATA = ROOT / "tests" / "data"
WEB = (DATA / "en_ewt-ud-dev.sentences.txt", DATA / "en_ewt-ud-test.sentences.txt")
ARTICLES = DATA / "wikitext2_valid.txt"
EDIT_LEVELS = (2, 5, 10, 20, 40)
EDITS = ("substitute", "insert", "delete")
ORIGINALS = 150
MIN_WORDS = 40  # an original has at least this many words
QUOTES, HOSTS_PER_QUOTE, QUOTE_WORDS = 10, 3, 60
BOILERPLATE_SENTENCES = 3


@dataclasses.dataclass(frozen=True)
class Labelled:
    key: str
    lines: list[str]
    group: int  # the original's index; unrelated documents have their own
    kind: str  # original, unrelated, quoted, exact, normalised, <edit>-<P>, prepend, append


def _words(lines: list[str]) -> list[str]:
    return " ".join(lines).split()


def _lines(words: list[str], per_line: int) -> list[str]:
    return [" ".join(words[i:i + per_line]) for i in range(0, len(words), per_line)]


def _edited(words: list[str], edit: str, percent: int, vocabulary: list[str], rng) -> list[str]:
    count = max(1, round(len(words) * percent / 100))
    words = list(words)
    for position in sorted(rng.sample(range(len(words)), count), reverse=True):
        if edit == "substitute":
            words[position] = next(w for w in iter(lambda: rng.choice(vocabulary), None)
                                   if w != words[position])
        elif edit == "insert":
            words.insert(position, rng.choice(vocabulary))
        else:
            del words[position]
    return words


def _normalised_copy(lines: list[str], rng) -> list[str]:
    """Other line breaks, runs of spaces and tabs, other letter case."""
    words = []
    for index, word in enumerate(_words(lines)):
        roll = rng.random()
        words.append(word.upper() if index < 12 else word.title() if roll < 0.2 else word)
        words.append(rng.choice(["  ", " \t", "   "]) if rng.random() < 0.2 else " ")
    text = "".join(words).strip()
    cut = rng.randrange(5, 12)
    pieces = text.split(" ")
    return [" ".join(pieces[i:i + cut]) for i in range(0, len(pieces), cut)]


def build_eval_set(seed: int = 0, originals: int = ORIGINALS) -> list[Labelled]:
    """The labelled documents (deterministic for a seed)."""
    rng = hashed_rng(seed, "dedup-eval")
    web = [lines for path in WEB for _, lines in read_documents(path)]
    articles = [lines for _, lines in read_documents(ARTICLES)]
    boilerplate, web = web[0][:BOILERPLATE_SENTENCES], web[1:]
    vocabulary = sorted({w for lines in web + articles for w in _words(lines)})
    pool = [d for d in web + articles if len(_words(d)) >= MIN_WORDS]
    rng.shuffle(pool)
    chosen, others = pool[:originals], pool[originals:]
    documents: list[Labelled] = []
    for group, lines in enumerate(chosen):
        words = _words(lines)
        per_line = max(1, round(len(words) / len(lines)))
        copies = {"original": lines, "exact": list(lines),
                  "normalised": _normalised_copy(lines, rng),
                  "prepend": boilerplate + lines, "append": lines + boilerplate}
        for edit in EDITS:
            for percent in EDIT_LEVELS:
                copies[f"{edit}-{percent}"] = _lines(
                    _edited(words, edit, percent, vocabulary, rng), per_line)
        for rank, (kind, copy) in enumerate(copies.items()):
            documents.append(Labelled(f"g{group:04d}/{rank:02d}-{kind}", copy, group, kind))
    quoted = others[:QUOTES * HOSTS_PER_QUOTE]
    sources = others[QUOTES * HOSTS_PER_QUOTE:]
    for index, lines in enumerate(others):
        group = originals + index
        if index < len(quoted):
            source = _words(sources[index // HOSTS_PER_QUOTE])
            start = rng.randrange(max(1, len(source) - QUOTE_WORDS))
            quote = " ".join(source[start:start + QUOTE_WORDS])
            middle = len(lines) // 2
            documents.append(Labelled(f"q{index:04d}", lines[:middle] + [f'"{quote}"']
                                      + lines[middle:], group, "quoted"))
        else:
            documents.append(Labelled(f"u{index:04d}", lines, group, "unrelated"))
    return documents


@dataclasses.dataclass(frozen=True)
class Decisions:
    """Which documents share a cluster (exact or near) with which."""

    cluster_of: dict[str, int]  # key -> cluster id
    kept: set[str]


def deduplicate(documents: list[tuple[str, list[str]]], *, mode: str, threshold: float = 0.8,
                ngram: int = 5) -> Decisions:
    """The stage's decisions in one process, by its own functions
    (transforms.dedup.beam runs the same ones in Beam)."""
    texts = {key: normalised_text(lines) for key, lines in documents}
    digests = {key: text_digest(text) for key, text in texts.items()}
    keys = [key for key, _ in documents]
    by_digest = collections.defaultdict(list)
    for key in keys:
        by_digest[digests[key]].append(key)
    exact = exact_groups(ExactRows(digest_array([digests[k] for k in keys]), keys))
    kept_of_digest = {digest: min(members) for digest, members in by_digest.items()}
    cluster_of_digest = {digest: index for index, digest in enumerate(by_digest)}
    dropped = set(exact.drops)
    if mode == "near":
        edges = list(_verified_edges(texts, digests, by_digest, kept_of_digest, threshold, ngram))
        for index, cluster in enumerate(clusters_of(edges), start=len(by_digest)):
            for node in cluster:
                cluster_of_digest[node.digest] = index
            dropped.update(node.key for node in sorted(cluster, key=lambda n: n.key)[1:])
    return Decisions({key: cluster_of_digest[digests[key]] for key in keys},
                     set(keys) - dropped)


def _verified_edges(texts, digests, by_digest, kept_of_digest, threshold, ngram
                    ) -> Iterator[tuple[Node, Node]]:
    bands, rows = band_shape(threshold)
    unique = list(by_digest)
    representative = [texts[kept_of_digest[d]] for d in unique]
    shingles, counts = shingle_hashes(representative, ngram)
    keys = band_keys(signatures(shingles, counts, bands * rows), bands, rows)
    flat = digest_array(unique)
    for first, _, second, _ in candidate_pairs(BandRows(keys.reshape(-1),
                                                        np.repeat(flat, bands, axis=0))):
        a, b = (texts[kept_of_digest[d]] for d in (first, second))
        if jaccard(shingle_set(a, ngram), shingle_set(b, ngram)) >= threshold:
            yield tuple(Node(d, kept_of_digest[d], len(by_digest[d])) for d in (first, second))


@dataclasses.dataclass(frozen=True)
class Level:
    kind: str
    copies: int
    found: int
    true_jaccard: list[float]
    estimated_jaccard: list[float]


def score(documents: list[Labelled], decisions: Decisions, *, threshold: float = 0.8,
          ngram: int = 5) -> tuple[list[Level], float, int, int, float]:
    """(levels, precision, removed, wrongly removed, recall on copies at
    Jaccard >= threshold)."""
    originals = {d.group: d for d in documents if d.kind == "original"}
    bands, rows = band_shape(threshold)
    by_kind: dict[str, list[Labelled]] = collections.defaultdict(list)
    for document in documents:
        if document.group in originals and document.kind != "original":
            by_kind[document.kind].append(document)
    levels, at_threshold, found_at_threshold = [], 0, 0
    for kind, copies in by_kind.items():
        found, true, estimated = 0, [], []
        for copy in copies:
            original = originals[copy.group]
            pair = [normalised_text(d.lines) for d in (original, copy)]
            similarity = jaccard(*(shingle_set(text, ngram) for text in pair))
            sigs = signatures(*shingle_hashes(pair, ngram), bands * rows)
            same = decisions.cluster_of[copy.key] == decisions.cluster_of[original.key]
            found += same
            true.append(similarity)
            estimated.append(float((sigs[0] == sigs[1]).mean()))
            if similarity >= threshold:
                at_threshold += 1
                found_at_threshold += same
        levels.append(Level(kind, len(copies), found, true, estimated))
    kept_cluster = {decisions.cluster_of[key]: key for key in decisions.kept}
    group_of = {d.key: d.group for d in documents}
    removed = [d for d in documents if d.key not in decisions.kept]
    wrong = sum(group_of[kept_cluster[decisions.cluster_of[d.key]]] != d.group for d in removed)
    precision = (len(removed) - wrong) / len(removed) if removed else 1.0
    recall = found_at_threshold / at_threshold if at_threshold else 1.0
    return levels, precision, len(removed), wrong, recall


def _order(kind: str) -> tuple:
    name, _, level = kind.partition("-")
    return (int(level) if level else -1, name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--ngram", type=int, default=5)
    args = parser.parse_args(argv)
    documents = build_eval_set(args.seed)
    pairs = [(d.key, d.lines) for d in documents]
    kinds = collections.Counter(d.kind for d in documents)
    print(f"{len(documents):,} documents: " + ", ".join(f"{k} {n}" for k, n in kinds.items()
                                                        if "-" not in k) + f", edits {ORIGINALS} "
          "of each level and kind")
    for mode in ("exact", "near"):
        decisions = deduplicate(pairs, mode=mode, threshold=args.threshold, ngram=args.ngram)
        levels, precision, removed, wrong, recall = score(
            documents, decisions, threshold=args.threshold, ngram=args.ngram)
        print(f"\n--dedup={mode} (threshold {args.threshold}, {args.ngram}-grams, "
              f"bands x rows {band_shape(args.threshold)}): removed {removed}, wrongly "
              f"{wrong}, precision {precision:.4f}, recall on copies at Jaccard >= "
              f"{args.threshold}: {recall:.4f}")
        print(f"{'copy':<16}{'copies':>7}{'recall':>8}{'true J mean':>12}{'min':>6}{'max':>6}"
              f"{'est. J mean':>12}{'|est-true|':>11}{'J>=t':>6}")
        for level in sorted(levels, key=lambda level: _order(level.kind)):
            error = statistics.mean(abs(e - t) for e, t in
                                    zip(level.estimated_jaccard, level.true_jaccard))
            print(f"{level.kind:<16}{level.copies:>7}{level.found / level.copies:>8.3f}"
                  f"{statistics.mean(level.true_jaccard):>12.3f}{min(level.true_jaccard):>6.2f}"
                  f"{max(level.true_jaccard):>6.2f}{statistics.mean(level.estimated_jaccard):>12.3f}"
                  f"{error:>11.3f}"
                  f"{sum(j >= args.threshold for j in level.true_jaccard):>6}")


if __name__ == "__main__":
    main()
