"""Corpora as users have them: JSONL and Parquet input rows -> (doc_key, [paragraphs]).

One document per input row, its text in `--text_field`, its paragraphs the
text's non-blank lines (split into sentences by Tokenize). The key is a hash
of the text, so a document gets the same instances whatever the corpus's
format or place, and keeps them when others come or go. Bad input rows are
counted, not fatal; a Parquet schema without a string text field is a
one-line error before any work starts.
"""

from __future__ import annotations

import hashlib
import json

from bert_pretraining_data.transforms.read.documents import Document



INPUT_FORMATS = ("text", "jsonl", "parquet", "wikipedia", "warc")


def text_lines(text: str) -> list[str]:
    """A document's text as its paragraphs: its non-blank lines, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def text_document(text: str) -> Document | None:
    """An input row's text as a document: its non-blank lines, stripped, keyed by
    128 bits of the text's sha256; None when the text is blank."""
    lines = text_lines(text)
    if not lines:
        return None
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32], lines


# The counters of input rows (manifest keys: their names predate "input row").
ROW_COUNTERS = ("records", "invalid_json_records", "records_without_text",
                "records_with_blank_text")


def row_document(row: str | dict, *, text_field: str, json_lines: bool,
                 counts: dict[str, int]) -> Document | None:
    """An input row's document, or None with the reason counted in `counts`
    (ROW_COUNTERS): a JSON line is parsed first; a blank line is no row."""
    if json_lines:
        if not row.strip():
            return None  # a blank line between rows is not a row
        counts["records"] += 1
        try:
            row = json.loads(row)
        except ValueError:
            counts["invalid_json_records"] += 1
            return None
    else:
        counts["records"] += 1
    text = row.get(text_field) if isinstance(row, dict) else None
    if not isinstance(text, str):
        counts["records_without_text"] += 1
        return None
    document = text_document(text)
    if document is None:
        counts["records_with_blank_text"] += 1
    return document


