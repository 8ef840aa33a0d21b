"""Corpora as users have them: JSONL and Parquet records -> (doc_key, [paragraphs]).

`--input_format=text` is BERT's format (transforms.read.documents: one sentence
per line, blank lines between documents). JSONL and Parquet hold one
document per record, its text in `--text_field` (Hugging Face's `text`);
a document's paragraphs are its text's non-blank lines, which the Tokenize
stage splits into sentences (transforms.tokenize.sentences).

A document's key is a hash of its text: stable wherever the corpus lives
and whatever its format, so the same text gives the same records from a
JSONL file, a Parquet file or a dump, and a document keeps its records when
others are added or removed. Two identical documents get the same key, so
the same instances.

Bad records are counted, not fatal: invalid JSON, a record that is not an
object, a missing or non-string text field, a text without any non-blank
line. A Parquet file whose schema lacks a string text field is a one-line
error before any work starts.
"""

from __future__ import annotations

import hashlib
import json
from typing import Iterator, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.transforms.counters import BundleCounters, CountingDoFn
from bert_pretraining_data.transforms.read.documents import DOCUMENTS, PROBLEMS, InputError

INPUT_FORMATS = ("text", "jsonl", "parquet", "wikipedia")
Document = tuple[str, list[str]]


def text_document(text: str) -> Document | None:
    """A record's text as a document: its non-blank lines, stripped, keyed by
    128 bits of the text's sha256; None when the text is blank."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32], lines


class _Records(CountingDoFn):
    """A record (a JSON line, or a Parquet row as a dict) -> (key, [paragraphs]),
    or a count of why it gave none."""

    def __init__(self, *, text_field: str, json_lines: bool) -> None:
        self._field = text_field
        self._json = json_lines
        self._count = BundleCounters("records", "invalid_json_records",
                                     "records_without_text", "records_with_blank_text")

    def process(self, record) -> Iterator[Document]:
        document = self._document(record)
        if document is not None:
            yield document

    def _document(self, record) -> Document | None:
        count = self._count.counts
        if self._json:
            if not record.strip():
                return None  # a blank line between records is not a record
            count["records"] += 1
            try:
                record = json.loads(record)
            except ValueError:
                count["invalid_json_records"] += 1
                return None
        else:
            count["records"] += 1
        text = record.get(self._field) if isinstance(record, dict) else None
        if not isinstance(text, str):
            count["records_without_text"] += 1
            return None
        document = text_document(text)
        if document is None:
            count["records_with_blank_text"] += 1
        return document


def check_parquet_schema(paths: Sequence[str], text_field: str) -> None:
    """Every file has a string `text_field` column; else a one-line InputError."""
    import pyarrow
    import pyarrow.parquet as pq

    for path in paths:
        with FileSystems.open(path) as handle:
            try:
                schema = pq.read_schema(handle)
            except (pyarrow.ArrowException, OSError) as err:
                raise InputError(f"{path} is not a Parquet file ({err}); check "
                                 "--input_format") from None
        if text_field not in schema.names:
            raise InputError(f"{path} has no column {text_field!r} (its columns: "
                             f"{', '.join(schema.names)}); pass --text_field")
        kind = schema.field(text_field).type
        if not (pyarrow.types.is_string(kind) or pyarrow.types.is_large_string(kind)):
            raise InputError(f"{path}: column {text_field!r} holds {kind}, not text; "
                             "pass the text column as --text_field")


class ReadRecords(beam.PTransform):
    """JSONL or Parquet files -> outputs `documents` (key, [paragraphs]) and
    `problems` (none: a file that cannot be read fails the run), as
    transforms.read.documents.ReadDocuments gives for text files."""

    def __init__(self, *, patterns: Sequence[str], input_format: str, text_field: str) -> None:
        super().__init__()
        self._patterns = tuple(patterns)
        self._format = input_format
        self._field = text_field

    def expand(self, pbegin):
        if self._format == "jsonl":  # splittable, .gz/.bz2 by extension, as text
            reads = [pbegin | f"ReadPattern{i}" >> beam.io.ReadFromText(pattern)
                     for i, pattern in enumerate(self._patterns)]
        else:
            reads = [pbegin | f"ReadPattern{i}" >> beam.io.ReadFromParquet(
                         pattern, columns=[self._field])
                     for i, pattern in enumerate(self._patterns)]
        documents = (tuple(reads) | "Flatten" >> beam.Flatten()
                     | "ParseRecords" >> beam.ParDo(_Records(
                         text_field=self._field, json_lines=self._format == "jsonl")))
        problems = pbegin | "NoProblems" >> beam.Create([])
        return {DOCUMENTS: documents, PROBLEMS: problems}
