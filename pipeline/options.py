"""Command-line flags: the original's names and defaults, plus this pipeline's.

An existing `create_pretraining_data.py` command line runs unchanged (absl
spellings included: `--do_lower_case=False`, `--nodo_lower_case`, bare
`--do_whole_word_mask`). Flags this parser does not know go to Beam
(`--runner`, `--direct_num_workers`, `--project`, ...). Everything is
validated here, before any pipeline object exists, and turned into a frozen
`Config` that the stages receive: no global FLAGS in library code.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
from typing import Sequence

from bert_pretraining_data.transforms.write.tf_example import RecordLayout
from bert_pretraining_data.transforms.instances.pairs import NEXT_SENTENCE_OBJECTIVES, InstanceConfig
from bert_pretraining_data.transforms.instances.masking import MaskingConfig, masking_config
from bert_pretraining_data.transforms.pack.plan import prediction_budget
from bert_pretraining_data.transforms.write.rows import InstanceRows, PackedRows
from bert_pretraining_data.transforms.seeds import MAX_DUPE_FACTOR
from bert_pretraining_data.transforms.dedup.beam import DEDUP_MODES
from bert_pretraining_data.transforms.read.tables import INPUT_FORMATS
from bert_pretraining_data.transforms.tokenize.chinese_words import SEGMENTERS
from bert_pretraining_data.transforms.tokenize.sentences import DEFAULT_SPLITTER, SPLITTERS
from bert_pretraining_data.transforms.write.shuffle_entries import SHUFFLES
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import (SENTENCEPIECE, WORDPIECE,
                                                                TokenizerSpec)
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary

DEFAULT_NSP_SAMPLE_SIZE = 10_000
# Sequences a packed row holds at most (--max_sequences_per_pack): Krell et
# al.'s depth 3, and MLPerf's.
DEFAULT_SEQUENCES_PER_PACK = 3
DEFAULT_NSP_SAMPLE_MAX_BYTES = 256 << 20
TARGET_SHARD_BYTES = 256 << 20
# Output bytes per input byte per dupe: ~2 (padded int64 features at the
# default max_seq_length, measured on WikiText-2).
OUTPUT_BYTES_PER_INPUT_BYTE_PER_DUPE = 2
# The pipeline's dependencies besides Beam; setup.py's [pipeline] extra is built from it.
WORKER_REQUIREMENTS = pathlib.Path(__file__).with_name("worker_requirements.txt")


class ConfigError(ValueError):
    """A flag problem; the message is one line that names the flag and the fix."""


@dataclasses.dataclass(frozen=True)
class Config:
    input_file: str
    output_file: str | None
    output_dir: str | None
    vocab_file: str | None
    do_lower_case: bool
    do_whole_word_mask: bool
    max_seq_length: int
    max_predictions_per_seq: int
    random_seed: int
    dupe_factor: int
    masked_lm_prob: float
    short_seq_prob: float
    num_shards: int | None
    compression: str | None
    nsp_sample_size: int
    nsp_sample_max_bytes: int
    reference_compatible: bool
    input_split_bytes: int | None
    overwrite: bool = False
    recipe: str = "bert"
    masking: str = "static"
    padding: str = "fixed"
    shuffle: str = "files"
    next_sentence: str = "nsp"
    ngram: int = 0
    favor_shorter_ngram: bool = True
    max_ngram_size: int = 0
    use_v2_feature_names: bool = False
    whole_word_segmenter: str = "none"
    input_format: str = "text"
    text_field: str = "text"
    sentence_splitter: str = "none"
    progress: str = "auto"
    dedup: str = "exact"
    dedup_threshold: float = 0.8
    dedup_ngram: int = 5
    pack_sequences: bool = False
    max_sequences_per_pack: int = DEFAULT_SEQUENCES_PER_PACK
    spm_model_file: str | None = None
    tokenization: str = WORDPIECE
    sp_model_file: str | None = None

    @property
    def token_boundary(self) -> bool:
        """ALBERT's objectives write ALBERT's token_boundary feature."""
        return self.next_sentence == "sop" or self.ngram > 0

    @property
    def tokenizer(self) -> TokenizerSpec:
        """WordPiece (--vocab_file) or SentencePiece (ALBERT's --spm_model_file,
        the Model Garden's --tokenization=SentencePiece --sp_model_file)."""
        return TokenizerSpec.of(self.flags())

    def flags(self) -> dict[str, object]:
        """The flags as recorded in the manifest."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Stages:
    """What the stages need, derived once from the flags and the vocabulary."""

    instances: InstanceConfig
    masking: MaskingConfig
    layout: RecordLayout
    rows: InstanceRows | PackedRows  # how the shard writer makes records of instances

    @classmethod
    def of(cls, config: Config, vocab: Vocabulary) -> "Stages":
        masking = masking_config(
            vocab, masked_lm_prob=config.masked_lm_prob,
            max_predictions_per_seq=config.max_predictions_per_seq,
            do_whole_word_mask=config.do_whole_word_mask, ngram=config.ngram,
            favor_shorter_ngram=config.favor_shorter_ngram,
            max_ngram_size=config.max_ngram_size)
        layout = record_layout(config)
        if config.pack_sequences:
            rows = PackedRows(layout, config.max_seq_length,
                              row_prediction_budget(config, masking),
                              config.max_sequences_per_pack)
        else:
            rows = InstanceRows(layout, config.max_seq_length, config.max_predictions_per_seq)
        return cls(
            instances=InstanceConfig(
                max_seq_length=config.max_seq_length, short_seq_prob=config.short_seq_prob,
                cls_id=vocab.cls_id, sep_id=vocab.sep_id, next_sentence=config.next_sentence,
                continues=tuple(vocab.continuation_flags()) if config.token_boundary else None,
                # segmenters mark whole words in the ids; SentencePiece, its
                # unknown pieces that continue one (transforms.subword)
                segmented=config.whole_word_segmenter != "none" or config.tokenizer.sentencepiece),
            masking=masking, layout=layout, rows=rows)


def row_prediction_budget(config: Config, masking: MaskingConfig) -> int:
    """Masked-LM predictions a record has room for: max_predictions_per_seq,
    or with --pack_sequences the most a packed row can need."""
    if not config.pack_sequences:
        return config.max_predictions_per_seq
    return prediction_budget(masking, config.max_seq_length, config.max_sequences_per_pack)


def record_layout(config: Config) -> RecordLayout:
    """The records' features as the flags ask."""
    return RecordLayout(
        padded=config.padding == "fixed", v2_names=config.use_v2_feature_names,
        token_boundary=config.token_boundary,
        next_sentence_labels=config.next_sentence != "none",
        # --masking=none keeps empty masked_lm features for the loaders,
        # unless there is no pair task either (ELECTRA's records) or the
        # rows are packed (a new layout, which never had them).
        masked_lm=config.masking == "static" or (
            config.next_sentence != "none" and not config.pack_sequences),
        packed=config.pack_sequences)


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "t", "1", "yes"):
        return True
    if lowered in ("false", "f", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit
        raise ConfigError(message)


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="create-pretraining-data", allow_abbrev=False,
        description="BERT masked-LM + next-sentence-prediction TFRecords on Apache Beam. "
                    "Unknown flags are Beam pipeline options (--runner, ...).")
    add = parser.add_argument
    add("--input_file", help="input text file(s): comma-separated paths or globs, "
        "local or gs://, .gz/.bz2 by extension; one sentence per line, blank line "
        "between documents")
    add("--output_file", help="exact output file(s), comma-separated, as the original")
    add("--output_dir", help="directory for part-NNNNN-of-NNNNN.tfrecord shards "
        "and manifest.json (instead of --output_file)")
    add("--vocab_file", help="the WordPiece vocab.txt of the model to train (with "
        "--spm_model_file, ALBERT's .vocab beside it, which is not read)")
    add("--spm_model_file", help="ALBERT's flag: tokenize with this SentencePiece model "
        "(e.g. 30k-clean.model) as ALBERT's script does; ids are the model's")
    add("--tokenization", choices=[WORDPIECE, SENTENCEPIECE], default=WORDPIECE,
        help="the Model Garden's flag: WordPiece (--vocab_file, default) or "
             "SentencePiece (--sp_model_file), as its script tokenizes")
    add("--sp_model_file", help="the Model Garden's flag: with --tokenization="
        "SentencePiece, the SentencePiece model")
    for name, default, text in (
            ("do_lower_case", True, "lower-case and strip accents (uncased models)"),
            ("do_whole_word_mask", False, "mask whole words instead of WordPieces"),
            ("favor_shorter_ngram", True, "with --ngram: n-gram lengths weighted 1/n, "
             "else n/sum (ALBERT's flag)"),
            ("use_v2_feature_names", False, "the Model Garden's names: input_word_ids and "
             "input_type_ids for input_ids and segment_ids"),
            ("gzip_compress", False, "the Model Garden's flag: --compression=gzip")):
        add(f"--{name}", type=parse_bool, nargs="?", const=True, default=default,
            help=f"{text} (default {default})")
        add(f"--no{name}", dest=name, action="store_false", help=argparse.SUPPRESS)
    add("--max_seq_length", type=int, default=128)
    add("--max_predictions_per_seq", type=int,
        help="default 20; with --recipe=d2l round(max_seq_length * masked_lm_prob)")
    add("--random_seed", type=int, default=12345)
    add("--dupe_factor", type=int, help="copies of the data, each with different "
        "masks (default 10; 1 with --recipe=d2l, which makes one pass as d2l does)")
    add("--masked_lm_prob", type=float, default=0.15)
    add("--short_seq_prob", type=float, default=0.1)
    add("--num_shards", type=int, help="with --output_dir; default: one shard per "
        f"~{TARGET_SHARD_BYTES >> 20} MiB of expected output")
    add("--compression", choices=["none", "gzip"], default="none",
        help="with --output_dir: gzip the shards (tf.data compression_type='GZIP')")
    add("--nsp_sample_size", type=int, default=DEFAULT_NSP_SAMPLE_SIZE,
        help="documents in the random-next sample (a side input)")
    add("--nsp_sample_max_bytes", type=int, default=DEFAULT_NSP_SAMPLE_MAX_BYTES,
        help="cap on the sample's token bytes")
    add("--reference_compatible", type=parse_bool, nargs="?", const=True, default=False,
        help="reproduce the original script record for record: one process, one "
             "random.Random, the whole corpus and all instances in memory like the "
             "original; for migration checks, not for large corpora")
    add("--overwrite", type=parse_bool, nargs="?", const=True, default=False,
        help="replace a dataset already at the output location (only once this "
             "run has succeeded)")
    add("--recipe", choices=["bert", "d2l"], default="bert",
        help="bert: the original's instances and features (default); d2l: the "
             "WikiText-2 dataset of d2l.ai (one paragraph per line, word tokens, a "
             "vocabulary computed from the corpus, written as vocab.txt)")
    add("--masking", choices=["static", "none"], default="static",
        help="static: mask here, as the original (default); none: leave instances "
             "unmasked for dynamic masking at load time (loaders.torch_data)")
    add("--padding", choices=["fixed", "none"], default="fixed",
        help="fixed: pad to max_seq_length / max_predictions_per_seq, as the "
             "original (default); none: variable-length features, padded per "
             "batch at load time")
    add("--shuffle", choices=list(SHUFFLES),
        help="how records reach their shard: runner (the runner's GroupByKey; on "
             "Dataflow the Shuffle service) or files (temporary bucket files, for "
             "the DirectRunner, which holds a GroupByKey's input in memory). "
             "Default: files on the DirectRunner, runner elsewhere. Same bytes either way")
    add("--next_sentence", choices=list(NEXT_SENTENCE_OBJECTIVES), default="nsp",
        help="the sentence-pair task: nsp, BERT's next sentence prediction (default); "
             "sop, ALBERT's sentence order prediction (B is the actual next segment, "
             "swapped with A half the time; label 1 = swapped); none, ELECTRA's and "
             "RoBERTa's full sequences (filled to max_seq_length across a document's "
             "sentences, no label; with --masking=none, ELECTRA's input_ids, "
             "input_mask and segment_ids only)")
    add("--ngram", type=int, default=0,
        help="ALBERT's n-gram masking: mask spans of up to N words (or WordPieces), "
             "lengths weighted 1/n; 0: BERT's masking (default). ALBERT's features "
             "(token_boundary) are written with --ngram or --next_sentence=sop")
    add("--max_ngram_size", type=int, default=0,
        help="the TF Model Garden's masking: spans of up to N whole words (with "
             "--do_whole_word_mask), lengths weighted 1/n, each span replaced as one; "
             "1: its token (or whole-word) masking; 0: BERT's masking (default)")
    add("--whole_word_segmenter", choices=list(SEGMENTERS), default="none",
        help="with --do_whole_word_mask: jieba, Chinese whole words (Chinese "
             "BERT-wwm): the characters that continue a jieba word are masked with "
             "it; none: WordPiece's whole words only (default)")
    add("--input_format", choices=list(INPUT_FORMATS), default="text",
        help="text: one sentence per line, a blank line between documents, as the "
             "original (default); jsonl: one JSON object per line, a document each; "
             "parquet: a document per row (Hugging Face's corpora); wikipedia: a "
             "MediaWiki XML dump (pages-articles*.xml.bz2), an article per document")
    add("--text_field", default="text",
        help="with --input_format=jsonl|parquet: the field holding a document's text "
             "(default text)")
    add("--sentence_splitter", choices=list(SPLITTERS),
        help="how a paragraph (a line of a document's text) becomes sentences: none "
             f"(a line is a sentence; the default for text) or {DEFAULT_SPLITTER} (the "
             "default for the other formats; see README 'Sentences')")
    add("--progress", choices=["auto", "none"], default="auto",
        help="auto: a local run prints its progress (a live line on a terminal, a "
             "line every 30 s in a log); a Dataflow run prints its console URL "
             "(default); none: quiet until the end")
    add("--dedup", choices=list(DEDUP_MODES),
        help="documents kept once: exact, those whose normalised text (NFKC, case "
             "folded, whitespace collapsed) is the same (the default); near, also those "
             "whose word n-gram Jaccard similarity reaches --dedup_threshold (MinHash "
             "and LSH, candidates verified, clusters formed transitively); none, every "
             "document (the default with --reference_compatible, as the original)")
    add("--dedup_threshold", type=float,
        help="with --dedup=near: the Jaccard similarity of two documents' word n-grams "
             "from which they are near copies (default 0.8)")
    add("--dedup_ngram", type=int,
        help="with --dedup=near: words per shingle (default 5)")
    add("--pack_sequences", type=parse_bool, nargs="?", const=True, default=False,
        help="pack up to --max_sequences_per_pack whole instances into each row of "
             "max_seq_length tokens, with MLPerf's packed features (input_mask holds "
             "each token's sequence index, positions restart per sequence, "
             "next_sentence_positions/_labels/_weights per sequence): no padding to "
             "train on (README 'Packed sequences'). Default false: one instance a "
             "record, as the original")
    add("--max_sequences_per_pack", type=int,
        help=f"with --pack_sequences: instances a row holds at most (default "
             f"{DEFAULT_SEQUENCES_PER_PACK})")
    add("--input_split_bytes", type=int, help=argparse.SUPPRESS)  # tests: many splits
    return parser


