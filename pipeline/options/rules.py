"""The rules between flag groups: what a recipe and --reference_compatible
allow of the other groups' flags.

A group checks its own flags (`FlagGroup.checks`; a format's refusals are its
adapter's, transforms.write.formats). These rules read many groups at once,
so they are kept here, together, and run after every group's checks
(`parse_config`'s `rules`).
"""

from __future__ import annotations

from typing import Any, Callable

from bert_pretraining_data.pipeline.command_line import Check


def reference_rules(config: Any) -> list[Check]:
    """--reference_compatible is the original script's run, and nothing else."""
    if not config.reference_compatible:
        return []
    return [
        (config.recipe == "bert", "--reference_compatible reproduces the original BERT "
         f"script; drop it with --recipe={config.recipe}"),
        (not config.tokenizer_file, "--reference_compatible reproduces a script that "
         "tokenizes with its own vocabulary; drop --tokenizer_file"),
        (config.input_format == "text",
         "--reference_compatible reads the original's text format; drop --input_format"),
        (config.sentence_splitter == "none", "--reference_compatible reads a sentence a "
         "line, as the original; drop --sentence_splitter"),
        (not (config.ngram and not 0 <= config.random_seed < 2**32),
         "--reference_compatible with --ngram seeds numpy's generator as ALBERT's "
         f"runs do, which takes a --random_seed in [0, 2**32), got {config.random_seed}"),
        (config.dedup == "none",
         "--reference_compatible keeps every document, as the original does; drop --dedup"),
        (not config.output_dir, "--reference_compatible writes exactly the --output_file "
         "list, as the original; use --output_file"),
        (config.next_sentence == "none"
         or (config.masking, config.padding) == ("static", "fixed"),
         "--reference_compatible writes the original's padded, statically masked "
         "records; drop --masking and --padding"),
        (config.next_sentence != "none"
         or (config.masking, config.padding) == ("none", "fixed"),
         "--reference_compatible with --next_sentence=none writes ELECTRA's padded, "
         "unmasked records; add --masking=none and drop --padding"),
        (not config.pack_sequences,
         "--reference_compatible writes the original's records, one instance each; "
         "drop --pack_sequences (or --reference_compatible)"),
    ]


def roberta_rules(config: Any) -> list[Check]:
    """--recipe=roberta is RoBERTa's DOC-SENTENCES and masking."""
    if config.recipe != "roberta":
        return []
    return [
        (config.next_sentence == "none", "--recipe=roberta has no sentence-pair task "
         "(RoBERTa's DOC-SENTENCES); drop --next_sentence"),
        ((config.ngram, config.max_ngram_size) == (0, 0), "--recipe=roberta masks "
         "tokens (or whole words) as RoBERTa does; drop --ngram and --max_ngram_size"),
    ]


def d2l_rules(config: Any) -> list[Check]:
    """--recipe=d2l is d2l's dataset: its vocabulary, batches and masking."""
    if config.recipe != "d2l":
        return []
    return [
        (not (config.vocab_file or config.sentencepiece_flags or config.tokenizer_file),
         "--recipe=d2l computes its vocabulary from the corpus (written as vocab.txt); drop "
         "--vocab_file, --spm_model_file, --tokenization and --tokenizer_file"),
        (bool(config.output_dir), "--recipe=d2l writes vocab.txt beside its "
         "shards; use --output_dir"),
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


# In the order they run, after the groups' checks.
RULES: tuple[Callable[[Any], list[Check]], ...] = (reference_rules, roberta_rules, d2l_rules)
