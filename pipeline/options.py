"""Command-line flags: the original's names and defaults, plus this pipeline's.

An existing `create_pretraining_data.py` command line runs unchanged (absl
spellings included: `--do_lower_case=False`, `--nodo_lower_case`, bare
`--do_whole_word_mask`). Each flag is defined once, as a field of `Config`
that carries its help; the parser is made from the fields. Flags the parser
does not know go to Beam (`pipeline.beam_options`). Everything is validated
here, before any pipeline object exists, and turned into a frozen `Config`
that the stages receive: no global FLAGS in library code.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any, Callable, NoReturn, Sequence

from bert_pretraining_data.pipeline.beam_options import (ConfigError, default_shuffle,
                                                         split_known_args)
from bert_pretraining_data.pipeline.cli import PIPELINE_EXTRA
from bert_pretraining_data.transforms.dedup.decisions import DEDUP_MODES
from bert_pretraining_data.transforms.instances.masking import MaskingConfig, masking_config
from bert_pretraining_data.transforms.instances.pairs import (NEXT_SENTENCE_OBJECTIVES,
                                                              InstanceConfig)
from bert_pretraining_data.transforms.pack.plan import prediction_budget
from bert_pretraining_data.transforms.read.tables import INPUT_FORMATS
from bert_pretraining_data.transforms.seeds import MAX_DUPE_FACTOR
from bert_pretraining_data.transforms.tokenize.chinese_words import SEGMENTERS
from bert_pretraining_data.transforms.tokenize.sentences import DEFAULT_SPLITTER, SPLITTERS
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import (SENTENCEPIECE, WORDPIECE,
                                                                      TokenizerSpec)
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary
from bert_pretraining_data.transforms.write.parquet_rows import (COMPRESSIONS as
                                                                 PARQUET_COMPRESSIONS,
                                                                 ParquetRows, polars_installed)
from bert_pretraining_data.transforms.write.rows import InstanceRows, PackedRows
from bert_pretraining_data.transforms.write.shuffle_entries import SHUFFLES
from bert_pretraining_data.transforms.write.tf_example import RecordLayout

TARGET_SHARD_BYTES = 256 << 20
# Output bytes per input byte per dupe: ~2 (padded int64 features at the
# default max_seq_length, measured on WikiText-2).
OUTPUT_BYTES_PER_INPUT_BYTE_PER_DUPE = 2
# The sections of --help, in the order of the pipeline's stages.
GROUPS = {
    "input": "the corpus and how it is read",
    "dedup": "documents dropped as copies of others, before tokenizing",
    "tokenizer": "WordPiece (the original's) or SentencePiece (ALBERT's, the Model Garden's)",
    "instances": "how documents become sequence pairs",
    "masking": "the masked-LM task",
    "packing": "several instances in a record",
    "output": "the records and where they are written",
    "run": "what the run reproduces and how it runs",
}
_VALUE_TYPES = {"int": int, "float": float}
RECIPES = ("bert", "roberta", "d2l")


@dataclasses.dataclass(frozen=True)
class Flag:
    """How a field is spelled on the command line. The parser reads the value
    as the field's annotation says: int, float, str, or a boolean the absl way."""

    group: str  # its section of --help, a key of GROUPS
    help: str  # what it does; --help adds the default
    choices: Sequence[str] | None = None
    type: Callable[[str], object] | None = None  # a conversion other than the annotation's
    # A boolean of an absl script (the original's, ALBERT's, the Model Garden's):
    # also spelled --noNAME, as absl spells false.
    absl: bool = False
    parser_default: object = None  # see flag()
    default_help: str | None = None  # the default in words, when other flags decide it
    hidden: bool = False  # left out of --help


def flag(group: str, help: str, *, default: object = dataclasses.MISSING,
         parser_default: object = dataclasses.MISSING, **spec: Any) -> Any:
    """A `Config` field that is a flag.

    Args:
        group, help, spec: the `Flag` fields.
        default: the field's value when the flag is not given; left out for a
            value that parse_args derives from other flags (say how in
            `default_help`).
        parser_default: the parser's default if not `default` (or None when
            that is left out): None for a flag that parse_args must see unset,
            as it applies only with another flag.
    """
    if parser_default is dataclasses.MISSING:
        parser_default = None if default is dataclasses.MISSING else default
    return dataclasses.field(default=default, metadata={
        "flag": Flag(group, help, parser_default=parser_default, **spec)})


