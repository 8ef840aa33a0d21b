"""Held-out splits (--validation_fraction, --test_fraction) end to end, on a
corpus the feature was not developed on: real Wikipedia articles (a 2016
enwiki excerpt) with planted near copies, among ~2,300 short documents of
the English Web Treebank.

What must hold: no held-out document has a near copy in training (checked on
the output's tokens, so a split by position or by document key, which puts a
planted copy and its original on different sides four times in five, fails);
each split's share of documents is its fraction's; every held-out document's
tokens are in its split exactly once, masked; a refresh that adds documents,
some of them near copies of held-out ones, keeps every held-out document held
out and lets no new copy into training.
"""

from __future__ import annotations

import bz2
import collections
import datetime
import json
import pathlib
import random
import re
import shutil

import numpy as np
import pytest

from bert_pretraining_data.loaders.manifest import DatasetError, read_manifest
from bert_pretraining_data.loaders.records import read_instances
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.pipeline.refresh import refresh
from bert_pretraining_data.transforms.dedup.minhash import jaccard, shingle_set
from bert_pretraining_data.transforms.dedup.normalise import normalised_text, text_digest
from bert_pretraining_data.transforms.read.wikipedia import (ARTICLE_COUNTERS, article_document,
                                                             dump_pages)
from bert_pretraining_data.transforms.split.held_out import HeldOutShingles, SplitFractions
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec

from conftest import DATA as DATA_DIR, UNCASED_VOCAB as VOCAB
from helpers.corpora import web_treebank_documents

FRACTIONS = SplitFractions(validation=0.1, test=0.1)
MONDAY = datetime.datetime(2026, 1, 5, 3, 0, tzinfo=datetime.timezone.utc)
GRAM = 8  # token n-grams a leaked near copy shares with its original
FRAMING = (101, 102)  # [CLS], [SEP]


def _articles() -> list[list[str]]:
    """The excerpt's articles in pieces of 150 words or more, a sentence a
    line (cut at full stops), each short enough for one instance."""
    articles = []
    with bz2.open(DATA_DIR / "enwiki-excerpt-small.xml.bz2") as handle:
        for page in dump_pages(handle):
            if page.redirect or page.namespace != "0" or not page.text:
                continue
            document = article_document(page.text, counts=dict.fromkeys(ARTICLE_COUNTERS, 0))
            if document is None:
                continue
            lines = [s for line in document[1] for s in re.split(r"(?<=\.) ", line)
                     if 0 < len(s.split()) <= 60]
            piece: list[str] = []
            for line in lines:  # pieces of 150 words or more, as sections are
                piece.append(line)
                if sum(len(s.split()) for s in piece) >= 150:
                    articles.append(piece)
                    piece = []
    return articles


