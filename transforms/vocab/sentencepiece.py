"""Learning a SentencePiece model from a corpus on Beam (`create-vocab
--tokenization=SentencePiece`): a sample of its sentences, Google's trainer
(the library spm_train wraps) on one worker, with ALBERT's settings.

A corpus of 16 GB on GCS needs no local copy: documents are read, split
into training and held-out parts and preprocessed on the workers; the
trainer sees at most `input_sentence_size` sentences, as spm_train would
(ALBERT's 10,000,000 by default). They are the sentences with the smallest
stable hash: each worker keeps those below a threshold set from the corpus's
sentence count (a little above the wanted share), and the learner takes the
smallest of what arrives, in hash order. The same corpus gives the same
sentences in the same order on every runner, and the trainer, seeded and
run with a fixed number of threads, the same model bytes.

A sentence is a line as ALBERT's script hands it to the tokenizer
(`preprocess_text`, lower-cased with `--do_lower_case`), so the pieces are
learned from the text they will segment; the sample is of the raw lines, so
that the training metrics can tokenize them as the pipeline will. ALBERT's settings are its README's
spm_train command: `<pad>` 0, `<unk>` 1, no `<s>`/`</s>`, control symbols
`[CLS] [SEP] [MASK]`, user-defined `( ) " - . – £ €`, shuffled input, a
character coverage of 0.99995, unigram. One change: a corpus too small for
`--vocab_size` gives a smaller model and says so (`hard_vocab_limit`
false), where spm_train fails, which on Dataflow would fail the job after
the corpus was read.
"""

from __future__ import annotations

import dataclasses
import io
from typing import Iterable, Sequence

import apache_beam as beam
import sentencepiece

from bert_pretraining_data.transforms.randomness import stable_hash
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
_HASH_RANGE = 1 << 63  # stable_hash's range
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
    return stable_hash("sentencepiece-sample", line)


def sample_threshold(total: int, size: int) -> int:
    """Keep a sentence whose key is below this: all of them when `size`
    covers the corpus, else a little more than the share `size / total`."""
    if total <= size:
        return _HASH_RANGE
    return min(_HASH_RANGE, int(_HASH_RANGE * SAMPLE_MARGIN * size / total))


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


def _sentences(doc: tuple[str, list[str]]) -> list[str]:
    """A document's lines that are sentences (not blank once preprocessed)."""
    return [line for line in doc[1] if preprocess_text(line, lower=False)]


def _below(line: str, threshold: int) -> bool:
    return sample_key(line) < threshold


class SampleSentences(beam.PTransform):
    """(doc_key, [lines]) -> the lines the trainer may use: those whose key is
    below the threshold set by the corpus's sentence count (`size`: the
    trainer's input_sentence_size)."""

    def __init__(self, *, size: int) -> None:
        super().__init__()
        self._size = size

    def expand(self, docs):
        lines = docs | "Sentences" >> beam.FlatMap(_sentences)
        threshold = (lines
                     | "CountSentences" >> beam.combiners.Count.Globally()
                     | "Threshold" >> beam.Map(sample_threshold, self._size))
        return lines | "BelowThreshold" >> beam.Filter(_below, beam.pvalue.AsSingleton(threshold))
