"""inspect-pretraining-data: what a dataset holds, as text a person can read.

    inspect-pretraining-data out/                     # summary, 20 instances, histogram
    inspect-pretraining-data gs://b/bert-data/ --num_instances=5 --plot=lengths.png
    inspect-pretraining-data out/ --split=validation  # a held-out split's instances
    inspect-pretraining-data root/                    # a refresh's: the version LATEST names

The manifest's summary (and its table of splits, when it has held-out ones),
the first instances of one split decoded like the original's "*** Example ***"
log, and statistics over up to --max_records of them (lengths, predictions,
padding, packing), through `loaders`, without Beam.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
from typing import Sequence

import numpy as np

from bert_pretraining_data.loaders.manifest import (DatasetError, Manifest, Packing,
                                                    published_versions, read_manifest,
                                                    read_vocabulary, read_vocabulary_bytes)
from bert_pretraining_data.loaders.records import Instance, read_instances
from bert_pretraining_data.pipeline.command_line import (FlagGroup, OneLineParser, build_parser,
                                                         flag, run_command)
from bert_pretraining_data.transforms.quality.rule_table import (DROPPED, LANGUAGE_DOCUMENTS,
                                                                 LANGUAGE_DROPPED, SAMPLE_FILE,
                                                                 filters_named, removed_by_rule)
from bert_pretraining_data.transforms.split.held_out import SPLITS, TRAIN
from bert_pretraining_data.transforms.write.formats import output_format

PROG = "inspect-pretraining-data"
HISTOGRAM_BINS = 16
BAR_WIDTH = 40
BATCH_SIZE = 32  # for the dynamic-padding estimate


def vocabulary_tokens(manifest: Manifest, vocab_file: str | None) -> list[str] | None:
    """Token per id (a vocab.txt's lines, a SentencePiece model's pieces, a
    tokenizer.json's tokens), or None when the vocabulary is not at hand (ids
    are shown)."""
    try:
        spec = manifest.tokenizer  # a model file (not a vocab.txt's lines) is parsed
        if spec.sentencepiece or spec.tokenizer_file:
            return list(read_vocabulary(manifest, vocab_file).tokens)
        return read_vocabulary_bytes(manifest, vocab_file).decode("utf-8").split("\n")
    except DatasetError:
        return None


def _text(ids: Sequence[int], tokens: list[str] | None) -> str:
    if tokens is None:
        return " ".join(str(int(i)) for i in ids)
    return " ".join(tokens[int(i)] if 0 <= i < len(tokens) else f"<id {int(i)}>" for i in ids)


# What label 1 means, per --next_sentence.
_LABEL_MEANINGS = {"nsp": ("B follows A", "B is a random sentence"),
                   "sop": ("A and B in order", "A and B swapped (or B random: a "
                           "one-sentence chunk)")}


def objective(manifest: Manifest) -> str:
    """The objective and masking policy the flags chose, in words."""
    flags = manifest.flags
    if manifest.recipe == "d2l":
        return "objective: d2l's NSP and MLM over word tokens"
    tasks = {"nsp": "BERT's next sentence prediction (NSP)",
             "sop": "ALBERT's sentence order prediction (SOP)",
             "none": "no pair task: full sequences (ELECTRA/RoBERTa)"}
    task = "no pair task: RoBERTa's DOC-SENTENCES" if manifest.recipe == "roberta" else tasks[
        flags["next_sentence"]]
    pieces = ("SentencePiece pieces" if manifest.tokenizer.sentencepiece
              else "tokens" if manifest.tokenizer.tokenizer_file else "WordPieces")
    words = "whole words" if flags.get("do_whole_word_mask") else pieces
    if flags["whole_word_segmenter"] != "none":
        words += f" (Chinese words by {flags['whole_word_segmenter']})"
    if manifest.masking == "none":
        policy = "none on disk (the PyTorch collator masks each epoch)"
    elif flags["ngram"]:
        shorter = "shorter favored" if flags["favor_shorter_ngram"] else "longer"
        policy = f"ALBERT's n-grams of up to {flags['ngram']} {words} ({shorter})"
    elif flags["max_ngram_size"]:
        policy = f"the Model Garden's n-grams of up to {flags['max_ngram_size']} {words}"
    else:
        policy = f"BERT's, {words}"
    return (f"objective: {task}; masking: {policy}\n"
            "features: " + ", ".join(sorted(manifest.features)))


def describe(instance: Instance, tokens: list[str] | None, manifest: Manifest) -> str:
    """One instance as the original's first-20 log shows it."""
    name = (f"Example {instance.index}" if instance.sequence is None
            else f"Row {instance.index}, sequence {instance.sequence + 1}")
    lines = [f"*** {name} ***",
             f"tokens: {_text(instance.input_ids, tokens)}",
             "segment_ids: " + " ".join(map(str, instance.segment_ids.tolist()))]
    if instance.token_boundary is not None:
        lines.append("token_boundary: " + " ".join(map(str, instance.token_boundary.tolist())))
    if manifest.masking == "none":
        lines.append("masked_lm: none on disk (--masking=none: the loader masks each epoch)")
    else:
        lines.append("masked_lm_positions: "
                     + " ".join(map(str, instance.masked_lm_positions.tolist())))
        lines.append(f"masked_lm_labels: {_text(instance.masked_lm_ids, tokens)}")
    if instance.next_sentence_label is not None:
        meanings = _LABEL_MEANINGS[manifest.flags["next_sentence"]]
        lines.append(f"next_sentence_label: {instance.next_sentence_label} "
                     f"({meanings[instance.next_sentence_label]})")
    return "\n".join(lines)


