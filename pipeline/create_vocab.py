"""create-vocab: a WordPiece vocabulary, a SentencePiece model or a byte-level
BPE tokenizer.json, learned from a corpus on Beam (usage: docs/vocabularies.md).

A stable fraction of the documents is held out, so the vocabulary is measured
on text it was not learned from; vocabulary and `<output_file>.metrics.json`
are published only when the run succeeded.

    ReadDocuments -> SplitHeldOut -> CountTrainingWords -> CountCharacters (side input)
                                                        -> MostFrequentWords -> LearnWordPiece
                                                        -> MeasureTraining
                                  -> CountHeldOutWords  -> MeasureHeldOut
    --tokenization=SentencePiece (ByteLevelBPE: LearnByteLevelBPE):
    ReadDocuments -> SplitHeldOut -> SampleSentences -> CollectSample -> LearnSentencePiece
                                                                     -> MeasureTraining
                                  -> HeldOutLines   -> MeasureHeldOut
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from typing import AbstractSet, Any, Iterator, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.local_runner import new_pipeline
from bert_pretraining_data.pipeline.command_line import (Check, FlagGroup, OneLineParser,
                                                         build_parser, flag, parse_config,
                                                         run_command)
from bert_pretraining_data.pipeline.publish import OutputPaths, check_writable, remove_tree
from bert_pretraining_data.transforms.read.beam import ReadDocuments, match_inputs
from bert_pretraining_data.transforms.read.documents import (DOCUMENTS, PROBLEMS, InputError,
                                                             comma_separated)
from bert_pretraining_data.transforms.tokenize.sentencepiece_model import parse_model
from bert_pretraining_data.transforms.tokenize.sentencepiece_text import SentencePieceTokenizer
from bert_pretraining_data.transforms.tokenize.tokenizer_json import parse_tokenizer_json
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import SENTENCEPIECE, WORDPIECE
from bert_pretraining_data.transforms.vocab.beam import (CountCharacters, CountWords,
                                                         MeasureVocabulary, SampleSentences,
                                                         SplitHeldOut)
from bert_pretraining_data.transforms.vocab.sentencepiece import (MODEL_TYPES,
                                                                  SentencePieceLearning,
                                                                  SentencePieceLearningError,
                                                                  chosen_lines, line_stats,
                                                                  train_model, vocab_text)
from bert_pretraining_data.transforms.vocab.tokenizer_json import (SPECIAL_TOKENS,
                                                                   ByteLevelBpeLearning,
                                                                   TokenizerLearningError,
                                                                   tokenizer_line_stats,
                                                                   train_byte_level_bpe)
from bert_pretraining_data.transforms.vocab.word_counts import WordCount, sum_stats
from bert_pretraining_data.transforms.vocab.wordpiece import (LearningConfig, LearningError,
                                                              TokenizationStats, learn_wordpiece,
                                                              vocabulary_bytes)

PROG = "create-vocab"
METRICS_SUFFIX = ".metrics.json"
STAGED_VOCAB = "vocab.txt"
STAGED_METRICS = "metrics.json"
STAGED_MODEL = "sentencepiece.model"
STAGED_PIECES = "sentencepiece.vocab"
STAGED_TOKENIZER = "tokenizer.json"
BYTE_LEVEL_BPE = "ByteLevelBPE"  # a tokenizer.json for --tokenizer_file
# Defaults that differ by --tokenization (a flag without one here does not
# apply): BERT-Base's size, every character, uncased; ALBERT's 30k and
# spm_train character coverage; RoBERTa's 50,265 tokens, cased.
DEFAULTS: dict[str, dict[str, Any]] = {
    WORDPIECE: {"vocab_size": 30522, "character_coverage": 1.0, "do_lower_case": True,
                "num_unused": 0, "max_words": 200_000},
    SENTENCEPIECE: {"vocab_size": 30000, "character_coverage": 0.99995, "do_lower_case": True},
    BYTE_LEVEL_BPE: {"vocab_size": 50265, "do_lower_case": False, "special_tokens": "roberta"}}
# What a learner raises for a corpus or settings it cannot learn from: one line each.
LEARNING_ERRORS = (LearningError, SentencePieceLearningError, TokenizerLearningError)

@dataclasses.dataclass(frozen=True, kw_only=True)
class VocabConfig(FlagGroup):
    """create-vocab's flags, validated; the learners' settings derive from them."""

    SECTION = ("vocabulary", "what is learned, from which corpus, and where it goes")

    input_file: str | None = flag(
        "input text file(s): comma-separated paths or globs, local or gs://, .gz/.bz2 by "
        "extension; one sentence per line, blank line between documents", default=None,
        default_help="none; required")
    output_file: str | None = flag(
        "the vocab.txt (SentencePiece .model, tokenizer.json) to write (local or gs://); the "
        f"metrics go beside it, to <output_file>{METRICS_SUFFIX}", default=None,
        default_help="none; required")
    tokenization: str = flag(
        "WordPiece: a BERT vocab.txt for --vocab_file; SentencePiece: a model for "
        "--spm_model_file (ALBERT's settings), and its .vocab beside it; ByteLevelBPE: a "
        "tokenizer.json for --tokenizer_file (RoBERTa's and ModernBERT's kind), learned by "
        "the tokenizers library's trainer", choices=[WORDPIECE, SENTENCEPIECE, BYTE_LEVEL_BPE],
        default=WORDPIECE)
    special_tokens: str | None = flag(
        "with --tokenization=ByteLevelBPE: the family whose special tokens and framing the "
        "file carries: roberta (<s> A </s></s> B </s>, <pad>=1) or bert ([CLS] A [SEP] B "
        "[SEP], [PAD]=0, as ModernBERT's)", choices=list(SPECIAL_TOKENS), default=None,
        default_help="roberta")
    model_type: str = flag(
        "with --tokenization=SentencePiece: the trainer's algorithm (ALBERT's: unigram)",
        choices=list(MODEL_TYPES), default="unigram")
    input_sentence_size: int = flag(
        "with --tokenization=SentencePiece or ByteLevelBPE: learn from at most this many "
        "sentences, a stable sample of the training lines (ALBERT's)", default=10_000_000)
    vocab_size: int = flag(
        "tokens in the vocabulary, reserved ones included",
        default_help="30522, BERT-Base's; SentencePiece: 30000, ALBERT's; ByteLevelBPE: "
                     "50265, RoBERTa's")
    do_lower_case: bool = flag(
        "lower-case (and, for WordPiece and SentencePiece, strip accents), for uncased "
        "models", absl=True, default_help="true; ByteLevelBPE: false, as RoBERTa and "
                                          "ModernBERT are cased")
    num_unused: int = flag(
        "WordPiece: [unusedN] placeholders after the reserved tokens, for tokens added later",
        default=0, parser_default=None)
    character_coverage: float = flag(
        "share of character occurrences whose characters get a token; lower it for scripts "
        "with very many rare characters", default=1.0, parser_default=None,
        default_help="1.0: all; SentencePiece: 0.99995, ALBERT's")
    held_out_fraction: float = flag(
        "share of documents (chosen by a stable hash of their text) kept out of learning and "
        "used for the metrics", default=0.1)
    max_words: int | None = flag(
        "WordPiece: learn from at most this many of the most frequent distinct words (the "
        "learner's work grows with it; characters always come from all words)",
        default=None, default_help="200000")
    overwrite: bool = flag(
        "replace an existing vocabulary file (only once this run has succeeded)",
        default=False)

    @classmethod
    def defaults(cls, args: argparse.Namespace, beam_args: Sequence[str]) -> dict[str, Any]:
        return DEFAULTS[args.tokenization]

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        checks = [(bool(config.input_file), "--input_file is required"),
                  (bool(config.output_file), "--output_file is required")]
        for name in ("num_unused", "max_words", "character_coverage", "special_tokens"):
            applies = [tokenization for tokenization, flags in DEFAULTS.items()
                       if name in flags]
            checks.append((config.tokenization in applies or name not in given,
                           f"--{name} applies to --tokenization={' or '.join(applies)}; "
                           "drop it"))
        return checks + [
            (0 <= config.held_out_fraction < 1,
             f"--held_out_fraction must be in [0, 1), got {config.held_out_fraction}"),
            (config.max_words is None or config.max_words >= 1,
             f"--max_words must be at least 1, got {config.max_words}"),
        ]

    @property
    def learning(self) -> LearningConfig:
        return LearningConfig(vocab_size=self.vocab_size, num_unused=self.num_unused,
                              character_coverage=self.character_coverage)

    @property
    def sentencepiece(self) -> SentencePieceLearning:
        return SentencePieceLearning(
            vocab_size=self.vocab_size, model_type=self.model_type,
            character_coverage=self.character_coverage,
            input_sentence_size=self.input_sentence_size, do_lower_case=self.do_lower_case)

    @property
    def byte_level_bpe(self) -> ByteLevelBpeLearning:
        return ByteLevelBpeLearning(
            vocab_size=self.vocab_size, special_tokens=self.special_tokens or "roberta",
            do_lower_case=self.do_lower_case, input_sentence_size=self.input_sentence_size)

    @property
    def outputs(self) -> list[tuple[str, str]]:
        """(staged name, final path) of each file, the metrics last: vocab.txt;
        the tokenizer.json; or the model and the .vocab spm_train writes beside it."""
        if self.tokenization == WORDPIECE:
            files = [(STAGED_VOCAB, self.output_file)]
        elif self.tokenization == BYTE_LEVEL_BPE:
            files = [(STAGED_TOKENIZER, self.output_file)]
        else:
            stem = self.output_file[:-len(".model")] if self.output_file.endswith(
                ".model") else self.output_file
            files = [(STAGED_MODEL, self.output_file), (STAGED_PIECES, f"{stem}.vocab")]
        return files + [(STAGED_METRICS, self.metrics_file)]

    @property
    def metrics_file(self) -> str:
        return self.output_file + METRICS_SUFFIX

    @property
    def staging_dir(self) -> str:
        directory, name = FileSystems.split(self.output_file)
        return FileSystems.join(directory, f".staging-{name}")

    def flags(self) -> dict[str, object]:
        """What decides the vocabulary (not where it goes), for the metrics file."""
        flags = dataclasses.asdict(self)
        for where in ("output_file", "overwrite"):
            del flags[where]
        return flags


def parser() -> OneLineParser:
    return build_parser(
        prog=PROG, groups=(VocabConfig,),
        description="Learn a BERT WordPiece vocabulary, an ALBERT SentencePiece model or a "
                    "RoBERTa-style byte-level BPE tokenizer.json from a corpus on Apache "
                    "Beam. Unknown flags are Beam pipeline options (--runner, ...).")


def parse_args(argv: Sequence[str]) -> tuple[VocabConfig, list[str]]:
    """Parses and validates; returns the config and the flags left for Beam."""
    config, beam_args = parse_config(parser(), VocabConfig, (VocabConfig,), argv)
    try:  # validates the learner's settings now, not on a worker
        {SENTENCEPIECE: lambda: config.sentencepiece, WORDPIECE: lambda: config.learning,
         BYTE_LEVEL_BPE: lambda: config.byte_level_bpe}[config.tokenization]()
    except LEARNING_ERRORS as err:
        raise ConfigError(f"--{err}") from None
    return config, beam_args


def _count_then_word(word_count: WordCount) -> tuple[int, str]:
    """Top.Of's order: by count, ties by the word, so the cut is deterministic."""
    word, count = word_count
    return count, word


