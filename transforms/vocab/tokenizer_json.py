"""Learning a byte-level BPE tokenizer.json (`create-vocab
--tokenization=ByteLevelBPE`): RoBERTa's and ModernBERT's kind, by the
`tokenizers` library's own trainer, from the same stable sample of lines the
SentencePiece trainer gets (transforms.vocab.sentencepiece.chosen_lines).

The file carries a named family's special tokens and framing, so that the
pipeline (`--tokenizer_file`) and `transformers` read it as that family's:
roberta: <s>=0 <pad>=1 </s>=2 <unk>=3 <mask>=4, `<s> A </s></s> B </s>`
(RobertaProcessing); bert: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4,
`[CLS] A [SEP] B [SEP]` with B of type 1 (ModernBERT's template). The
trainer is deterministic for a given sample and order: the same lines give
the same bytes on every runner.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from bert_pretraining_data.transforms.vocab.wordpiece import TokenizationStats

# Special tokens by family, in id order; the framing's tokens are among them.
SPECIAL_TOKENS = {
    "roberta": ("<s>", "<pad>", "</s>", "<unk>", "<mask>"),
    "bert": ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
}
MIN_FREQUENCY = 2  # a merge seen once is noise (the library's ByteLevelBPETokenizer default)
BYTE_ALPHABET = 256


class TokenizerLearningError(ValueError):
    """A setting the trainer cannot use; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class ByteLevelBpeLearning:
    vocab_size: int = 50265  # RoBERTa's
    special_tokens: str = "roberta"
    do_lower_case: bool = False  # RoBERTa and ModernBERT are cased
    input_sentence_size: int = 10_000_000

    def __post_init__(self) -> None:
        reserved = BYTE_ALPHABET + len(SPECIAL_TOKENS.get(self.special_tokens, ()))
        checks = [
            (self.special_tokens in SPECIAL_TOKENS,
             f"special_tokens must be one of {', '.join(SPECIAL_TOKENS)}, got "
             f"{self.special_tokens!r}"),
            (self.vocab_size > reserved,
             f"vocab_size must exceed the {reserved} byte and special tokens, got "
             f"{self.vocab_size}"),
            (self.input_sentence_size >= 1,
             f"input_sentence_size must be at least 1, got {self.input_sentence_size}"),
        ]
        for ok, message in checks:
            if not ok:
                raise TokenizerLearningError(message)


def _post_processor(family: str):
    from tokenizers import processors

    if family == "roberta":
        return processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                            add_prefix_space=False)
    return processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])


def train_byte_level_bpe(lines: Sequence[str], config: ByteLevelBpeLearning) -> bytes:
    """The library's BPE trainer over these lines, byte-level as GPT-2's and
    RoBERTa's; the tokenizer.json's bytes, pretty-printed as `save` writes."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if not lines:
        raise TokenizerLearningError(
            "the corpus has no training line (is --held_out_fraction near 1, or the input "
            "empty?)")
    specials = SPECIAL_TOKENS[config.special_tokens]
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    if config.do_lower_case:
        tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size, min_frequency=MIN_FREQUENCY, show_progress=False,
        special_tokens=list(specials), initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(lines, trainer=trainer, length=len(lines))
    tokenizer.post_processor = _post_processor(config.special_tokens)
    return tokenizer.to_str(pretty=True).encode("utf-8")


def tokenizer_line_stats(tokenizer, lines: Iterable[str]) -> TokenizationStats:
    """How a tokenizer.json segments lines as the pipeline encodes them (each
    alone, no special tokens): whitespace-separated words, tokens, unknown
    tokens, and characters (those inside an unknown token not covered)."""
    lines = list(lines)
    unk = tokenizer.token_to_id("<unk>")
    unk = tokenizer.token_to_id("[UNK]") if unk is None else unk
    stats = TokenizationStats()
    for line, encoding in zip(lines, tokenizer.encode_batch(lines, add_special_tokens=False)):
        unknown = [offsets for token_id, offsets in zip(encoding.ids, encoding.offsets)
                   if token_id == unk]
        characters = sum(not c.isspace() for c in line)
        stats += TokenizationStats(
            distinct_words=0, words=len(line.split()), tokens=len(encoding.ids),
            unk_tokens=len(unknown), characters=characters,
            covered_characters=characters - sum(
                sum(not c.isspace() for c in line[start:end]) for start, end in unknown))
    return stats
