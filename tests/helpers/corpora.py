"""Test corpora made from the real text in tests/data."""

from __future__ import annotations

import pathlib

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"


def web_treebank_documents() -> list[list[str]]:
    """Short web documents: the English Web Treebank's dev and test sentences,
    two a document (~2,350 of them)."""
    sentences = [line.strip() for name in ("en_ewt-ud-dev.sentences.txt",
                                           "en_ewt-ud-test.sentences.txt")
                 for line in (DATA / name).read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    return [sentences[i:i + 2] for i in range(0, len(sentences) - 1, 2)]
