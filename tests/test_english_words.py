"""The quality rules' English words and sentences (transforms.quality.
english_words) are spaCy's English tokens and sentencizer's sentences, as
datatrove's word_tokenize and split_into_sentences return them: spaCy 3.8.18
runs in a venv of its own (tests/helpers/spacy_english.py) on real text and on
the chunks its rules treat apart, and the rules file is the one that spaCy
gives."""

from __future__ import annotations

import bz2
import json
import pathlib
import unicodedata

import pytest

from conftest import DATA
from helpers.client_venvs import client_python, run_client
from helpers.spacy_english import SPACY
from bert_pretraining_data.transforms.quality import english_words
from bert_pretraining_data.transforms.read.wikipedia import dump_pages, plain_text

ORACLE = pathlib.Path(__file__).parent / "helpers" / "spacy_english.py"
RULES_FILE = pathlib.Path(english_words.__file__).with_name("english_words.json")
# What spaCy's English rules treat apart: special cases (contractions with and
# without their apostrophe, abbreviations, times, emoticons), each affix and
# infix, URLs and e-mail addresses, whitespace other than one space, and the
# special cases its last pass finds among tokens.
CHUNKS = (
    "I've Ive cant can't CANNOT gonna id im youre y'all 'cause o'clock Mr. Mrs.) (Dr. U.S. "
    "e.g., i.e. a.m. 10a.m. 5p.m. vs. Jan. 1st 2nd",
    ":) :-) (-: <3 :P ;) 8-) hello:) (o: ^_^ ¯\\_(ツ)_/¯ (╯°□°）╯︵┻━┻",
    "US$5 $10.50 €3 20km 5kg 100% 1975-03-27 1946-1954 3+4 2*3 10^6 +12 -12 -5°C 98.6°F.",
    "http://example.com/a?b=c, (https://www.bbc.co.uk/news) www.example.org. "
    "xploita...@gmail.com Team@ENRON <b>bold</b> path[i] and/or Vdc+ Vdc- A/B x=y",
    "***** ????? !!!!! $$$ ____ ----- ...... …… «quoted» “curly” ‘single’ ''double'' ``tex''",
    "word's words' John’s it's. that's! It's, (that's) 'tis 'em 'n' rock'n'roll",
    "tab\there  two  spaces\u00a0nbsp\u2028line\u3000ideographic end.\n\nnew paragraph",
    "中文，标点。日本語「かぎ」 한국어? Ελληνικά; русский — «текст» ١٢٣ ٪",
    "C++ C# F# .NET node.js 3.5.1 v2.0 1,000,000 0.5 .5 5. A. B.C. ABC. aB. Co. co. ca.",
    "Wait... What?! Really?? \"Yes.\" (Sure.) No!!! 'Fine.' Hi.  . Ok.\t- Next. End.[1] ¿Qué? ¡Sí!",
)


def _wikipedia_paragraphs(limit: int) -> list[str]:
    """Paragraphs of the English Wikipedia excerpt, as its reader extracts them."""
    paragraphs: list[str] = []
    with bz2.open(DATA / "enwiki-excerpt-small.xml.bz2") as handle:
        for page in dump_pages(handle):
            if page.namespace == "0" and not page.redirect and page.text:
                paragraphs += [p for p in plain_text(page.text).split("\n") if p.strip()]
    return paragraphs[:limit]


@pytest.fixture(scope="module")
def spacy_python() -> pathlib.Path:
    return client_python("spacy", SPACY)