def summary(manifest: Manifest) -> str:
    flags = manifest.flags
    fmt = output_format(manifest.output_format)
    if fmt.makes_instances:
        shown = ("max_seq_length", "max_predictions_per_seq", "masked_lm_prob", "dupe_factor",
                 "random_seed", "do_lower_case", "do_whole_word_mask", "compression")
        made = [f"{manifest.total_instances:,} instances in {len(manifest.shards)} "
                f"{manifest.output_format} shard(s); recipe {manifest.recipe}, padding "
                f"{manifest.padding}, masking {manifest.masking}", objective(manifest)]
    else:  # a tokenized corpus: the trainer makes its samples, and masks them
        shown = ("random_seed", "do_lower_case")
        made = [f"{manifest.total_instances:,} {fmt.holds} in {len(manifest.shards)} "
                f"{fmt.label} shard(s): the tokenized corpus, a sequence a sentence, with no "
                "instances, pairs or masks (the trainer makes its samples, epochs and masks)"]
    lines = [f"dataset: {manifest.path}", *made,
             "flags: " + " ".join(f"{name}={flags.get(name)}" for name in shown),
             f"vocabulary: {manifest.vocab_path} (sha256 "
             f"{str(manifest.content.vocab_sha256)[:12]}...)"]
    counters = manifest.content.counters
    if counters:
        lines.append("counters: " + ", ".join(f"{k}={v:,}" for k, v in counters.items()))
    if manifest.packing:
        lines.append(packing_text(manifest.packing))
    return "\n".join(lines)


def splits_text(manifest: Manifest, shown: str) -> str:
    """A row per split of a dataset with held-out splits: how much of the
    corpus each holds and how it was made, and which one this report reads."""
    whole = manifest.whole  # `content` is one split's view, without training's shards
    header = ("split", "fraction", "documents", "tokens", "instances", "near copies dropped",
              "shards", "masking", "seed")
    rows = [header]
    for name in whole.split_names:
        record = whole.splits[name]
        shards = whole.shards if name == TRAIN else record.shards
        rows.append((name, f"{record.fraction:g}", f"{record.documents:,}",
                     f"{record.tokens:,}", f"{record.instances:,}",
                     f"{record.near_copies_dropped:,}", f"{len(shards):,}", record.masking,
                     str(record.seed)))
    return "\n".join([f"splits (this report reads {shown}):",
                      *table(rows, left=("split", "masking"))])


# Languages inspect names one by one, the most documents first; the rest are summed.
LANGUAGES_SHOWN = 10


