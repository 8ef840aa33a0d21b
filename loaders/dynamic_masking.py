"""Dynamic masking: the instances of a dataset written with `--masking=none`
are masked as they are loaded, differently each epoch.

The masking is the pipeline's own (`transforms.instances.masking.mask_tokens`: the same
budget, 80/10/10, whole-word and n-gram options, from the flags the manifest
records), drawn from an RNG derived from (seed, epoch, example index): an epoch
is reproducible whatever the number of workers or ranks. It needs only the base
install (numpy and numba compile it), so any training framework can call it;
the PyTorch collator (`torch_data.Collator`) does.
"""

from __future__ import annotations

from bert_pretraining_data.loaders.manifest import Manifest, read_vocabulary
from bert_pretraining_data.loaders.records import Instance
from bert_pretraining_data.transforms.instances.masking import (Masked, MaskingConfig, mask_tokens,
                                                      masking_config)
from bert_pretraining_data.transforms.randomness import hashed_rng
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary


def dynamic_masking(manifest: Manifest, vocab_file: str | None = None, *,
                    vocabulary: Vocabulary | None = None) -> MaskingConfig | None:
    """The masking a dataset's instances need at load time: None when its
    records hold their masks, else the recorded flags' masking over its
    vocabulary (`vocabulary` when the caller parsed it already, else the
    dataset's vocab.txt, SentencePiece model or tokenizer.json, else the
    recorded file, or `vocab_file`)."""
    if manifest.masking != "none":
        return None
    flags = manifest.flags
    return masking_config(
        vocabulary or read_vocabulary(manifest, vocab_file),
        masked_lm_prob=flags["masked_lm_prob"],
        max_predictions_per_seq=flags["max_predictions_per_seq"],
        do_whole_word_mask=flags["do_whole_word_mask"], ngram=flags["ngram"],
        favor_shorter_ngram=flags["favor_shorter_ngram"], max_ngram_size=flags["max_ngram_size"])


def mask_for_epoch(instance: Instance, masking: MaskingConfig, seed: int) -> Masked:
    """One instance masked for its epoch (`instance.epoch`), the same on every
    worker and rank that reads it: with the generator of (seed, epoch, record
    index[, its place in a packed row])."""
    place = () if instance.sequence is None else (instance.sequence,)
    return mask_tokens(instance.input_ids.tolist(), masking,
                       hashed_rng(seed, instance.epoch, instance.index, *place))
