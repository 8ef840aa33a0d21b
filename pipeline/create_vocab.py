"""create-vocab: a WordPiece vocabulary learned from a corpus, on Beam.

On this machine (DirectRunner, several processes):

    create-vocab --input_file=corpus/*.txt --output_file=vocab.txt \\
        --vocab_size=30522 --direct_running_mode=multi_processing \\
        --direct_num_workers=4

On Dataflow (corpus and vocabulary on gs://):

    create-vocab --input_file=gs://b/corpus/*.txt.gz \\
        --output_file=gs://b/vocab.txt --vocab_size=30522 \\
        --runner=DataflowRunner --project=P --region=R \\
        --temp_location=gs://b/tmp --setup_file=./setup.py

The corpus is read as create-pretraining-data reads it (one sentence per
line, blank line between documents). Words are counted over the whole corpus
after BERT's basic tokenization; a stable fraction of the documents is held
out; the vocabulary is learned from the training documents' word counts
(transforms.wordpiece_learning) and measured on the held-out ones. The
vocabulary goes to --output_file, ready for `create-pretraining-data
--vocab_file`, and the measurements to `<output_file>.metrics.json`, both
only when the run succeeded.

    ReadDocuments -> SplitHeldOut -> CountTrainingWords -> CountCharacters (side input)
                                                        -> MostFrequentWords -> LearnWordPiece
                                                        -> MeasureTraining
                                  -> CountHeldOutWords  -> MeasureHeldOut
    LearnWordPiece + measurements -> Report -> WriteStaged (then the driver publishes)
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from typing import Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.pipeline.local_runner import new_pipeline
from bert_pretraining_data.pipeline.options import (ConfigError, OneLineParser, parse_bool,
                                                    split_known_args)
from bert_pretraining_data.pipeline.publish import OutputLayout, check_writable, remove_tree
from bert_pretraining_data.transforms.documents import (DOCUMENTS, PROBLEMS, InputError,
                                                        ReadDocuments, comma_separated,
                                                        match_inputs)
from bert_pretraining_data.transforms.word_counts import (CountCharacters, CountWords,
                                                          MeasureVocabulary, SplitHeldOut,
                                                          WordCount)
from bert_pretraining_data.transforms.wordpiece_learning import (LearningConfig, LearningError,
                                                                 TokenizationStats, learn_wordpiece,
                                                                 vocabulary_bytes)

PROG = "create-vocab"
METRICS_SUFFIX = ".metrics.json"
STAGED_VOCAB = "vocab.txt"
STAGED_METRICS = "metrics.json"


@dataclasses.dataclass(frozen=True)
class VocabConfig:
    input_file: str
    output_file: str
    vocab_size: int
    do_lower_case: bool
    num_unused: int
    character_coverage: float
    held_out_fraction: float
    max_words: int
    overwrite: bool = False

    @property
    def learning(self) -> LearningConfig:
        return LearningConfig(vocab_size=self.vocab_size, num_unused=self.num_unused,
                              character_coverage=self.character_coverage)

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


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG, allow_abbrev=False,
        description="Learn a BERT WordPiece vocabulary from a corpus on Apache Beam. "
                    "Unknown flags are Beam pipeline options (--runner, ...).")
    add = parser.add_argument
    add("--input_file", help="input text file(s): comma-separated paths or globs, local "
        "or gs://, .gz/.bz2 by extension; one sentence per line, blank line between "
        "documents")
    add("--output_file", help="the vocab.txt to write (local or gs://); the metrics go "
        f"beside it, to <output_file>{METRICS_SUFFIX}")
    add("--vocab_size", type=int, default=30522,
        help="tokens in the vocabulary, reserved ones included (default 30522, BERT-Base's)")
    add("--do_lower_case", type=parse_bool, nargs="?", const=True, default=True,
        help="lower-case and strip accents, for uncased models (default True)")
    add("--nodo_lower_case", dest="do_lower_case", action="store_false",
        help=argparse.SUPPRESS)
    add("--num_unused", type=int, default=0,
        help="[unusedN] placeholders after the reserved tokens, for tokens added later")
    add("--character_coverage", type=float, default=1.0,
        help="share of character occurrences whose characters get a token (default 1.0: "
             "all); lower it for scripts with very many rare characters")
    add("--held_out_fraction", type=float, default=0.1,
        help="share of documents (chosen by a stable hash of their text) kept out of "
             "learning and used for the metrics")
    add("--max_words", type=int, default=200_000,
        help="learn from at most this many of the most frequent distinct words (the "
             "learner's work grows with it; characters always come from all words)")
    add("--overwrite", type=parse_bool, nargs="?", const=True, default=False,
        help="replace an existing vocabulary file (only once this run has succeeded)")
    return parser


def parse_args(argv: Sequence[str]) -> tuple[VocabConfig, list[str]]:
    """Parses and validates; returns the config and the flags left for Beam."""
    args, beam_args = split_known_args(_parser(), argv)
    for flag in ("input_file", "output_file"):
        if not getattr(args, flag):
            raise ConfigError(f"--{flag} is required")
    checks = [
        (0 <= args.held_out_fraction < 1,
         f"--held_out_fraction must be in [0, 1), got {args.held_out_fraction}"),
        (args.max_words >= 1, f"--max_words must be at least 1, got {args.max_words}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    config = VocabConfig(
        input_file=args.input_file, output_file=args.output_file,
        vocab_size=args.vocab_size, do_lower_case=args.do_lower_case,
        num_unused=args.num_unused, character_coverage=args.character_coverage,
        held_out_fraction=args.held_out_fraction, max_words=args.max_words,
        overwrite=args.overwrite)
    try:
        config.learning  # validates the learner's settings now, not on a worker
    except LearningError as err:
        raise ConfigError(f"--{err}") from None
    return config, beam_args


def _count_then_word(word_count: WordCount) -> tuple[int, str]:
    """Top.Of's order: by count, ties by the word, so the cut is deterministic."""
    word, count = word_count
    return count, word


