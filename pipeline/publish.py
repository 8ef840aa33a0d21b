"""Atomic output: shards are written to a staging directory and published
(renamed to their final paths, then `manifest.json` written) only after the
run succeeded. The manifest is the commit point: a directory without one is
not a dataset, whatever else it holds.

An `--output_dir` dataset carries its vocabulary, so a copied dataset does not
depend on where the vocabulary was. Publishing survives lost responses: a
retried step finds some renames done, and a rename counts as done when its
destination holds the bytes the pipeline wrote (size and sha256); anything
else is a one-line `PublishError` before the manifest: nothing is published.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
from typing import Sequence

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.loaders.manifest import (MANIFEST_NAME, VOCAB_NAME, DatasetManifest,
                                                    vocabulary_name)
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.changes import DocumentPlan
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.options.output import default_num_shards
from bert_pretraining_data.transforms.quality.rule_table import SAMPLE_FILE, filters_named
from bert_pretraining_data.transforms.read.documents import comma_separated
from bert_pretraining_data.transforms.split.held_out import SPLITS, TRAIN
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec
from bert_pretraining_data.transforms.write.beam import holds, read_file
from bert_pretraining_data.transforms.write.formats import output_format
from bert_pretraining_data.transforms.write.shard_record import ShardRecord

STAGING_NAME = ".staging"
SHARD_LIST_NAME = "shards.json"
PROBLEM_LIST_NAME = "input_problems.json"
DEDUP_NAME = "dedup.json"
SPLIT_NAME = "split.json"  # a split's documents and tokens (in its staging folder)
NEAR_COPY_NAME = "near_copies.json"  # training's documents dropped as held-out near copies
DECONTAMINATION_NAME = "decontamination_summary.json"  # the manifest's decontamination section
AUDIT_NAME = "decontamination.json"  # each match, staged and published beside the manifest
QUALITY_NAME = "quality.json"  # the quality rules' sample of removed documents, staged
# (published beside the manifest as transforms.quality.rules.SAMPLE_FILE, a record a line)
MIXTURE_SOURCES_NAME = "mixture_sources.json"  # each source's documents, tokens, copies, weight
MIXTURE_OUTPUT_NAME = "mixture_output.json"  # each source's instances and their tokens
# --shuffle=files' batch files (transforms.handoff.beam)
DEDUP_BATCHES_NAME = "dedup-batches"  # the documents waiting for the dedup decisions
TOKENIZED_BATCHES_NAME = "tokenized-batches"  # a split's tokenized documents
FIGURES_NAME = "figures.json"  # the run's counts (transforms.counters), the manifest's counters


class PublishError(RuntimeError):
    """Publishing failed before the manifest was written; one line."""


@dataclasses.dataclass(frozen=True)
class OutputPaths:
    """Where the shards are staged and where each is published."""

    staging_dir: str
    final_paths: tuple[str, ...]
    manifest_path: str
    vocab_path: str | None = None  # the dataset's copy of its vocabulary (--output_dir)
    # the output's parts, each a folder of shards: with a held-out split, each
    # split's (train, validation, test); with a mixture written by source, each
    # source's; their names and shard counts, in the order of final_paths
    parts: tuple[tuple[str, int], ...] = ()
    # the files a shard is, its path and each of these (Megatron's: .bin and .idx)
    suffixes: tuple[str, ...] = ("",)

    @property
    def final_files(self) -> list[str]:
        """Every file the shards are published as, in shard order."""
        return [path + suffix for path in self.final_paths for suffix in self.suffixes]

    @property
    def shard_names(self) -> list[str]:
        """Staging file names, one per final path, in shard order."""
        return [f"shard-{i:05d}" for i in range(len(self.final_paths))]

    def part(self, name: str) -> "OutputPaths":
        """One part's shards (training's is the whole output when it has no
        held-out split), staged in a folder of their own: each part's writer
        keeps its buckets and staging lists apart. A part of parts (training's
        by source beside held-out splits: train/<source>) holds them as its own."""
        if name == TRAIN and not {part.split("/")[0] for part, _ in self.parts} & set(SPLITS):
            return self  # no split, or a mixture's sources: training is the whole output
        start = 0
        for part, count in self.parts:
            if part == name:
                return dataclasses.replace(
                    self, staging_dir=FileSystems.join(self.staging_dir, name),
                    final_paths=self.final_paths[start:start + count], parts=())
            start += count
        inner = [(part[len(name) + 1:], count) for part, count in self.parts
                 if part.startswith(name + "/")]  # listed together
        if not inner:
            raise ValueError(f"the output has no part {name!r}")
        first = [part for part, _ in self.parts].index(f"{name}/{inner[0][0]}")
        start = sum(count for _, count in self.parts[:first])
        return dataclasses.replace(
            self, staging_dir=FileSystems.join(self.staging_dir, name),
            final_paths=self.final_paths[start:start + sum(c for _, c in inner)],
            parts=tuple(inner))

    @property
    def part_outputs(self) -> list["OutputPaths"]:
        """Each part's paths (the whole output's alone without parts), in the
        order of final_paths."""
        return [self.part(name) for name, _ in self.parts] or [self]

    @property
    def staged_vocab_path(self) -> str:
        return FileSystems.join(self.staging_dir, VOCAB_NAME)

    def beside_manifest(self, name: str) -> str:
        """Where a file the manifest names is published: in `--output_dir`, or
        beside `--output_file`'s first file, prefixed with its name."""
        if self.manifest_path.endswith("/" + MANIFEST_NAME) or self.manifest_path == MANIFEST_NAME:
            return FileSystems.join(self.folder, name)
        return self.manifest_path[:-len(MANIFEST_NAME)] + name

    @property
    def folder(self) -> str:
        """The folder the run writes in: `--output_dir`, or the folder of
        `--output_file`'s first file (where its staging and manifest go)."""
        return FileSystems.split(self.manifest_path)[0] or "."