def metrics_report(files: dict[str, bytes], *, config: VocabConfig,
                   training: TokenizationStats, held_out: TokenizationStats,
                   training_documents: int, held_out_documents: int,
                   input_problems: list[dict]) -> dict:
    """The metrics file: rates on held-out documents (and on the training ones,
    to show how much of the quality is memorized), with the sums behind them.
    `files`: what is written, by staged name (the vocabulary first)."""
    def section(stats: TokenizationStats, documents: int) -> dict:
        return dict(documents=documents, **dataclasses.asdict(stats), **stats.rates())
    vocabulary = files[config.outputs[0][0]]
    if config.tokenization == SENTENCEPIECE:
        size = len(parse_model(vocabulary, source="learned model"))
    elif config.tokenization == BYTE_LEVEL_BPE:  # parsed as --tokenizer_file will parse it
        size = len(parse_tokenizer_json(vocabulary, source="learned tokenizer.json"))
    else:
        size = vocabulary.count(b"\n")
    return {
        "vocab_size": size,
        "vocab_sha256": hashlib.sha256(vocabulary).hexdigest(),
        "flags": config.flags(),
        "held_out": section(held_out, held_out_documents),
        "training": section(training, training_documents),
        "input_problems": sorted(input_problems, key=lambda p: json.dumps(p, sort_keys=True)),
    }


