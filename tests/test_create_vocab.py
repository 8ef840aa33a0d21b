"""create-vocab: word counting on Beam, the CLI end to end, and the comparison
with HuggingFace's WordPiece trainer on WikiText-2."""

from __future__ import annotations

import hashlib
import json
import pathlib

import apache_beam as beam
import pytest
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from conftest import DATA
from helpers.gcs_emulator import gcs  # noqa: F401  (fixture)
from bert_pretraining_data.pipeline.create_vocab import main, parse_args, run
from bert_pretraining_data.pipeline.main import run as run_pretraining_data
from bert_pretraining_data.pipeline.beam_options import ConfigError
from helpers.records import read_examples
from helpers.vocab_baselines import corpus_documents
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
from bert_pretraining_data.transforms.tokenize.vocabulary import parse_vocabulary
from bert_pretraining_data.transforms.vocab.word_counts import document_word_counts, is_held_out
from bert_pretraining_data.transforms.vocab.beam import CountWords
from bert_pretraining_data.transforms.vocab.wordpiece import (RESERVED_TOKENS, TokenizationStats,
                                                                 count_characters, word_stats)

WIKITEXT = DATA / "wikitext2_valid.txt"
SAMPLE = DATA / "sample_text.txt"


def _flags(**flags) -> list[str]:
    return [f"--{name}={value}" for name, value in flags.items()]


def _table(documents: list[list[str]], *, do_lower_case: bool = True) -> dict[str, int]:
    total: dict[str, int] = {}
    for doc in documents:
        for word, count in document_word_counts(doc, do_lower_case=do_lower_case).items():
            total[word] = total.get(word, 0) + count
    return total


def _measure(tokens: list[str], table: dict[str, int]) -> TokenizationStats:
    vocab = parse_vocabulary("".join(f"{t}\n" for t in tokens).encode("utf-8"))
    tokenizer = FullTokenizer(vocab, do_lower_case=False)
    return sum((word_stats(tokenizer, w, c) for w, c in table.items()), TokenizationStats())


# --- Word counting --------------------------------------------------------------


def test_words_are_what_the_basic_tokenizer_makes():
    lines = ["Héllo, World!", "中文 text  héllo"]
    assert document_word_counts(lines, do_lower_case=True) == {
        "hello": 2, ",": 1, "world": 1, "!": 1, "中": 1, "文": 1, "text": 1}
    assert document_word_counts(lines, do_lower_case=False) == {
        "Héllo": 1, "héllo": 1, ",": 1, "World": 1, "!": 1, "中": 1, "文": 1, "text": 1}


def test_count_words_sums_over_documents():
    docs = [("f:0", ["a b a", "c"]), ("f:9", ["B a"]), ("g:0", ["d."])]
    with test_pipeline.TestPipeline() as p:
        counts = p | beam.Create(docs) | CountWords(do_lower_case=True)
        assert_that(counts, equal_to([("a", 3), ("b", 2), ("c", 1), ("d", 1), (".", 1)]))


def test_held_out_documents_are_a_stable_fraction_chosen_by_their_text():
    docs = [[f"sentence {i} of a document", "another line"] for i in range(3000)]
    held = [is_held_out(doc, 0.1) for doc in docs]
    assert 0.08 < sum(held) / len(docs) < 0.12
    assert held == [is_held_out(list(doc), 0.1) for doc in docs]
    assert not any(is_held_out(doc, 0.0) for doc in docs)


# --- Flags -------------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["--output_file=v.txt"], "--input_file is required"),
    (["--input_file=x"], "--output_file is required"),
    (["--input_file=x", "--output_file=v", "--held_out_fraction=1"], "--held_out_fraction"),
    (["--input_file=x", "--output_file=v", "--vocab_size=0"], "--vocab_size must be positive"),
    (["--input_file=x", "--output_file=v", "--character_coverage=1.5"],
     "--character_coverage"),
    (["--input_file=x", "--output_file=v", "--vocab_sise=100"], "unknown flag --vocab_sise"),
])
def test_bad_flags_fail_in_one_line(argv, message):
    with pytest.raises(ConfigError, match=message):
        parse_args(argv)


