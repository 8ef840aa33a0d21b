"""tokenizer.json files made with the `tokenizers` library directly, as a user
makes them (not through create-vocab): the tokenizers the --tokenizer_file
tests run on."""

from __future__ import annotations

import pathlib
from typing import Sequence

from tokenizers import ByteLevelBPETokenizer, Tokenizer, processors
from tokenizers.implementations import BertWordPieceTokenizer


def roberta_bpe(lines: Sequence[str], path: pathlib.Path, vocab_size: int = 4000) -> Tokenizer:
    """A RoBERTa-style byte-level BPE: <s>=0 <pad>=1 </s>=2 <unk>=3 <mask>=4,
    RobertaProcessing."""
    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(list(lines), vocab_size=vocab_size, min_frequency=2,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                            show_progress=False)
    bpe.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    bpe.save(str(path))
    return Tokenizer.from_file(str(path))


def modernbert_bpe(lines: Sequence[str], path: pathlib.Path, vocab_size: int = 4000
                   ) -> Tokenizer:
    """A ModernBERT-style byte-level BPE: [CLS] A [SEP] by a TemplateProcessing,
    [PAD] [MASK] [UNK] as added special tokens after the learned ones."""
    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(list(lines), vocab_size=vocab_size, min_frequency=2,
                            show_progress=False)
    size = bpe.get_vocab_size()
    bpe.add_special_tokens(["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"])
    bpe.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", size + 1), ("[SEP]", size + 2)])
    bpe.save(str(path))
    return Tokenizer.from_file(str(path))


def bert_wordpiece(vocab_txt: pathlib.Path, path: pathlib.Path, lowercase: bool = True
                   ) -> Tokenizer:
    """The tokenizer.json of a BERT vocab.txt (uncased, or cased), as
    `transformers` converts one: BertNormalizer, BertPreTokenizer, WordPiece,
    BertProcessing."""
    BertWordPieceTokenizer(str(vocab_txt), lowercase=lowercase).save(str(path))
    return Tokenizer.from_file(str(path))

