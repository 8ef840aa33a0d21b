"""--recipe=d2l on WikiText-2 validation text: d2l's vocabulary, d2l's pairs and
d2l's batch shapes, checked against d2l's rules applied here independently."""

from __future__ import annotations

import collections
import json
import pathlib

import pytest
import torch

from bert_pretraining_data.loaders import load_data_wiki
from bert_pretraining_data.loaders.manifest import read_manifest
from bert_pretraining_data.loaders.records import read_instances
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.transforms.d2l.pairs import split_paragraph
from conftest import DATA

CORPUS = DATA / "wikitext2_valid.raw.txt"
MAX_LEN = 64
RESERVED = ["<unk>", "<pad>", "<mask>", "<cls>", "<sep>"]


def d2l_paragraphs(path: pathlib.Path) -> list[list[list[str]]]:
    """d2l's _read_wiki without its shuffle, then d2l.tokenize(..., 'word')."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    paragraphs = [line.strip().lower().split(" . ")
                  for line in lines if len(line.split(" . ")) >= 2]
    return [[sentence.split() for sentence in paragraph] for paragraph in paragraphs]


def d2l_vocabulary(paragraphs) -> list[str]:
    """d2l.Vocab(sentences, min_freq=5, reserved_tokens=[...]) with plain Counter.

    d2l orders equal counts by first appearance after its random paragraph
    shuffle, i.e. arbitrarily; the recipe breaks ties in tf.Transform's
    documented order (reverse lexicographic), which is applied here too.
    """
    counts = collections.Counter(word for paragraph in paragraphs
                                 for sentence in paragraph for word in sentence)
    frequent = [(word, n) for word, n in counts.items() if n >= 5 and word not in RESERVED]
    frequent.sort(key=lambda item: (item[1], item[0]), reverse=True)
    return RESERVED + [word for word, _ in frequent]


@pytest.fixture(scope="module")
def expected_vocabulary() -> list[str]:
    return d2l_vocabulary(d2l_paragraphs(CORPUS))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("d2l") / "out"
    run(["--recipe=d2l", f"--input_file={CORPUS}", f"--output_dir={out}",
         f"--max_seq_length={MAX_LEN}", "--num_shards=2"])
    return out


def test_paragraph_rule_is_d2ls():
    assert split_paragraph(" = = Heading = = ") is None
    assert split_paragraph(" Only one sentence . ") == [["only", "one", "sentence", "."]]
    assert split_paragraph(" A b . C d . ") == [["a", "b"], ["c", "d", "."]]
    assert split_paragraph(" A b . C", lower=False) == [["A", "b"], ["C"]]
    assert split_paragraph(" no period at the end .") is None  # no ' . ' in the raw line


def test_flags_of_the_recipe():
    base = ["--recipe=d2l", f"--input_file={CORPUS}", "--output_dir=/tmp/never-written"]
    config, _ = parse_args(base)
    assert (config.dupe_factor, config.max_predictions_per_seq, config.vocab_file) == (
        1, 19, None)  # one pass; round(128 * 0.15) predictions, d2l's padding width
    config, _ = parse_args(base + ["--max_seq_length=64"])
    assert config.max_predictions_per_seq == 10
    for extra, fragment in ((["--vocab_file=v.txt"], "drop --vocab_file"),
                            (["--masking=none"], "--masking and --padding apply to"),
                            (["--do_whole_word_mask"], "whose tokens are whole words")):
        with pytest.raises(ConfigError, match=fragment):
            parse_args(base + extra)
    with pytest.raises(ConfigError, match="use --output_dir"):
        parse_args(["--recipe=d2l", f"--input_file={CORPUS}", "--output_file=/tmp/x"])


@pytest.mark.slow
def test_vocabulary_is_the_one_d2ls_rules_give(dataset, expected_vocabulary):
    written = (dataset / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert written[-1] == ""  # one token per line, newline-terminated
    assert written[:-1] == expected_vocabulary
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert manifest["flags"]["recipe"] == "d2l"
    assert manifest["vocab_sha256"] == read_manifest(str(dataset)).content.vocab_sha256


@pytest.mark.slow
def test_load_data_wiki_yields_d2ls_batch(dataset, expected_vocabulary):
    train_iter, vocab = load_data_wiki(str(dataset), 512)
    assert len(vocab) == len(expected_vocabulary)
    assert vocab["<unk>"] == 0 and vocab["<pad>"] == 1 and vocab["never-seen-word"] == 0
    batch = next(iter(train_iter))
    tokens_X, segments_X, valid_lens_x, pred_positions_X, mlm_weights_X, mlm_Y, nsp_y = batch
    assert [tuple(t.shape) for t in batch] == [
        (512, 64), (512, 64), (512,), (512, 10), (512, 10), (512, 10), (512,)]
    assert [t.dtype for t in batch] == [torch.long, torch.long, torch.float32, torch.long,
                                        torch.float32, torch.long, torch.long]
    for row in range(512):
        n = int(valid_lens_x[row])
        ids = tokens_X[row].tolist()
        assert ids[0] == vocab["<cls>"] and ids[n - 1] == vocab["<sep>"]
        assert ids[:n].count(vocab["<sep>"]) == 2
        assert ids[n:] == [vocab["<pad>"]] * (MAX_LEN - n)
        predictions = int(mlm_weights_X[row].sum())
        assert predictions == max(1, round(n * 0.15))  # d2l's budget
        positions = pred_positions_X[row, :predictions].tolist()
        assert positions == sorted(positions) and all(0 < p < n for p in positions)
        assert pred_positions_X[row, predictions:].tolist() == [0] * (10 - predictions)
        assert mlm_Y[row, predictions:].tolist() == [0] * (10 - predictions)
    assert 0.4 < nsp_y.float().mean() < 0.6


@pytest.mark.slow
def test_pairs_are_adjacent_sentences_or_random_ones(dataset, expected_vocabulary):
    """Unmasked again (labels put back), each pair's A is a corpus sentence and,
    when labelled "is next", B is the sentence after it in its paragraph."""
    ids = {word: index for index, word in enumerate(expected_vocabulary)}
    paragraphs = [[tuple(ids.get(w, 0) for w in sentence) for sentence in paragraph]
                  for paragraph in d2l_paragraphs(CORPUS)]
    sentences = {sentence for paragraph in paragraphs for sentence in paragraph}
    adjacent = {pair for paragraph in paragraphs for pair in zip(paragraph, paragraph[1:])}
    instances = list(read_instances(read_manifest(str(dataset))))
    random_next = 0
    for instance in instances:
        tokens = instance.input_ids.copy()
        tokens[instance.masked_lm_positions] = instance.masked_lm_ids
        first_sep = tokens.tolist().index(ids["<sep>"])
        a, b = tuple(tokens[1:first_sep].tolist()), tuple(tokens[first_sep + 1:-1].tolist())
        assert a in sentences and b in sentences
        assert len(a) + len(b) + 3 <= MAX_LEN
        if instance.next_sentence_label:
            random_next += 1
        else:
            assert (a, b) in adjacent
        assert instance.segment_ids.tolist() == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert random_next / len(instances) == pytest.approx(0.5, abs=0.03)


@pytest.mark.slow
def test_tf_data_reads_the_d2l_features(dataset):
    from bert_pretraining_data.loaders.tf_data import tf_dataset

    first = next(iter(tf_dataset(str(dataset), batch_size=4, training=False)))
    instance = next(read_instances(read_manifest(str(dataset))))
    n = int(first["valid_lens"][0])
    assert first["tokens"].shape == (4, MAX_LEN) and first["mlm_weights"].shape == (4, 10)
    assert first["tokens"][0, :n].numpy().tolist() == instance.input_ids.tolist()
    assert int(first["nsp_labels"][0]) == 1 - instance.next_sentence_label


def test_line_source_splits_anywhere_without_losing_or_repeating_lines(tmp_path):
    from apache_beam.io import source_test_utils

    from bert_pretraining_data.transforms.d2l.beam import LineSource

    text = tmp_path / "wiki.txt"
    text.write_bytes(CORPUS.read_bytes()[:40_000] + b"no final newline . x")
    source = LineSource(str(text), root=f"{tmp_path}/")
    reference = source_test_utils.read_from_source(source)
    assert [line for _, line in reference] == text.read_text().split("\n")
    assert reference[0][0] == "wiki.txt:000000000000"
    splits = [(s.source, s.start_position, s.stop_position) for s in source.split(997)]
    assert len(splits) > 30
    source_test_utils.assert_sources_equal_reference_source((source, None, None), splits)


@pytest.mark.slow
def test_output_is_byte_identical_on_another_runner(tmp_path):
    small = tmp_path / "small.txt"
    small.write_bytes(b"".join(CORPUS.read_bytes().splitlines(keepends=True)[:400]))
    outputs = []
    for name, extra in (("in_memory", []), ("two_threads", [
            "--direct_running_mode=multi_threading", "--direct_num_workers=2"])):
        out = tmp_path / name
        run(["--recipe=d2l", f"--input_file={small}", f"--output_dir={out}",
             f"--max_seq_length={MAX_LEN}", "--num_shards=2", *extra])
        outputs.append({p.name: p.read_bytes() for p in out.iterdir() if p.name != "manifest.json"})
    assert outputs[0] == outputs[1]
    assert sorted(outputs[0]) == ["part-00000-of-00002.tfrecord",
                                  "part-00001-of-00002.tfrecord", "vocab.txt"]