@pytest.mark.slow
def test_words_and_sentences_are_spacys(spacy_python, tmp_path):
    """words_of is spaCy's tokens; words_and_sentences those and the count
    of spaCy's sentencizer."""
    ewt = (DATA / "en_ewt-ud-test.paragraphs.txt").read_text(encoding="utf-8").splitlines()
    wikitext = (DATA / "wikitext2_valid.raw.txt").read_text(encoding="utf-8")
    texts = [*CHUNKS, *filter(str.strip, ewt), *_wikipedia_paragraphs(2000),
             *(wikitext[i:i + 4000] for i in range(0, len(wikitext), 4000))]
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    expected = run_client(spacy_python, ORACLE.read_text(encoding="utf-8"),
                          "--tokens", tmp_path / "texts.json")
    assert len(expected) == len(texts) > 1500
    differing = [(text[:80], english_words.words_of(text), words)
                 for text, (words, _) in zip(texts, expected)
                 if english_words.words_of(text) != words]
    assert not differing, differing[:3]
    differing = [(text[:80], english_words.words_and_sentences(text)[1], sentences)
                 for text, (words, sentences) in zip(texts, expected)
                 if english_words.words_and_sentences(text) != (words, sentences)]
    assert not differing, differing[:3]
    lines = [line for text in texts for line in text.split("\n")]
    assert sum(english_words.words_and_sentences(line)[1] > 1 for line in lines) > 1000


@pytest.mark.slow
def test_the_rules_file_is_spacys(spacy_python):
    rules = run_client(spacy_python, ORACLE.read_text(encoding="utf-8"))
    assert rules["spacy"] == SPACY[0].split("==")[1]
    assert json.loads(RULES_FILE.read_text(encoding="utf-8")) == rules


@pytest.mark.parametrize("plane", range(3))
def test_letters_alone_take_the_rules_path_they_skip(plane):
    """A chunk of letters alone is one token without the expressions (the
    fast path): the expressions agree, for every letter of the plane, alone
    and beside ASCII letters."""
    letters = [chr(code) for code in range(plane * 0x10000, (plane + 1) * 0x10000)
               if chr(code).isalpha() and unicodedata.category(chr(code)) != "Cn"]
    for letter in letters:
        for chunk in (letter, letter * 2, "a" + letter, letter + "Z", "ab" + letter + "cd"):
            if chunk not in english_words._SPECIAL:
                assert english_words._affix_tokens(chunk) == (chunk,), chunk


def test_the_last_pass_joins_a_special_case_found_among_tokens():
    """`hello:)`: the affix rules make `hello` `:` `)`, and the last pass
    finds the emoticon `:)` among them (spaCy's own result); across a space
    it finds nothing."""
    assert english_words.words_of("hello:) there") == ["hello", ":)", "there"]
    assert english_words.words_of("hello: ) there") == ["hello", ":", ")", "there"]


def test_a_full_chunk_cache_changes_no_word(monkeypatch):
    """The chunk cache emptied every few chunks (and a special case's chunk
    seen again after that) gives the words and sentences of a fresh cache."""
    texts = [*CHUNKS, *(DATA / "en_ewt-ud-test.paragraphs.txt").read_text(
        encoding="utf-8").splitlines()[:300]]
    english_words.forget_chunks()
    expected = [english_words.words_and_sentences(text) for text in texts]
    monkeypatch.setattr(english_words, "_KNOWN_CHUNKS", 5)
    english_words.forget_chunks()
    for _ in range(2):
        assert [english_words.words_and_sentences(text) for text in texts] == expected
        assert [english_words.words_of(text) for text in texts] == [w for w, _ in expected]
    assert len(english_words._known[0]) <= 5


def test_a_printable_text_has_no_whitespace_but_the_space():
    """The fast path of splitting at whitespace tokens: a printable text
    without two spaces in a row has none, as no whitespace character but the
    space is printable (in this Python's Unicode tables)."""
    assert not [hex(code) for code in range(0x110000)
                if chr(code).isspace() and chr(code) != " " and chr(code).isprintable()]
    for text in ("a b c.", "one, two", "a\tb", "a  b", "a\u00a0b", "a\u3000b", "a\u2028b"):
        assert english_words._parts(text) == english_words._WHITESPACE_TOKEN.split(text)
