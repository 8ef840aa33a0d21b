"""Benchmark decontamination: the word n-grams of benchmark items, and the
documents that hold one.

Words are lm-eval's janitor's (GPT-3's 13-gram decontamination) in spirit:
the text folded as Deduplicate folds it (NFKC, case folding), punctuation
(Unicode category P*) made a space, split at whitespace
(transforms.handoff.words: PUNCTUATION_AS_SPACE). Each item's n-grams are
hashed to 64 bits and kept sorted; a document (its lines joined by spaces, so an n-gram may
cross a sentence) is looked up with the n-grams of a whole batch of documents
in a few numpy operations, and dropped whole when it holds any
(docs/decontamination.md).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import re
import zlib
from typing import Iterable, Sequence

import numpy as np

from bert_pretraining_data.transforms.handoff.word_hashes import mix64, multipliers
from bert_pretraining_data.transforms.handoff.words import (PUNCTUATION_AS_SPACE, folded,
                                                            separated_character)
from bert_pretraining_data.transforms.hashes.document_hashes import document_hash

DEFAULT_NGRAM = 13
DEFAULT_FIELD = "text"
MATCHES = "matches"
# Benchmark files read as JSON lines (after a compression suffix that the
# Beam shell's FileSystems decompresses by name); any other file is text.
JSON_SUFFIXES = (".jsonl", ".json")
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".deflate", ".zst", ".zstd", ".xz", ".lzma")
# The salt of the n-gram weights (transforms.handoff.word_hashes.multipliers).
_SALT = 3
# Filter bits per benchmark n-gram: a document n-gram not in the benchmarks
# passes the filter to the binary search about 1 time in 16 or fewer.
_FILTER_BITS_PER_HASH = 16
# A JSON line without the text field: at most this many of its fields are named.
_LISTED_FIELDS = 8


class DecontaminationError(ValueError):
    """A bad --decontaminate file or pattern; the message is one line saying what to fix."""


# ASCII bytes lowered, and punctuation and whitespace made a space; UTF-8's
# bytes of other characters (0x80 and up) stay as they are.
_ASCII = bytes(b if b >= 128 else ord(separated_character(b).lower()) for b in range(256))
# A run of non-ASCII characters and the spaces between them: most text is
# ASCII but for a few such runs, and str.translate is fast on ASCII only.
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f][^\x00-\x1f\x21-\x7f]*")


def _separated_run(match: re.Match) -> str:
    return match.group().translate(PUNCTUATION_AS_SPACE)


def _word_bytes(text: str) -> list[bytes]:
    """The benchmark words of `text`, UTF-8 encoded: those of
    split_words(text, PUNCTUATION_AS_SPACE, fold=True), made faster (ASCII
    text takes one C pass: lowering and separating are one byte table)."""
    if not text.isascii():
        text = _NON_ASCII_RUN.sub(_separated_run, folded(text))
    return text.encode("utf-8", "surrogatepass").translate(_ASCII).split()


def benchmark_words(text: str) -> list[str]:
    """The words n-grams are made of: folded, punctuation made a space, split
    at whitespace; so re-cased, re-spaced or re-punctuated copies of a text
    have its words."""
    return [word.decode("utf-8", "surrogatepass") for word in _word_bytes(text)]


def _ngrams(word_lists: Sequence[Sequence[bytes]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(hashes, owners): the uint64 hash of every n-gram of every list of
    words, in order, and the index of the list it is in; a list of fewer
    than n words has none. Words are hashed with crc32 (as MinHash's
    shingles), their n positions weighed by fixed odd 64-bit constants."""
    counts = np.fromiter(map(len, word_lists), dtype=np.int64, count=len(word_lists))
    total = int(counts.sum())
    starts = total - n + 1
    if starts <= 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    words = np.fromiter(map(zlib.crc32, itertools.chain.from_iterable(word_lists)),
                        dtype=np.uint64, count=total)
    weights = multipliers(n, _SALT)
    runs = words[:starts] * weights[0]
    for offset in range(1, n):
        runs += words[offset:offset + starts] * weights[offset]
    owners = np.repeat(np.arange(len(word_lists)), counts)[:starts]
    inside = np.arange(starts) + n <= np.cumsum(counts)[owners]  # the n-gram ends in its list
    return mix64(runs[inside]), owners[inside]