def _near_copy(lines: list[str], rng: random.Random) -> list[str]:
    """The article with 1% of its words replaced: a near copy (Jaccard >= 0.85)."""
    words = [line.split() for line in lines]
    flat = [(i, j) for i, line in enumerate(words) for j in range(len(line))]
    for i, j in rng.sample(flat, max(1, len(flat) // 100)):
        words[i][j] = f"planted{rng.randrange(10**6)}"
    return [" ".join(line) for line in words]


def _write(path, documents: list[list[str]]) -> None:
    path.write_text("\n\n".join("\n".join(lines) for lines in documents) + "\n",
                    encoding="utf-8")


def _split_of(lines: list[str]) -> str:
    text = normalised_text(lines)
    return FRACTIONS.split_of(text_digest(text) if text else None)


def _tokens(instance) -> list[int]:
    """An instance's tokens with its masks undone, [CLS] and [SEP] dropped."""
    ids = instance.input_ids.copy()
    ids[instance.masked_lm_positions] = instance.masked_lm_ids
    return [int(i) for i in ids if i not in FRAMING]


def _grams(tokens: list[int]) -> set[tuple[int, ...]]:
    return {tuple(tokens[i:i + GRAM]) for i in range(len(tokens) - GRAM + 1)}


def _run(corpus, out, *extra: str) -> dict:
    return run([f"--input_file={corpus}", f"--output_dir={out}", f"--vocab_file={VOCAB}",
                "--max_seq_length=512", "--max_predictions_per_seq=80", "--dupe_factor=2",
                "--next_sentence=none", "--masking=none", "--held_out_masking=static",
                "--dedup=exact",
                f"--validation_fraction={FRACTIONS.validation}",
                f"--test_fraction={FRACTIONS.test}", *extra])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = random.Random(7)
    articles = _articles()
    copies = [_near_copy(lines, rng) for lines in articles]
    for original, copy in zip(articles, copies):
        assert jaccard(shingle_set(normalised_text(original), 5),
                       shingle_set(normalised_text(copy), 5)) >= 0.85
    short = web_treebank_documents()
    documents = short + articles + copies
    rng.shuffle(documents)
    # the refresh's 10% more: new short documents and near copies of held-out articles
    held_articles = [lines for lines in articles if _split_of(lines) != "train"]
    fresh = round(0.1 * len(documents)) - len(held_articles)  # and new text: WikiText-2's
    paragraphs = [line.strip() for line in (DATA_DIR / "wikitext2_valid.raw.txt").read_text(
        encoding="utf-8").splitlines() if len(line.split()) > 20]
    new = ([[paragraph] for paragraph in paragraphs[:fresh]]
           + [_near_copy(lines, rng) for lines in held_articles])
    assert len(new) == round(0.1 * len(documents))
    root = tmp_path_factory.mktemp("splits")
    first, second = root / "corpus.txt", root / "corpus-refreshed.txt"
    _write(first, documents)
    _write(second, documents + new)
    return {"first": first, "second": second, "root": root, "documents": documents,
            "articles": articles, "copies": copies, "held_articles": held_articles,
            "new": new}


@pytest.fixture(scope="module")
def runs(corpus):
    root = corpus["root"]
    return {name: (root / f"out-{name}", _run(corpus[name], root / f"out-{name}"))
            for name in ("first", "second")}


def _instances(out, split: str):
    return list(read_instances(read_manifest(str(out), split=split)))


def test_no_held_out_document_has_a_near_copy_in_training(corpus, runs):
    for name in ("first", "second"):
        out, manifest = runs[name]
        training = set().union(*(_grams(_tokens(i)) for i in _instances(out, "train")))
        for split in ("validation", "test"):
            for instance in _instances(out, split):
                grams = _grams(_tokens(instance))
                # The articles' instances: two short web documents (two image
                # URLs) can share most tokens and no 5-gram of words.
                if len(grams) < 100:
                    continue
                shared = len(grams & training) / len(grams)
                assert shared < 0.5, (name, split, instance.index, shared)
    # The planted copies of held-out articles were there to leak, and were dropped.
    held = len(corpus["held_articles"])
    assert held >= 5
    _, first = runs["first"]
    assert first["splits"]["train"]["near_copies_dropped"] >= held
    assert first["counters"]["held_out_near_copies"] == first["splits"]["train"][
        "near_copies_dropped"]


def test_each_split_holds_its_share_of_the_documents(corpus, runs):
    _, manifest = runs["first"]
    splits = manifest["splits"]
    total = sum(split["documents"] + split["near_copies_dropped"] for split in splits.values())
    assert total >= 2000
    for name in ("validation", "test"):
        share = splits[name]["documents"] / total
        assert abs(share - FRACTIONS.fraction(name)) <= 0.2 * FRACTIONS.fraction(name), share
        assert splits[name]["fraction"] == FRACTIONS.fraction(name)
    assert splits["train"]["instances"] == manifest["total_instances"]


def test_every_held_out_document_is_in_its_split_once_masked(corpus, runs):
    out, manifest = runs["first"]
    assert manifest["counters"]["truncated_tokens"] == 0  # every document fits an instance
    tokenizer = TokenizerSpec(str(VOCAB), True).tokenizer(
        TokenizerSpec(str(VOCAB), True).load_vocabulary())
    for split in ("validation", "test"):
        expected = collections.Counter()
        documents = {normalised_text(d): d for d in corpus["documents"] if _split_of(d) == split}
        for lines in documents.values():
            for line in lines:
                expected.update(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)))
        instances = _instances(out, split)
        found = collections.Counter(t for i in instances for t in _tokens(i))
        assert found == expected, split
        assert all(len(i.masked_lm_positions) for i in instances)
        assert manifest["splits"][split]["documents"] == len(documents)
        assert manifest["splits"][split]["dupe_factor"] == 1
        assert manifest["splits"][split]["masking"] == "static"


