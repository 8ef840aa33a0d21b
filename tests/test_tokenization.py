"""The fast tokenizer and the character-level oracle against the original's golden output."""

from __future__ import annotations

import json
import unicodedata

import pytest

from bert_pretraining_data.transforms.handoff.tokenized_documents import (TokenizedDocument,
                                                                          compact_document)
from bert_pretraining_data.transforms.tokenize import wordpiece
from bert_pretraining_data.transforms.tokenize.compiled_calls import KEPT_BYTES
from bert_pretraining_data.transforms.tokenize.document import DocumentTokenizer
from bert_pretraining_data.transforms.tokenize.vocabulary import parse_vocabulary
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
from conftest import DATA
from helpers.oracle_tokenization import OracleTokenizer

GOLDEN = [json.loads(line) for line in
          (DATA / "tokenization_golden.jsonl").read_text(encoding="ascii").splitlines()]


def _expected(case: dict, lower: bool) -> list[str]:
    return case["lower" if lower else "cased"]


def test_golden_data_covers_the_required_kinds():
    sources = [case["source"] for case in GOLDEN]
    assert sum(s.startswith("adversarial:") for s in sources) >= 60
    assert {"wikitext2_valid", "sample_text", "seeds_zh"} <= set(sources)


@pytest.fixture(scope="module")
def tokenizers(uncased_vocab):
    return {lower: (FullTokenizer(uncased_vocab, do_lower_case=lower),
                    OracleTokenizer(list(uncased_vocab.tokens), lower))
            for lower in (True, False)}


@pytest.mark.parametrize("lower", [True, False])
def test_fast_tokenizer_matches_every_golden_line(tokenizers, lower):
    fast, _ = tokenizers[lower]
    mismatches = [(c["source"], c["text"][:60]) for c in GOLDEN
                  if fast.tokenize(c["text"]) != _expected(c, lower)]
    assert mismatches == []


@pytest.mark.parametrize("lower", [True, False])
def test_oracle_matches_every_golden_line(tokenizers, lower):
    _, oracle = tokenizers[lower]
    mismatches = [(c["source"], c["text"][:60]) for c in GOLDEN
                  if oracle.tokenize(c["text"]) != _expected(c, lower)]
    assert mismatches == []


def test_ids_are_the_vocabulary_ids_of_the_tokens(tokenizers, uncased_vocab):
    fast, _ = tokenizers[True]
    for case in GOLDEN:
        ids = fast.tokenize_to_ids(case["text"])
        assert ids == [uncased_vocab.ids[t] for t in case["lower"]]
        assert fast.convert_ids_to_tokens(ids) == case["lower"]
        assert fast.convert_tokens_to_ids(case["lower"]) == ids


@pytest.mark.slow
def test_every_code_point_is_cleaned_as_the_oracle_cleans_it(tokenizers):
    """The character map is filled lazily, one character at a time: check all
    1.1 M code points, each inside a word, against the character-level port."""
    fast, oracle = tokenizers[True]
    for start in range(0, 0x110000, 4096):
        text = " ".join(chr(cp) + "a" for cp in range(start, min(start + 4096, 0x110000)))
        assert fast.tokenize(text) == oracle.tokenize(text), hex(start)


# U+03A3 lower-cases to U+03C2 at the end of its word (Python's Final_Sigma
# rule: after a cased letter, case-ignorables such as marks, "'" and "."
# skipped); deleted characters (ZWSP) are not in the word, CJK ends it.
_SIGMA_LINES = [
    "ΟΔΟΣ", "ΣΑΣ ΣΑΣ.", "Σ", "ΑΣ.", "ΑΣ.Β", "ΑΣ'Β", "ΑΣ-Β", "Α\u0301Σ", "ΑΣ\u0301",
    "ΑΣ\u0301Β", "1Σ", "ΑΣ1", "ΑΣ\u200bΒ", "Α\u200bΣ", "ΑΣ你", "你Σ", "\u0301Σ",
    "ΑΣΣ", "αΣ", "ʰΣ", "ΑʰΣ", "ΑΣʰ", "ΑΣ\u2028Β", "ΟΔΥΣΣΕΥΣ ΚΑΙ ΠΗΝΕΛΟΠΗ.",
]
# Characters that keep a combining class after NFD (which may reorder them):
# their lines are tokenized word by word in Python.
_REORDERED_LINES = [
    "a\u1b44\u0301b plain words", "\U0001d15e\U0001d165\U0001d16d x", "ᬅ\u1b44\u1b34 Σ é",
    "A\u0301\u1b44\u0316Σ. tail",
]


