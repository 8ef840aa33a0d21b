"""Shared fixtures: the committed test data (no test reads ../shared)."""

from __future__ import annotations

import os
import pathlib

import pytest
from hypothesis import HealthCheck, settings

from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary, parse_vocabulary

DATA = pathlib.Path(__file__).parent / "data"
UNCASED_VOCAB = DATA / "bert-base-uncased-vocab.txt"
CHINESE_VOCAB = DATA / "bert-base-chinese-vocab.txt"

# Every property test: a fixed seed by default, so CI never meets a new random
# case; HYPOTHESIS_PROFILE=long explores many more, with fresh randomness.
settings.register_profile("ci", max_examples=200, derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def uncased_vocab() -> Vocabulary:
    return parse_vocabulary(UNCASED_VOCAB.read_bytes(), source=str(UNCASED_VOCAB))


@pytest.fixture(scope="session")
def uncased_tokenizer(uncased_vocab: Vocabulary) -> FullTokenizer:
    return FullTokenizer(uncased_vocab, do_lower_case=True)
