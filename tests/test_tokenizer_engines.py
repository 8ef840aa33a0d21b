"""--tokenizer_engine: fastokens encodes a byte-level BPE tokenizer.json, and
this project's kernels a BERT WordPiece and a Unigram one, only where they
give the tokenizers library's ids, checked on the run's own input.

Tokenizers trained here as users train them (RoBERTa's structure: ByteLevel
without a prefix space and RobertaProcessing; ModernBERT's: a prefix space,
special tokens added after training, a TemplateProcessing) on the English Web
Treebank's dev sentences, and a BERT WordPiece tokenizer.json, which fastokens
cannot express. The ids are compared on corpora the engine was not developed
on (the treebank's test sentences, Chinese GSD, adversarial lines), a run with
the fast engine writes the reference run's bytes, and a planted difference
(two merges swapped in the engine's copy only) sends the run to the reference
with a warning.
"""

from __future__ import annotations

import base64
import gzip
import json
import pathlib
import random
import unicodedata

import pytest

from conftest import DATA, UNCASED_VOCAB
from tokenizers import AddedToken, Regex, Tokenizer, normalizers, pre_tokenizers

from bench.tokenizer_families import (FAMILIES, SPECIAL_TOKENS, sentencepiece_bpe,
                                      sentencepiece_unigram, unigram)
from helpers.corpora import write_wet
from helpers.tokenizer_files import bert_wordpiece, modernbert_bpe, roberta_bpe
from bert_pretraining_data.pipeline.input_sample import sample_documents
from bert_pretraining_data.pipeline.main import main, run
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.pipeline.prepare import prepare
from bert_pretraining_data.transforms.tokenize import (engines, unigram as unigram_engine,
                                                       unigram_kernel)
from bert_pretraining_data.transforms.tokenize.compiled_calls import WHOLE_DOCUMENT_CHARACTERS
from bert_pretraining_data.transforms.tokenize.document import DocumentTokenizer
from bert_pretraining_data.transforms.tokenize.precompiled_charsmap import PrecompiledCharsMap
from bert_pretraining_data.transforms.tokenize.engines import (FASTOKENS, TOKENIZERS, UNIGRAM,
                                                               WORDPIECE, Unencodable,
                                                               fast_engine, fast_engine_json,
                                                               wordpiece_case)
from bert_pretraining_data.transforms.tokenize.tokenizer_json import (JsonTokenizer,
                                                                      load_tokenizer_json)

TRAINING = [line for line in (DATA / "en_ewt-ud-dev.sentences.txt").read_text(
    encoding="utf-8").splitlines() if line.strip()]
ADVERSARIAL = [
    "", " ", "   leading and trailing   ", "tabs\tand\r\nCRLF", "digits 1234567890 3.14159",
    "contractions: it's, don't, we're, they'll, I'd, you've", "emoji 🙂🚀 and ZWJ 👩‍💻",
    "combining: e\u0301 a\u0308 n\u0303", "non-BMP 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈", "control \x00\x07\x1b chars",
    "a" * 500, "<s> </s> <unk> <mask> <pad> [CLS] [SEP] [MASK]", "Ünïcödé ΑΒΓ кириллица עברית",
    "!!!???...,,,;;;", "mixed中文English混合", "  \u3000full-width space\u3000",
    # what SentencePiece's character map rewrites, and the library's reading of
    # it by grapheme cluster: half-width katakana and their sound marks,
    # full-width letters, ligatures, circled digits, a full-width letter whose
    # combining mark the library drops, decomposed Hangul, Indic clusters
    "ｶﾞｷﾞｸﾞ ﾊﾟﾋﾟ ＡＢＣ１２３ ﬁﬂ ①②③ Ａ\u0301 ᵋ\u065c \u1100\u1161\u11a8 क्षि ಕ್ಷೇ",
    "mail |||EMAIL_ADDRESS||| from |||IP_ADDRESS|||, then  two,   three and" + " " * 30 + "more",
]


def _lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