@pytest.mark.parametrize("lower", [True, False])
def test_words_that_need_their_context_match_the_oracle(tokenizers, lower):
    fast, oracle = tokenizers[lower]
    for line in _SIGMA_LINES + _REORDERED_LINES:
        assert fast.tokenize(line) == oracle.tokenize(line), line


def test_final_sigma_is_read_from_the_word(uncased_vocab):
    fast = FullTokenizer(uncased_vocab, do_lower_case=True)
    assert fast.tokenize("ΣΑΣ")[-1].endswith("ς")
    assert fast.tokenize("ΑΣΑ")[-1].endswith("α")
    assert "##ς" not in fast.tokenize("ΣΑΣΑ")


def test_a_line_of_many_new_characters_fills_the_table_in_rounds(tokenizers):
    """More unseen characters than one pass lists, and a line longer than the
    output buffer: the same tokens as the oracle."""
    fast, oracle = tokenizers[True]
    line = " ".join(chr(cp) + "é" for cp in range(0x1E00, 0x1E00 + 700))
    assert fast.tokenize(line) == oracle.tokenize(line)
    long_line = "a, " * 40_000
    assert fast.tokenize(long_line) == oracle.tokenize(long_line)


def _line_by_line(tokenizer: FullTokenizer, lines: list[str]) -> TokenizedDocument:
    sentences = [ids for ids in map(tokenizer.tokenize_to_ids, lines) if ids]
    unk = tokenizer.vocabulary.unk_id
    return TokenizedDocument(compact_document(sentences) if sentences else None,
                             len(sentences), sum(map(len, sentences)),
                             sum(s.count(unk) for s in sentences), len(lines) - len(sentences))


@pytest.mark.parametrize("lower", [True, False])
def test_a_document_in_one_call_is_its_lines_one_by_one(uncased_vocab, lower):
    """Tokenize's one call a document (`compact_lines`) against `tokenize_to_ids`
    line by line: the golden lines as documents of 1-5 lines (empty lines
    among them; a fresh tokenizer, so new characters turn up mid-document), and
    a Final_Sigma that ends its line though the next line goes on in letters."""
    fast = FullTokenizer(uncased_vocab, do_lower_case=lower)
    texts = [case["text"] for case in GOLDEN]
    documents = [["ΑΣ", "Α"], ["ΑΣ", "", "Σ", "ΑΣΑ"], [], [""]]
    start = 0
    while start < len(texts):
        size = 1 + start % 5
        documents.append(texts[start:start + size] + [""] * (start % 3 == 0))
        start += size
    one_call = 0
    for lines in documents:
        whole = fast.compact_lines(lines)
        one_call += whole is not None
        assert (whole or _line_by_line(fast, lines)) == _line_by_line(fast, lines), lines
    assert fast.compact_lines(["ΑΣ", "Α"]) == _line_by_line(fast, ["ΑΣ", "Α"])
    assert one_call > 0.9 * len(documents)  # only words that need their context go line by line