def _path_or_none(text: str) -> str | None:
    """No path for an empty one (`--spm_model_file=`)."""
    return text or None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The flags, validated: one field per flag, in the manifest's order."""

    input_file: str | None = flag(
        "input", "input text file(s): comma-separated paths or globs, local or gs://, "
        ".gz/.bz2 by extension; one sentence per line, blank line between documents",
        default=None, default_help="none; required")
    output_file: str | None = flag(
        "output", "exact output file(s), comma-separated, as the original (or --output_dir)",
        default=None)
    output_dir: str | None = flag(
        "output", "directory for part-NNNNN-of-NNNNN.tfrecord shards and manifest.json "
        "(or --output_file)", default=None)
    vocab_file: str | None = flag(
        "tokenizer", "the WordPiece vocab.txt of the model to train (with "
        "--spm_model_file, ALBERT's .vocab beside it, which is not read)", default=None,
        default_help="none; required unless a SentencePiece model or --recipe=d2l gives "
                     "the vocabulary")
    do_lower_case: bool = flag(
        "tokenizer", "lower-case and strip accents (uncased models); not with "
        "--tokenizer_file, whose normalizer decides", default=True, absl=True,
        parser_default=None)
    do_whole_word_mask: bool = flag(
        "masking", "mask whole words instead of WordPieces", default=False, absl=True)
    max_seq_length: int = flag(
        "instances", "tokens an instance holds at most, [CLS] and [SEP]s included",
        default=128)
    max_predictions_per_seq: int = flag(
        "masking", "masked-LM predictions an instance holds at most",
        default_help="20; with --recipe=d2l or roberta, round(max_seq_length * "
                     "masked_lm_prob)")
    random_seed: int = flag(
        "instances", "the seed of every random choice: sequence lengths, random next "
        "sentences, masks", default=12345)
    dupe_factor: int = flag(
        "instances", "copies of the data, each with different masks",
        default_help="10; 1 with --recipe=d2l, which makes one pass as d2l does, and with "
                     "--recipe=roberta, whose masks are drawn at load time")
    masked_lm_prob: float = flag(
        "masking", "the fraction of an instance's tokens masked (up to "
        "--max_predictions_per_seq)", default=0.15)
    short_seq_prob: float = flag(
        "instances", "the chance that an instance aims at a random shorter length (2 to "
        "max_seq_length - 3 tokens), as the original, so that short inputs are seen too",
        default=0.1)
    num_shards: int | None = flag(
        "output", "with --output_dir: the number of shards", default=None,
        default_help=f"one per ~{TARGET_SHARD_BYTES >> 20} MiB of expected output")
    compression: str | None = flag(  # parse_args: None for "none", gzip for --gzip_compress
        "output", "with --output_dir: gzip compresses the shards (tf.data "
        "compression_type='GZIP')", choices=["none", "gzip"], parser_default="none")
    nsp_sample_size: int = flag(
        "instances", "documents in the sample random next sentences come from (a side "
        "input)", default=10_000)
    nsp_sample_max_bytes: int = flag(
        "instances", "cap on the sample's token bytes", default=256 << 20)
    reference_compatible: bool = flag(
        "run", "reproduce the original script record for record: one process, one "
        "random.Random, the whole corpus and all instances in memory like the original; "
        "for migration checks, not for large corpora", default=False)
    input_split_bytes: int | None = flag(
        "input", "bytes per split of the input (tests: many splits)", default=None,
        hidden=True)
    overwrite: bool = flag(
        "output", "replace a dataset already at the output location (only once this run "
        "has succeeded)", default=False)
    recipe: str = flag(
        "run", "bert: the original's instances and features; roberta: RoBERTa's "
        "DOC-SENTENCES (whole consecutive sentences of one document up to max_seq_length, "
        "one segment framed by the tokenizer, e.g. <s> ... </s>, no pair task), masked at "
        "load time unless --masking=static; d2l: the WikiText-2 dataset of d2l.ai (one "
        "paragraph per line, word tokens, a vocabulary computed from the corpus, written "
        "as vocab.txt)", choices=list(RECIPES), default="bert")
    masking: str = flag(
        "masking", "static: mask here, as the original; none: leave instances unmasked "
        "for dynamic masking at load time (loaders.torch_data)",
        choices=["static", "none"], default="static", parser_default=None,
        default_help="static; none with --recipe=roberta, RoBERTa's dynamic masking")
    padding: str = flag(
        "output", "fixed: pad to max_seq_length / max_predictions_per_seq, as the "
        "original; none: variable-length features, padded per batch at load time",
        choices=["fixed", "none"], default="fixed", parser_default=None,
        default_help="fixed; none with --output_format=parquet, whose rows are unpadded")
    output_format: str = flag(
        "output", "tfrecord: tf.train.Example records, as the original; parquet: the same "
        "instances in the same shards and order as unpadded Parquet rows (polars), for "
        "Hugging Face datasets, Spark, DuckDB", choices=["tfrecord", "parquet"],
        default="tfrecord")
    parquet_compression: str = flag(
        "output", "with --output_format=parquet: the codec inside each file",
        choices=list(PARQUET_COMPRESSIONS), default="zstd", parser_default=None)
    shuffle: str = flag(
        "run", "how records reach their shard: runner (the runner's GroupByKey; on "
        "Dataflow the Shuffle service) or files (temporary bucket files, for the "
        "DirectRunner, which holds a GroupByKey's input in memory); the same bytes "
        "either way", choices=list(SHUFFLES),
        default_help="files on the DirectRunner (Beam's default runner), runner on others")
    next_sentence: str = flag(
        "instances", "the sentence-pair task: nsp, BERT's next sentence prediction; sop, "
        "ALBERT's sentence order prediction (B is the actual next segment, swapped with A "
        "half the time; label 1 = swapped); none, ELECTRA's and RoBERTa's full sequences "
        "(filled to max_seq_length across a document's sentences, no label; with "
        "--masking=none, ELECTRA's input_ids, input_mask and segment_ids only)",
        choices=list(NEXT_SENTENCE_OBJECTIVES), default="nsp", parser_default=None,
        default_help="nsp; none with --recipe=roberta")
    ngram: int = flag(
        "masking", "ALBERT's n-gram masking: mask spans of up to N words (or WordPieces), "
        "lengths weighted 1/n; 0: BERT's masking. ALBERT's features (token_boundary) are "
        "written with --ngram or --next_sentence=sop", default=0)
    favor_shorter_ngram: bool = flag(
        "masking", "with --ngram: n-gram lengths weighted 1/n, else n/sum (ALBERT's flag)",
        default=True, absl=True)
    max_ngram_size: int = flag(
        "masking", "the TF Model Garden's masking: spans of up to N whole words (with "
        "--do_whole_word_mask), lengths weighted 1/n, each span replaced as one; 1: its "
        "token (or whole-word) masking; 0: BERT's masking", default=0)
    use_v2_feature_names: bool = flag(
        "output", "the Model Garden's names: input_word_ids and input_type_ids for "
        "input_ids and segment_ids", default=False, absl=True)
    whole_word_segmenter: str = flag(
        "masking", "with --do_whole_word_mask: jieba, Chinese whole words (Chinese "
        "BERT-wwm): the characters that continue a jieba word are masked with it; none: "
        "WordPiece's whole words only", choices=list(SEGMENTERS), default="none")
    input_format: str = flag(
        "input", "text: one sentence per line, a blank line between documents, as the "
        "original; jsonl: one JSON object per line, a document each; parquet: a document "
        "per row (Hugging Face's corpora); wikipedia: a MediaWiki XML dump "
        "(pages-articles*.xml.bz2), an article per document",
        choices=list(INPUT_FORMATS), default="text")
    text_field: str = flag(
        "input", "with --input_format=jsonl|parquet: the field holding a document's text",
        default="text")
    sentence_splitter: str = flag(
        "input", "how a paragraph (a line of a document's text) becomes sentences: none, a "
        "line is a sentence; otherwise, the named splitter's sentences (docs/corpora.md)",
        choices=list(SPLITTERS),
        default_help=f"none for --input_format=text, {DEFAULT_SPLITTER} for the others")
    progress: str = flag(
        "run", "auto: a local run prints its progress (a live line on a terminal, a line "
        "every 30 s in a log); a Dataflow run prints its console URL; none: quiet until "
        "the end", choices=["auto", "none"], default="auto")
    dedup: str = flag(
        "dedup", "documents kept once: exact, those whose normalised text (NFKC, case "
        "folded, whitespace collapsed) is the same; near, also those whose word n-gram "
        "Jaccard similarity reaches --dedup_threshold (MinHash and LSH, candidates "
        "verified, clusters formed transitively); none, every document",
        choices=list(DEDUP_MODES),
        default_help="exact; none with --reference_compatible or --recipe=d2l, which keep "
                     "every document as the tools they reproduce do")
    dedup_threshold: float = flag(
        "dedup", "with --dedup=near: the Jaccard similarity of two documents' word n-grams "
        "from which they are near copies", default=0.8, parser_default=None)
    dedup_ngram: int = flag(
        "dedup", "with --dedup=near: words per shingle", default=5, parser_default=None)
    pack_sequences: bool = flag(
        "packing", "pack up to --max_sequences_per_pack whole instances into each row of "
        "max_seq_length tokens, with MLPerf's packed features (input_mask holds each "
        "token's sequence index, positions restart per sequence, "
        "next_sentence_positions/_labels/_weights per sequence): no padding to train on "
        "(docs/packing.md); false: one instance a record, as the original",
        default=False)
    max_sequences_per_pack: int = flag(  # 3: Krell et al.'s depth, and MLPerf's
        "packing", "with --pack_sequences: instances a row holds at most", default=3,
        parser_default=None)
    spm_model_file: str | None = flag(
        "tokenizer", "ALBERT's flag: tokenize with this SentencePiece model (e.g. "
        "30k-clean.model) as ALBERT's script does; ids are the model's",
        type=_path_or_none, default=None)
    tokenization: str = flag(
        "tokenizer", "the Model Garden's flag: WordPiece (--vocab_file) or SentencePiece "
        "(--sp_model_file), as its script tokenizes", choices=[WORDPIECE, SENTENCEPIECE],
        default=WORDPIECE)
    sp_model_file: str | None = flag(
        "tokenizer", "the Model Garden's flag: with --tokenization=SentencePiece, the "
        "SentencePiece model", type=_path_or_none, default=None)
    tokenizer_file: str | None = flag(
        "tokenizer", "a Hugging Face tokenizer.json (byte-level BPE, WordPiece, Unigram): "
        "each line encoded alone by the tokenizers library, framed by the file's "
        "post-processor, padded with its pad token (in place of --vocab_file)",
        type=_path_or_none, default=None)

    @property
    def token_boundary(self) -> bool:
        """ALBERT's objectives write ALBERT's token_boundary feature."""
        return self.next_sentence == "sop" or self.ngram > 0

    @property
    def tokenizer(self) -> TokenizerSpec:
        """WordPiece (--vocab_file), SentencePiece (ALBERT's --spm_model_file, the
        Model Garden's --tokenization=SentencePiece --sp_model_file) or a
        tokenizer.json (--tokenizer_file), grouping words where the masking
        or the features read them."""
        return dataclasses.replace(TokenizerSpec.of(self.flags()),
                                   words=self.do_whole_word_mask or self.token_boundary)

    def flags(self) -> dict[str, object]:
        """The flags as recorded in the manifest."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class _Spellings:
    """Flags that are not fields of `Config`: other tools' spellings of one."""

    gzip_compress: bool = flag(
        "output", "the Model Garden's spelling of --compression=gzip", default=False,
        absl=True)


