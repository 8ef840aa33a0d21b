"""The corpus and how it is read."""

from __future__ import annotations

import argparse
import dataclasses
from typing import AbstractSet, Any, Sequence

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag
from bert_pretraining_data.transforms.read.documents import comma_separated
from bert_pretraining_data.transforms.read.input_formats import format_of_names
from bert_pretraining_data.transforms.read.tables import INPUT_FORMATS
from bert_pretraining_data.transforms.tokenize.sentences import DEFAULT_SPLITTER, SPLITTERS


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputFlags(FlagGroup):
    SECTION = ("input", "the corpus and how it is read")

    input_file: str | None = flag(
        "input text file(s): comma-separated paths or globs, local or gs://, "
        ".gz/.bz2 by extension; one sentence per line, blank line between documents",
        default=None, default_help="none; required")
    input_format: str = flag(
        "text: one sentence per line, a blank line between documents, as the "
        "original; jsonl: one JSON object per line, a document each; parquet: a document "
        "per row (Hugging Face's corpora); wikipedia: a MediaWiki XML dump "
        "(pages-articles*.xml.bz2), an article per document; warc: Common Crawl WET files "
        "(.warc.wet.gz), a page per document keyed by its URL",
        choices=list(INPUT_FORMATS),
        default_help="from the files' names (.xml: wikipedia, .jsonl or .json: jsonl, .wet or "
                     ".warc: warc, .parquet: parquet, before .gz/.bz2/.zst), else text; the "
                     "files' first bytes must agree")
    text_field: str = flag(
        "with --input_format=jsonl|parquet: the field holding a document's text",
        default="text")
    sentence_splitter: str = flag(
        "how a paragraph (a line of a document's text) becomes sentences: none, a "
        "line is a sentence; otherwise, the named splitter's sentences (docs/corpora.md)",
        choices=list(SPLITTERS),
        default_help=f"none for --input_format=text, {DEFAULT_SPLITTER} for the others")
    input_split_bytes: int | None = flag(
        "bytes per split of the input (tests: many splits)", default=None,
        hidden=True)

    @classmethod
    def defaults(cls, args: argparse.Namespace, beam_args: Sequence[str]) -> dict[str, Any]:
        input_format = (args.input_format or format_of_names(comma_separated(args.input_file))
                        or "text")
        return {"input_format": input_format,
                "sentence_splitter": "none" if input_format == "text" else DEFAULT_SPLITTER}

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        return [(bool(config.input_file or config.mixture),
                 "--input_file (or --mixture) is required")]