def quality_text(manifest: Manifest) -> str | None:
    """What --quality_filters and --languages removed, rule by rule, and the
    documents read in each language (the manifest's counters), and where the
    sample of dropped documents is; None without the flags."""
    filters = filters_named(manifest.flags, (manifest.content.mixture or {}).get("sources", ()))
    if not filters:
        return None
    counters = manifest.content.counters
    rows = [("rule", "documents dropped", "lines removed"), *(
        (rule, f"{figures['documents']:,}", f"{figures['lines']:,}")
        for rule, figures in removed_by_rule(counters).items())]
    dropped = sum(v for k, v in counters.items() if k.startswith(DROPPED))
    languages = sorted(((-read, name.removeprefix(LANGUAGE_DOCUMENTS))
                        for name, read in counters.items()
                        if name.startswith(LANGUAGE_DOCUMENTS) and read))
    language_rows = [("language", "documents", "dropped")] + [
        (code, f"{-read:,}", f"{counters.get(LANGUAGE_DROPPED + code, 0):,}")
        for read, code in languages[:LANGUAGES_SHOWN]]
    if len(languages) > LANGUAGES_SHOWN:
        rest = languages[LANGUAGES_SHOWN:]
        language_rows.append((f"{len(rest)} others", f"{-sum(read for read, _ in rest):,}",
                              f"{sum(counters.get(LANGUAGE_DROPPED + c, 0) for _, c in rest):,}"))
    return "\n".join([f"quality ({filters}): {dropped:,} of {counters.get('documents', 0):,} "
                      f"documents dropped; a sample of each rule's in {SAMPLE_FILE}",
                      *(table(rows, left=("rule",)) if len(rows) > 1 else []),
                      *(table(language_rows, left=("language",)) if languages else [])])


def table(rows: Sequence[Sequence[str]], left: Sequence[str]) -> list[str]:
    """Rows under their header (the first), the columns named in `left`
    aligned left, the others (figures) right."""
    header = rows[0]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    return ["  " + "  ".join(cell.ljust(width) if column in left else cell.rjust(width)
                             for column, cell, width in zip(header, row, widths)).rstrip()
            for row in rows]


def indexed_text(manifest: Manifest, split: str) -> str:
    """A Megatron-LM dataset's shards (--output_format=megatron), `split`'s:
    the prefixes --data-path takes (or the split's flag), with their
    sentences, documents and tokens."""
    shards = list(zip(manifest.shards, sorted(manifest.content.shards, key=lambda s: s.shard)))
    rows = [("prefix", "sentences", "documents", "tokens")]
    rows += [(shard.path, f"{entry.records:,}", f"{entry.figures['documents']:,}",
              f"{entry.tokens:,}") for shard, entry in shards]
    lines = ["Megatron-LM indexed datasets (read them with megatron-core's "
             "IndexedDataset; docs/megatron.md):", *table(rows, left=("prefix",))]
    # With held-out splits, each split is its own blend: Megatron-LM's
    # --train-data-path, --valid-data-path and --test-data-path.
    flag = f"--{split.replace('validation', 'valid')}-data-path" if (
        manifest.whole.splits) else "--data-path"
    if manifest.held_out:
        lines += [f"Megatron-LM's {flag} (the split's prefixes):",
                  "  " + " ".join(shard.path for shard, entry in shards if entry.records)]
    elif manifest.content.mixture:
        lines += [mixture_text(manifest.content.mixture),
                  f"Megatron-LM blend of the sources at their weights ({flag}):",
                  "  " + " ".join(f"{np.format_float_positional(weight, trim='-')} {prefix}"
                                  for weight, prefix in megatron_blend(manifest))]
    return "\n".join(lines)


def megatron_blend(manifest: Manifest) -> list[tuple[float, str]]:
    """A by_source mixture's --data-path: each prefix weighted by its
    source's planned weight times its tokens, so a blend draws each source's
    tokens at the share the mixed layout would give it. Prefixes without a
    sentence are left out (megatron-core cannot open them)."""
    weights = {source["name"]: source["weight"] for source in manifest.content.mixture["sources"]}
    entries = sorted(manifest.content.shards, key=lambda s: s.shard)
    return [(weights[posixpath.basename(posixpath.dirname(entry.path))] * entry.tokens,
             shard.path) for shard, entry in zip(manifest.shards, entries) if entry.records]


def refresh_root_text(location: str, manifest: Manifest) -> str | None:
    """Given a refresh's --output_root: its versions, and which one this
    report reads (the one its LATEST names, where the loaders found the manifest)."""
    root = location.rstrip("/")
    version = posixpath.dirname(manifest.path)
    if posixpath.dirname(version) != root:
        return None  # a dataset's own directory, a manifest path, a shard pattern
    latest, versions = posixpath.basename(version), published_versions(root)
    return (f"refresh root {root}: {len(versions)} version(s) ({', '.join(versions)}); "
            f"LATEST names {latest}, which this report reads")