def ngram_hashes(words: Sequence[str], n: int) -> np.ndarray:
    """The uint64 hash of each n-gram of `words`, in order (none for fewer
    than n words); the same in every process."""
    return _ngrams([[word.encode("utf-8", "surrogatepass") for word in words]], n)[0]


def _filter_shift(count: int) -> np.uint64:
    """How far a hash is shifted right to give its filter bit, for `count` hashes."""
    bits = max(3, (max(count, 1) * _FILTER_BITS_PER_HASH - 1).bit_length())
    return np.uint64(64 - bits)


def _filter_bits(hashes: np.ndarray, shift: np.uint64) -> np.ndarray:
    """A bit per value of a hash's top bits, set when some hash has them (one byte per 8)."""
    bits = np.zeros(1 << (64 - int(shift)), dtype=bool)
    bits[(hashes >> shift).astype(np.intp)] = True
    return np.packbits(bits, bitorder="little")


@dataclasses.dataclass(frozen=True, eq=False)
class BenchmarkIndex:
    """The n-grams of every benchmark item, what a worker holds to look
    documents up: sorted unique hashes, each with the first item (by file,
    then line) that holds it, the items counted per file, and a filter of
    the hashes' top bits that most document n-grams fail at once."""

    ngram: int
    files: tuple[str, ...]
    hashes: np.ndarray  # uint64, sorted, unique
    item_files: np.ndarray  # int32: for each hash, the file index of its first item
    item_lines: np.ndarray  # int32: ... and that item's 1-based line number
    items: tuple[int, ...]  # per file
    items_too_short: tuple[int, ...]  # per file: items of fewer than `ngram` words
    filter_bits: np.ndarray  # uint8, see _filter_bits

    @classmethod
    def build(cls, files: Sequence[str], items: Iterable[tuple[int, int, str]],
              ngram: int) -> "BenchmarkIndex":
        """The index of `items`, (file index, line, text) in any order."""
        if ngram < 1:
            raise ValueError(f"the n-gram length must be at least 1, got {ngram}")
        ordered = sorted(items, key=lambda item: item[:2])
        item_files = np.array([item[0] for item in ordered], dtype=np.int32)
        item_lines = np.array([item[1] for item in ordered], dtype=np.int32)
        word_lists = [_word_bytes(text) for _, _, text in ordered]
        short = np.fromiter((len(words) < ngram for words in word_lists), dtype=bool,
                            count=len(word_lists))
        hashes, owners = _ngrams(word_lists, ngram)
        # Owners ascend in (file, line) order, so a stable sort puts each
        # hash's first item first.
        order = np.argsort(hashes, kind="stable")
        hashes, owners = hashes[order], owners[order]
        first = np.ones(len(hashes), dtype=bool)
        first[1:] = hashes[1:] != hashes[:-1]
        hashes, owners = hashes[first], owners[first]
        return cls(ngram=ngram, files=tuple(files), hashes=hashes,
                   item_files=item_files[owners], item_lines=item_lines[owners],
                   items=_per_file(item_files, len(files)),
                   items_too_short=_per_file(item_files[short], len(files)),
                   filter_bits=_filter_bits(hashes, _filter_shift(len(hashes))))

    def batch_matches(self, documents: Sequence[Sequence[str]]) -> list[list[tuple[int, int]]]:
        """For each document (a list of lines), the distinct (file index,
        line) items whose n-grams it holds, sorted; empty when none. One
        batch costs a few numpy operations, whatever its number of documents."""
        hashes, owners = _ngrams([_word_bytes(" ".join(lines)) for lines in documents],
                                 self.ngram)
        shift = _filter_shift(len(self.hashes))
        top = hashes >> shift
        passed = np.flatnonzero((self.filter_bits[(top >> np.uint64(3)).astype(np.intp)]
                                 >> (top & np.uint64(7)).astype(np.uint8)) & 1)
        found = np.minimum(np.searchsorted(self.hashes, hashes[passed]), len(self.hashes) - 1)
        held = self.hashes[found] == hashes[passed]
        found, owners = found[held], owners[passed[held]]
        files, lines = self.item_files[found], self.item_lines[found]
        order = np.lexsort((lines, files, owners))
        rows = np.stack([owners[order], files[order], lines[order]], axis=1)
        distinct = np.ones(len(rows), dtype=bool)
        distinct[1:] = (rows[1:] != rows[:-1]).any(axis=1)
        result: list[list[tuple[int, int]]] = [[] for _ in documents]
        for document, file_index, line in rows[distinct].tolist():
            result[document].append((file_index, line))
        return result

    def matches(self, lines: Sequence[str]) -> list[tuple[int, int]]:
        """The distinct (file index, line) items whose n-grams the document
        holds, sorted; empty when none."""
        return self.batch_matches([lines])[0]


