"""tokenizer.json files of the families encoders ship, built here as the real
ones are (their normalizer, pre-tokenizer and model sections; no real file
can be downloaded here), trained on a corpus: the bench's and the engine
tests' cases (bench/README.md, "Tokenizer engines").

    python bench/tokenizer_families.py OUT_DIR [--corpus FILE] [--vocab_size N]

writes neox-nfc.json (GPT-NeoX's and OLMo's NFC byte-level BPE: ModernBERT's
family), llama3-split.json (Llama-3's Split then ByteLevel), nfc-lowercase.json,
xlmr-unigram.json (NFKC, Metaspace, Unigram), xlmr-precompiled.json (a
SentencePiece Unigram trained by `sentencepiece`, then converted as
`transformers`' XLMRobertaConverter converts XLM-R's: its Precompiled character
map, which is what published XLM-R-family files carry) and gemma-bpe.json (a SentencePiece BPE with byte fallback converted as
GemmaConverter converts Gemma's: mmBERT's tokenizer, and Llama-2's kind).
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
from typing import Iterator, Sequence

import sentencepiece

from tokenizers import (Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)

# Llama-3's pre-tokenizer regex (its tokenizer.json's Split pattern).
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_TOKENS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]


def _framed(tokenizer: Tokenizer, path: pathlib.Path) -> Tokenizer:
    """[CLS] A [SEP] by a TemplateProcessing, saved to `path`."""
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tokenizer.token_to_id("[CLS]")),
                        ("[SEP]", tokenizer.token_to_id("[SEP]"))])
    tokenizer.save(str(path))
    return tokenizer


def byte_level_bpe(lines: Sequence[str], path: pathlib.Path, *, normalizer=None,
                   split: str | None = None, vocab_size: int = 4000) -> Tokenizer:
    """A byte-level BPE: GPT-NeoX's and OLMo's NFC normalizer
    (`normalizer=normalizers.NFC()`), or Llama-3's Split pre-tokenizer then a
    ByteLevel without its own regex (`split=LLAMA3_SPLIT`)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = (pre_tokenizers.ByteLevel(add_prefix_space=False) if split is None
                               else pre_tokenizers.Sequence([
                                   pre_tokenizers.Split(Regex(split), behavior="isolated"),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                            use_regex=False)]))
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(list(lines), trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS,
        show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return _framed(tokenizer, path)


def unigram(lines: Sequence[str], path: pathlib.Path, vocab_size: int = 4000,
            unk_token: str | None = "[UNK]", normalizer=None, pre_tokenizer=None) -> Tokenizer:
    """XLM-R's kind as a tokenizer.json: NFKC, Metaspace, a Unigram with an
    unknown token (`unk_token=None`: none, so a character it never saw
    cannot be encoded); another `normalizer` or `pre_tokenizer` where given
    (`pre_tokenizer=False`: none)."""
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizer or normalizers.NFKC()
    if pre_tokenizer is not False:
        tokenizer.pre_tokenizer = pre_tokenizer or pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.train_from_iterator(list(lines), trainers.UnigramTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, unk_token=unk_token,
        show_progress=False))
    return _framed(tokenizer, path)


def _protobuf_fields(message: bytes) -> Iterator[tuple[int, bytes | int]]:
    """A protobuf message's (field number, value) pairs, read from the wire
    format (the `.model`'s generated module needs a newer protobuf than
    TensorFlow's)."""
    def varint(at: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = message[at]
            value, shift, at = value | (byte & 0x7F) << shift, shift + 7, at + 1
            if byte < 0x80:
                return value, at
    at = 0
    while at < len(message):
        key, at = varint(at)
        kind = key & 7
        if kind == 0:
            value, at = varint(at)
        elif kind == 2:
            size, at = varint(at)
            value, at = message[at:at + size], at + size
        else:  # fixed 64 or 32 bits
            size = 8 if kind == 1 else 4
            value, at = message[at:at + size], at + size
        yield key >> 3, value


def precompiled_charsmap(model: bytes) -> bytes:
    """A serialized SentencePiece model's normalizer_spec.precompiled_charsmap."""
    normalizer_spec = next(value for number, value in _protobuf_fields(model) if number == 3)
    return next(value for number, value in _protobuf_fields(normalizer_spec) if number == 2)


def sentencepiece_unigram(lines: Sequence[str], path: pathlib.Path, vocab_size: int = 4000,
                          normalizer: str = "transformers", framing: str = "xlmr") -> Tokenizer:
    """A SentencePiece Unigram model (its default nmt_nfkc rules) trained on
    the lines, converted as `transformers`' XLMRobertaConverter does: <s>,
    <pad>, </s>, <unk>, the model's pieces after its own three, <mask>; the
    Precompiled character map, then (`normalizer="transformers"`, today's
    converter) Strip on the right and runs of spaces made one U+2581, or
    (`"2020"`, the converter that made XLM-R's published file) runs of
    spaces made one space; a Metaspace prepending always. `framing="bert"`
    puts BERT's special tokens and framing in XLM-R's place, for runs with
    the original's flags."""
    model = _sentencepiece_model(lines, vocab_size, model_type="unigram")
    pieces = _pieces(model)
    if framing == "xlmr":
        vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), *pieces,
                 ("<mask>", 0.0)]
        unk = 3
    else:
        vocab, unk = [(token, 0.0) for token in SPECIAL_TOKENS] + pieces, 0  # [UNK] first
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=unk, byte_fallback=False))
    spaces = ([normalizers.Strip(left=False, right=True), normalizers.Replace(Regex(" {2,}"), "▁")]
              if normalizer == "transformers" else [normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(precompiled_charsmap(model)), *spaces])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    if framing != "xlmr":
        tokenizer.add_special_tokens(SPECIAL_TOKENS)
        return _framed(tokenizer, path)
    tokenizer.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    tokenizer.save(str(path))
    return tokenizer


