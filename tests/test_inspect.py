"""inspect-pretraining-data on a tiny dataset: decoded instances, summary,
histogram and plot."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.pipeline.inspect_data import histogram, main, report
from bert_pretraining_data.pipeline.main import run
from helpers.records import read_examples

VOCAB = UNCASED_VOCAB.read_text(encoding="utf-8").split("\n")


def _run(out, vocab, *extra: str) -> str:
    run([f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={vocab}",
         f"--output_dir={out}", "--dupe_factor=1", "--num_shards=2", *extra])
    return str(out)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return _run(tmp_path_factory.mktemp("inspect") / "static", UNCASED_VOCAB)


def _words(ids: list[int]) -> str:
    return " ".join(VOCAB[i] for i in ids)


@pytest.mark.slow
def test_prints_instances_as_the_original_logs_them(tiny, tmp_path, capsys):
    plot = tmp_path / "lengths.png"
    main([tiny, "--num_instances=3", f"--plot={plot}"])
    out = capsys.readouterr().out
    shards = sorted(str(p) for p in pathlib.Path(tiny).glob("part-*"))
    records = read_examples(shards, 128, 20)
    assert f"{len(records):,} instances in 2 tfrecord shard(s); recipe bert, padding fixed" in out
    assert out.count("*** Example") == 3
    for index, record in enumerate(records[:3]):
        n = sum(record["input_mask"])
        k = int(sum(record["masked_lm_weights"]))
        block = out.split(f"*** Example {index} ***\n")[1].split("\n\n")[0]
        assert f"tokens: {_words(record['input_ids'][:n])}\n" in block
        assert block.startswith("tokens: [CLS] ")
        positions = " ".join(map(str, record["masked_lm_positions"][:k]))
        assert f"masked_lm_positions: {positions}\n" in block
        assert f"masked_lm_labels: {_words(record['masked_lm_ids'][:k])}\n" in block
        assert f"next_sentence_label: {record['next_sentence_labels'][0]} (" in block
    assert "[MASK]" in out
    counts = [int(m.replace(",", "")) for m in re.findall(r"\| #* *([\d,]+)$", out, re.M)]
    assert sum(counts) == len(records)
    lengths = [sum(r["input_mask"]) for r in records]
    assert f"tokens mean {sum(lengths) / len(lengths):.1f}" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_histogram_bins_cover_zero_to_max_seq_length():
    edges, counts = histogram([0, 3, 127, 128, 128], 128)
    assert edges[0] == 0 and edges[-1] <= 128 < edges[-1] + (edges[1] - edges[0])
    assert sum(counts) == 5 and counts[0] == 2 and counts[-1] == 3


@pytest.mark.slow
def test_unmasked_data_and_missing_vocabulary(tmp_path):
    vocab = tmp_path / "vocab.txt"
    shutil.copy(UNCASED_VOCAB, vocab)
    out = _run(tmp_path / "unmasked", vocab, "--masking=none", "--padding=none")
    text = report(out, num_instances=1)
    assert "masking none" in text and "none on disk" in text
    assert "predictions made at load time" in text
    vocab.unlink()
    assert "[CLS]" in report(out, num_instances=1)  # the dataset's own copy
    (pathlib.Path(out) / "vocab.txt").unlink()
    text = report(out, num_instances=1)
    assert "not found: showing ids" in text
    assert re.search(r"^tokens: 101 \d+", text, re.M)
    assert "[CLS]" in report(out, num_instances=1, vocab_file=str(UNCASED_VOCAB))


def test_cli_fails_in_one_line_without_a_dataset(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bert_pretraining_data.pipeline.inspect_data",
                           str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("inspect-pretraining-data: error: no manifest.json at")
    assert proc.stderr.count("\n") == 1