def _per_file(file_indexes: np.ndarray, count: int) -> tuple[int, ...]:
    return tuple(np.bincount(file_indexes, minlength=count).tolist())


def is_json_lines(path: str) -> bool:
    """Whether a benchmark file is read as JSON lines, by its name."""
    name = path.lower()
    for suffix in COMPRESSION_SUFFIXES:
        name = name.removesuffix(suffix)
    return name.endswith(JSON_SUFFIXES)


def read_benchmark_items(path: str, data: bytes, field: str) -> list[tuple[int, str]]:
    """(1-based line number, text) of each item of one benchmark file (its
    bytes decompressed): a non-blank line of a text file, or the `field` of
    a JSON line of a .jsonl/.json file (`field`: comma-separated names, the
    first a line has: a GLUE-style file's `sentence` beside a SQuAD-style
    file's `context`)."""
    fields = tuple(name.strip() for name in field.split(",") if name.strip())
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        raise DecontaminationError(
            f"--decontaminate file {path} is not UTF-8 text ({err.reason} at byte {err.start}); "
            "convert it to UTF-8") from None
    json_lines = is_json_lines(path)
    items = [(number, _json_item(path, number, line, fields) if json_lines else line.strip())
             for number, line in enumerate(text.split("\n"), start=1) if line.strip()]
    if not items:
        raise DecontaminationError(
            f"--decontaminate file {path} holds no benchmark item (it is empty or blank); "
            "give it one item per line, or leave it out of --decontaminate")
    return items


def _json_item(path: str, number: int, line: str, fields: tuple[str, ...]) -> str:
    """The text of one JSON line's item: its first field of `fields` that holds text."""
    try:
        row = json.loads(line)
    except ValueError as err:
        raise DecontaminationError(
            f"--decontaminate file {path}, line {number}: not JSON ({getattr(err, 'msg', err)}); "
            "give one JSON object per line, or name the file .txt to read one item per line"
        ) from None
    found = [row[name] for name in fields if isinstance(row, dict)
             and isinstance(row.get(name), str)]
    if not found:
        has = ("none: not an object" if not isinstance(row, dict) else ", ".join(
            list(row)[:_LISTED_FIELDS] + ["..."] * (len(row) > _LISTED_FIELDS)) or "none")
        wanted = " or ".join(repr(name) for name in fields)
        raise DecontaminationError(
            f"--decontaminate file {path}, line {number}: no text field {wanted} (its fields: "
            f"{has}); pass --decontaminate_field naming the field that holds the text "
            "(comma-separated for files of several kinds: each line's first)")
    return found[0]


def audit_records(index: BenchmarkIndex, key: str, lines: Sequence[str],
                  found: Sequence[tuple[int, int]]) -> list[dict]:
    """The audit list's records of one dropped document: one per item it holds."""
    document = f"{document_hash(lines):016x}"
    return [{"document": document, "key": key, "file": index.files[file_index], "line": line}
            for file_index, line in found]


def summary(index: BenchmarkIndex, matches: Iterable[dict]) -> dict:
    """The manifest's section: per file its items, those too short to match,
    those matched, and the documents removed (a document once per file, and
    once in the total, however many items it holds)."""
    documents: dict[tuple[str, str], collections.Counter] = collections.defaultdict(
        collections.Counter)
    for record in matches:
        documents[record["document"], record["key"]][record["file"], record["line"]] += 1
    files = {path: {"items": items, "items_too_short": too_short, "items_matched": 0,
                    "documents_removed": 0}
             for path, items, too_short in zip(index.files, index.items, index.items_too_short)}
    matched: dict[str, set[int]] = collections.defaultdict(set)
    removed = 0
    for held in documents.values():
        # Identical documents under one key give the same records: each
        # record is there once per copy.
        copies = max(held.values())
        removed += copies
        for path in {path for path, _ in held}:
            files[path]["documents_removed"] += copies
        for path, line in held:
            matched[path].add(line)
    for path, lines in matched.items():
        files[path]["items_matched"] = len(lines)
    return {"ngram": index.ngram, "documents_removed": removed, "files": files}
