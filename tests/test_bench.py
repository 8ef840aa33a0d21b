"""Smoke tests of the benchmark harness (bench/): its corpora and its stage
breakdown. No timing is asserted: figures depend on the machine."""

from __future__ import annotations

import collections
import pathlib

from bench.corpus import MB, corpus_path
from bench.pipeline import STAGES, stage_breakdown
from conftest import DATA
from pipeline.main import run


def test_corpus_is_deterministic_and_of_the_requested_size(tmp_path: pathlib.Path):
    first = corpus_path(0.05, seed=3, cache_dir=tmp_path / "a")
    again = corpus_path(0.05, seed=3, cache_dir=tmp_path / "b")
    other_seed = corpus_path(0.05, seed=4, cache_dir=tmp_path / "c")

    data = first.read_bytes()
    assert again.read_bytes() == data
    assert other_seed.read_bytes() != data
    assert abs(len(data) - 0.05 * MB) <= 0.01 * 0.05 * MB
    source_lines = set((DATA / "wikitext2_valid.txt").read_bytes().split(b"\n"))
    assert set(data.split(b"\n")) <= source_lines


def test_corpus_repeats_every_document_evenly(tmp_path: pathlib.Path):
    source = tmp_path / "source.txt"
    source.write_text("alpha one.\nalpha two.\n\nbeta one.\n\n\ngamma one.\ngamma two.\n")
    size = 10 * len(source.read_bytes())

    data = corpus_path(size / MB, seed=0, source=source, cache_dir=tmp_path).read_bytes()

    assert size - len(b"alpha two.\n") <= len(data) <= size
    documents = [block for block in data.split(b"\n\n") if block.strip()]
    copies = collections.Counter(document.split()[0] for document in documents)
    assert set(copies) == {b"alpha", b"beta", b"gamma"}
    assert max(copies.values()) - min(copies.values()) <= 1  # whole shuffled rounds


def test_stage_breakdown_does_the_pipelines_work(tmp_path: pathlib.Path):
    corpus = corpus_path(0.05, seed=0, cache_dir=tmp_path / "cache")

    seconds, instances = stage_breakdown(corpus)

    assert tuple(seconds) == STAGES
    assert all(spent >= 0 for spent in seconds.values())
    manifest = run([f"--input_file={corpus}", f"--output_dir={tmp_path / 'out'}",
                    f"--vocab_file={DATA / 'bert-base-uncased-vocab.txt'}"])
    assert instances == manifest["total_instances"] > 0
