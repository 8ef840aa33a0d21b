"""tokenizer.json files of the families encoders ship, built here as the real
ones are (their normalizer, pre-tokenizer and model sections; no real file
can be downloaded here), trained on a corpus: the bench's and the engine
tests' cases (bench/README.md, "Tokenizer engines").

    python bench/tokenizer_families.py OUT_DIR [--corpus FILE] [--vocab_size N]

writes neox-nfc.json (GPT-NeoX's and OLMo's NFC byte-level BPE: ModernBERT's
family), llama3-split.json (Llama-3's Split then ByteLevel), nfc-lowercase.json
and xlmr-unigram.json (NFKC, Metaspace, Unigram: XLM-R's and mmBERT's kind).
"""

from __future__ import annotations

import argparse
import pathlib
from typing import Sequence

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


FAMILIES = {
    "neox-nfc": lambda lines, path, size: byte_level_bpe(
        lines, path, normalizer=normalizers.NFC(), vocab_size=size),
    "llama3-split": lambda lines, path, size: byte_level_bpe(
        lines, path, split=LLAMA3_SPLIT, vocab_size=size),
    "nfc-lowercase": lambda lines, path, size: byte_level_bpe(
        lines, path, normalizer=normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()]),
        vocab_size=size),
    "xlmr-unigram": lambda lines, path, size: unigram(lines, path, vocab_size=size),
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