def test_beam_flags_pass_through_and_original_spellings_work():
    config, beam_args = parse_args(["--input_file=x", "--output_file=v", "--nodo_lower_case",
                                    "--runner=DirectRunner", "--direct_num_workers=2"])
    assert not config.do_lower_case
    assert beam_args == ["--runner=DirectRunner", "--direct_num_workers=2"]


def test_an_existing_vocabulary_is_kept_without_overwrite(tmp_path):
    existing = tmp_path / "vocab.txt"
    existing.write_text("keep me\n")
    with pytest.raises(ConfigError, match="--overwrite"):
        run(_flags(input_file=SAMPLE, output_file=existing))
    assert existing.read_text() == "keep me\n"


@pytest.mark.slow
def test_a_vocabulary_too_small_for_the_characters_fails_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(_flags(input_file=SAMPLE, output_file=tmp_path / "v.txt", vocab_size=20))
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("create-vocab: error: vocab_size 20 cannot hold")
    assert "raise --vocab_size" in error[-1]
    assert list(tmp_path.iterdir()) == []  # no vocabulary, metrics or staging left


# --- End to end -----------------------------------------------------------------


@pytest.fixture(scope="module")
def wikitext_vocab(tmp_path_factory) -> dict:
    """One in-memory DirectRunner run at 8k on WikiText-2 (validation split)."""
    out = tmp_path_factory.mktemp("wikitext") / "vocab.txt"
    return run(_flags(input_file=WIKITEXT, output_file=out, vocab_size=8000))


@pytest.fixture(scope="module")
def wikitext_tables() -> tuple[dict[str, int], dict[str, int]]:
    """Training and held-out word tables, split as the pipeline splits them."""
    documents = corpus_documents(WIKITEXT)
    return (_table([d for d in documents if not is_held_out(d, 0.1)]),
            _table([d for d in documents if is_held_out(d, 0.1)]))