def _write_staged(files: dict[str, bytes], *, report: dict, staging_dir: str) -> None:
    metrics = (json.dumps(report, indent=2, sort_keys=True) + "\n").encode("utf-8")
    for name, data in {**files, STAGED_METRICS: metrics}.items():
        with FileSystems.create(FileSystems.join(staging_dir, name)) as handle:
            handle.write(data)


def _wordpiece_files(tokens: list[str]) -> dict[str, bytes]:
    return {STAGED_VOCAB: vocabulary_bytes(tokens)}


def _sentencepiece_files(model: bytes) -> dict[str, bytes]:
    return {STAGED_MODEL: model, STAGED_PIECES: vocab_text(model).encode("utf-8")}


def _report_and_stage(files, config: VocabConfig, *, training, held_out, training_docs,
                      held_out_docs, problems) -> dict[str, beam.PCollection]:
    """The metrics report of the learned files, and both staged for publishing."""
    def count(docs, label: str):
        return beam.pvalue.AsSingleton(docs | label >> beam.combiners.Count.Globally())
    report = files | "Report" >> beam.Map(
        metrics_report, config=config, training=beam.pvalue.AsSingleton(training),
        held_out=beam.pvalue.AsSingleton(held_out),
        training_documents=count(training_docs, "CountTrainingDocuments"),
        held_out_documents=count(held_out_docs, "CountHeldOutDocuments"),
        input_problems=beam.pvalue.AsSingleton(
            problems | "CollectInputProblems" >> beam.combiners.ToList()))
    written = files | "WriteStaged" >> beam.Map(
        _write_staged, report=beam.pvalue.AsSingleton(report),
        staging_dir=config.staging_dir)
    return {"report": report, "written": written}