CORPUS = (_lines("en_ewt-ud-test.sentences.txt") + _lines("zh_gsd-ud-test.sentences.txt")
          + [sentence for line in _lines("spacy_examples.jsonl")
             for sentence in json.loads(line)["sentences"]]  # 66 languages
          + ADVERSARIAL)


# Unigram files besides the bench's XLM-R kind: one without an unknown token;
# XLM-R's squeezed spaces, lower-cased, Metaspace prepending to the first
# word; T5's and Llama-2's spaces made U+2581 by normalizers, with no
# pre-tokenizer (its pieces may span words); and NFKD stripping accents, a
# normalizer the kernel does not read.
UNIGRAMS = {
    "unigram-no-unk": {"unk_token": None},
    "unigram-lowercase": {"normalizer": normalizers.Sequence([
        normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " "), normalizers.Lowercase()]),
        "pre_tokenizer": pre_tokenizers.Metaspace(prepend_scheme="first")},
    "unigram-no-pre-tokenizer": {"normalizer": normalizers.Sequence([
        normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]),
        "pre_tokenizer": False},
    "unigram-strip-accents": {"normalizer": normalizers.Sequence([
        normalizers.NFKD(), normalizers.StripAccents()])},
}
# XLM-R's published tokenizer.json was converted in 2020, before the
# converter stripped the right and made runs of spaces one U+2581
PRECOMPILED_2020 = "precompiled-2020"
# Llama-2's SentencePiece BPE as the legacy converter writes it (Gemma's is a family)
LLAMA2_BPE = "llama2-bpe"
# GPT-NeoX's added tokens that are not special: runs of 2 to 24 spaces, which the
# library splits out of any text before the BPE; and OLMo's placeholders
NEOX_ADDED = "neox-added"
NEOX_ADDED_TOKENS = [" " * n for n in range(2, 25)] + ["|||EMAIL_ADDRESS|||", "|||IP_ADDRESS|||"]
UNIGRAM_FAMILIES = ("xlmr-unigram", "xlmr-precompiled", PRECOMPILED_2020, "unigram-lowercase",
                    "unigram-no-pre-tokenizer")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("engines")
    made = {name: root / f"{name}.json"
            for name in ("roberta", "modernbert", "bert", "bert-cased", *FAMILIES, *UNIGRAMS,
                         PRECOMPILED_2020, LLAMA2_BPE, NEOX_ADDED)}
    roberta_bpe(TRAINING, made["roberta"])
    modernbert_bpe(TRAINING, made["modernbert"])
    bert_wordpiece(UNCASED_VOCAB, made["bert"])
    bert_wordpiece(UNCASED_VOCAB, made["bert-cased"], lowercase=False)
    for name, build in FAMILIES.items():
        build(TRAINING, made[name], 4000)
    for name, structure in UNIGRAMS.items():
        unigram(TRAINING, made[name], 4000, **structure)
    sentencepiece_unigram(TRAINING, made[PRECOMPILED_2020], 4000, normalizer="2020")
    sentencepiece_bpe(TRAINING, made[LLAMA2_BPE], 4000, converter="llama2")
    neox = FAMILIES["neox-nfc"](TRAINING, made[NEOX_ADDED], 4000)
    neox.add_tokens([AddedToken(token, normalized=False) for token in NEOX_ADDED_TOKENS])
    neox.save(str(made[NEOX_ADDED]))
    return made


# The byte-level BPE structures encoders ship with: RoBERTa's (no normalizer),
# ModernBERT's own test file, GPT-NeoX's and OLMo's NFC (ModernBERT's family),
# Llama-3's Split then ByteLevel, and NFC then lowercase; and SentencePiece
# BPEs with byte fallback: Gemma's (mmBERT's tokenizer) and Llama-2's.
FAST_FAMILIES = ("roberta", "modernbert", "neox-nfc", "llama3-split", "nfc-lowercase",
                 "gemma-bpe", LLAMA2_BPE, NEOX_ADDED)