def test_a_refresh_keeps_held_out_documents_held_out(corpus, runs):
    (first_out, first), (second_out, second) = runs["first"], runs["second"]
    for split in ("validation", "test"):
        # every token of the first run's split is in the second's (its
        # documents' instances are cut anew: their keys are in another file)
        before, after = (collections.Counter(t for i in _instances(out, split) for t in _tokens(i))
                         for out in (first_out, second_out))
        assert not before - after, split
        assert second["splits"][split]["documents"] >= first["splits"][split]["documents"]
    # each new near copy of a held-out article was dropped too (but those
    # whose own text draws a held-out split: held-out documents stay)
    new_copies = [lines for lines in corpus["new"][-len(corpus["held_articles"]):]
                  if _split_of(lines) == "train"]
    assert len(new_copies) >= 5
    assert (second["splits"]["train"]["near_copies_dropped"]
            >= first["splits"]["train"]["near_copies_dropped"] + len(new_copies))


def test_training_masks_at_load_time_held_out_splits_here(runs):
    out, manifest = runs["first"]
    assert manifest["flags"]["masking"] == "none"
    assert not any(len(i.masked_lm_positions) for i in _instances(out, "train")[:50])
    seeds = {name: split["seed"] for name, split in manifest["splits"].items()}
    assert len(set(seeds.values())) == 3


def test_an_unknown_split_is_one_line(runs):
    out, _ = runs["first"]
    with pytest.raises(DatasetError, match="no split 'dev'") as caught:
        read_manifest(str(out), split="dev")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("flags, message", [
    (["--validation_fraction=0.5"], r"--validation_fraction is a share of the documents in"),
    (["--test_fraction=-0.1"], r"--test_fraction is a share of the documents in"),
    (["--validation_fraction=0.3", "--test_fraction=0.2"], r"together hold out 0.5"),
    (["--validation_fraction=0.1", "--output_file=OUT/x.tfrecord"], r"use --output_dir"),
    (["--validation_fraction=0.1", "--reference_compatible"], r"--reference_compatible"),
    (["--validation_fraction=0.1", "--recipe=d2l"], r"--recipe=d2l makes d2l's one"),
])
def test_bad_split_flags_are_one_line_and_publish_nothing(tmp_path, flags, message):
    flags = [flag.replace("OUT", str(tmp_path)) for flag in flags]
    output = [] if any(f.startswith("--output_file") for f in flags) else [
        f"--output_dir={tmp_path / 'out'}"]
    with pytest.raises(ConfigError, match=message) as caught:
        run([f"--input_file={DATA_DIR / 'sample_text.txt'}", f"--vocab_file={VOCAB}",
             *output, *flags])
    assert "\n" not in str(caught.value)
    assert not list(tmp_path.rglob("*manifest.json"))


def test_the_split_is_decided_by_the_text_alone():
    """Draws are keyed hashes of the normalised text: whitespace and case do
    not move a document; raising a fraction only adds documents to its split."""
    documents = web_treebank_documents()
    small, large = SplitFractions(validation=0.05), SplitFractions(validation=0.1, test=0.05)
    for lines in documents:
        text = normalised_text(lines)
        assert small.split_of(text_digest(text)) == small.split_of(
            text_digest(normalised_text([line.upper() + "  " for line in lines])))
        if small.split_of(text_digest(text)) == "validation":
            assert large.split_of(text_digest(text)) == "validation"
    draws = np.array([FRACTIONS.split_of(text_digest(normalised_text(d))) == "validation"
                      for d in documents])
    assert abs(draws.mean() - 0.1) <= 0.02


