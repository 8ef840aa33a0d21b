"""create-vocab --tokenization=ByteLevelBPE: a tokenizer.json that the
`tokenizers` library and `transformers` load as the named family's, as good
on held-out text as the library's own trainer run directly on the same
training lines, the same bytes with one worker or two, and usable by
create-pretraining-data --tokenizer_file."""

from __future__ import annotations

import json

import pytest
from tokenizers import ByteLevelBPETokenizer, Tokenizer

from conftest import DATA
from helpers.vocab_baselines import split_lines
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.create_vocab import parse_args, run
from bert_pretraining_data.pipeline.main import run as run_pretraining_data

WIKITEXT = DATA / "wikitext2_valid.txt"
VOCAB_SIZE = 8000


def _flags(**flags) -> list[str]:
    return [f"--{name}={value}" for name, value in flags.items()]


@pytest.mark.parametrize("argv, message", [
    (["--special_tokens=bert"], "--special_tokens applies to --tokenization=ByteLevelBPE"),
    (["--tokenization=ByteLevelBPE", "--character_coverage=0.99"],
     "--character_coverage applies to --tokenization=WordPiece or SentencePiece"),
    (["--tokenization=ByteLevelBPE", "--max_words=10"], "--max_words applies to"),
    (["--tokenization=ByteLevelBPE", "--vocab_size=200"],
     "vocab_size must exceed the 261 byte and special tokens"),
])
def test_bad_flags_fail_in_one_line(argv, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_args(["--input_file=x", "--output_file=t.json", *argv])
    assert "\n" not in str(err.value)


def test_defaults_are_robertas():
    config, _ = parse_args(["--input_file=x", "--output_file=t.json",
                            "--tokenization=ByteLevelBPE"])
    learning = config.byte_level_bpe
    assert (learning.vocab_size, learning.special_tokens, learning.do_lower_case) == (
        50265, "roberta", False)


@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> dict:
    """One in-memory DirectRunner run per family at 8k on WikiText-2 (validation)."""
    directory = tmp_path_factory.mktemp("bpe")
    return {family: run(_flags(input_file=WIKITEXT, output_file=directory / f"{family}.json",
                               tokenization="ByteLevelBPE", vocab_size=VOCAB_SIZE,
                               special_tokens=family))
            for family in ("roberta", "bert")}


@pytest.mark.parametrize("family, specials, pair", [
    ("roberta", {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4},
     "<s> A </s> </s> B </s>"),
    ("bert", {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4},
     "[CLS] A [SEP] B [SEP]"),
])
def test_the_file_loads_as_the_familys_in_tokenizers_and_transformers(learned, family,
                                                                       specials, pair):
    from transformers import PreTrainedTokenizerFast

    path = learned[family]["vocab_file"]
    library = Tokenizer.from_file(path)
    assert library.get_vocab_size() == VOCAB_SIZE
    assert {token: library.token_to_id(token) for token in specials} == specials
    fast = PreTrainedTokenizerFast(tokenizer_file=path)
    a, b = fast("A", add_special_tokens=False).input_ids, fast("B", add_special_tokens=False).input_ids
    expected = [fast.convert_tokens_to_ids(t) if t not in "AB" else {"A": a, "B": b}[t]
                for t in pair.split()]
    flat = [i for part in expected for i in (part if isinstance(part, list) else [part])]
    assert fast("A", "B").input_ids == flat
    text = "The Tower of London's 1078 keep, \u00e9t\u00e9 \u4e2d\u6587 \U0001f600"
    assert fast.decode(fast(text, add_special_tokens=False).input_ids) == text  # byte-level


def test_tokens_per_word_on_held_out_text_match_the_library_trainer(learned):
    """The library's trainer run directly on the training lines, in corpus
    order (as a user would run ByteLevelBPETokenizer.train): held-out tokens
    per word within 2%."""
    training, held_out = split_lines(WIKITEXT)
    direct = ByteLevelBPETokenizer(add_prefix_space=False)
    direct.train_from_iterator(training, vocab_size=VOCAB_SIZE, min_frequency=2,
                               special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                               show_progress=False)
    direct._tokenizer.encode_special_tokens = True  # as the pipeline encodes lines
    words = sum(len(line.split()) for line in held_out)
    direct_rate = sum(len(e.ids) for e in direct.encode_batch(held_out)) / words
    report = learned["roberta"]
    assert report["held_out"]["words"] == words
    rate = report["held_out"]["tokens_per_word"]
    assert abs(rate - direct_rate) / direct_rate < 0.02, (rate, direct_rate)
    assert 1.0 < rate < 2.0


@pytest.mark.slow
def test_output_is_identical_with_two_worker_processes(learned, tmp_path):
    out = tmp_path / "roberta.json"
    run(_flags(input_file=WIKITEXT, output_file=out, tokenization="ByteLevelBPE",
               vocab_size=VOCAB_SIZE, direct_num_workers=2,
               direct_running_mode="multi_processing"))
    with open(learned["roberta"]["vocab_file"], "rb") as handle:
        assert out.read_bytes() == handle.read()


def test_learned_tokenizer_plugs_into_create_pretraining_data(learned, tmp_path):
    metrics = json.loads(open(learned["roberta"]["metrics_file"]).read())
    assert metrics["vocab_size"] == VOCAB_SIZE
    manifest = run_pretraining_data(_flags(
        input_file=DATA / "en_ewt-ud-dev.sentences.txt", output_dir=tmp_path / "out",
        tokenizer_file=learned["roberta"]["vocab_file"], recipe="roberta", num_shards=1))
    assert manifest["total_instances"] > 0
    counters = manifest["counters"]
    assert counters["tokens"] > 0 and counters["unk_tokens"] == 0  # byte-level: no unknowns