def split_known_args(parser: argparse.ArgumentParser,
                     argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """This tool's flags and the Beam options; an unknown flag is an error."""
    args, beam_args = parser.parse_known_args(list(argv))
    unknown = unknown_flags(beam_args)
    if unknown:
        raise ConfigError(f"unknown flag {unknown[0].split('=')[0]}: not a flag of this "
                          "tool nor a Beam pipeline option; see --help")
    return args, with_worker_requirements(beam_args)


def requirement_lines(text: str) -> list[str]:
    """The requirements of a pip requirements file's text, comments dropped."""
    return [line.split("#")[0].strip() for line in text.splitlines()
            if line.split("#")[0].strip()]


def with_worker_requirements(beam_args: Sequence[str]) -> list[str]:
    """The Beam flags, plus this package's worker dependencies when workers
    install it from `--setup_file`.

    Beam's workers pip-install the `--setup_file` package without extras, and
    the pipeline's dependencies sit behind the `[pipeline]` extra (so that a
    training environment can install the loaders alone). They travel as
    `--requirements_file=WORKER_REQUIREMENTS` instead, installed by each worker
    from PyPI (`--requirements_cache=skip`: not downloaded here and uploaded
    with the job). A container image (`--sdk_container_image`) has them already.
    """
    from apache_beam.options.pipeline_options import (PipelineOptions, SetupOptions,
                                                      WorkerOptions)

    options = PipelineOptions(list(beam_args))
    setup = options.view_as(SetupOptions)
    if not setup.setup_file or options.view_as(WorkerOptions).sdk_container_image:
        return list(beam_args)
    ours = requirement_lines(WORKER_REQUIREMENTS.read_text())
    if setup.requirements_file:
        with open(setup.requirements_file, encoding="utf-8") as f:
            missing = set(ours) - set(requirement_lines(f.read()))
        if missing:
            raise ConfigError(
                f"--requirements_file={setup.requirements_file} lacks {sorted(missing)[0]}: "
                "with --setup_file, workers get this package's dependencies from it; add "
                f"the lines of {WORKER_REQUIREMENTS}")
        return list(beam_args)
    cache = [] if setup.requirements_cache else ["--requirements_cache=skip"]
    return [*beam_args, f"--requirements_file={WORKER_REQUIREMENTS}", *cache]


def unknown_flags(beam_args: Sequence[str]) -> list[str]:
    """Flags that neither this parser nor any Beam PipelineOptions knows.

    Beam only logs and discards those, so a typo (`--dupe_factr=5`) would
    silently run with the default: this is the check Beam leaves out.
    """
    from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

    parser = _BeamArgumentParser(allow_abbrev=False)
    for options_class in PipelineOptions.__subclasses__():
        options_class._add_argparse_args(parser)
    _, unknown = parser.parse_known_args(list(beam_args))
    return [arg for arg in unknown if arg.startswith("-")]


def parse_args(argv: Sequence[str]) -> tuple[Config, list[str]]:
    """Parses and validates; returns the config and the flags left for Beam."""
    args, beam_args = split_known_args(_parser(), argv)
    if args.max_sequences_per_pack is not None and not args.pack_sequences:
        raise ConfigError("--max_sequences_per_pack sets the rows of --pack_sequences; add "
                          "--pack_sequences or drop it")
    config = Config(
        input_file=args.input_file, output_file=args.output_file,
        output_dir=args.output_dir, vocab_file=args.vocab_file,
        do_lower_case=args.do_lower_case, do_whole_word_mask=args.do_whole_word_mask,
        max_seq_length=args.max_seq_length, random_seed=args.random_seed,
        **_recipe_defaults(args),
        masked_lm_prob=args.masked_lm_prob, short_seq_prob=args.short_seq_prob,
        num_shards=args.num_shards,
        compression="gzip" if args.gzip_compress else (
            None if args.compression == "none" else args.compression),
        nsp_sample_size=args.nsp_sample_size,
        nsp_sample_max_bytes=args.nsp_sample_max_bytes,
        reference_compatible=args.reference_compatible,
        input_split_bytes=args.input_split_bytes, overwrite=args.overwrite,
        recipe=args.recipe, masking=args.masking, padding=args.padding,
        shuffle=args.shuffle or default_shuffle(beam_args),
        next_sentence=args.next_sentence, ngram=args.ngram,
        favor_shorter_ngram=args.favor_shorter_ngram, max_ngram_size=args.max_ngram_size,
        use_v2_feature_names=args.use_v2_feature_names,
        whole_word_segmenter=args.whole_word_segmenter, input_format=args.input_format,
        text_field=args.text_field, progress=args.progress,
        pack_sequences=args.pack_sequences,
        max_sequences_per_pack=(DEFAULT_SEQUENCES_PER_PACK if args.max_sequences_per_pack is None
                                else args.max_sequences_per_pack),
        sentence_splitter=args.sentence_splitter or (
            "none" if args.input_format == "text" else DEFAULT_SPLITTER),
        spm_model_file=args.spm_model_file or None, tokenization=args.tokenization,
        sp_model_file=args.sp_model_file or None, **_dedup_flags(args))
    validate(config)
    return config, beam_args


def runner_name(beam_args: Sequence[str]) -> str:
    """The `--runner` of these Beam flags, by class name (a class path is
    cut to its last part); "" when unset, i.e. Beam's default DirectRunner."""
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    runner = PipelineOptions(list(beam_args)).view_as(StandardOptions).runner or ""
    return str(runner).rsplit(".", 1)[-1]


def default_shuffle(beam_args: Sequence[str]) -> str:
    """`files` on the DirectRunner (Beam's default runner), `runner` elsewhere."""
    runner = runner_name(beam_args)
    return "files" if not runner or "direct" in runner.lower() else "runner"


def _dedup_flags(args: argparse.Namespace) -> dict[str, object]:
    """--dedup is exact unless the run reproduces a tool that keeps every
    document (--reference_compatible, --recipe=d2l); its parameters are near's."""
    dedup = args.dedup or ("none" if args.reference_compatible or args.recipe == "d2l"
                           else "exact")
    if dedup != "near" and (args.dedup_threshold, args.dedup_ngram) != (None, None):
        raise ConfigError("--dedup_threshold and --dedup_ngram set --dedup=near; add it")
    return {"dedup": dedup,
            "dedup_threshold": 0.8 if args.dedup_threshold is None else args.dedup_threshold,
            "dedup_ngram": 5 if args.dedup_ngram is None else args.dedup_ngram}


def _recipe_defaults(args: argparse.Namespace) -> dict[str, int]:
    """Flags whose default depends on --recipe: d2l makes one pass over the
    corpus and pads its predictions to round(max_len * 0.15), as d2l does."""
    if args.recipe == "d2l":
        defaults = {"max_predictions_per_seq":
                    max(1, round(args.max_seq_length * args.masked_lm_prob)),
                    "dupe_factor": 1}
    else:
        defaults = {"max_predictions_per_seq": 20, "dupe_factor": 10}
    given = {name: getattr(args, name) for name in defaults}
    return {name: defaults[name] if value is None else value
            for name, value in given.items()}


def validate(config: Config) -> None:
    """Raises ConfigError for the first problem found, before any work starts."""
    # The d2l recipe computes its vocabulary from the corpus; a SentencePiece
    # model is the vocabulary.
    sentencepiece = (config.spm_model_file or config.sp_model_file
                     or config.tokenization == SENTENCEPIECE)
    required = ("input_file",) if config.recipe == "d2l" or sentencepiece else (
        "input_file", "vocab_file")
    for flag in required:
        if not getattr(config, flag):
            raise ConfigError(f"--{flag} is required")
    if bool(config.output_file) == bool(config.output_dir):
        raise ConfigError("give exactly one of --output_file (exact files, as the "
                          "original) or --output_dir (sharded directory)")
    checks = [
        (config.max_seq_length >= 5, "--max_seq_length must be at least 5 to hold "
         f"[CLS] A [SEP] B [SEP], got {config.max_seq_length}"),
        (config.max_predictions_per_seq >= 1, "--max_predictions_per_seq must be at "
         f"least 1, got {config.max_predictions_per_seq}"),
        (config.dupe_factor >= 1, f"--dupe_factor must be at least 1, got {config.dupe_factor}"),
        (config.dupe_factor <= MAX_DUPE_FACTOR, f"--dupe_factor must be at most "
         f"{MAX_DUPE_FACTOR:,} (seeds give each copy 22 bits), got {config.dupe_factor}"),
        (0 < config.masked_lm_prob <= 1, "--masked_lm_prob must be in (0, 1], got "
         f"{config.masked_lm_prob}"),
        (0 <= config.short_seq_prob <= 1, "--short_seq_prob must be in [0, 1], got "
         f"{config.short_seq_prob}"),
        (config.ngram >= 0, f"--ngram must be at least 0 (0: off), got {config.ngram}"),
        (config.max_ngram_size >= 0, "--max_ngram_size must be at least 0 (0: off), got "
         f"{config.max_ngram_size}"),
        (not (config.ngram and config.max_ngram_size), "--ngram (ALBERT's masking) and "
         "--max_ngram_size (the Model Garden's) are two masking policies; give one"),
        (config.max_ngram_size <= 1 or config.do_whole_word_mask, "--max_ngram_size "
         "spans whole words, as the Model Garden's; add --do_whole_word_mask"),
        (config.whole_word_segmenter == "none" or config.do_whole_word_mask,
         "--whole_word_segmenter finds the whole words that --do_whole_word_mask "
         "masks; add --do_whole_word_mask"),
        (not (config.spm_model_file and (config.sp_model_file or config.tokenization
                                          == SENTENCEPIECE)),
         "--spm_model_file (ALBERT's flag) and --tokenization=SentencePiece "
         "--sp_model_file (the Model Garden's) both name a SentencePiece model; give one"),
        (config.tokenization != SENTENCEPIECE or config.sp_model_file,
         "--tokenization=SentencePiece needs --sp_model_file, the model to tokenize with"),
        (not config.sp_model_file or config.tokenization == SENTENCEPIECE,
         "--sp_model_file is read with --tokenization=SentencePiece (the Model Garden's "
         "flags); add it, or give the model as --spm_model_file (ALBERT's)"),
        (config.whole_word_segmenter == "none" or not sentencepiece,
         "--whole_word_segmenter marks Chinese words among WordPiece's one-character "
         "tokens; SentencePiece pieces are words already: drop it"),
        (not config.reference_compatible or config.input_format == "text",
         "--reference_compatible reads the original's text format; drop --input_format"),
        (config.whole_word_segmenter == "none" or config.masking == "static",
         "--whole_word_segmenter's words are used when masking here; the records "
         "keep plain ids, so dynamic masking could not use them: drop --masking=none"),
        (not (config.ngram and config.reference_compatible
              and not 0 <= config.random_seed < 2**32),
         "--reference_compatible with --ngram seeds numpy's generator as ALBERT's "
         f"runs do, which takes a --random_seed in [0, 2**32), got {config.random_seed}"),
        (config.num_shards is None or config.num_shards >= 1,
         f"--num_shards must be at least 1, got {config.num_shards}"),
        (not (config.reference_compatible and config.dedup != "none"),
         "--reference_compatible keeps every document, as the original does; drop --dedup"),
        (0 < config.dedup_threshold <= 1, "--dedup_threshold is a Jaccard similarity in "
         f"(0, 1], got {config.dedup_threshold}"),
        (config.dedup_ngram >= 1, f"--dedup_ngram must be at least 1, got {config.dedup_ngram}"),
        (config.nsp_sample_size >= 1, "--nsp_sample_size must be at least 1, got "
         f"{config.nsp_sample_size}"),
        (config.nsp_sample_max_bytes >= 1, "--nsp_sample_max_bytes must be positive"),
        (not (config.output_file and config.num_shards),
         "--num_shards applies to --output_dir only; with "
         "--output_file the number of files is the number of names given"),
        (not (config.reference_compatible and config.output_dir),
         "--reference_compatible writes exactly the --output_file list, as the "
         "original; use --output_file"),
        (not config.reference_compatible or config.next_sentence == "none"
         or (config.masking, config.padding) == ("static", "fixed"),
         "--reference_compatible writes the original's padded, statically masked "
         "records; drop --masking and --padding"),
        (not config.reference_compatible or config.next_sentence != "none"
         or (config.masking, config.padding) == ("none", "fixed"),
         "--reference_compatible with --next_sentence=none writes ELECTRA's padded, "
         "unmasked records; add --masking=none and drop --padding"),
        (not (config.pack_sequences and config.reference_compatible),
         "--reference_compatible writes the original's records, one instance each; "
         "drop --pack_sequences (or --reference_compatible)"),
        (config.max_sequences_per_pack >= 2, "--max_sequences_per_pack must be at least 2, "
         f"got {config.max_sequences_per_pack} (one instance a row: drop --pack_sequences)"),
    ]
    if config.recipe == "d2l":
        checks += [
            (not config.vocab_file and not sentencepiece, "--recipe=d2l computes its "
             "vocabulary from the corpus (written as vocab.txt); drop --vocab_file, "
             "--spm_model_file and --tokenization"),
            (bool(config.output_dir), "--recipe=d2l writes vocab.txt beside its "
             "shards; use --output_dir"),
            (not config.reference_compatible, "--reference_compatible reproduces the "
             "original BERT script; drop it with --recipe=d2l"),
            (config.dedup == "none", "--recipe=d2l keeps every paragraph, as d2l does; "
             "drop --dedup"),
            ((config.masking, config.padding) == ("static", "fixed"), "--recipe=d2l "
             "writes d2l's padded, statically masked batches; --masking and "
             "--padding apply to --recipe=bert"),
            (not config.pack_sequences, "--recipe=d2l writes d2l's batches, an instance a "
             "record; --pack_sequences applies to --recipe=bert"),
            (not config.do_whole_word_mask, "--do_whole_word_mask has no effect with "
             "--recipe=d2l, whose tokens are whole words; drop it"),
            ((config.input_format, config.sentence_splitter) == ("text", "none"),
             "--recipe=d2l reads d2l's WikiText-2 text (a paragraph per line); "
             "--input_format and --sentence_splitter apply to --recipe=bert"),
            ((config.next_sentence, config.ngram, config.max_ngram_size,
              config.use_v2_feature_names) == ("nsp", 0, 0, False),
             "--recipe=d2l is d2l's NSP and masking; --next_sentence, --ngram, "
             "--max_ngram_size and --use_v2_feature_names apply to --recipe=bert"),
        ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def default_num_shards(input_bytes: int, dupe_factor: int) -> int:
    """Enough shards that each holds ~TARGET_SHARD_BYTES of expected output."""
    expected = input_bytes * dupe_factor * OUTPUT_BYTES_PER_INPUT_BYTE_PER_DUPE
    return max(1, math.ceil(expected / TARGET_SHARD_BYTES))