def mixture_text(mixture: dict) -> str:
    """A row per source of a mixture (--mixture): its weight, what it held
    and what it made, and the copies dropped across sources."""
    # what each source's quality filters dropped (manifests before that have no figure)
    dropped = [sum(figures["documents"] for figures in source.get("quality", {}).values())
               for source in mixture["sources"]]
    filtered = any(dropped)
    rows = [("source", "weight", "documents", "tokens", "epochs", "instances",
             "output tokens", "share", *(("quality dropped",) if filtered else ()))]
    rows += [(source["name"], f"{source['weight']:.4g}", f"{source['documents']:,}",
              f"{source['tokens']:,}", f"{source['epochs']:.3f}", f"{source['instances']:,}",
              f"{source['output_tokens']:,}", f"{source['share']:.2%}",
              *((f"{count:,}",) if filtered else ()))
             for source, count in zip(mixture["sources"], dropped)]
    alpha = f", alpha {mixture['alpha']:g}" if mixture["alpha"] is not None else ""
    lines = [f"mixture ({mixture['layout']}{alpha}):", *table(rows, left=("source",))]
    lines += [f"  {pair['documents']:,} document(s) of {pair['dropped']} kept in "
              f"{pair['kept']} (copies across sources)"
              for pair in mixture["duplicates_across_sources"]]
    return "\n".join(lines)


def packing_text(packing: Packing) -> str:
    """The packed rows (--pack_sequences): how full, and how many instances each holds."""
    by_depth = {int(depth): rows for depth, rows in packing.rows_by_depth.items()}
    peak = max(by_depth.values()) or 1
    lines = [f"packed: {packing.instances:,} instances in {packing.rows:,} rows of up "
             f"to {packing.max_sequences_per_pack}; {packing.filled:.2%} of the token "
             f"slots filled ({packing.tokens:,} of {packing.token_slots:,}), up to "
             f"{packing.max_predictions_per_row} predictions a row",
             "rows by instances held:"]
    for depth, rows in sorted(by_depth.items()):
        bar = "#" * math.ceil(BAR_WIDTH * rows / peak) if rows else ""
        lines.append(f"  {depth:3d} | {bar:<{BAR_WIDTH}} {rows:,}")
    return "\n".join(lines)


def statistics(lengths: Sequence[int], predictions: Sequence[int], labels: int | None,
               max_seq_length: int) -> str:
    """Means over the sample; `predictions` empty for unmasked data, `labels`
    (how many are 1) None without a pair task."""
    lengths = np.asarray(lengths)
    masked = (f"predictions mean {np.mean(predictions):.1f}" if len(predictions)
              else "predictions made at load time")
    share = "" if labels is None else f"; label 1 {labels / len(lengths):.1%}"
    return "\n".join([
        f"over {len(lengths):,} instances: tokens mean {lengths.mean():.1f}, median "
        f"{np.median(lengths):.0f}, max {lengths.max()}; {masked}{share}",
        f"padding: {1 - lengths.mean() / max_seq_length:.1%} of the token slots when "
        f"padded to max_seq_length={max_seq_length}, "
        f"{dynamic_padding(lengths, BATCH_SIZE):.1%} when each batch of {BATCH_SIZE} is "
        "padded to its longest (the loaders' dynamic padding)",
    ])


def dynamic_padding(lengths: Sequence[int], batch_size: int) -> float:
    """Share of padding when consecutive batches are padded to their longest."""
    slots = sum(max(lengths[start:start + batch_size]) * len(lengths[start:start + batch_size])
                for start in range(0, len(lengths), batch_size))
    return 1 - sum(lengths) / slots