def build_vocab_pipeline(p: beam.Pipeline, *, config: VocabConfig,
                         patterns: list[str]) -> dict[str, beam.PCollection]:
    """Adds the vocabulary job to `p`; runs nothing."""
    read = p | "ReadDocuments" >> ReadDocuments(patterns=patterns)
    docs = read[DOCUMENTS]
    training_docs, held_out_docs = docs | "SplitHeldOut" >> SplitHeldOut(
        fraction=config.held_out_fraction)
    training_words = training_docs | "CountTrainingWords" >> CountWords(
        do_lower_case=config.do_lower_case)
    held_out_words = held_out_docs | "CountHeldOutWords" >> CountWords(
        do_lower_case=config.do_lower_case)
    char_counts = training_words | "CountCharacters" >> CountCharacters()
    learning_table = training_words | "MostFrequentWords" >> beam.combiners.Top.Of(
        config.max_words, key=_count_then_word)
    vocab = learning_table | "LearnWordPiece" >> beam.Map(
        learn_wordpiece, config=config.learning,
        char_counts=beam.pvalue.AsSingleton(char_counts))
    training_stats = training_words | "MeasureTraining" >> MeasureVocabulary(vocab=vocab)
    held_out_stats = held_out_words | "MeasureHeldOut" >> MeasureVocabulary(vocab=vocab)
    files = vocab | "Files" >> beam.Map(_wordpiece_files)
    staged = _report_and_stage(files, config, training=training_stats, held_out=held_out_stats,
                               training_docs=training_docs, held_out_docs=held_out_docs,
                               problems=read[PROBLEMS])
    return {"training_words": training_words, "held_out_words": held_out_words,
            "vocab": vocab, **staged}


