"""The one text normalisation (transforms.handoff.words): its words on tricky
text, pinned for each caller, and the callers held to it and to each other.

The callers: word splitting (Tokenize and create-vocab, BERT's cleanup,
unfolded), Deduplicate and the held-out split (BERT's cleanup, folded:
dedup.normalise) and Decontaminate (punctuation as space, folded:
decontaminate.benchmarks). Each caller's fast path must give the definition's
words; the two rules differ on punctuation, control and format characters and
CJK, and nowhere else.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, strategies as st

from bert_pretraining_data.transforms.decontaminate.benchmarks import benchmark_words
from bert_pretraining_data.transforms.dedup.normalise import normalised_text, text_digest
from bert_pretraining_data.transforms.handoff.words import (PUNCTUATION_AS_SPACE, cleaned_character,
                                                            folded, separated_character,
                                                            split_words)
from bert_pretraining_data.transforms.split.held_out import SplitFractions

# (text, word splitting's words, dedup's normalised text, decontamination's words)
TRICKY = [
    pytest.param("Straße STRASSE", ["Straße", "STRASSE"], "strasse strasse",
                 ["strasse", "strasse"], id="case-folding-sharp-s"),
    pytest.param("İstanbul ΣΊΣΥΦΟΣ", ["İstanbul", "ΣΊΣΥΦΟΣ"], "i\u0307stanbul σίσυφοσ",
                 ["i\u0307stanbul", "σίσυφοσ"], id="dotted-capital-i-and-final-sigma"),
    pytest.param("café cafe\u0301 cafe", ["café", "cafe\u0301", "cafe"], "café café cafe",
                 ["café", "café", "cafe"], id="accents-composed-and-kept"),
    pytest.param("Ｔｈｅ ﬁnal ½", ["Ｔｈｅ", "ﬁnal", "½"], "the final 1⁄2",
                 ["the", "final", "1⁄2"], id="compatibility-forms"),
    pytest.param("well-known, isn't it?", ["well-known,", "isn't", "it?"],
                 "well-known, isn't it?", ["well", "known", "isn", "t", "it"], id="punctuation"),
    pytest.param("“Quoted” — dash…", ["“Quoted”", "—", "dash…"], "“quoted” — dash...",
                 ["quoted", "dash"], id="unicode-punctuation"),
    pytest.param("$5 + x", ["$5", "+", "x"], "$5 + x", ["$5", "+", "x"], id="symbols-are-words"),
    pytest.param("a\u00a0b\u2003c\td\r\ne\u2028f\x0bg\x85h", ["a", "b", "c", "d", "e", "fgh"],
                 "a b c d e fgh", ["a", "b", "c", "d", "e", "f", "g", "h"],
                 id="whitespace-and-control-whitespace"),
    pytest.param("zero\u200bwidth co\u00adop", ["zerowidth", "coop"], "zerowidth coop",
                 ["zero\u200bwidth", "co\u00adop"], id="format-characters"),
    pytest.param("a\x00b\ufffdc", ["abc"], "abc", ["a\x00b\ufffdc"], id="nul-and-replacement"),
    pytest.param("中文字符abc。ひらがな", ["中", "文", "字", "符", "abc。ひらがな"],
                 "中 文 字 符 abc。ひらがな", ["中文字符abc", "ひらがな"], id="cjk"),
    pytest.param(" \n\t ", [], "", [], id="blank"),
]


@pytest.mark.parametrize("text, words, dedup, benchmark", TRICKY)
def test_tricky_text_gives_each_caller_its_pinned_words(text, words, dedup, benchmark):
    assert split_words(text) == words
    assert normalised_text([text]) == dedup == " ".join(split_words(text, fold=True))
    assert benchmark_words(text) == benchmark == split_words(text, PUNCTUATION_AS_SPACE, fold=True)


def test_folding_unifies_case_and_compatibility_forms_but_keeps_accents():
    assert folded("Straße") == folded("STRASSE") == "strasse"
    assert folded("ΣΊΣΥΦΟΣ") == folded("σίσυφος") == "σίσυφοσ"
    assert folded("Ｔｈｅ ﬁnal") == "the final"
    assert folded("cafe\u0301") == folded("CAFÉ") == "café" != folded("cafe")


@given(st.text())
def test_the_callers_fast_paths_give_the_definitions_words(text):
    assert normalised_text([text]) == " ".join(split_words(text, fold=True))
    assert benchmark_words(text) == split_words(text, PUNCTUATION_AS_SPACE, fold=True)


@given(st.text(st.characters(categories=("L", "M", "N", "Zs")) | st.sampled_from("\t\n\r")))
def test_the_callers_agree_on_text_of_letters_digits_and_spaces(text):
    """Without punctuation, control or format characters and CJK (after
    folding), the two rules map every character alike, so dedup, decontamination
    and word splitting cut the same words."""
    words = split_words(folded(text))
    assume(all(cleaned_character(ord(char)) == separated_character(ord(char))
               for char in folded(text)))
    assert normalised_text([text]).split() == benchmark_words(text) == words


def test_copies_differing_in_case_spacing_and_forms_are_one_text_to_every_caller():
    copies = [["The final café, in Straße 5."],
              ["THE  ﬁnal CAFE\u0301,", "in STRASSE 5."],
              ["Ｔｈｅ\tfinal\u00a0café,\n in strasse 5. "]]
    fractions = SplitFractions(validation=0.3, test=0.3)
    assert len({normalised_text(lines) for lines in copies}) == 1
    assert len({fractions.split_of(text_digest(normalised_text(lines))) for lines in copies}) == 1
    assert len({tuple(benchmark_words(" ".join(lines))) for lines in copies}) == 1
    assert len({tuple(split_words(" ".join(lines), fold=True)) for lines in copies}) == 1
