"""Shared fixtures: the committed test data (no test reads ../shared)."""

from __future__ import annotations

import pathlib

import pytest

from transforms.tokenization import FullTokenizer
from transforms.vocabulary import Vocabulary, parse_vocabulary

DATA = pathlib.Path(__file__).parent / "data"
UNCASED_VOCAB = DATA / "bert-base-uncased-vocab.txt"
CHINESE_VOCAB = DATA / "bert-base-chinese-vocab.txt"


@pytest.fixture(scope="session")
def uncased_vocab() -> Vocabulary:
    return parse_vocabulary(UNCASED_VOCAB.read_bytes(), source=str(UNCASED_VOCAB))


@pytest.fixture(scope="session")
def uncased_tokenizer(uncased_vocab: Vocabulary) -> FullTokenizer:
    return FullTokenizer(uncased_vocab, do_lower_case=True)