def _sentencepiece_model(lines: Sequence[str], vocab_size: int, **settings) -> bytes:
    """A SentencePiece model trained on the lines, serialized."""
    with tempfile.TemporaryDirectory() as scratch:
        prefix = f"{scratch}/model"
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=vocab_size,
            character_coverage=1.0, hard_vocab_limit=False, minloglevel=2,
            **settings)  # hard_vocab_limit: a small corpus may not hold vocab_size pieces
        return pathlib.Path(f"{prefix}.model").read_bytes()


def _pieces(model: bytes) -> list[tuple[str, float]]:
    """A serialized model's pieces and scores after its own <unk>, <s> and
    </s>, which a converted file replaces with its special tokens."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    return [(processor.id_to_piece(i), processor.get_score(i))
            for i in range(3, processor.get_piece_size())]


def sentencepiece_bpe(lines: Sequence[str], path: pathlib.Path, vocab_size: int = 4000,
                      converter: str = "gemma") -> Tokenizer:
    """A SentencePiece BPE with byte fallback and digits split one by one
    (Gemma's and Llama-2's settings; Gemma's is mmBERT's tokenizer) trained
    on the lines, converted as `transformers` converts them: the merges from
    the pieces and their scores (its generate_merges), byte fallback, and
    (`converter="gemma"`, GemmaConverter) spaces made U+2581 by a Replace
    before a Split on spaces, which then finds none, or (`"llama2"`, the
    legacy LlamaConverter) U+2581 prepended and spaces replaced, no
    pre-tokenizer. BERT's special tokens take the model's three."""
    model = _sentencepiece_model(lines, vocab_size, model_type="bpe", byte_fallback=True,
                                 split_digits=True, normalization_rule_name="identity")
    scores = dict(_pieces(model))
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *scores])}
    merges = sorted(((piece[:cut], piece[cut:], score) for piece, score in scores.items()
                     for cut in range(1, len(piece))
                     if piece[:cut] in vocab and piece[cut:] in vocab),
                    key=lambda merge: (merge[2], len(merge[0]), len(merge[1])), reverse=True)
    tokenizer = Tokenizer(models.BPE(vocab, [(left, right) for left, right, _ in merges],
                                     unk_token="[UNK]", fuse_unk=True, byte_fallback=True))
    if converter == "gemma":
        tokenizer.normalizer = normalizers.Replace(" ", "▁")
        tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    else:
        tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                                     normalizers.Replace(" ", "▁")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                           decoders.Fuse()])
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    return _framed(tokenizer, path)


FAMILIES = {
    "neox-nfc": lambda lines, path, size: byte_level_bpe(
        lines, path, normalizer=normalizers.NFC(), vocab_size=size),
    "llama3-split": lambda lines, path, size: byte_level_bpe(
        lines, path, split=LLAMA3_SPLIT, vocab_size=size),
    "nfc-lowercase": lambda lines, path, size: byte_level_bpe(
        lines, path, normalizer=normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()]),
        vocab_size=size),
    "xlmr-unigram": lambda lines, path, size: unigram(lines, path, vocab_size=size),
    "xlmr-precompiled": lambda lines, path, size: sentencepiece_unigram(
        lines, path, vocab_size=size, framing="bert"),
    "gemma-bpe": lambda lines, path, size: sentencepiece_bpe(lines, path, vocab_size=size),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--corpus", type=pathlib.Path,
                        default=pathlib.Path(__file__).parent.parent / "tests" / "data"
                        / "wikitext2_valid.raw.txt")
    parser.add_argument("--vocab_size", type=int, default=30_000)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [line for line in args.corpus.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    for name, build in FAMILIES.items():
        build(lines, args.out / f"{name}.json", args.vocab_size)
        print(args.out / f"{name}.json")


if __name__ == "__main__":
    main()
