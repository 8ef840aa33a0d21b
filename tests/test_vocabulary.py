"""Vocabulary loading: the original's line semantics and one-line errors."""

from __future__ import annotations

import pytest

from conftest import UNCASED_VOCAB
from bert_pretraining_data.transforms.tokenize.vocabulary import (VocabularyError, load_vocabulary,
                                                         parse_vocabulary)

SPECIALS = b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"


def test_real_vocabulary_ids_are_line_numbers():
    vocab = load_vocabulary(str(UNCASED_VOCAB))
    assert len(vocab) == 30522
    assert (vocab.cls_id, vocab.sep_id, vocab.mask_id, vocab.unk_id) == (101, 102, 103, 100)
    assert vocab.tokens[1996] == "the"
    assert vocab.sha256 == "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"


def test_lines_are_stripped_and_crlf_is_accepted():
    vocab = parse_vocabulary(SPECIALS.replace(b"\n", b"\r\n") + b"  hello \r\n")
    assert vocab.tokens[-1] == "hello"
    assert len(vocab) == 6


def test_continuation_flags_mark_double_hash_tokens():
    vocab = parse_vocabulary(SPECIALS + b"play\n##ing\n")
    assert vocab.continuation_flags() == [False] * 6 + [True]


@pytest.mark.parametrize("data, fragment", [
    (b"", "is empty"),
    (b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n", "missing special token(s) [MASK]"),
    (SPECIALS + b"a\nb\na\n", "duplicate entry 'a' on lines 6 and 8"),
    (SPECIALS + b"\xff\n", "not valid UTF-8"),
])
def test_bad_vocabularies_fail_with_one_line(data, fragment):
    with pytest.raises(VocabularyError) as err:
        parse_vocabulary(data, source="v.txt")
    message = str(err.value)
    assert fragment in message and message.startswith("v.txt: ") and "\n" not in message


def test_missing_file_names_the_flag(tmp_path):
    with pytest.raises(VocabularyError, match="--vocab_file"):
        load_vocabulary(str(tmp_path / "nope.txt"))
