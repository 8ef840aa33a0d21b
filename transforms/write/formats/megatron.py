"""Megatron-LM's and NeMo's indexed datasets: the tokenized corpus, a
sentence a sequence, a .bin and .idx per shard (transforms.write.megatron),
from which the trainer makes its samples, epochs and masks."""

from __future__ import annotations

import dataclasses
from typing import Any

from bert_pretraining_data.transforms.write.formats.output_format import (SENTENCES, Flags,
                                                                         OutputFormat)
from bert_pretraining_data.transforms.write.megatron import megatron_dtype

# The flags that shape instances, which this format does not make: one set
# away from its default is refused.
INSTANCE_FLAGS = ("short_seq_prob", "masked_lm_prob", "do_whole_word_mask", "ngram",
                  "max_ngram_size", "pack_sequences", "padding", "use_v2_feature_names")


class MegatronFormat(OutputFormat):
    def shard_files(self, flags: Flags) -> tuple[str, ...]:
        return (".bin", ".idx")  # beside the shard's prefix (--data-path)

    def data_file(self, flags: Flags) -> tuple[str, str]:
        return ".idx", ""  # found by its .idx, opened as the prefix

    def corpus_dtype(self, vocab_size: int) -> str:
        """The token ids' numpy type, as Megatron's preprocess_data.py picks it."""
        return megatron_dtype(vocab_size).name

    def checks(self, config: Any, given: frozenset[str]) -> list[tuple[bool, str]]:
        defaults = {field.name: field.default for field in dataclasses.fields(config)}
        made_here = [flag for flag in INSTANCE_FLAGS if getattr(config, flag) != defaults[flag]]
        return [
            (not made_here, f"--{made_here[0] if made_here else ''} makes instances, which "
             f"--output_format={self.name} does not write (Megatron-LM makes its samples, "
             "epochs and masks at training time); drop it"),
            (config.dupe_factor == 1 and config.masking == "none",
             f"--output_format={self.name} writes each sentence once and unmasked; drop "
             "--dupe_factor and --masking"),
            (config.compression is None, "Megatron-LM reads uncompressed .bin files; drop "
             "--compression and --gzip_compress"),
            (config.recipe == "bert", f"--output_format={self.name} writes a tokenized "
             "corpus, from which Megatron-LM makes its own samples, and --recipe="
             f"{config.recipe} makes instances here; drop one"),
            (not config.reference_compatible, "--reference_compatible writes the original's "
             f"records, not --output_format={self.name}'s tokenized corpus; drop one"),
            (not config.mixture or config.mixture_layout == "by_source",
             f"--output_format={self.name} writes a mixture's sources apart, for a blend "
             "(--data-path) to weigh at training time: add --mixture_layout=by_source"),
            (bool(config.output_dir), f"--output_format={self.name} writes a .bin and .idx "
             "per shard: use --output_dir"),
        ]


MEGATRON = MegatronFormat(
    "megatron", holds=SENTENCES, label="Megatron-LM indexed dataset",
    not_read_here="Megatron-LM indexed datasets (--output_format=megatron) hold sentences, "
                  "not instances: train on them with Megatron-LM or NeMo (docs/megatron.md)")
