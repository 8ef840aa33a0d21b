"""create-vocab's corpus as it splits it (training and held-out documents), and
the baseline its SentencePiece models are compared with: Google's trainer run
directly (the library spm_train wraps) on a file of the same training
sentences, in corpus order, with the same settings, as an ALBERT user would
run spm_train on their corpus. Shared by the create-vocab tests and
bench/sentencepiece_vocab.py."""

from __future__ import annotations

import pathlib

import sentencepiece

from bert_pretraining_data.transforms.read.documents import split_documents
from bert_pretraining_data.transforms.tokenize.sentencepiece_text import preprocess_text
from bert_pretraining_data.transforms.vocab.sentencepiece import (
    SentencePieceLearning)
from bert_pretraining_data.transforms.vocab.word_counts import is_held_out


def corpus_documents(path: pathlib.Path) -> list[list[str]]:
    """The corpus' documents as ReadDocuments sees them."""
    lines, offset = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        lines.append((offset, line))
        offset += len(line)
    return [doc for _, doc in split_documents(lines)]


def split_lines(path: pathlib.Path, fraction: float = 0.1) -> tuple[list[str], list[str]]:
    """(training sentences, held-out lines), split as create-vocab splits them."""
    documents = corpus_documents(path)
    training = [line for doc in documents if not is_held_out(doc, fraction) for line in doc
                if preprocess_text(line, lower=False)]
    held_out = [line for doc in documents if is_held_out(doc, fraction) for line in doc]
    return training, held_out


def spm_train_directly(lines: list[str], workdir: pathlib.Path,
                       learning: SentencePieceLearning) -> bytes:
    """The trainer on a file of these lines preprocessed as create-vocab
    preprocesses them, with create-vocab's settings (ALBERT's)."""
    corpus = workdir / "all.txt"
    corpus.write_text("".join(f"{preprocess_text(line, lower=learning.do_lower_case)}\n"
                              for line in lines), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(workdir / "direct"), minloglevel=2,
        **learning.trainer_settings())
    return (workdir / "direct.model").read_bytes()