def histogram(lengths: Sequence[int], max_seq_length: int) -> tuple[list[int], list[int]]:
    """(bin lower edges, counts) of lengths 0..max_seq_length in equal bins."""
    width = math.ceil((max_seq_length + 1) / HISTOGRAM_BINS)
    edges = list(range(0, max_seq_length + 1, width))
    counts = [0] * len(edges)
    for length in lengths:
        counts[min(length // width, len(edges) - 1)] += 1
    return edges, counts


def histogram_text(edges: list[int], counts: list[int], max_seq_length: int) -> str:
    peak = max(counts) or 1
    uppers = [next_edge - 1 for next_edge in edges[1:]] + [max_seq_length]
    rows = ["sequence length histogram:"]
    for edge, upper, count in zip(edges, uppers, counts):
        bar = "#" * math.ceil(BAR_WIDTH * count / peak) if count else ""
        rows.append(f"  {edge:5d}-{upper:<5d} | {bar:<{BAR_WIDTH}} {count:,}")
    return "\n".join(rows)


def plot_histogram(lengths: Sequence[int], max_seq_length: int, path: str, title: str) -> None:
    try:
        import matplotlib
    except ImportError:
        raise DatasetError("--plot needs matplotlib: pip install "
                           "'bert-pretraining-data[plot]'") from None
    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4))
    axes.hist(lengths, bins=range(0, max_seq_length + 2), color="#4472c4")
    axes.axvline(max_seq_length, color="#c00000", linestyle="--", label="max_seq_length")
    axes.set(xlabel="tokens per instance", ylabel="instances", title=title)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def report(dataset: str, *, split: str = TRAIN, num_instances: int = 20,
           max_records: int = 100_000, vocab_file: str | None = None,
           plot: str | None = None) -> str:
    """Everything `inspect` prints, as one string: the summary, then `split`'s
    instances and statistics."""
    manifest = read_manifest(dataset, split=split)
    tokens = vocabulary_tokens(manifest, vocab_file)
    parts = [summary(manifest)]
    root = refresh_root_text(dataset, manifest)
    if root:
        parts[0] = root + "\n" + parts[0]
    if manifest.content.splits:
        parts[0] += "\n" + splits_text(manifest, split)
    quality = quality_text(manifest)
    if quality:
        parts[0] += "\n" + quality
    if not output_format(manifest.output_format).makes_instances:
        return "\n".join([*parts, indexed_text(manifest, split)])
    if manifest.content.mixture:
        parts[0] += "\n" + mixture_text(manifest.content.mixture)
    if tokens is None:
        parts.append(f"(vocabulary {manifest.vocab_path} not found: showing ids; pass "
                     "--vocab_file)")
    lengths: list[int] = []
    predictions: list[int] = []
    labels: int | None = None
    for read, instance in enumerate(read_instances(manifest,
                                                   limit=max(num_instances, max_records))):
        if read < num_instances:
            parts.append(describe(instance, tokens, manifest))
        if len(lengths) < max_records:
            lengths.append(len(instance.input_ids))
            if instance.next_sentence_label is not None:
                labels = (labels or 0) + instance.next_sentence_label
            if manifest.masking != "none":
                predictions.append(len(instance.masked_lm_positions))
    if lengths:
        parts.append(statistics(lengths, predictions, labels, manifest.max_seq_length))
        parts.append(histogram_text(*histogram(lengths, manifest.max_seq_length),
                                    manifest.max_seq_length))
        if plot:
            plot_histogram(lengths, manifest.max_seq_length, plot,
                           f"{len(lengths):,} instances of {manifest.path}")
            parts.append(f"histogram written to {plot}")
    return "\n\n".join(parts)


@dataclasses.dataclass(frozen=True, kw_only=True)
class InspectFlags(FlagGroup):
    """inspect-pretraining-data's arguments."""

    SECTION = ("dataset", "which dataset, and how much of it is read")

    dataset: str = flag("dataset directory, manifest.json or a refresh's --output_root (the "
                        "version its LATEST names; local or gs://)", positional=True)
    split: str = flag(
        "the split whose instances are printed and measured: a dataset written with "
        "--validation_fraction or --test_fraction has held-out ones beside training",
        default=TRAIN, choices=list(SPLITS))
    num_instances: int = flag("instances to print (as the original's log)", default=20)
    max_records: int = flag("instances read for the statistics", default=100_000)
    vocab_file: str | None = flag(
        "the vocabulary, when neither the dataset's vocab.txt nor the recorded path is "
        "readable from here", default=None)
    plot: str | None = flag("also write the length histogram as a PNG here", default=None)


def parser() -> OneLineParser:
    return build_parser(prog=PROG, groups=(InspectFlags,), description=__doc__.split("\n\n")[0])


def inspect(argv: Sequence[str]) -> str:
    """The report of the dataset the arguments name."""
    args = InspectFlags(**vars(parser().parse_args(list(argv))))
    return report(args.dataset, split=args.split, num_instances=args.num_instances,
                  max_records=args.max_records, vocab_file=args.vocab_file, plot=args.plot)


def main(argv: Sequence[str] | None = None) -> None:
    run_command(PROG, inspect, print, argv, user_errors=(DatasetError,))


if __name__ == "__main__":
    main()
