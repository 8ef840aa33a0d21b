#!/usr/bin/env python
"""Train the SentencePiece model the tests use (tests/data/sentencepiece-8k.model).

Google's `sentencepiece` trainer (the library spm_train wraps), run directly,
not through this project, so that the tests of the project's SentencePiece
code are not checked against its own output: a unigram model of 8,000 pieces
with ALBERT's settings (its README's spm_train command: `<pad>` 0, `<unk>` 1,
no `<s>`/`</s>`, control symbols `[CLS] [SEP] [MASK]`, user-defined
`( ) " - . – £ €`, character coverage 0.99995), learned from real text of
tests/data: WikiText-2 valid (English, pre-tokenized), UD English EWT dev
(web text) and UD Chinese GSD test (Chinese Wikipedia sentences).

One addition to ALBERT's settings: the user-defined pieces `0,` ... `9,`.
The anchors' `encode_pieces` re-encodes every piece that ends in a digit and
a comma; no such piece is learned from a megabyte of text (commas are pieces
of their own), so without these the tests would never meet that rule.

    python tests/golden/make_sentencepiece_model.py
"""

from __future__ import annotations

import hashlib
import io
import pathlib

import sentencepiece as spm

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
TEXTS = ("wikitext2_valid.txt", "en_ewt-ud-dev.sentences.txt", "zh_gsd-ud-test.sentences.txt")
NAME = "sentencepiece-8k"
SEED = 12345
ALBERT_USER_DEFINED = ["(", ")", '"', "-", ".", "–", "£", "€"]


def main() -> None:
    sentences = [line.strip() for name in TEXTS
                 for line in (DATA / name).read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    spm.set_random_generator_seed(SEED)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, model_type="unigram",
        vocab_size=8000, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        user_defined_symbols=ALBERT_USER_DEFINED + [f"{d}," for d in range(10)],
        shuffle_input_sentence=True, input_sentence_size=10_000_000,
        character_coverage=0.99995, num_threads=1, minloglevel=2)
    data = model.getvalue()
    (DATA / f"{NAME}.model").write_bytes(data)
    processor = spm.SentencePieceProcessor(model_proto=data)
    vocab = "".join(f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}\n"
                    for i in range(processor.get_piece_size()))
    (DATA / f"{NAME}.vocab").write_text(vocab, encoding="utf-8")
    print(f"{NAME}.model: {len(sentences):,} sentences, {processor.get_piece_size():,} pieces, "
          f"{len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