class _MeasureLines(beam.DoFn):
    """Lines + the learned file (side input) -> TokenizationStats of the lines."""

    def __init__(self, *, do_lower_case: bool, tokenization: str) -> None:
        super().__init__()
        self._lower = do_lower_case
        self._json = tokenization == BYTE_LEVEL_BPE

    def setup(self) -> None:
        self._model: object = None

    def _measure(self, model: bytes):
        """The function from lines to their stats under the learned file."""
        if self._json:
            tokenizer = parse_tokenizer_json(model, source="learned tokenizer.json").tokenizer()
            return lambda lines: tokenizer_line_stats(tokenizer, lines)
        vocabulary = parse_model(model, source="learned model")
        tokenizer = SentencePieceTokenizer(vocabulary, do_lower_case=self._lower)
        return lambda lines: line_stats(tokenizer, lines)

    def process(self, lines: list[str], model: bytes) -> Iterator[TokenizationStats]:
        if model is not self._model:  # the side input is one object per bundle
            self._stats, self._model = self._measure(model), model
        yield self._stats(lines)


def build_sentencepiece_pipeline(p: beam.Pipeline, *, config: VocabConfig,
                                 patterns: list[str]) -> dict[str, beam.PCollection]:
    """Adds the SentencePiece (or byte-level BPE) job to `p`; runs nothing.
    The sample is one list on the learning worker (the trainer holds it in
    memory anyway); the held-out documents are measured where they are read."""
    bpe = config.tokenization == BYTE_LEVEL_BPE
    learning = config.byte_level_bpe if bpe else config.sentencepiece
    read = p | "ReadDocuments" >> ReadDocuments(patterns=patterns)
    training_docs, held_out_docs = read[DOCUMENTS] | "SplitHeldOut" >> SplitHeldOut(
        fraction=config.held_out_fraction)
    chosen = (training_docs
              | "SampleSentences" >> SampleSentences(size=learning.input_sentence_size)
              | "CollectSample" >> beam.combiners.ToList()
              | "ChooseSample" >> beam.Map(chosen_lines, learning.input_sentence_size))
    model = (chosen | "LearnByteLevelBPE" >> beam.Map(train_byte_level_bpe, learning) if bpe
             else chosen | "LearnSentencePiece" >> beam.Map(train_model, learning))
    measure = _MeasureLines(do_lower_case=config.do_lower_case,
                            tokenization=config.tokenization)
    training_stats = chosen | "MeasureTraining" >> beam.ParDo(
        measure, beam.pvalue.AsSingleton(model))
    held_out_stats = (held_out_docs
                      | "HeldOutLines" >> beam.Map(lambda doc: doc[1])
                      | "MeasureHeldOut" >> beam.ParDo(measure, beam.pvalue.AsSingleton(model))
                      | "SumHeldOut" >> beam.CombineGlobally(sum_stats))
    files = model | "Files" >> beam.Map(
        (lambda data: {STAGED_TOKENIZER: data}) if bpe else _sentencepiece_files)
    staged = _report_and_stage(files, config, training=training_stats, held_out=held_out_stats,
                               training_docs=training_docs, held_out_docs=held_out_docs,
                               problems=read[PROBLEMS])
    return {"sample": chosen, "model": model, **staged}