def _hf_wordpiece(table: dict[str, int], vocab_size: int) -> list[str]:
    """HF's WordPiece trainer on exactly our words (already basic-tokenized)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, show_progress=False,
                                        special_tokens=list(RESERVED_TOKENS))
    tokenizer.train_from_iterator((" ".join([w] * c) for w, c in sorted(table.items())),
                                  trainer=trainer)
    return sorted(tokenizer.get_vocab(), key=tokenizer.get_vocab().get)


@pytest.mark.slow
def test_held_out_quality_matches_or_beats_hf_wordpiece_at_8k(wikitext_vocab, wikitext_tables):
    training, held_out = wikitext_tables
    ours = pathlib.Path(wikitext_vocab["vocab_file"]).read_text(encoding="utf-8").splitlines()
    theirs = _hf_wordpiece(training, 8000)
    assert len(ours) == len(theirs) == 8000
    our_stats, their_stats = _measure(ours, held_out), _measure(theirs, held_out)
    # The pipeline measured its vocabulary on the same held-out words.
    reported = wikitext_vocab["held_out"]
    assert reported["words"] == our_stats.words > 10_000
    assert reported["tokens"] == our_stats.tokens
    assert reported["unk_tokens"] == our_stats.unk_tokens
    assert wikitext_vocab["training"]["words"] == sum(training.values())
    ours_rates, theirs_rates = our_stats.rates(), their_stats.rates()
    print(f"\nheld-out, ours: {ours_rates}\nheld-out, HF:   {theirs_rates}")
    assert ours_rates["tokens_per_word"] <= 1.1 * theirs_rates["tokens_per_word"]
    assert ours_rates["unk_rate"] <= theirs_rates["unk_rate"]
    assert ours_rates["character_coverage"] >= theirs_rates["character_coverage"]


@pytest.mark.slow
def test_output_is_identical_with_two_worker_processes(wikitext_vocab, tmp_path):
    out = tmp_path / "vocab.txt"
    report = run(_flags(input_file=WIKITEXT, output_file=out, vocab_size=8000)
                 + ["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    reference = pathlib.Path(wikitext_vocab["vocab_file"])
    assert out.read_bytes() == reference.read_bytes()
    assert (pathlib.Path(report["metrics_file"]).read_bytes()
            == pathlib.Path(wikitext_vocab["metrics_file"]).read_bytes())


@pytest.mark.slow
def test_learned_vocabulary_plugs_into_create_pretraining_data(wikitext_vocab, tmp_path):
    vocab_file = pathlib.Path(wikitext_vocab["vocab_file"])
    manifest = run_pretraining_data(_flags(
        input_file=SAMPLE, output_dir=tmp_path / "out", vocab_file=vocab_file,
        dupe_factor=1, max_seq_length=64, max_predictions_per_seq=10))
    assert (manifest["vocab_sha256"] == wikitext_vocab["vocab_sha256"]
            == hashlib.sha256(vocab_file.read_bytes()).hexdigest())
    vocab = parse_vocabulary(vocab_file.read_bytes())
    tokenizer = FullTokenizer(vocab, do_lower_case=True)
    corpus_ids = {i for line in SAMPLE.read_text(encoding="utf-8").splitlines()
                  for i in tokenizer.tokenize_to_ids(line)}
    records = read_examples([s["path"] for s in manifest["shards"]], 64, 10)
    assert len(records) == manifest["total_instances"] > 0
    special = {vocab.cls_id, vocab.sep_id, vocab.mask_id}
    for record in records:
        assert record["input_ids"][0] == vocab.cls_id
        masked = set(p for p, w in zip(record["masked_lm_positions"],
                                       record["masked_lm_weights"]) if w)
        real = [i for k, (i, m) in enumerate(zip(record["input_ids"], record["input_mask"]))
                if m and k not in masked and i not in special]
        assert set(real) <= corpus_ids
        assert set(record["masked_lm_ids"][:len(masked)]) <= corpus_ids


@pytest.mark.slow
def test_small_corpus_with_nothing_held_out_learns_from_every_character(tmp_path, capsys):
    out = tmp_path / "vocab.txt"
    main(_flags(input_file=SAMPLE, output_file=out, vocab_size=400, max_words=50,
                held_out_fraction=0, do_lower_case="false"))
    printed = capsys.readouterr()
    assert "held-out: no words" in printed.out and printed.err == ""
    tokens = out.read_text(encoding="utf-8").splitlines()
    documents = corpus_documents(SAMPLE)
    table = _table(documents, do_lower_case=False)
    assert set(count_characters(table.items())) <= set(tokens)  # beyond the top 50 words
    assert "The" in tokens  # cased
    metrics = json.loads((tmp_path / "vocab.txt.metrics.json").read_text())
    assert metrics["training"]["documents"] == len(documents)
    assert metrics["training"]["unk_tokens"] == 0
    assert metrics["held_out"]["words"] == 0 and metrics["held_out"]["unk_rate"] is None


@pytest.mark.slow
def test_gs_corpus_and_vocabulary_match_a_local_run(gcs, tmp_path):  # noqa: F811
    flags = _flags(vocab_size=300, held_out_fraction=0.3)
    local = run(_flags(input_file=SAMPLE, output_file=tmp_path / "vocab.txt") + flags)
    corpus = gcs.upload(SAMPLE, "vocab-corpus/sample_text.txt")
    remote = run(_flags(input_file=corpus, output_file=gcs.url("vocab/vocab.txt")) + flags)
    assert gcs.names("vocab/") == ["vocab/vocab.txt", "vocab/vocab.txt.metrics.json"]
    assert gcs.read("vocab/vocab.txt") == pathlib.Path(local["vocab_file"]).read_bytes()
    assert remote["held_out"] == local["held_out"]