def metrics_report(tokens: list[str], *, config: VocabConfig, training: TokenizationStats,
                   held_out: TokenizationStats, training_documents: int,
                   held_out_documents: int, input_problems: list[dict]) -> dict:
    """The metrics file: rates on held-out documents (and on the training ones,
    to show how much of the quality is memorized), with the sums behind them."""
    def section(stats: TokenizationStats, documents: int) -> dict:
        return dict(documents=documents, **dataclasses.asdict(stats), **stats.rates())
    return {
        "vocab_size": len(tokens),
        "vocab_sha256": hashlib.sha256(vocabulary_bytes(tokens)).hexdigest(),
        "flags": config.flags(),
        "held_out": section(held_out, held_out_documents),
        "training": section(training, training_documents),
        "input_problems": sorted(input_problems, key=lambda p: json.dumps(p, sort_keys=True)),
    }


def _write_staged(tokens: list[str], *, report: dict, staging_dir: str) -> None:
    with FileSystems.create(FileSystems.join(staging_dir, STAGED_VOCAB)) as handle:
        handle.write(vocabulary_bytes(tokens))
    with FileSystems.create(FileSystems.join(staging_dir, STAGED_METRICS)) as handle:
        handle.write((json.dumps(report, indent=2, sort_keys=True) + "\n").encode("utf-8"))


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
    report = vocab | "Report" >> beam.Map(
        metrics_report, config=config,
        training=beam.pvalue.AsSingleton(training_stats),
        held_out=beam.pvalue.AsSingleton(held_out_stats),
        training_documents=beam.pvalue.AsSingleton(
            training_docs | "CountTrainingDocuments" >> beam.combiners.Count.Globally()),
        held_out_documents=beam.pvalue.AsSingleton(
            held_out_docs | "CountHeldOutDocuments" >> beam.combiners.Count.Globally()),
        input_problems=beam.pvalue.AsSingleton(
            read[PROBLEMS] | "CollectInputProblems" >> beam.combiners.ToList()))
    written = vocab | "WriteStaged" >> beam.Map(
        _write_staged, report=beam.pvalue.AsSingleton(report),
        staging_dir=config.staging_dir)
    return {"training_words": training_words, "held_out_words": held_out_words,
            "vocab": vocab, "report": report, "written": written}


def _check_output(config: VocabConfig) -> list[str]:
    existing = [p for p in (config.output_file, config.metrics_file) if FileSystems.exists(p)]
    if existing and not config.overwrite:
        raise ConfigError(f"{existing[0]} already exists; pass --overwrite to replace it, "
                          "or choose another --output_file")
    return existing


def _publish(config: VocabConfig, replaces: list[str]) -> dict:
    """Moves the staged vocabulary, then its metrics, to their final paths."""
    if replaces:
        FileSystems.delete(replaces)
    staged = [FileSystems.join(config.staging_dir, n) for n in (STAGED_VOCAB, STAGED_METRICS)]
    with FileSystems.open(staged[1]) as handle:
        report = json.loads(handle.read())
    FileSystems.rename(staged, [config.output_file, config.metrics_file])
    remove_tree(config.staging_dir)
    return report


def run(argv: Sequence[str]) -> dict:
    """Parses, validates, runs and publishes; returns the metrics (plus
    `vocab_file` and `metrics_file`, where they were written)."""
    config, beam_args = parse_args(argv)
    match_inputs(config.input_file)
    replaces = _check_output(config)
    remove_tree(config.staging_dir)  # whatever an interrupted run left
    check_writable(OutputLayout(config.staging_dir, (config.output_file,), config.metrics_file))
    patterns = comma_separated(config.input_file)
    pipeline = new_pipeline(beam_args)
    build_vocab_pipeline(pipeline, config=config, patterns=patterns)
    try:
        pipeline.run().wait_until_finish()
    except Exception:
        remove_tree(config.staging_dir)  # nothing half-written stays behind
        raise
    report = _publish(config, replaces)
    return dict(report, vocab_file=config.output_file, metrics_file=config.metrics_file)


def summary(report: dict) -> str:
    """A few lines for the terminal: where the vocabulary went and how good it is."""
    lines = [f"wrote {report['vocab_size']:,} tokens to {report['vocab_file']}"]
    if report["vocab_size"] < report["flags"]["vocab_size"]:
        lines.append(f"  (asked for {report['flags']['vocab_size']:,}: no further subword "
                     "shortens this corpus)")
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


def main(argv: Sequence[str] | None = None) -> None:
    try:
        report = run(sys.argv[1:] if argv is None else argv)
    except (ConfigError, InputError, LearningError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        sys.exit(2)
    print(summary(report))
    for warning in warnings(report):
        print(f"{PROG}: warning: {warning}", file=sys.stderr)


if __name__ == "__main__":
    main()