def num_shards(config: Config, inputs: Sequence[tuple[str, int]]) -> int:
    """One file per `--output_file` name, else `--num_shards` or sized from the input."""
    if config.output_file:
        return len(comma_separated(config.output_file))
    return config.num_shards or default_num_shards(sum(s for _, s in inputs),
                                                   config.dupe_factor)


def part_shards(config: Config, inputs: Sequence[tuple[str, int]],
                 sources: Sequence[tuple[str, int]] = ()) -> tuple[tuple[str, int], ...]:
    """Each part's shards (OutputPaths.parts; none without a held-out split
    or a mixture written by source): with a split, training's as
    the run's, a held-out split's sized from its share of the input, one copy
    per document, and never more than training's. With a mixture written
    by source (`sources`: each one's name and input bytes), each source's
    folder instead: --num_shards each, or sized from its input."""
    by_source = tuple((name, config.num_shards or default_num_shards(size, 1))
                      for name, size in sources) if config.mixture_layout == "by_source" else ()
    fractions = config.split_fractions
    if not fractions.active:
        return by_source
    train = num_shards(config, inputs)
    size = sum(s for _, s in inputs)
    held_out = tuple((name, min(train, default_num_shards(
        math.ceil(size * fractions.fraction(name)), 1))) for name in fractions.held_out)
    if by_source:  # training's sources in its folder, beside the held-out splits
        return (*((f"{TRAIN}/{name}", count) for name, count in by_source), *held_out)
    return ((TRAIN, train), *held_out)


def prepare_output(config: Config, inputs: Sequence[tuple[str, int]],
                   sources: Sequence[tuple[str, int]] = ()) -> tuple[OutputPaths, list[str]]:
    """Before any work: the output, what an `--overwrite` will replace, a clean
    and writable staging directory. Every entry point starts here.
    `sources`: a mixture's, each one's name and input bytes."""
    output = output_paths(config, num_shards(config, inputs),
                          part_shards(config, inputs, sources))
    replaces = check_output_location(config, output, overwrite=config.overwrite)
    remove_tree(output.staging_dir)  # whatever an interrupted run left
    check_writable(output)
    return output, replaces


