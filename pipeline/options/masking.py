"""The masked-LM task: how many tokens, which, and whether masked here at all."""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import AbstractSet, Any, Sequence

from bert_pretraining_data.pipeline.command_line import Check, FlagGroup, flag
from bert_pretraining_data.transforms.tokenize.chinese_words import SEGMENTERS
from bert_pretraining_data.transforms.write.formats import output_format


# How far masked_lm_prob x max_seq_length may pass --max_predictions_per_seq
# before a run says so: the original's 128 x 0.15 = 19.2 under its 20 passes.
PREDICTION_CAP_MARGIN = 1.05


def prediction_cap_warning(config: Any) -> str | None:
    """A full instance gets min(masked_lm_prob x its tokens, the cap) masks.
    The original keeps the cap of 20 at any length, silently: at 512 tokens
    and 0.15 it masks 4% where 15% was asked. The drop-in default stays; this
    says when it bites (the d2l and RoBERTa recipes derive their cap)."""
    wanted = config.masked_lm_prob * config.max_seq_length
    cap = config.max_predictions_per_seq
    if config.masking != "static" or wanted <= PREDICTION_CAP_MARGIN * cap:
        return None
    return (f"--max_predictions_per_seq={cap} masks at most {cap / config.max_seq_length:.1%} "
            f"of a full {config.max_seq_length}-token instance's tokens, not the "
            f"--masked_lm_prob={config.masked_lm_prob:g} asked; add "
            f"--max_predictions_per_seq={math.ceil(wanted)}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MaskingFlags(FlagGroup):
    SECTION = ("masking", "the masked-LM task")

    do_whole_word_mask: bool = flag(
        "mask whole words instead of WordPieces", default=False, absl=True)
    max_predictions_per_seq: int = flag(
        "masked-LM predictions an instance holds at most",
        default_help="20; with --recipe=d2l or roberta, round(max_seq_length * "
                     "masked_lm_prob)")
    masked_lm_prob: float = flag(
        "the fraction of an instance's tokens masked (up to "
        "--max_predictions_per_seq)", default=0.15)
    masking: str = flag(
        "static: mask here, as the original; none: leave instances unmasked "
        "for dynamic masking at load time (loaders.torch_data)",
        choices=["static", "none"], default="static", parser_default=None,
        default_help="static; none with --recipe=roberta, RoBERTa's dynamic masking, and "
                     "with --output_format=megatron, which Megatron-LM masks at training time")
    ngram: int = flag(
        "ALBERT's n-gram masking: mask spans of up to N words (or WordPieces), "
        "lengths weighted 1/n; 0: BERT's masking. ALBERT's features (token_boundary) are "
        "written with --ngram or --next_sentence=sop", default=0)
    favor_shorter_ngram: bool = flag(
        "with --ngram: n-gram lengths weighted 1/n, else n/sum (ALBERT's flag)",
        default=True, absl=True)
    max_ngram_size: int = flag(
        "the TF Model Garden's masking: spans of up to N whole words (with "
        "--do_whole_word_mask), lengths weighted 1/n, each span replaced as one; 1: its "
        "token (or whole-word) masking; 0: BERT's masking", default=0)
    whole_word_segmenter: str = flag(
        "with --do_whole_word_mask: jieba, Chinese whole words (Chinese "
        "BERT-wwm): the characters that continue a jieba word are masked with it; none: "
        "WordPiece's whole words only", choices=list(SEGMENTERS), default="none")

    @classmethod
    def defaults(cls, args: argparse.Namespace, beam_args: Sequence[str]) -> dict[str, Any]:
        """d2l and RoBERTa pad their predictions to round(max_seq_length *
        masked_lm_prob), as they do; RoBERTa masks at load time."""
        derived = args.recipe in ("d2l", "roberta")
        return {"max_predictions_per_seq": (max(1, round(args.max_seq_length
                                                         * args.masked_lm_prob))
                                            if derived else 20),
                "masking": ("none" if args.recipe == "roberta"
                            or not output_format(args.output_format).makes_instances
                            else "static")}

    @classmethod
    def checks(cls, config: Any, given: AbstractSet[str]) -> list[Check]:
        return [
            (config.max_predictions_per_seq >= 1, "--max_predictions_per_seq must be at "
             f"least 1, got {config.max_predictions_per_seq}"),
            (0 < config.masked_lm_prob <= 1, "--masked_lm_prob must be in (0, 1], got "
             f"{config.masked_lm_prob}"),
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
            (not (config.tokenizer_file and config.masking == "none"
                  and config.do_whole_word_mask),
             "with --tokenizer_file, a word's tokens are known when tokenizing, not in the "
             "records: whole-word masking needs --masking=static"),
            (config.whole_word_segmenter == "none"
             or not (config.sentencepiece_flags or config.tokenizer_file),
             "--whole_word_segmenter marks Chinese words among WordPiece's one-character "
             "tokens; SentencePiece's pieces and a tokenizer.json's word ids are words "
             "already: drop it"),
            (config.whole_word_segmenter == "none" or config.masking == "static",
             "--whole_word_segmenter's words are used when masking here; the records "
             "keep plain ids, so dynamic masking could not use them: drop --masking=none"),
        ]
