"""Learning a SentencePiece model from a corpus on Beam (`create-vocab
--tokenization=SentencePiece`): a sample of its sentences, Google's trainer
(the library spm_train wraps) on one worker, with ALBERT's settings.

The trainer sees at most `input_sentence_size` sentences, as spm_train would:
those of smallest stable hash, so every runner gives the same sentences in
the same order and the trainer, seeded, on fixed threads, the same model
bytes. Sentences are preprocessed as ALBERT's script hands them to the
tokenizer, so pieces are learned from the text they will segment. One change
from ALBERT's spm_train command: a corpus too small for `--vocab_size` gives
a smaller model and says so (`hard_vocab_limit` false), where spm_train
would fail a Dataflow job after the corpus was read.
"""

from __future__ import annotations

import dataclasses
import io
from typing import Iterable, Sequence

import sentencepiece

from bert_pretraining_data.transforms.randomness import STABLE_HASH_RANGE, stable_hash
from bert_pretraining_data.transforms.tokenize.sentencepiece_text import (SentencePieceTokenizer,
                                                                          preprocess_text)
from bert_pretraining_data.transforms.vocab.wordpiece import TokenizationStats

MODEL_TYPES = ("unigram", "bpe")
ALBERT_SETTINGS = {
    "pad_id": 0, "unk_id": 1, "bos_id": -1, "eos_id": -1,
    "control_symbols": ["[CLS]", "[SEP]", "[MASK]"],
    "user_defined_symbols": ["(", ")", '"', "-", ".", "–", "£", "€"],
    "shuffle_input_sentence": True,
}
# The trainer's results depend on its thread count (it splits the sentences
# among threads): fixed, at spm_train's default, so every machine agrees.
TRAINER_THREADS = 16
TRAINER_SEED = 12345
SAMPLE_MARGIN = 1.05  # a threshold this much above the share, so that enough arrive


class SentencePieceLearningError(ValueError):
    """A setting the trainer cannot use; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class SentencePieceLearning:
    vocab_size: int = 30000
    model_type: str = "unigram"
    character_coverage: float = 0.99995
    input_sentence_size: int = 10_000_000
    do_lower_case: bool = True

    def __post_init__(self) -> None:
        checks = [
            (self.model_type in MODEL_TYPES,
             f"model_type must be one of {', '.join(MODEL_TYPES)}, got {self.model_type!r}"),
            (self.vocab_size > len(ALBERT_SETTINGS["control_symbols"])
             + len(ALBERT_SETTINGS["user_defined_symbols"]) + 2,
             f"vocab_size must exceed the 13 reserved pieces, got {self.vocab_size}"),
            (0 < self.character_coverage <= 1,
             f"character_coverage must be in (0, 1], got {self.character_coverage}"),
            (self.input_sentence_size >= 1,
             f"input_sentence_size must be at least 1, got {self.input_sentence_size}"),
        ]
        for ok, message in checks:
            if not ok:
                raise SentencePieceLearningError(message)

    def trainer_settings(self) -> dict[str, object]:
        """Everything the trainer is given: ALBERT's settings and these."""
        return dict(ALBERT_SETTINGS, vocab_size=self.vocab_size, model_type=self.model_type,
                    character_coverage=self.character_coverage,
                    input_sentence_size=self.input_sentence_size, hard_vocab_limit=False,
                    num_threads=TRAINER_THREADS)


def sample_key(line: str) -> int:
    """A sentence's stable rank: the trainer's sample is the smallest keys."""
    return stable_hash("sentencepiece-sample", line)


def sample_threshold(total: int, size: int) -> int:
    """Keep a sentence whose key is below this: all of them when `size`
    covers the corpus, else a little more than the share `size / total`."""
    if total <= size:
        return STABLE_HASH_RANGE
    return min(STABLE_HASH_RANGE, int(STABLE_HASH_RANGE * SAMPLE_MARGIN * size / total))


def chosen_lines(sample: Iterable[str], size: int) -> list[str]:
    """The `size` lines of `sample` with the smallest keys, in key order
    (ties by text): the trainer's input, the same on every runner."""
    return [line for _, line in sorted((sample_key(line), line) for line in sample)[:size]]


def train_model(lines: Sequence[str], config: SentencePieceLearning) -> bytes:
    """The trainer on these lines, preprocessed as ALBERT's script does; the
    serialized model."""
    if not lines:
        raise SentencePieceLearningError(
            "the corpus has no training sentence (is --held_out_fraction near 1, or the "
            "input empty?)")
    sentencepiece.set_random_generator_seed(TRAINER_SEED)
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=(preprocess_text(line, lower=config.do_lower_case)
                           for line in lines),
        model_writer=model, minloglevel=2, **config.trainer_settings())
    return model.getvalue()


def vocab_text(model: bytes) -> str:
    """The .vocab spm_train writes beside a model: piece, tab, score, per id."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    return "".join(f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}\n"
                   for i in range(processor.get_piece_size()))


def line_stats(tokenizer: SentencePieceTokenizer, lines: Iterable[str]) -> TokenizationStats:
    """How the model segments lines as the pipeline would: words (separated
    by whitespace after `preprocess_text`), pieces, unknown pieces, and
    characters (those in an unknown piece are not covered)."""
    unk = tokenizer.vocabulary.unk_id
    to_id = tokenizer.convert_tokens_to_ids
    stats = TokenizationStats()
    for line in lines:
        text = tokenizer.preprocess(line)
        pieces = tokenizer.tokenize(line)
        unknown = [p for p, i in zip(pieces, to_id(pieces)) if i == unk]
        characters = len(text.replace(" ", ""))
        stats += TokenizationStats(
            distinct_words=0, words=len(text.split()), tokens=len(pieces),
            unk_tokens=len(unknown), characters=characters,
            covered_characters=characters - sum(len(p.lstrip("▁")) for p in unknown))
    return stats


def in_sample(line: str, total: int, size: int) -> bool:
    """Whether a line is in the sample of `size` of a corpus of `total`
    sentences: its key is below sample_threshold. The count, not the
    threshold, is what a runner passes along: the threshold reaches 2^64,
    beyond the signed 64 bits of the coder Beam gives an int."""
    return sample_key(line) < sample_threshold(total, size)