def dataset_warnings(counters: dict[str, int], problems: Sequence[dict]) -> list[str]:
    """Signs of an input that is not what the user meant, in plain words."""
    found = [f"{p['path']}: {p['message']}" for p in problems]
    documents = counters.get("tokenized_documents", 0)
    if counters and not documents:
        found.append("the input holds no text: no document had a single token")
    if documents and counters.get("sentences") == documents:
        found.append("every document has a single sentence, so every instance is a "
                     "random next: is the input one document per line? Put one sentence "
                     "per line and a blank line between documents")
    bad = {name: counters.get(name, 0) for name in (
        "invalid_json_records", "records_without_text", "records_with_blank_text")}
    if any(bad.values()):
        found.append(f"{sum(bad.values()):,} input record(s) held no document and were "
                     "skipped: " + ", ".join(f"{name}={n:,}" for name, n in bad.items() if n)
                     + " (is --text_field right?)")
    if counters.get("random_next_unavailable"):
        found.append(f"{counters['random_next_unavailable']:,} chunk(s) needed a random "
                     "next sentence but the corpus has no other document: they were "
                     "paired with their actual next sentence, or dropped if they had none")
    return found


def output_paths(config: Config, num_shards: int,
                 splits: tuple[tuple[str, int], ...] = ()) -> OutputPaths:
    """`--output_dir`: part-NNNNN-of-NNNNN shards and manifest.json inside it
    (with held-out `splits`, each split's shards in a folder named after it);
    `--output_file`: exactly the listed files, manifest beside the first."""
    if config.output_dir:
        root = config.output_dir.rstrip("/")
        fmt, flags = output_format(config.output_format), config.flags()
        suffix = fmt.shard_suffix(flags)
        folders = [(FileSystems.join(root, name), count) for name, count in splits]
        finals = tuple(FileSystems.join(folder, f"part-{i:05d}-of-{count:05d}{suffix}")
                       for folder, count in folders or [(root, num_shards)]
                       for i in range(count))
        return OutputPaths(FileSystems.join(root, STAGING_NAME), finals,
                            FileSystems.join(root, MANIFEST_NAME),
                            FileSystems.join(root, vocabulary_name(flags)), splits,
                            fmt.shard_files(flags))
    finals = tuple(comma_separated(config.output_file))
    first_dir, first_name = FileSystems.split(finals[0])
    return OutputPaths(FileSystems.join(first_dir, f"{STAGING_NAME}-{first_name}"),
                        finals, f"{finals[0]}.{MANIFEST_NAME}")


def existing_outputs(config: Config, output: OutputPaths) -> list[str]:
    """Files already at the output location (the staging directory aside)."""
    if config.output_dir:  # its files, and those of the split folders this tool writes
        root = config.output_dir.rstrip("/")
        folders = [(), *((name,) for name in sorted({*SPLITS, *dict(output.parts)}))]
        # an MDS shard set is a folder of files: its part-NNNNN-of-NNNNN folder's
        patterns = [FileSystems.join(root, *folder, *shard_set, "*") for folder in folders
                    for shard_set in ((), ("part-*-of-*",))]
        found = [m.path for result in FileSystems.match(patterns) for m in result.metadata_list]
        return sorted(p for p in found if not p.startswith(output.staging_dir))
    candidates = [*output.final_paths, output.manifest_path]
    return [p for p in candidates if FileSystems.exists(p)]


def check_output_location(config: Config, output: OutputPaths, *, overwrite: bool) -> list[str]:
    """Refuses to mix a new dataset into an old one unless told to replace it;
    returns what publishing will replace."""
    existing = existing_outputs(config, output)
    if existing and not overwrite:
        where = config.output_dir or existing[0]
        raise ConfigError(f"output location {where} is not empty ({len(existing)} "
                          "file(s)); pass --overwrite to replace it, or choose another")
    return existing


def check_writable(output: OutputPaths) -> None:
    """Creates and deletes a file where the shards will be staged, so an
    unwritable output fails now, in one line, not after hours of work."""
    probe = FileSystems.join(output.staging_dir, ".write-probe")
    try:
        FileSystems.create(probe).close()
        FileSystems.delete([probe])
    except Exception as err:  # the error types differ per filesystem
        raise ConfigError(f"cannot write to the output location {output.staging_dir} "
                          f"({type(err).__name__}); check the path and its permissions, "
                          "or choose another") from None


def remove_tree(path: str) -> None:
    """Deletes everything under a local directory or an object-store prefix.

    A leftover staging directory must go before a run: its bucket files would
    otherwise be read into the new shards.
    """
    files = [m.path for m in FileSystems.match([FileSystems.join(path, "**")])[0].metadata_list]
    if files:
        FileSystems.delete(files)
    if FileSystems.exists(path):  # local directories outlive their files
        FileSystems.delete([path])