@pytest.mark.parametrize("family", FAST_FAMILIES)
def test_fastokens_gives_the_librarys_ids_on_every_line(files, family):
    vocabulary = load_tokenizer_json(str(files[family]))
    fast = JsonTokenizer(vocabulary, words=False, engine=FASTOKENS)
    assert fast._fast is not None  # the fast engine, not the reference behind it
    reference = JsonTokenizer(vocabulary, words=False, engine=TOKENIZERS)
    assert fast.lines_to_ids(CORPUS) == reference.lines_to_ids(CORPUS)
    assert len(CORPUS) > 2500


def test_a_file_saved_with_truncation_and_padding_takes_fastokens_whole(files, tmp_path):
    """A file saved with the model's truncation (512, or here 8) and padding:
    the pipeline encodes lines whole, and so does fastokens' copy (it would
    apply them, and the run's check would then send it to the library)."""
    tokenizer = Tokenizer.from_file(str(files["neox-nfc"]))
    tokenizer.enable_truncation(8)
    tokenizer.enable_padding(length=16, pad_id=3, pad_token="[PAD]")
    tokenizer.save(str(tmp_path / "truncating.json"))
    vocabulary = load_tokenizer_json(str(tmp_path / "truncating.json"))
    fast = JsonTokenizer(vocabulary, words=False, engine=FASTOKENS)
    assert fast._fast is not None
    reference = JsonTokenizer(vocabulary, words=False, engine=TOKENIZERS)
    assert fast.lines_to_ids(CORPUS) == reference.lines_to_ids(CORPUS)
    assert max(map(len, fast.lines_to_ids(CORPUS))) > 16


def test_a_file_no_fast_engine_expresses_takes_the_library(files, tmp_path):
    for family in ("bert", "bert-cased", "xlmr-unigram"):  # fastokens reads no WordPiece
        assert fast_engine_json(files[family].read_bytes()) is None, family
    file = files["unigram-strip-accents"]  # nor Unigram; the kernel reads no StripAccents
    assert fast_engine(load_tokenizer_json(str(file))) is None
    corpus = DATA / "en_ewt-ud-test.paragraphs.txt"
    manifest = run([f"--input_file={corpus}", f"--tokenizer_file={file}",
                    f"--output_dir={tmp_path / 'out'}", "--dupe_factor=1"])
    assert manifest["tokenizer_engine"] == TOKENIZERS


def test_a_wordpiece_file_with_added_words_takes_no_kernel(files, tmp_path):
    """The library splits a token added without `special` out of any text
    before WordPiece; BERT's FullTokenizer, which the kernel is, does not."""
    tokenizer = Tokenizer.from_file(str(files["bert"]))
    tokenizer.add_tokens(["covid19"])
    tokenizer.save(str(tmp_path / "bert-added.json"))
    assert wordpiece_case(files["bert"].read_bytes()) is True
    assert wordpiece_case((tmp_path / "bert-added.json").read_bytes()) is None


@pytest.mark.parametrize("family", UNIGRAM_FAMILIES)
def test_the_unigram_kernel_gives_the_librarys_ids_on_every_line(files, family):
    vocabulary = load_tokenizer_json(str(files[family]))
    kernel = JsonTokenizer(vocabulary, words=False, engine=UNIGRAM)
    assert kernel._fast is not None
    reference = JsonTokenizer(vocabulary, words=False, engine=TOKENIZERS)
    assert kernel.lines_to_ids(CORPUS) == reference.lines_to_ids(CORPUS)


