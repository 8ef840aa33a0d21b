"""--tokenizer_file and --recipe=roberta on a corpus and tokenizers not used in
development: English Web Treebank dev sentences (UD), tokenizers trained here
with the `tokenizers` library on the treebank's test sentences.

The oracle of each sequence is the library itself (each line encoded alone)
and RoBERTa's DOC-SENTENCES as its paper states it: whole consecutive
sentences of one document, as many as fit, a longer sentence cut into blocks.
"""

from __future__ import annotations

import collections
import gzip
import json
import math
import pathlib

import numpy as np
import pytest
from tokenizers import Tokenizer

from conftest import DATA, UNCASED_VOCAB
from helpers.records import decode_records
from bench.tokenizer_families import unigram
from helpers.tokenizer_files import bert_wordpiece, modernbert_bpe, roberta_bpe
from bert_pretraining_data.loaders.manifest import read_manifest
from bert_pretraining_data.loaders.records import decoded_records, sequences_of
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.main import main, run
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.transforms.tokenize.chinese_words import ID_BITS, MARK
from bert_pretraining_data.transforms.tokenize.tokenizer_json import (JsonTokenizer,
                                                                      load_tokenizer_json)
from bert_pretraining_data.transforms.tokenize.vocabulary import VocabularyError

CORPUS = DATA / "en_ewt-ud-dev.sentences.txt"
TRAINING = [line for line in (DATA / "en_ewt-ud-test.sentences.txt").read_text(
    encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def tokenizers_dir(tmp_path_factory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("tokenizers")
    roberta_bpe(TRAINING, directory / "roberta.json")
    modernbert_bpe(TRAINING, directory / "modernbert.json")
    bert_wordpiece(UNCASED_VOCAB, directory / "bert.json")
    return directory


def documents() -> list[list[str]]:
    """The corpus' documents (blank-line separated), lines stripped."""
    docs, current = [], []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            current.append(line.strip())
        elif current:
            docs.append(current)
            current = []
    return docs + [current] if current else docs


def library_ids(path: pathlib.Path) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.encode_special_tokens = True  # a corpus' "</s>" is text
    return tokenizer


def doc_sentences_blocks(path: pathlib.Path, block: int) -> collections.Counter:
    """RoBERTa's DOC-SENTENCES blocks of the corpus, each line encoded alone."""
    tokenizer = library_ids(path)
    blocks = collections.Counter()
    for doc in documents():
        current: list[int] = []
        for encoding in tokenizer.encode_batch(doc, add_special_tokens=False):
            ids = list(encoding.ids)
            if current and len(current) + len(ids) > block:
                blocks[tuple(current)] += 1
                current = []
            while len(ids) > block:
                blocks[tuple(ids[:block])] += 1
                ids = ids[block:]
            current += ids
        if current:
            blocks[tuple(current)] += 1
    return blocks


def build(tmp_path: pathlib.Path, name: str, *flags: str) -> pathlib.Path:
    out = tmp_path / name
    run([f"--input_file={CORPUS}", f"--output_dir={out}", "--num_shards=2", "--dedup=none",
         *flags])
    return out


def raw_records(out: pathlib.Path) -> list[dict[str, list]]:
    return [r for p in sorted(out.glob("part-*")) for r in decode_records(str(p))]


def test_roberta_sequences_are_framed_whole_sentences_of_one_document(tmp_path,
                                                                      tokenizers_dir):
    tokenizer_file = tokenizers_dir / "roberta.json"
    out = build(tmp_path, "roberta", f"--tokenizer_file={tokenizer_file}", "--recipe=roberta",
                "--dupe_factor=2", "--max_seq_length=128")
    blocks, covered = collections.Counter(), 0
    for record in raw_records(out):
        ids, mask = record["input_ids"], record["input_mask"]
        n = sum(mask)
        assert len(ids) == 128 and mask == [1] * n + [0] * (128 - n)
        assert ids[0] == 0 and ids[n - 1] == 2  # <s> ... </s>
        assert ids[n:] == [1] * (128 - n)  # RoBERTa's <pad>
        assert set(record["segment_ids"]) == {0}
        assert "masked_lm_ids" not in record  # masked at load time by default
        blocks[tuple(ids[1:n - 1])] += 1
        covered += n - 2
    expected = doc_sentences_blocks(tokenizer_file, 126)
    assert blocks == collections.Counter({b: 2 * c for b, c in expected.items()})
    sentence_tokens = sum(len(b) * c for b, c in expected.items())
    assert covered / (2 * sentence_tokens) >= 0.99
    manifest = read_manifest(str(out))
    assert (out / "tokenizer.json").read_bytes() == tokenizer_file.read_bytes()
    assert manifest.tokenizer.tokenizer_file == str(tokenizer_file)


def _masked_share(out: pathlib.Path, specials: set[int], mask_id: int) -> float:
    """Predictions per maskable (non-special) token; no special token masked,
    ~80% of the masked shown as the mask."""
    maskable = predictions = shown_as_mask = 0
    for record in decoded_records(read_manifest(str(out))):
        for instance in sequences_of(record):
            ids = instance.input_ids.copy()
            ids[instance.masked_lm_positions] = instance.masked_lm_ids
            assert not set(instance.masked_lm_ids.tolist()) & specials
            maskable += int(np.isin(ids, list(specials), invert=True).sum())
            predictions += len(instance.masked_lm_positions)
            shown_as_mask += int(np.sum(instance.input_ids[instance.masked_lm_positions]
                                        == mask_id))
    assert 0.77 <= shown_as_mask / predictions <= 0.83
    return predictions / maskable


@pytest.mark.parametrize("family, flags", [
    ("roberta", ["--recipe=roberta", "--masking=static"]),
    # ModernBERT's flags (docs/bert-family.md), its predictions budget given
    ("modernbert", ["--next_sentence=none", "--max_predictions_per_seq=307"]),
])
def test_masked_share_at_1024_packed_is_masked_lm_prob(tmp_path, tokenizers_dir, family,
                                                       flags):
    tokenizer_file = tokenizers_dir / f"{family}.json"
    out = build(tmp_path, family, f"--tokenizer_file={tokenizer_file}", *flags,
                "--masked_lm_prob=0.3", "--max_seq_length=1024", "--pack_sequences=True",
                "--dupe_factor=1")
    library = Tokenizer.from_file(str(tokenizer_file))
    specials = set(library.get_added_tokens_decoder())
    mask_id = library.token_to_id("<mask>" if family == "roberta" else "[MASK]")
    assert 0.28 <= _masked_share(out, specials, mask_id) <= 0.32


def test_bert_tokenizer_json_gives_the_vocab_file_shards(tmp_path, tokenizers_dir):
    """A BERT vocab.txt as tokenizer.json: the same bytes, where the two
    tokenizers agree (they do on every line of this corpus)."""
    library = library_ids(tokenizers_dir / "bert.json")
    from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
    from bert_pretraining_data.transforms.tokenize.vocabulary import load_vocabulary
    full = FullTokenizer(load_vocabulary(str(UNCASED_VOCAB)), do_lower_case=True)
    lines = [line for doc in documents() for line in doc]
    assert all(e.ids == full.tokenize_to_ids(line) for line, e in zip(
        lines, library.encode_batch(lines, add_special_tokens=False)))
    for name, flags in [("nsp", []), ("whole_word", ["--do_whole_word_mask=True"]),
                        ("sop_ngram", ["--next_sentence=sop", "--ngram=3"])]:
        vocab = build(tmp_path, f"{name}-vocab", f"--vocab_file={UNCASED_VOCAB}", *flags)
        json_ = build(tmp_path, f"{name}-json",
                      f"--tokenizer_file={tokenizers_dir / 'bert.json'}", *flags)
        shards = sorted(p.name for p in vocab.glob("part-*"))
        assert shards == sorted(p.name for p in json_.glob("part-*"))
        for shard in shards:
            assert (vocab / shard).read_bytes() == (json_ / shard).read_bytes(), (name, shard)
    # the manifest records the file's own settings, not the WordPiece flags' defaults
    flags = json.loads((json_ / "manifest.json").read_text())["flags"]
    assert (flags["do_lower_case"], flags["tokenization"]) == (True, "WordPiece")


def _without_post_processor(path: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.post_processor = None
    tokenizer.save(str(out))
    return out


def _without_mask(tmp_path: pathlib.Path) -> pathlib.Path:
    from tokenizers import ByteLevelBPETokenizer
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TRAINING[:500], vocab_size=600, special_tokens=["<s>", "<pad>",
                                                                            "</s>"],
                            show_progress=False)
    path = tmp_path / "no-mask.json"
    bpe.save(str(path))
    return path


@pytest.mark.parametrize("case, expected", [
    ("not_json", "not a tokenizer.json the tokenizers library can load"),
    ("empty", "the tokenizer file is empty"),
    ("no_mask", "it has no mask token"),
    ("no_framing", "its post-processor frames one segment as"),
])
def test_bad_tokenizer_files_are_refused_in_one_line(tmp_path, tokenizers_dir, case, expected):
    path = {
        "not_json": lambda: tmp_path / "bad.json",
        "empty": lambda: tmp_path / "empty.json",
        "no_mask": lambda: _without_mask(tmp_path),
        "no_framing": lambda: _without_post_processor(tokenizers_dir / "roberta.json",
                                                      tmp_path / "plain.json"),
    }[case]()
    if case == "not_json":
        path.write_text('{"version": "1.0", "model": ')
    if case == "empty":
        path.write_text("\n")
    out = tmp_path / "out"
    with pytest.raises(VocabularyError) as err:
        run([f"--input_file={CORPUS}", f"--output_dir={out}", f"--tokenizer_file={path}",
             "--recipe=roberta"])
    message = str(err.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message
    assert not out.exists()


@pytest.mark.parametrize("flags, expected", [
    (["--do_lower_case=False"], "--do_lower_case does not apply to --tokenizer_file"),
    (["--vocab_file=v.txt"], "--tokenizer_file is the whole tokenizer"),
    (["--recipe=roberta", "--next_sentence=nsp"], "--recipe=roberta has no sentence-pair"),
    (["--recipe=roberta", "--ngram=3"], "drop --ngram"),
    (["--masking=none", "--do_whole_word_mask=True", "--next_sentence=none"],
     "whole-word masking needs --masking=static"),
    ([], "writes BERT's CLS A SEP B SEP pairs: use --recipe=roberta"),
])
def test_flags_a_tokenizer_file_cannot_take_are_refused_in_one_line(tmp_path, tokenizers_dir,
                                                                    flags, expected):
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as err:
        run([f"--input_file={CORPUS}", f"--output_dir={out}",
             f"--tokenizer_file={tokenizers_dir / 'roberta.json'}", *flags])
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert not out.exists()


@pytest.mark.parametrize("family, model", [("roberta", "RobertaForMaskedLM"),
                                           ("modernbert", "ModernBertForMaskedLM")])
def test_masked_lm_models_take_the_loaders_batches(tmp_path, tokenizers_dir, family, model):
    """A tiny randomly initialised model of the family: its loss on the
    loader's batches (dynamically masked with the file's mask id, padded with
    its pad id) is about ln V at init, and one step lowers it."""
    import torch
    import transformers

    from bert_pretraining_data.loaders.torch_data import make_dataloader

    tokenizer_file = tokenizers_dir / f"{family}.json"
    out = build(tmp_path, family, f"--tokenizer_file={tokenizer_file}", "--recipe=roberta",
                "--max_seq_length=64")
    library = Tokenizer.from_file(str(tokenizer_file))
    size = library.get_vocab_size(with_added_tokens=True)
    pad = library.token_to_id("<pad>" if family == "roberta" else "[PAD]")
    torch.manual_seed(0)
    if family == "roberta":
        config = transformers.RobertaConfig(
            vocab_size=size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=66 + pad, pad_token_id=pad,
            type_vocab_size=1)
    else:
        config = transformers.ModernBertConfig(
            vocab_size=size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64, pad_token_id=pad,
            global_attn_every_n_layers=1, local_attention=64)
    network = getattr(transformers, model)(config)
    optimizer = torch.optim.AdamW(network.parameters(), lr=3e-3)
    losses = []
    for step, batch in enumerate(make_dataloader(str(out), batch_size=16)):
        assert (batch["input_ids"][batch["attention_mask"] == 0] == pad).all()
        assert (batch["labels"] != -100).any()
        loss = network(**batch).loss
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step == 20:
            break
    assert abs(losses[0] - math.log(size)) < 0.1 * math.log(size)
    assert np.mean(losses[-5:]) < losses[0] - 0.5


@pytest.mark.parametrize("family", ["roberta", "modernbert", "bert"])
def test_runs_that_group_no_words_get_the_same_ids_unmarked(tokenizers_dir, family):
    """Without whole words to group, lines go through the library's faster
    call, which works out no word ids: each line's ids must be the same."""
    vocab = load_tokenizer_json(str(tokenizers_dir / f"{family}.json"))
    lines = [line for doc in documents() for line in doc]
    grouped = JsonTokenizer(vocab, words=True).lines_to_ids(lines)
    assert any(i & MARK for ids in grouped for i in ids)
    assert JsonTokenizer(vocab, words=False).lines_to_ids(lines) == [
        [i & ID_BITS for i in ids] for ids in grouped]


@pytest.mark.parametrize("flags, words", [
    ([], False), (["--masking=none"], False), (["--do_whole_word_mask=True"], True),
    (["--next_sentence=sop"], True), (["--ngram=3"], True)])
def test_words_are_grouped_where_masking_or_features_read_them(tokenizers_dir, flags, words):
    config, _ = parse_args([f"--input_file={CORPUS}", "--output_dir=unused",
                            f"--tokenizer_file={tokenizers_dir / 'bert.json'}", *flags])
    assert config.tokenizer.words is words
    assert config.tokenizer.marks_continuations is words


def test_inspect_decodes_with_the_datasets_tokenizer(tmp_path, tokenizers_dir, capsys):
    """inspect-pretraining-data shows a tokenizer.json dataset's tokens as the
    library spells them, from the copy the dataset carries (the file the run
    read is moved away first)."""
    from bert_pretraining_data.pipeline.inspect_data import main as inspect

    tokenizer_file = tmp_path / "roberta.json"
    tokenizer_file.write_bytes((tokenizers_dir / "roberta.json").read_bytes())
    out = build(tmp_path, "roberta", f"--tokenizer_file={tokenizer_file}", "--recipe=roberta",
                "--masking=static", "--max_seq_length=64")
    library = Tokenizer.from_file(str(tokenizer_file))
    tokenizer_file.unlink()
    inspect([str(out), "--num_instances=2"])
    printed = capsys.readouterr().out
    ids = decode_records(str(sorted(out.glob("part-*"))[0]))[0]["input_ids"]
    n = ids.index(1) if 1 in ids else len(ids)  # RoBERTa's <pad> ends the tokens
    tokens = " ".join(library.id_to_token(i) for i in ids[:n])
    assert tokens.startswith("<s> ") and "<mask>" in printed
    assert f"tokens: {tokens}\n" in printed
    # RoBERTa's byte-level BPE keeps case: recorded and shown as the file's, not as
    # --do_lower_case's default (issue 53)
    flags = json.loads((out / "manifest.json").read_text())["flags"]
    assert (flags["do_lower_case"], flags["tokenization"]) == (False, "BPE")
    assert " do_lower_case=False" in printed


def test_tf_dataset_pads_unpadded_records_with_the_tokenizers_pad(tmp_path, tokenizers_dir):
    """tf.data pads --padding=none records of a tokenizer.json dataset with its
    pad id (RoBERTa's 1, which its position ids count on), so they read as the
    --padding=fixed records the pipeline padded itself."""
    from bert_pretraining_data.loaders.tf_data import tf_dataset

    flags = [f"--tokenizer_file={tokenizers_dir / 'roberta.json'}", "--recipe=roberta",
             "--masking=static", "--max_seq_length=64"]
    fixed = build(tmp_path, "fixed", *flags)
    unpadded = build(tmp_path, "unpadded", *flags, "--padding=none")

    def batches(out: pathlib.Path) -> dict[str, np.ndarray]:
        read = list(tf_dataset(str(out), batch_size=1000, training=False))
        return {name: np.concatenate([b[name].numpy() for b in read]) for name in read[0]}
    padded, rebuilt = batches(fixed), batches(unpadded)
    assert (padded["input_ids"] == 1).any()
    assert padded.keys() == rebuilt.keys()
    for name in padded:
        assert np.array_equal(padded[name], rebuilt[name]), name


@pytest.mark.parametrize("name, flags, code, found", [
    # a gzipped corpus is not sampled at launch by a local run: a worker meets the line
    ("corpus.txt.gz", [], 1, "the run failed in step 'Tokenize"),
    # the runner's shuffle learns its codebook from the first documents: they meet it
    ("corpus.txt.gz", ["--shuffle=runner"], 2, "in a sample of the input"),
    ("corpus.txt", [], 2, "in a sample of the input"),  # the disk estimate's sample meets it
])
def test_text_a_tokenizer_cannot_encode_is_one_line(tmp_path, capsys, name, flags, code, found):
    """issue 53: a Unigram without an unknown token on a character it never
    saw ended in the library's traceback ("Encountered an unknown token but
    `unk_id` is missing")."""
    unigram(TRAINING, tmp_path / "tokenizer.json", unk_token=None)
    text = ("\n".join(TRAINING[:40]) + "\n\n" + "\n".join(TRAINING[40:60])
            + "\nThe 汉字 are new to it.\n").encode()
    (tmp_path / name).write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    with pytest.raises(SystemExit) as exit_:
        main([f"--input_file={tmp_path / name}", f"--tokenizer_file={tmp_path / 'tokenizer.json'}",
              f"--output_dir={tmp_path / 'out'}", "--max_seq_length=64",
              "--max_predictions_per_seq=10", *flags])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_.value.code == code, error
    assert found in error, error
    assert (f"{tmp_path / 'tokenizer.json'} cannot encode the line 'The 汉字 are new to it.' "
            "(Encountered an unknown token but `unk_id` is missing): give its model an unknown "
            "token") in error, error
    assert not (tmp_path / "out" / "manifest.json").exists()