def placed(shards: Sequence[ShardRecord], output: OutputPaths) -> list[ShardRecord]:
    """The writer's shard list in shard order, each at its final path."""
    return [s.placed(output.final_paths[s.shard]) for s in sorted(shards, key=lambda s: s.shard)]


def staged_shards(output: OutputPaths) -> list[ShardRecord]:
    """The shard list a writer staged for this part of the output, placed."""
    return placed([ShardRecord.from_json(shard)
                   for shard in read_staging_json(output, SHARD_LIST_NAME)], output)


def training_shards(output: OutputPaths) -> list[ShardRecord]:
    """Training's shards as the pipeline staged them, at their final paths
    (a mixture's sources, each in its folder: theirs in source order,
    numbered on)."""
    train = output.part(TRAIN)
    if not train.parts:
        return staged_shards(train)
    shards = [shard for part in train.part_outputs for shard in staged_shards(part)]
    return [shard.placed(shard.path, number) for number, shard in enumerate(shards)]


def staged_paths(output: OutputPaths) -> list[str]:
    """Where the shards are written before they are published, in the order
    of their final paths."""
    return [FileSystems.join(split.staging_dir, name + suffix)
            for split in output.part_outputs for name in split.shard_names
            for suffix in output.suffixes]


def move_files(sources: Sequence[str], destinations: Sequence[str],
               expected: Sequence[tuple[int, str] | None]) -> None:
    """Renames each source to its destination. A rename that failed because
    its source is gone counts as done when the destination holds the
    expected (size, sha256): an earlier attempt made it and its response, or
    its worker, was lost. Any other failure (or a missing source whose bytes
    are not known: `None`) is a PublishError."""
    if not sources:
        return
    try:
        FileSystems.rename(list(sources), list(destinations))
        return
    except BeamIOError as err:
        error = err
    failed = error.exception_details or {}
    if not failed:  # the operation failed as a whole
        raise PublishError(f"moving the staged files failed ({_one_line(error)})") from error
    wanted = dict(zip(destinations, expected))
    for (source, destination), cause in sorted(failed.items()):
        if (FileSystems.exists(source) or wanted[destination] is None
                or not holds(destination, *wanted[destination])):
            raise PublishError(f"{len(failed)} staged file(s) could not be moved, "
                               f"{source} -> {destination} among them "
                               f"({_one_line(cause)})") from error