def test_the_character_map_gives_the_librarys_text(files):
    """SentencePiece's map as the library reads it, grapheme cluster by
    cluster, on random text: every character Python's tables assign below
    U+3000, the half-width forms, Hangul jamo and syllables, and combining
    marks, sound marks and joiners often enough to make clusters."""
    spec = json.loads(files["xlmr-precompiled"].read_text(encoding="utf-8"))
    (charsmap,) = [step["precompiled_charsmap"] for step in spec["normalizer"]["normalizers"]
                   if step["type"] == "Precompiled"]
    blob = base64.b64decode(charsmap)
    library, ours = normalizers.Precompiled(blob), PrecompiledCharsMap(blob)
    assigned = [chr(c) for c in [*range(0x20, 0x3000), *range(0xFF00, 0xFFF0),
                                 *range(0xAC00, 0xAC40)]
                if unicodedata.category(chr(c)) != "Cn"]
    joiners = ["\u0301", "\u0308", "\u065c", "\u200d", "\uff9e", "\uff9f", "\u094d"] * 200
    rng = random.Random(0)
    texts = ["".join(rng.choices(assigned + joiners, k=40)) for _ in range(5000)]
    texts += [*CORPUS, *(line + "\r\n" + line for line in ADVERSARIAL)]
    changed = [text for text in texts if library.normalize_str(text) != text]
    assert [ours(text) for text in texts] == [library.normalize_str(text) for text in texts]
    assert len(changed) > 5000  # the map rewrote text, not only passed it through