def check_framing(config: Config, vocab: Vocabulary) -> None:
    """Raises ConfigError when the tokenizer cannot frame what the objective
    writes: sentence pairs need BERT's `CLS A SEP B SEP` with B of type 1."""
    if config.recipe != "roberta" and not vocab.framing.bert_pairs:
        raise ConfigError(
            f"{config.tokenizer.path}: its tokenizer frames two segments as CLS A SEP SEP "
            "B SEP or with one segment type (RoBERTa's); --next_sentence="
            f"{config.next_sentence} writes BERT's CLS A SEP B SEP pairs: use "
            "--recipe=roberta (one segment), or a tokenizer.json with BERT's pair framing")


@dataclasses.dataclass(frozen=True)
class Stages:
    """What the stages need, derived once from the flags and the vocabulary."""

    instances: InstanceConfig
    masking: MaskingConfig
    layout: RecordLayout
    rows: InstanceRows | PackedRows | ParquetRows  # how the shard writer makes records

    @classmethod
    def of(cls, config: Config, vocab: Vocabulary) -> "Stages":
        """Raises ConfigError when the tokenizer cannot frame what the objective writes."""
        check_framing(config, vocab)
        single_segment = config.recipe == "roberta"
        masking = masking_config(
            vocab, masked_lm_prob=config.masked_lm_prob,
            max_predictions_per_seq=config.max_predictions_per_seq,
            do_whole_word_mask=config.do_whole_word_mask, ngram=config.ngram,
            favor_shorter_ngram=config.favor_shorter_ngram,
            max_ngram_size=config.max_ngram_size)
        layout = dataclasses.replace(record_layout(config), pad_id=vocab.pad_id)
        if config.pack_sequences:
            rows = PackedRows(layout, config.max_seq_length,
                              row_prediction_budget(config, masking),
                              config.max_sequences_per_pack)
        else:
            rows = InstanceRows(layout, config.max_seq_length, config.max_predictions_per_seq)
        if config.output_format == "parquet":
            rows = ParquetRows(rows, len(vocab), config.parquet_compression)
        return cls(
            instances=InstanceConfig(
                max_seq_length=config.max_seq_length, short_seq_prob=config.short_seq_prob,
                cls_id=vocab.cls_id, sep_id=vocab.sep_id, next_sentence=config.next_sentence,
                continues=tuple(vocab.continuation_flags()) if config.token_boundary else None,
                # segmenters mark whole words in the ids; SentencePiece, its
                # unknown pieces that continue one; a tokenizer.json, every
                # continuation (transforms.tokenize)
                segmented=(config.whole_word_segmenter != "none"
                           or config.tokenizer.marks_continuations),
                single_segment=single_segment),
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
    """A boolean flag's value as absl reads it (true/false, t/f, 1/0, yes/no, any case)."""
    lowered = text.lower()
    if lowered in ("true", "t", "1", "yes"):
        return True
    if lowered in ("false", "f", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one-line ConfigErrors, not usage and exit."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="create-pretraining-data", allow_abbrev=False,
        usage="%(prog)s --input_file=... (--output_file=... | --output_dir=...) "
              "[--vocab_file=...] [flags] [Beam pipeline options]",
        description="BERT masked-LM + next-sentence-prediction TFRecords on Apache Beam. "
                    "Unknown flags are Beam pipeline options (--runner, ...).")
    groups = {name: parser.add_argument_group(name, text) for name, text in GROUPS.items()}
    for field in (*dataclasses.fields(Config), *dataclasses.fields(_Spellings)):
        _add_flag(groups[field.metadata["flag"].group], field)
    return parser


def _add_flag(group: argparse._ArgumentGroup, field: dataclasses.Field) -> None:
    """Registers one field's flag (and its absl --noNAME spelling) in its group."""
    spec: Flag = field.metadata["flag"]
    default = spec.parser_default
    name, kind = f"--{field.name}", field.type.split(" | ")[0]  # the annotation: int, str, ...
    help = argparse.SUPPRESS if spec.hidden else (
        f"{spec.help} (default: {_default_help(field)})".replace("%", "%%"))
    if kind == "bool":
        group.add_argument(name, type=parse_bool, nargs="?", const=True, default=default,
                           metavar="true|false", help=help)
        if spec.absl:
            group.add_argument(f"--no{field.name}", dest=field.name, action="store_false",
                               default=default, help=argparse.SUPPRESS)
    else:
        group.add_argument(name, type=spec.type or _VALUE_TYPES.get(kind),
                           choices=spec.choices, default=default, help=help)


def _default_help(field: dataclasses.Field) -> str:
    """A flag's default as --help states it."""
    spec: Flag = field.metadata["flag"]
    value = spec.parser_default if field.default is dataclasses.MISSING else field.default
    if spec.default_help:
        text = spec.default_help
    elif value is None or isinstance(value, bool):
        text = str(value).lower()  # none, true, false
    else:
        text = str(value)
    return f"{text}; --no{field.name} for false" if spec.absl else text


def parse_args(argv: Sequence[str]) -> tuple[Config, list[str]]:
    """Parses and validates; returns the config and the flags left for Beam."""
    args, beam_args = split_known_args(_parser(), argv)
    # A flag not given (None) takes its field's default, or one that depends on others.
    given = {field.name: getattr(args, field.name) for field in dataclasses.fields(Config)
             if getattr(args, field.name) is not None}
    config = Config(**{
        **_dependent_defaults(args, beam_args), **given,
        "compression": "gzip" if args.gzip_compress else (
            None if args.compression == "none" else args.compression)})
    if "max_sequences_per_pack" in given and not config.pack_sequences:
        raise ConfigError("--max_sequences_per_pack sets the rows of --pack_sequences; add "
                          "--pack_sequences or drop it")
    if config.dedup != "near" and given.keys() & {"dedup_threshold", "dedup_ngram"}:
        raise ConfigError("--dedup_threshold and --dedup_ngram set --dedup=near; add it")
    if config.output_format == "parquet" and given.get("padding") == "fixed":
        raise ConfigError("--output_format=parquet writes unpadded rows (their lengths imply "
                          "input_mask and masked_lm_weights); drop --padding=fixed")
    if config.output_format != "parquet" and "parquet_compression" in given:
        raise ConfigError("--parquet_compression applies to --output_format=parquet; add it "
                          "or drop --parquet_compression")
    if config.tokenizer_file and "do_lower_case" in given:
        raise ConfigError("--do_lower_case does not apply to --tokenizer_file: the "
                          "tokenizer.json's normalizer decides the case; drop it")
    validate(config)
    return config, beam_args


def _dependent_defaults(args: argparse.Namespace, beam_args: Sequence[str]) -> dict[str, object]:
    """The defaults that other flags or the runner decide (their --help says how).

    d2l makes one pass over the corpus and pads its predictions to
    round(max_len * 0.15), as d2l does; a run that reproduces a tool which keeps
    every document (--reference_compatible, --recipe=d2l) does not dedup.
    """
    d2l, roberta = args.recipe == "d2l", args.recipe == "roberta"
    return {
        "max_predictions_per_seq": (max(1, round(args.max_seq_length * args.masked_lm_prob))
                                    if d2l or roberta else 20),
        "dupe_factor": 1 if d2l or roberta else 10,
        "masking": "none" if roberta else "static",
        "padding": "none" if args.output_format == "parquet" else "fixed",
        "next_sentence": "none" if roberta else "nsp",
        "shuffle": default_shuffle(beam_args),
        "sentence_splitter": "none" if args.input_format == "text" else DEFAULT_SPLITTER,
        "dedup": "none" if args.reference_compatible or d2l else "exact",
    }


def validate(config: Config) -> None:
    """Raises ConfigError for the first problem found, before any work starts."""
    # The d2l recipe computes its vocabulary from the corpus; a SentencePiece
    # model is the vocabulary.
    sentencepiece = (config.spm_model_file or config.sp_model_file
                     or config.tokenization == SENTENCEPIECE)
    required = ("input_file",) if (config.recipe == "d2l" or sentencepiece
                                   or config.tokenizer_file) else ("input_file", "vocab_file")
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
        (not (config.tokenizer_file and (config.vocab_file or sentencepiece)),
         "--tokenizer_file is the whole tokenizer (its vocabulary included); drop "
         "--vocab_file, --spm_model_file and --tokenization=SentencePiece"),
        (not (config.tokenizer_file and config.reference_compatible),
         "--reference_compatible reproduces a script that tokenizes with its own "
         "vocabulary; drop --tokenizer_file"),
        (not (config.tokenizer_file and config.masking == "none" and config.do_whole_word_mask),
         "with --tokenizer_file, a word's tokens are known when tokenizing, not in the "
         "records: whole-word masking needs --masking=static"),
        (config.whole_word_segmenter == "none" or not (sentencepiece or config.tokenizer_file),
         "--whole_word_segmenter marks Chinese words among WordPiece's one-character "
         "tokens; SentencePiece's pieces and a tokenizer.json's word ids are words "
         "already: drop it"),
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
    if config.output_format == "parquet":
        checks += [
            (config.compression is None, "--output_format=parquet compresses inside each "
             "file (--parquet_compression, default zstd); drop --compression and "
             "--gzip_compress"),
            (not config.reference_compatible, "--reference_compatible reproduces the "
             "original's TFRecord files; drop --output_format=parquet"),
            (config.recipe != "d2l", "--recipe=d2l writes d2l's TFRecord features; drop "
             "--output_format=parquet"),
            (bool(config.output_dir), "--output_format=parquet writes part-NNNNN-of-NNNNN."
             "parquet shards: use --output_dir"),
            (polars_installed(), "--output_format=parquet writes with polars, which is not "
             f"installed: {PIPELINE_EXTRA}"),
        ]
    if config.recipe == "roberta":
        checks += [
            (config.next_sentence == "none", "--recipe=roberta has no sentence-pair task "
             "(RoBERTa's DOC-SENTENCES); drop --next_sentence"),
            (not config.reference_compatible, "--reference_compatible reproduces the "
             "original BERT script; drop it with --recipe=roberta"),
            ((config.ngram, config.max_ngram_size) == (0, 0), "--recipe=roberta masks "
             "tokens (or whole words) as RoBERTa does; drop --ngram and --max_ngram_size"),
        ]
    if config.recipe == "d2l":
        checks += [
            (not (config.vocab_file or sentencepiece or config.tokenizer_file),
             "--recipe=d2l computes its "
             "vocabulary from the corpus (written as vocab.txt); drop --vocab_file, "
             "--spm_model_file, --tokenization and --tokenizer_file"),
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