def _one_line(err: object, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def _copy_vocabulary(output: OutputPaths, source: str, sha256: str) -> None:
    """Copies the run's vocabulary (`--vocab_file`, the SentencePiece model, or
    the d2l recipe's staged vocab.txt) beside the manifest, for `--output_dir`
    datasets; the bytes must be the ones the run used (read as
    `load_vocabulary` reads them)."""
    if not output.vocab_path:
        return
    with FileSystems.open(source) as handle:
        data = handle.read()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise RuntimeError(f"{source}: the vocabulary changed during the run (its sha256 "
                           f"is no longer {sha256[:12]}...); run again")
    with FileSystems.create(output.vocab_path) as handle:
        handle.write(data)


def _write_json(path: str, value: object) -> None:
    with FileSystems.create(path) as handle:
        handle.write((json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def write_staging_json(output: OutputPaths, name: str, items: list[dict]) -> None:
    """What the pipeline's last steps hand to the publisher (sorted: deterministic)."""
    _write_json(FileSystems.join(output.staging_dir, name),
                sorted(items, key=lambda item: json.dumps(item, sort_keys=True)))


def read_staging_json(output: OutputPaths, name: str) -> list[dict]:
    with FileSystems.open(FileSystems.join(output.staging_dir, name)) as handle:
        return json.loads(handle.read())


def read_published(manifest_path: str) -> DatasetManifest:
    """A published dataset's manifest (a refresh's previous version, or the
    one a retried publish step finds written)."""
    with FileSystems.open(manifest_path) as handle:
        return DatasetManifest.from_json(json.loads(handle.read()))


def publish(output: OutputPaths, manifest: DatasetManifest, *, replaces: Sequence[str] = (),
            documents: DocumentPlan | None = None) -> None:
    """Moves staged shards (and `documents`' hash files) to their final
    paths, copies the vocabulary beside them (`--output_dir`), then writes
    `manifest`, which says what each of them holds.

    What an earlier run left (`replaces`) is deleted only now, after this run
    succeeded, and its manifest first: a failed run leaves the old dataset
    whole, and no reader ever sees old and new shards under one manifest.
    A failure before the manifest is written is a PublishError.
    """
    try:
        _publish(output, manifest, replaces=replaces, documents=documents)
    except PublishError as err:
        raise PublishError(f"publishing {output.folder} failed: {err}; nothing was "
                           "published (no manifest was written): run again") from err
    except Exception as err:  # storage errors differ per filesystem and client
        raise PublishError(f"publishing {output.folder} failed: {type(err).__name__}: "
                           f"{_one_line(err)}; nothing was published (no manifest was "
                           "written): run again") from err
    try:
        remove_tree(output.staging_dir)
    except Exception as err:  # published: what is left in staging is garbage
        logging.getLogger(__name__).warning(
            "published, but %s could not be removed (%s); delete it, or the next run "
            "into this location will", output.staging_dir, _one_line(err))


def _publish(output: OutputPaths, manifest: DatasetManifest, *, replaces: Sequence[str],
             documents: DocumentPlan | None) -> None:
    # Files this publish writes replace their old selves; of the rest, the
    # manifest goes first. (A retried publish finds its own files there.)
    audit = [output.beside_manifest(AUDIT_NAME)] if manifest.decontamination else []
    quality = ([output.beside_manifest(SAMPLE_FILE)]
               if filters_named(manifest.flags, (manifest.mixture or {}).get("sources", ()))
               else [])
    indexes = output_format(manifest.flags["output_format"]).index_files(
        [FileSystems.split(part.final_paths[0])[0] for part in output.part_outputs])
    ours = {*output.final_files, *(documents.final if documents else ()), output.vocab_path,
            *audit, *quality, *indexes}
    old = [p for p in replaces if p not in ours and FileSystems.exists(p)]
    old_manifests = [p for p in old if p.endswith(MANIFEST_NAME)]
    if old_manifests:
        FileSystems.delete(old_manifests)
    if len(old) > len(old_manifests):
        FileSystems.delete([p for p in old if p not in old_manifests])
    # an old MDS shard set's folder, emptied (a local folder outlives its files)
    emptied = {FileSystems.split(p)[0] for p in old} - {*output.final_paths}
    for folder in sorted(f for f in emptied if FileSystems.split(f)[1].startswith("part-")):
        if FileSystems.exists(folder) and not FileSystems.match(
                [FileSystems.join(folder, "*")])[0].metadata_list:
            FileSystems.delete([folder])
    # A local rename needs its folder (a no-op on gs://): a part's, a shard set's.
    folders = [FileSystems.split(output.part(name).final_paths[0])[0]
               for name, _ in output.parts]
    if output.suffixes[0].startswith("/"):
        folders += output.final_paths
    for folder in folders:
        if not FileSystems.exists(folder):
            FileSystems.mkdirs(folder)
    # A rename is checked against the bytes the manifest records (the
    # reference run's shards record none).
    move_files(staged_paths(output), output.final_files,
               [expected for s in manifest.all_shards()
                for expected in s.file_digests([suffix[1:] for suffix in output.suffixes])])
    if documents is not None:
        recorded = {f["path"]: (f["bytes"], f["sha256"])
                    for f in manifest.refresh.documents["files"]}
        move_files(documents.staged, documents.final, [recorded[p] for p in documents.final])
    move_files([FileSystems.join(output.staging_dir, AUDIT_NAME)] if audit else [], audit,
               [None] * len(audit))
    for path in quality:
        with FileSystems.create(path) as handle:
            handle.write("".join(json.dumps(record, sort_keys=True) + "\n" for record
                                 in read_staging_json(output, QUALITY_NAME)).encode("utf-8"))
    fmt = output_format(manifest.flags["output_format"])
    for part, index in zip(output.part_outputs, indexes):  # each folder of shards: its index
        with FileSystems.create(index) as handle:
            handle.write(fmt.index_bytes(list(part.final_paths), read_file))
    _copy_vocabulary(output, output.staged_vocab_path if manifest.flags["recipe"] == "d2l"
                     else TokenizerSpec.of(manifest.flags).path, manifest.vocab_sha256)
    _write_json(output.manifest_path, manifest.to_json())