def test_the_unigram_kernels_word_cache_changes_no_id(files):
    """The kernel keeps each word's ids: words seen before, words after the
    cache's pool filled (long words) and after its table filled (more short
    words than it holds) are all the library's ids."""
    vocabulary = load_tokenizer_json(str(files["xlmr-unigram"]))
    kernel = JsonTokenizer(vocabulary, words=False, engine=UNIGRAM)
    reference = JsonTokenizer(vocabulary, words=False, engine=TOKENIZERS)
    draw = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"

    def words(count: int, length: int) -> list[str]:
        made = ["".join(draw.choices(letters, k=length)) for _ in range(count)]
        return [" ".join(made[i:i + 10]) for i in range(0, count, 10)]

    def cached() -> int:
        return kernel._fast.params[unigram_kernel.WORDS_CACHED]

    for lines, emptied_below in ((CORPUS + words(20000, 30), 20000),  # the pool fills
                                 (CORPUS + words(40000, 7) + CORPUS,  # the table fills
                                  unigram_kernel.WORD_CACHE_SLOTS // 2)):
        assert kernel.lines_to_ids(lines) == reference.lines_to_ids(lines)
        assert 0 < cached() < emptied_below


def test_the_unigram_kernel_refuses_the_lines_the_library_refuses(files):
    """Without an unknown token: a line with a character no piece covers is
    refused by both, every other line encoded alike; through the pipeline's
    tokenizer, the library's one-line error."""
    vocabulary = load_tokenizer_json(str(files["unigram-no-unk"]))
    kernel = fast_engine(vocabulary).ids
    library = vocabulary.tokenizer()
    refused = 0
    for line in CORPUS:
        try:
            expected = library.encode(line, add_special_tokens=False).ids
        except Exception:  # noqa: BLE001 - the library raises Exception itself
            refused += 1
            with pytest.raises(Unencodable):
                kernel([line])
        else:
            assert kernel([line]) == [expected]
    assert 0 < refused < len(CORPUS) / 2
    unknown = next(line for line in CORPUS if line and "\u4e2d" in line)
    tokenizer = JsonTokenizer(vocabulary, words=False, engine=UNIGRAM)
    with pytest.raises(ValueError, match="cannot encode the line"):
        tokenizer.lines_to_ids(["ok", unknown])
    assert tokenizer.compact_lines(["ok", unknown]) is None  # the document goes line by line
    with pytest.raises(ValueError, match="cannot encode the line"):
        DocumentTokenizer.of(tokenizer)(["ok", unknown])


@pytest.mark.parametrize("family", ["bert", "bert-cased"])
def test_the_wordpiece_kernel_gives_the_librarys_ids_on_every_line(files, family):
    """A BERT WordPiece tokenizer.json (BertWordPieceTokenizer's, uncased and
    cased) on this project's compiled FullTokenizer."""
    vocabulary = load_tokenizer_json(str(files[family]))
    kernel = JsonTokenizer(vocabulary, words=False, engine=WORDPIECE)
    assert kernel._fast is not None
    reference = JsonTokenizer(vocabulary, words=False, engine=TOKENIZERS)
    assert kernel.lines_to_ids(CORPUS) == reference.lines_to_ids(CORPUS)


def _documents(lines: list[str]) -> list[list[str]]:
    """The lines as documents of 1-5 lines, as Tokenize gets them."""
    draw, documents, start = random.Random(0), [], 0
    while start < len(lines):
        size = draw.randint(1, 5)
        documents.append(lines[start:start + size])
        start += size
    return documents


@pytest.mark.parametrize("family", [*FAST_FAMILIES, "bert", *UNIGRAM_FAMILIES])
def test_a_fast_engines_document_call_writes_the_librarys_ids(files, family):
    """Tokenize's one call a document on the faster engine (no list of ids
    made: fastokens' flat buffers, the kernels' own) against the library's
    ids line by line, compacted and counted: every document takes the call."""
    vocabulary = load_tokenizer_json(str(files[family]))
    fast = JsonTokenizer(vocabulary, words=False, engine=fast_engine(vocabulary).name)
    reference = JsonTokenizer(vocabulary, words=False, engine=TOKENIZERS)
    assert fast.compact_lines is not None and reference.compact_lines is None
    documents = _documents(CORPUS)
    assert all(fast.compact_lines(document) is not None for document in documents)
    whole, line_by_line = DocumentTokenizer.of(fast), DocumentTokenizer.of(reference)
    assert [whole(document) for document in documents] == list(map(line_by_line, documents))


def test_a_long_document_leaves_the_unigram_kernels_buffers_a_lines_size(files):
    """Past WHOLE_DOCUMENT_CHARACTERS a document's lines go one by one (the
    buffers live as long as the worker), to the library's ids."""
    vocabulary = load_tokenizer_json(str(files["xlmr-unigram"]))
    kernel = fast_engine(vocabulary).ids
    line = " ".join(TRAINING[:40])
    lines = [line] * (WHOLE_DOCUMENT_CHARACTERS // len(line) + 1)
    assert kernel.compact_lines(lines, unk=vocabulary.unk_id) is None
    reference = JsonTokenizer(vocabulary, words=False, engine=TOKENIZERS)
    assert kernel(lines) == reference.lines_to_ids(lines)
    assert kernel._capacity < 2 * len(line)


def test_the_drivers_sample_is_tokenized_on_the_runs_engine(files, tmp_path, monkeypatch):
    """The codebook's and the disk estimate's sample is tokenized as the
    workers tokenize, on the engine the run chose: its documents never pass
    the library (which took ~0.4 CPU s more for the codebook's 1 MB)."""
    corpus = DATA / "en_ewt-ud-test.paragraphs.txt"
    config, beam_args = parse_args([f"--input_file={corpus}",
                                    f"--tokenizer_file={files['neox-nfc']}",
                                    f"--output_dir={tmp_path / 'out'}", "--recipe=roberta"])
    prepared = prepare(config, beam_args)
    assert prepared.stages.tokenizer.engine == FASTOKENS
    library = []
    monkeypatch.setattr(JsonTokenizer, "lines_to_ids",
                        lambda self, lines: library.append(lines) or [])
    documents, _ = sample_documents(config, prepared.stages, prepared.vocab, prepared.inputs,
                                    1 << 20)
    assert len(documents) > 100 and library == []


def test_a_run_that_groups_words_takes_the_reference(files, tmp_path):
    corpus = DATA / "en_ewt-ud-test.paragraphs.txt"
    manifest = run([f"--input_file={corpus}", f"--tokenizer_file={files['roberta']}",
                    f"--output_dir={tmp_path / 'out'}", "--dupe_factor=1", "--recipe=roberta",
                    "--masking=static", "--do_whole_word_mask"])
    assert manifest["tokenizer_engine"] == TOKENIZERS


def _shards(out: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("part-*"))}


@pytest.mark.parametrize("family", [*FAST_FAMILIES, "bert", "xlmr-unigram", "xlmr-precompiled"])
def test_the_fast_engine_writes_the_reference_runs_bytes(files, tmp_path, family):
    # the character map rewrites Chinese text's full-width punctuation and digits
    corpus = DATA / ("zh_gsd-ud-test.paragraphs.txt" if family == "xlmr-precompiled"
                     else "en_ewt-ud-test.paragraphs.txt")
    flags = [f"--input_file={corpus}", f"--tokenizer_file={files[family]}",
             "--recipe=roberta", "--num_shards=2", "--dupe_factor=2"]
    fast = run([*flags, f"--output_dir={tmp_path / 'fast'}"])
    reference = run([*flags, f"--output_dir={tmp_path / 'reference'}",
                     "--tokenizer_engine=tokenizers"])
    engine = {"bert": WORDPIECE, "xlmr-unigram": UNIGRAM,
              "xlmr-precompiled": UNIGRAM}.get(family, FASTOKENS)
    assert (fast["tokenizer_engine"], reference["tokenizer_engine"]) == (engine, TOKENIZERS)
    assert fast["flags"]["tokenizer_engine"] == "auto"
    assert _shards(tmp_path / "fast") == _shards(tmp_path / "reference") != {}


def test_a_planted_difference_in_the_wordpiece_kernel_sends_the_run_to_the_library(
        files, tmp_path, monkeypatch, capsys):
    """The kernel told the wrong case for an uncased file: the check finds a
    line it encodes otherwise, and the run takes the library, saying so."""
    real = engines.wordpiece_case
    monkeypatch.setattr(engines, "wordpiece_case", lambda data: not real(data))
    corpus = DATA / "en_ewt-ud-test.paragraphs.txt"
    assert main([f"--input_file={corpus}", f"--tokenizer_file={files['bert']}",
                 f"--output_dir={tmp_path / 'out'}", "--dupe_factor=1"]) in (0, None)
    assert "warning: wordpiece encodes a line of this input unlike tokenizers (" in (
        capsys.readouterr().err)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["tokenizer_engine"] == TOKENIZERS


def test_a_planted_difference_in_the_unigram_kernel_sends_the_run_to_the_library(
        files, tmp_path, monkeypatch, capsys):
    """The scores of two pieces swapped in the kernel's copy only: words that
    took one segment otherwise, and the run takes the library, saying so."""
    real = unigram_engine.UnigramKernel.of

    def swapped(tokenizer_json: str):
        spec = json.loads(tokenizer_json)
        vocab = spec["model"]["vocab"]
        first, last = len(SPECIAL_TOKENS), len(vocab) - 1
        vocab[first][1], vocab[last][1] = vocab[last][1], vocab[first][1]
        return real(json.dumps(spec))
    monkeypatch.setattr(unigram_engine.UnigramKernel, "of", swapped)
    corpus = DATA / "en_ewt-ud-test.paragraphs.txt"
    assert main([f"--input_file={corpus}", f"--tokenizer_file={files['xlmr-unigram']}",
                 f"--output_dir={tmp_path / 'out'}", "--dupe_factor=1"]) in (0, None)
    assert "warning: unigram encodes a line of this input unlike tokenizers (" in (
        capsys.readouterr().err)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["tokenizer_engine"] == TOKENIZERS


def test_a_mixture_of_text_and_jsonl_sources_takes_the_fast_engine(files, tmp_path):
    """Each source's lines are checked (its share of them), read as it says."""
    jsonl = tmp_path / "web.jsonl"
    jsonl.write_text("".join(json.dumps({"body": line}) + "\n"
                             for line in _lines("zh_gsd-ud-test.paragraphs.txt") if line.strip()),
                     encoding="utf-8")
    mixture = tmp_path / "mixture.json"
    mixture.write_text(json.dumps({"sources": [
        {"name": "treebank", "input_file": str(DATA / "en_ewt-ud-test.paragraphs.txt")},
        {"name": "web", "input_file": str(jsonl), "input_format": "jsonl",
         "text_field": "body"}]}))
    flags = [f"--mixture={mixture}", f"--tokenizer_file={files['roberta']}", "--recipe=roberta",
             "--num_shards=2"]
    fast = run([*flags, f"--output_dir={tmp_path / 'fast'}"])
    reference = run([*flags, f"--output_dir={tmp_path / 'reference'}",
                     "--tokenizer_engine=tokenizers"])
    assert (fast["tokenizer_engine"], reference["tokenizer_engine"]) == (FASTOKENS, TOKENIZERS)
    assert _shards(tmp_path / "fast") == _shards(tmp_path / "reference") != {}


@pytest.mark.parametrize("input_format", ["gzip", "parquet", "wikipedia", "warc"])
def test_inputs_read_whole_are_checked_from_their_first_documents(files, tmp_path,
                                                                  input_format):
    """Compressed text, Parquet, a dump and WET files, whose windows cannot be
    cut: the check reads the first documents of their files as the run reads
    them, and the fast engine writes the reference run's bytes."""
    pages = (DATA / "en_ewt-ud-test.paragraphs.txt").read_text(encoding="utf-8").split("\n\n")
    if input_format == "gzip":
        corpus = tmp_path / "treebank.txt.gz"
        corpus.write_bytes(gzip.compress((DATA / "en_ewt-ud-test.paragraphs.txt").read_bytes()))
    elif input_format == "parquet":
        import pyarrow
        import pyarrow.parquet as pq

        corpus = tmp_path / "treebank.parquet"
        pq.write_table(pyarrow.table({"text": pages}), corpus)
    elif input_format == "wikipedia":
        corpus = DATA / "enwiki-excerpt-small.xml.bz2"
    else:
        corpus = write_wet(tmp_path / "crawl.warc.wet.gz",
                           [(f"https://example.org/{n}", page) for n, page in enumerate(pages)])
    flags = [f"--input_file={corpus}", f"--tokenizer_file={files['roberta']}",
             "--recipe=roberta", "--dupe_factor=1"]
    fast = run([*flags, f"--output_dir={tmp_path / 'fast'}"])
    reference = run([*flags, f"--output_dir={tmp_path / 'reference'}",
                     "--tokenizer_engine=tokenizers"])
    assert (fast["tokenizer_engine"], reference["tokenizer_engine"]) == (FASTOKENS, TOKENIZERS)
    assert _shards(tmp_path / "fast") == _shards(tmp_path / "reference") != {}


@pytest.mark.parametrize("family", ["roberta", "neox-nfc"])
def test_a_planted_difference_sends_the_run_to_the_reference(files, tmp_path, monkeypatch,
                                                             capsys, family):
    """Two merges swapped in fastokens' copy only (the first and the last):
    words that took the first merge split otherwise,
    the check finds one, and the whole run takes the reference, saying so."""
    corpus = DATA / "en_ewt-ud-test.paragraphs.txt"
    real = engines.fast_engine_json

    def swapped(data: bytes) -> str | None:
        spec = json.loads(real(data))
        merges = spec["model"]["merges"]
        merges[0], merges[-1] = merges[-1], merges[0]  # the first merge, tried last
        return json.dumps(spec)
    monkeypatch.setattr(engines, "fast_engine_json", swapped)
    flags = [f"--input_file={corpus}", f"--tokenizer_file={files[family]}",
             "--recipe=roberta", "--num_shards=2", "--dupe_factor=1"]
    assert main([*flags, f"--output_dir={tmp_path / 'planted'}"]) in (0, None)
    warning = capsys.readouterr().err
    assert "warning: fastokens encodes a line of this input unlike tokenizers (" in warning
    manifest = json.loads((tmp_path / "planted" / "manifest.json").read_text())
    assert manifest["tokenizer_engine"] == TOKENIZERS
    assert any("fastokens encodes a line" in w for w in manifest["warnings"])
    monkeypatch.setattr(engines, "fast_engine_json", real)
    run([*flags, f"--output_dir={tmp_path / 'reference'}", "--tokenizer_engine=tokenizers"])
    assert _shards(tmp_path / "planted") == _shards(tmp_path / "reference")


def test_the_engine_flag_without_a_tokenizer_file_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
              f"--output_dir={tmp_path / 'out'}", "--tokenizer_engine=tokenizers"])
    error = capsys.readouterr().err.strip()
    assert "--tokenizer_engine applies to --tokenizer_file" in error and "\n" not in error