def test_ids_past_16_bits_make_a_wide_compact_document():
    """A vocabulary of more than 65,536 entries: ids past 16 bits make the
    compact document 4 bytes an id, as compact_document makes it."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##s"]
    tokens += [f"filler{i}" for i in range(70_000)] + ["world", "wide"]
    tokenizer = FullTokenizer(parse_vocabulary("\n".join(tokens).encode()))
    lines = ["hello worlds", "", "wide hello ✓"]
    document = tokenizer.compact_lines(lines)
    assert document == _line_by_line(tokenizer, lines)
    assert document.compact[:1] == b"i" and document.unk_tokens == 1
    narrow = tokenizer.compact_lines(["hellos"])
    assert narrow == _line_by_line(tokenizer, ["hellos"]) and narrow.compact[:1] == b"H"


def test_a_long_document_goes_line_by_line(uncased_vocab):
    """Past WHOLE_DOCUMENT_CHARACTERS the buffers would grow to the document's
    size for the worker's life: its lines go one by one, to the same document."""
    fresh = FullTokenizer(uncased_vocab)
    line = "a long line of words, " * 100
    lines = [line] * (wordpiece.WHOLE_DOCUMENT_CHARACTERS // len(line) + 1)
    assert fresh.compact_lines(lines) is None
    assert DocumentTokenizer.of(fresh)(lines) == _line_by_line(fresh, lines)
    assert fresh._capacity < len(line) * len(lines)  # buffers a line's size
    fresh.tokenize_to_ids("word " * wordpiece.WHOLE_DOCUMENT_CHARACTERS)  # a long line alone
    assert len(fresh._writer.room(0, 0)) <= KEPT_BYTES  # the writer's kept buffer
    assert fresh.compact_lines(lines[:-1]) == _line_by_line(fresh, lines[:-1])


def test_tokenize_stage_drops_lines_without_tokens(uncased_tokenizer):
    from bert_pretraining_data.transforms.handoff.tokenized_documents import expand_document
    from bert_pretraining_data.transforms.tokenize.beam import TokenizeDocument

    stage = TokenizeDocument(vocab_file=str(DATA / "bert-base-uncased-vocab.txt"),
                             do_lower_case=True)
    stage.setup()
    stage.start_bundle()
    lines = ["Hello world.", "", "\u200b\x00", "  ", "again"]
    [(_, packed)] = stage.process(("doc", lines))
    assert expand_document(packed) == [
        uncased_tokenizer.tokenize_to_ids("Hello world."),
        uncased_tokenizer.tokenize_to_ids("again")]
    assert stage._count.counts["lines_without_tokens"] == 3


def test_wordpiece_limit_is_200_characters(uncased_tokenizer):
    assert uncased_tokenizer.tokenize("a" * 201) == ["[UNK]"]
    assert "[UNK]" not in uncased_tokenizer.tokenize("a" * 200)


def test_special_tokens_in_text_are_not_special(uncased_tokenizer):
    assert uncased_tokenizer.tokenize("x [MASK] y") == ["x", "[", "mask", "]", "y"]


def test_chinese_vocabulary_splits_every_ideograph():
    from conftest import CHINESE_VOCAB
    from bert_pretraining_data.transforms.tokenize.vocabulary import parse_vocabulary

    vocab = parse_vocabulary(CHINESE_VOCAB.read_bytes())
    fast = FullTokenizer(vocab, do_lower_case=True)
    oracle = OracleTokenizer(list(vocab.tokens), True)
    text = (DATA / "chinese_small.txt").read_text(encoding="utf-8")
    for line in text.splitlines()[:200]:
        assert fast.tokenize(line) == oracle.tokenize(line)
    assert fast.tokenize("你好世界") == ["你", "好", "世", "界"]


@pytest.mark.parametrize("lower", [True, False])
def test_the_originals_interface_runs_code_written_against_it(lower):
    """As create_pretraining_data.py and run_classifier.py use wordpiece.py:
    built from a vocab file path by keyword, tokens, ids both ways, the
    vocab dict's keys as the word list."""
    path = DATA / "bert-base-uncased-vocab.txt"
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    tokenizer = wordpiece.FullTokenizer(vocab_file=str(path), do_lower_case=lower)
    assert list(tokenizer.vocab.keys()) == lines
    for case in GOLDEN[::7]:
        tokens = tokenizer.tokenize(case["text"])
        assert tokens == _expected(case, lower)
        ids = tokenizer.convert_tokens_to_ids(tokens)
        assert ids == [lines.index(t) for t in tokens]
        assert tokenizer.convert_ids_to_tokens(ids) == tokens
        assert [tokenizer.inv_vocab[i] for i in ids] == tokens


def test_control_characters_are_counted_across_a_documents_lines():
    """The count a document's lines give equals the characters the original's
    cleaning deletes as controls (category Cc but tab, LF and CR) and U+FFFD,
    counted one by one; a clean document counts none."""
    lines = ["a\x00b\x1f", "clean line", "\ufffd\x7f\x85", "\t tab\r", "", "\x9f" * 5]
    expected = sum(1 for line in lines for char in line
                   if (unicodedata.category(char) == "Cc" and char not in "\t\n\r")
                   or char == "\ufffd")
    assert expected == 10
    assert wordpiece.count_control_characters(lines) == expected
    assert wordpiece.count_control_characters(["clean", "lines \t"]) == 0
