"""Sentence splitting against sentence-boundary gold of real text (Universal
Dependencies English EWT test, web text; Chinese GSD test, Wikipedia): the
text is never changed, and boundaries are found as measured in
bench/SENTENCE_SPLITTERS.md."""

from __future__ import annotations

import pytest

from conftest import DATA
from bert_pretraining_data.transforms.tokenize.sentences import cjk_pieces, sentence_splitter


def gold(name: str, joiner: str) -> list[tuple[str, list[str]]]:
    """(paragraph, its gold sentences): paragraphs are their sentences joined."""
    sentences = [s for s in (DATA / f"{name}.sentences.txt").read_text("utf-8").split("\n") if s]
    pairs, position = [], 0
    for paragraph in (DATA / f"{name}.paragraphs.txt").read_text("utf-8").split("\n"):
        if not paragraph:
            continue
        taken = []
        while joiner.join(taken) != paragraph:
            taken.append(sentences[position])
            position += 1
        pairs.append((paragraph, taken))
    assert position == len(sentences)
    return pairs


def boundaries(sentences: list[str]) -> set[int]:
    """Where each sentence but the last ends, in characters without spaces."""
    ends, offset = set(), 0
    for sentence in sentences[:-1]:
        offset += len("".join(sentence.split()))
        ends.add(offset)
    return ends


def f1(name: str, joiner: str, splitter: str) -> float:
    split = sentence_splitter(splitter)
    found = expected = right = 0
    for paragraph, sentences in gold(name, joiner):
        ours = split([paragraph])
        assert "".join(ours).replace(" ", "") == paragraph.replace(" ", "")  # text unchanged
        mine, theirs = boundaries(ours), boundaries(sentences)
        found, expected, right = found + len(mine), expected + len(theirs), right + len(
            mine & theirs)
    return 2 * right / (found + expected)


@pytest.mark.parametrize("splitter, english, chinese", [
    ("blingfire", 0.80, 0.99), ("syntok", 0.80, 0.99)])
def test_splitters_find_the_gold_boundaries(splitter, english, chinese):
    assert f1("en_ewt-ud-test", " ", splitter) >= english
    assert f1("zh_gsd-ud-test", "", splitter) >= chinese


def test_cjk_sentence_ends_keep_their_closing_marks():
    assert cjk_pieces("他说：“你好。”然后走了！真的吗？是的") == [
        "他说：“你好。”", "然后走了！", "真的吗？", "是的"]


def test_none_keeps_each_line_and_splitters_keep_paragraphs_apart():
    lines = ["First one. Second one.", "」 Third."]
    assert sentence_splitter("none")(lines) == lines
    assert sentence_splitter("blingfire")(lines)[:2] == ["First one.", "Second one."]
    assert len(sentence_splitter("blingfire")(lines)) == 3  # no sentence spans two lines