def test_a_refresh_in_the_job_publishes_and_compares_each_split(tmp_path):
    """The Flex Template's mode (publishing inside the job, on the DirectRunner)
    writes the splits as a driver run does; the next version's change report
    has each split's figures beside the previous version's."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(DATA_DIR / "wiki_small.txt", corpus / "a.txt")
    flags = [f"--input_file={corpus}/*.txt", f"--vocab_file={VOCAB}", "--dupe_factor=1",
             "--max_seq_length=64", "--max_predictions_per_seq=10",
             "--validation_fraction=0.2", "--test_fraction=0.1"]
    root = tmp_path / "root"
    launched = refresh([*flags, f"--output_root={root}", "--launch_only"], now=MONDAY)
    in_job = json.loads((root / launched["version"] / "manifest.json").read_text())
    driver = json.loads(pathlib.Path(refresh(
        [*flags, f"--output_root={tmp_path / 'driver'}"], now=MONDAY)["manifest"]).read_text())
    assert in_job["counters"] == driver["counters"]  # figures, staged by the pipeline
    for name in ("train", "validation", "test"):
        figures = ("documents", "tokens", "instances", "near_copies_dropped", "seed")
        assert ({k: in_job["splits"][name][k] for k in figures}
                == {k: driver["splits"][name][k] for k in figures}), name
    assert [s["sha256"] for s in in_job["splits"]["validation"]["shards"]] == [
        s["sha256"] for s in driver["splits"]["validation"]["shards"]]
    assert (root / launched["version"] / "validation").is_dir()

    with open(corpus / "b.txt", "w", encoding="utf-8") as handle:
        handle.write((DATA_DIR / "sample_text.txt").read_text(encoding="utf-8"))
    second = refresh([*flags, f"--output_root={root}", "--launch_only"],
                     now=MONDAY + datetime.timedelta(days=7))
    changes = json.loads((root / second["version"] / "manifest.json").read_text())["changes"]
    for name in ("train", "validation", "test"):
        assert changes["splits"][name]["documents"]["previous"] == in_job["splits"][name][
            "documents"]
    assert sum(changes["splits"][name]["documents"]["current"] for name in changes["splits"]) \
        > sum(in_job["splits"][name]["documents"] for name in in_job["splits"])


def test_the_guard_finds_the_near_copies_the_definition_names():
    """HeldOutShingles.near_copies against brute force: word 5-gram Jaccard of
    every training text with every held-out one, on real sentences with
    copies edited from 0 to 10% of their words; built in parts and merged, as
    the workers build it."""
    rng = random.Random(3)
    texts = [normalised_text(d) for d in web_treebank_documents()]
    bodies = [" ".join(texts[i:i + 8]) for i in range(0, 800, 8)]  # ~100-word documents
    held = bodies[:40]
    candidates = []
    for body in held + bodies[40:]:
        words = body.split()
        for k in rng.sample(range(len(words)), rng.randrange(0, max(1, len(words) // 10))):
            words[k] = "edited"
        candidates.append(" ".join(words))
    index = HeldOutShingles.merge(
        [HeldOutShingles.of(held[:15], ngram=5, threshold=0.8),
         HeldOutShingles.of(held[15:], ngram=5, threshold=0.8)], ngram=5, threshold=0.8)
    sets = [shingle_set(text, 5) for text in held]
    truth = [any(jaccard(shingle_set(text, 5), s) >= 0.8 for s in sets) for text in candidates]
    found = index.near_copies(candidates + [""])
    assert sum(truth) >= 10 and not all(truth[:40])  # both sides of the threshold occur
    assert found[:-1].tolist() == truth and not found[-1]


def test_a_held_out_split_of_albert_packed_parquet_rows(tmp_path):
    """ALBERT's objectives (SOP, n-gram masks, a SentencePiece model) packed
    into Parquet rows: a held-out split gets the same layout as training, its
    own packing summary, and reads back through the loaders."""
    out = tmp_path / "out"
    manifest = run([f"--input_file={DATA_DIR / 'wikitext2_valid.txt'}", f"--output_dir={out}",
                    f"--spm_model_file={DATA_DIR / 'sentencepiece-8k.model'}",
                    "--next_sentence=sop", "--ngram=3", "--max_seq_length=128",
                    "--pack_sequences", "--output_format=parquet", "--dupe_factor=1",
                    "--validation_fraction=0.2"])
    validation = manifest["splits"]["validation"]
    assert validation["features"] == manifest["features"]
    assert validation["schema"] == manifest["schema"]
    assert validation["packing"]["instances"] == validation["instances"] > 0
    assert validation["packing"]["rows"] == sum(s["records"] for s in validation["shards"])
    instances = list(read_instances(read_manifest(str(out), split="validation")))
    assert len(instances) == validation["instances"]
    assert all(i.token_boundary is not None and len(i.masked_lm_positions) for i in instances)
