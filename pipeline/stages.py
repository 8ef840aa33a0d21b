"""What the stages need, derived once from the flags and the vocabulary.

The Beam pipeline (`build`), the reference run and the disk estimate all take
their instance, masking and record settings from `StageSettings`, so a flag changes
them alike.
"""

from __future__ import annotations

import dataclasses

from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.cli import PIPELINE_EXTRA
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.transforms.handoff.shuffle.frames import EntryCodebook
from bert_pretraining_data.transforms.instances.masking import MaskingConfig, masking_config
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig
from bert_pretraining_data.transforms.instances.units import InstanceKernels
from bert_pretraining_data.transforms.pack.plan import prediction_budget
from bert_pretraining_data.transforms.tokenize.engines import TOKENIZERS
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary
from bert_pretraining_data.transforms.write.formats import output_format
from bert_pretraining_data.transforms.write.formats.output_format import WriterNotInstalled
from bert_pretraining_data.transforms.write.rows import InstanceRows, PackedRows, RowWriter
from bert_pretraining_data.transforms.write.tf_example import RecordLayout


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
class StageSettings:
    """What the stages need, derived once from the flags and the vocabulary."""

    instances: InstanceConfig
    masking: MaskingConfig
    rows: RowWriter  # how the shard writer makes records (the output format's)
    masks_here: bool  # --masking=static: instances are masked as they are made
    tokenizer: TokenizerSpec  # the workers' tokenizer, with the engine the run chose
    # a held-out split's (--validation_fraction, --test_fraction)
    held_out: "StageSettings | None" = None
    indexed_dtype: str | None = None  # a tokenized corpus' ids' numpy dtype (the format's)
    entry_codebook: EntryCodebook | None = None  # the runner's shuffle frames' (prepare)

    @property
    def instance_masking(self) -> MaskingConfig | None:
        """The masking CreateInstances applies: None when the loaders mask at
        load time (--masking=none), with the same function."""
        return self.masking if self.masks_here else None

    def instance_kernels(self, *, reference: bool = False) -> InstanceKernels:
        """The instance kernels' settings and workspace as CreateInstances builds them, for the
        stages that make instances outside Beam (the disk estimate; with
        `reference`, --reference_compatible's run)."""
        return InstanceKernels.of(self.instances, self.instance_masking, reference=reference)

    def with_entry_codebook(self, codebook: EntryCodebook | None) -> "StageSettings":
        """These stages, and a held-out split's, with the shuffle frames'
        codebook (transforms.handoff.shuffle.frames)."""
        held_out = self.held_out.with_entry_codebook(codebook) if self.held_out else None
        return dataclasses.replace(self, entry_codebook=codebook, held_out=held_out)

    @classmethod
    def of(cls, config: Config, vocab: Vocabulary, tokenizer_engine: str = TOKENIZERS
           ) -> "StageSettings":
        """Raises ConfigError when the tokenizer cannot frame what the objective
        writes, or when the output's writer is not installed. A tokenizer.json
        is encoded by `tokenizer_engine` (prepare.tokenizer_engine chose it)."""
        check_framing(config, vocab)
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
        fmt = output_format(config.output_format)
        try:  # the format's rows, and a tokenized corpus' ids' type: what the vocabulary needs
            rows = fmt.row_writer(rows, len(vocab), config)
            indexed_dtype = fmt.corpus_dtype(len(vocab))
        except WriterNotInstalled as err:
            raise ConfigError(f"{err}: {PIPELINE_EXTRA}") from None
        except ValueError as err:
            raise ConfigError(str(err)) from None
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
                single_segment=config.recipe == "roberta"),
            masking=masking, rows=rows, masks_here=config.masking == "static",
            held_out=(cls.of(held_out_config(config), vocab, tokenizer_engine)
                      if config.split_fractions.active else None),
            indexed_dtype=indexed_dtype,
            tokenizer=dataclasses.replace(config.tokenizer, engine=tokenizer_engine))


def held_out_config(config: Config) -> Config:
    """A held-out split's flags: each document once, masked as training is
    (--held_out_masking says otherwise): a split masked at load time by the
    trainer's collator, as RoBERTa's and ModernBERT's evaluation loaders do,
    must not hold masks already. The same objective, framing, packing and
    format (its seed: split_seed)."""
    return dataclasses.replace(config, dupe_factor=1,
                               masking=config.held_out_masking or config.masking,
                               validation_fraction=0.0, test_fraction=0.0)


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
        # unless there is no pair task either (ELECTRA's records), the rows
        # are packed or the format's layout is new (MDS's, which never had them).
        masked_lm=config.masking == "static" or (
            config.next_sentence != "none" and not config.pack_sequences
            and output_format(config.output_format).empty_masked_lm),
        packed=config.pack_sequences,
        source=config.mixture is not None)  # a mixture's: each instance names its source