def _check_output(config: VocabConfig) -> list[str]:
    existing = [p for _, p in config.outputs if FileSystems.exists(p)]
    if existing and not config.overwrite:
        raise ConfigError(f"{existing[0]} already exists; pass --overwrite to replace it, "
                          "or choose another --output_file")
    return existing


def _publish(config: VocabConfig, replaces: list[str]) -> dict:
    """Moves the staged vocabulary (or model), then its metrics, to their final paths."""
    if replaces:
        FileSystems.delete(replaces)
    staged = [FileSystems.join(config.staging_dir, name) for name, _ in config.outputs]
    with FileSystems.open(staged[-1]) as handle:
        report = json.loads(handle.read())
    FileSystems.rename(staged, [path for _, path in config.outputs])
    remove_tree(config.staging_dir)
    return report


def run(argv: Sequence[str]) -> dict:
    """Parses, validates, runs and publishes; returns the metrics (plus
    `vocab_file` and `metrics_file`, where they were written)."""
    config, beam_args = parse_args(argv)
    match_inputs(config.input_file)
    replaces = _check_output(config)
    remove_tree(config.staging_dir)  # whatever an interrupted run left
    check_writable(OutputPaths(config.staging_dir, (config.output_file,), config.metrics_file))
    patterns = comma_separated(config.input_file)
    pipeline = new_pipeline(beam_args)
    build = (build_vocab_pipeline if config.tokenization == WORDPIECE
             else build_sentencepiece_pipeline)
    build(pipeline, config=config, patterns=patterns)
    try:
        pipeline.run().wait_until_finish()
    except Exception:
        remove_tree(config.staging_dir)  # nothing half-written stays behind
        raise
    report = _publish(config, replaces)
    return dict(report, vocab_file=config.output_file, metrics_file=config.metrics_file)


def summary(report: dict) -> str:
    """A few lines for the terminal: where the vocabulary went and how good it is."""
    sentencepiece = report["flags"].get("tokenization") == SENTENCEPIECE
    lines = [f"wrote {report['vocab_size']:,} {'pieces' if sentencepiece else 'tokens'} to "
             f"{report['vocab_file']}"]
    if report["vocab_size"] < report["flags"]["vocab_size"]:
        lines.append(f"  (asked for {report['flags']['vocab_size']:,}: "
                     + ("the trainer found no more pieces in this corpus)"
                        if report["flags"].get("tokenization") != WORDPIECE
                        else "no further subword shortens this corpus)"))
    for name in ("held_out", "training"):
        part, label = report[name], name.replace("_", "-")
        if not part["words"]:
            lines.append(f"{label}: no words")
            continue
        lines.append(
            f"{label}: {part['documents']:,} document(s), {part['words']:,} words; "
            f"[UNK] rate {part['unk_rate']:.4%}, {part['tokens_per_word']:.4f} tokens/word, "
            f"character coverage {part['character_coverage']:.4%}")
    lines.append(f"metrics: {report['metrics_file']}")
    return "\n".join(lines)


def warnings(report: dict) -> list[str]:
    """Files that could not be read to their end, and an empty held-out part."""
    found = [f"{p['path']}: {p['message']}" for p in report["input_problems"]]
    if report["flags"]["held_out_fraction"] and not report["held_out"]["words"]:
        found.append("no document was held out, so there are no held-out metrics: the "
                     "corpus has too few documents for --held_out_fraction")
    return found


def print_result(result: dict) -> None:
    print(summary(result))
    for warning in warnings(result):
        print(f"{PROG}: warning: {warning}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> None:
    run_command(PROG, run, print_result, argv, user_errors=(InputError, *LEARNING_ERRORS))


if __name__ == "__main__":
    main()
