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
import platform
import unicodedata
from importlib import metadata
from typing import Any, Sequence

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.loaders.manifest import VOCAB_NAME, vocabulary_name
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.changes import HASH_LIST_NAME, DocumentPlan, manifest_entries
from bert_pretraining_data.pipeline.options import Config, default_num_shards, record_layout
from bert_pretraining_data.transforms.read.documents import comma_separated
from bert_pretraining_data.transforms.write.beam import file_digest

STAGING_NAME = ".staging"
MANIFEST_NAME = "manifest.json"
SHARD_LIST_NAME = "shards.json"
PROBLEM_LIST_NAME = "input_problems.json"
DEDUP_NAME = "dedup.json"


class PublishError(RuntimeError):
    """Publishing failed before the manifest was written; one line."""


@dataclasses.dataclass(frozen=True)
class OutputLayout:
    """Where the shards are staged and where each is published."""

    staging_dir: str
    final_paths: tuple[str, ...]
    manifest_path: str
    vocab_path: str | None = None  # the dataset's copy of its vocabulary (--output_dir)

    @property
    def shard_names(self) -> list[str]:
        """Staging file names, one per final path, in shard order."""
        return [f"shard-{i:05d}" for i in range(len(self.final_paths))]

    @property
    def staged_vocab_path(self) -> str:
        return FileSystems.join(self.staging_dir, VOCAB_NAME)

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


def prepare_output(config: Config, inputs: Sequence[tuple[str, int]]
                   ) -> tuple[OutputLayout, list[str]]:
    """Before any work: the layout, what an `--overwrite` will replace, a clean
    and writable staging directory. Every entry point starts here."""
    layout = output_layout(config, num_shards(config, inputs))
    replaces = check_output_location(config, layout, overwrite=config.overwrite)
    remove_tree(layout.staging_dir)  # whatever an interrupted run left
    check_writable(layout)
    return layout, replaces


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


def output_layout(config: Config, num_shards: int) -> OutputLayout:
    """`--output_dir`: part-NNNNN-of-NNNNN shards and manifest.json inside it;
    `--output_file`: exactly the listed files, manifest beside the first."""
    if config.output_dir:
        root = config.output_dir.rstrip("/")
        suffix = (".parquet" if config.output_format == "parquet"
                  else ".tfrecord.gz" if config.compression == "gzip" else ".tfrecord")
        finals = tuple(FileSystems.join(root, f"part-{i:05d}-of-{num_shards:05d}{suffix}")
                       for i in range(num_shards))
        return OutputLayout(FileSystems.join(root, STAGING_NAME), finals,
                            FileSystems.join(root, MANIFEST_NAME),
                            FileSystems.join(root, vocabulary_name(config.flags())))
    finals = tuple(comma_separated(config.output_file))
    first_dir, first_name = FileSystems.split(finals[0])
    return OutputLayout(FileSystems.join(first_dir, f"{STAGING_NAME}-{first_name}"),
                        finals, f"{finals[0]}.{MANIFEST_NAME}")


def existing_outputs(config: Config, layout: OutputLayout) -> list[str]:
    """Files already at the output location (the staging directory aside)."""
    if config.output_dir:
        pattern = FileSystems.join(config.output_dir.rstrip("/"), "*")
        found = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
        return sorted(p for p in found if not p.startswith(layout.staging_dir))
    candidates = [*layout.final_paths, layout.manifest_path]
    return [p for p in candidates if FileSystems.exists(p)]


def check_output_location(config: Config, layout: OutputLayout, *, overwrite: bool) -> list[str]:
    """Refuses to mix a new dataset into an old one unless told to replace it;
    returns what publishing will replace."""
    existing = existing_outputs(config, layout)
    if existing and not overwrite:
        where = config.output_dir or existing[0]
        raise ConfigError(f"output location {where} is not empty ({len(existing)} "
                          "file(s)); pass --overwrite to replace it, or choose another")
    return existing


def check_writable(layout: OutputLayout) -> None:
    """Creates and deletes a file where the shards will be staged, so an
    unwritable output fails now, in one line, not after hours of work."""
    probe = FileSystems.join(layout.staging_dir, ".write-probe")
    try:
        FileSystems.create(probe).close()
        FileSystems.delete([probe])
    except Exception as err:  # the error types differ per filesystem
        raise ConfigError(f"cannot write to the output location {layout.staging_dir} "
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


def staged_paths(layout: OutputLayout) -> list[str]:
    """Where the shards are written before they are published, in shard order."""
    return [FileSystems.join(layout.staging_dir, n) for n in layout.shard_names]


def _holds(path: str, size: int, sha256: str) -> bool:
    """Whether a file exists with exactly these bytes (read only when the size agrees)."""
    found = FileSystems.match([path])[0].metadata_list
    return bool(found) and found[0].size_in_bytes == size and file_digest(path) == (size, sha256)


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
                or not _holds(destination, *wanted[destination])):
            raise PublishError(f"{len(failed)} staged file(s) could not be moved, "
                               f"{source} -> {destination} among them "
                               f"({_one_line(cause)})") from error


def _one_line(err: object, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def _copy_vocabulary(layout: OutputLayout, source: str, sha256: str) -> None:
    """Copies the run's vocabulary (`--vocab_file`, the SentencePiece model, or
    the d2l recipe's staged vocab.txt) beside the manifest, for `--output_dir`
    datasets; the bytes must be the ones the run used (read as
    `load_vocabulary` reads them)."""
    if not layout.vocab_path:
        return
    with FileSystems.open(source) as handle:
        data = handle.read()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise RuntimeError(f"{source}: the vocabulary changed during the run (its sha256 "
                           f"is no longer {sha256[:12]}...); run again")
    with FileSystems.create(layout.vocab_path) as handle:
        handle.write(data)


def _write_json(path: str, value: object) -> None:
    with FileSystems.create(path) as handle:
        handle.write((json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def write_staging_json(layout: OutputLayout, name: str, items: list[dict]) -> None:
    """What the pipeline's last steps hand to the publisher (sorted: deterministic)."""
    _write_json(FileSystems.join(layout.staging_dir, name),
                sorted(items, key=lambda item: json.dumps(item, sort_keys=True)))


def read_staging_json(layout: OutputLayout, name: str) -> list[dict]:
    with FileSystems.open(FileSystems.join(layout.staging_dir, name)) as handle:
        return json.loads(handle.read())


def read_dedup_summary(layout: OutputLayout, config: Config) -> dict:
    """The dedup stage's figures for the manifest (its one staged summary)."""
    if config.dedup == "none":
        return {"mode": "none"}
    (summary,) = read_staging_json(layout, DEDUP_NAME)
    return summary


def package_versions() -> dict[str, str]:
    """The versions the output depends on. Python's among them: tokenization
    follows Python's own Unicode database, as the original does, and Python 3.10
    (Unicode 13), 3.11 (14) and 3.12 (15.0; 3.13's 15.1 agrees with it here)
    tokenize 241 rarely used code points differently (docs/install.md: Supported Pythons)."""
    names = ("bert-pretraining-data", "apache-beam", "tensorflow", "tensorflow-transform")
    versions = {"python": platform.python_version(), "unicode": unicodedata.unidata_version}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def packing_summary(config: Config, shards: Sequence[dict], max_predictions_per_row: int
                    ) -> dict[str, Any]:
    """The manifest's `packing` entry: the rows' depths and how full they are."""
    rows = sum(s["records"] for s in shards)
    tokens = sum(s["tokens"] for s in shards)
    by_depth = [sum(column) for column in zip(*(s["rows_by_depth"] for s in shards))]
    return {"max_sequences_per_pack": config.max_sequences_per_pack,
            "max_predictions_per_row": max_predictions_per_row,
            "rows": rows, "instances": sum(s["instances"] for s in shards), "tokens": tokens,
            "token_slots": rows * config.max_seq_length,
            "filled": round(tokens / max(1, rows * config.max_seq_length), 6),
            "rows_by_depth": {str(depth): n for depth, n in enumerate(by_depth, 1)}}


def publish(layout: OutputLayout, *, config: Config, vocab_sha256: str,
            inputs: Sequence[tuple[str, int]], shards: Sequence[dict],
            counters: dict[str, int], input_problems: Sequence[dict] = (),
            warnings: Sequence[str] = (), replaces: Sequence[str] = (),
            max_predictions_per_row: int | None = None, dedup: dict | None = None,
            documents: DocumentPlan | None = None) -> dict:
    """Moves staged shards (and `documents`' hash files) to their final
    paths, copies the vocabulary beside them (`--output_dir`), then writes
    the manifest.

    What an earlier run left (`replaces`) is deleted only now, after this run
    succeeded, and its manifest first: a failed run leaves the old dataset
    whole, and no reader ever sees old and new shards under one manifest.
    A failure before the manifest is written is a PublishError.
    """
    try:
        manifest = _publish(layout, config=config, vocab_sha256=vocab_sha256, inputs=inputs,
                            shards=shards, counters=counters, input_problems=input_problems,
                            warnings=warnings, replaces=replaces,
                            max_predictions_per_row=max_predictions_per_row,
                            dedup=dedup, documents=documents)
    except PublishError as err:
        raise PublishError(f"publishing {layout.folder} failed: {err}; nothing was "
                           "published (no manifest was written): run again") from err
    except Exception as err:  # storage errors differ per filesystem and client
        raise PublishError(f"publishing {layout.folder} failed: {type(err).__name__}: "
                           f"{_one_line(err)}; nothing was published (no manifest was "
                           "written): run again") from err
    try:
        remove_tree(layout.staging_dir)
    except Exception as err:  # published: what is left in staging is garbage
        logging.getLogger(__name__).warning(
            "published, but %s could not be removed (%s); delete it, or the next run "
            "into this location will", layout.staging_dir, _one_line(err))
    return manifest


def _publish(layout: OutputLayout, *, config: Config, vocab_sha256: str,
             inputs: Sequence[tuple[str, int]], shards: Sequence[dict],
             counters: dict[str, int], input_problems: Sequence[dict],
             warnings: Sequence[str], replaces: Sequence[str],
             max_predictions_per_row: int | None, dedup: dict | None,
             documents: DocumentPlan | None) -> dict:
    # Files this publish writes replace their old selves; of the rest, the
    # manifest goes first. (A retried publish finds its own files there.)
    ours = {*layout.final_paths, *(documents.final if documents else ()), layout.vocab_path}
    old = [p for p in replaces if p not in ours and FileSystems.exists(p)]
    old_manifests = [p for p in old if p.endswith(MANIFEST_NAME)]
    if old_manifests:
        FileSystems.delete(old_manifests)
    if len(old) > len(old_manifests):
        FileSystems.delete([p for p in old if p not in old_manifests])
    # Parquet shards name their columns' types; the manifest states them once.
    schema = next((s["columns"] for s in shards if "columns" in s), None)
    by_shard = sorted(({k: v for k, v in s.items() if k != "columns"} for s in shards),
                      key=lambda s: s["shard"])
    move_files(staged_paths(layout), layout.final_paths,
               [(s["bytes"], s["sha256"]) if "sha256" in s else None for s in by_shard])
    if documents is not None:
        written = sorted(read_staging_json(layout, HASH_LIST_NAME), key=lambda w: w["file"])
        move_files(documents.staged, documents.final, [(w["bytes"], w["sha256"]) for w in written])
    _copy_vocabulary(layout, layout.staged_vocab_path if config.recipe == "d2l"
                     else config.tokenizer.path, vocab_sha256)
    manifest = {
        "format": f"bert-pretraining-{config.output_format}/1",
        "flags": config.flags(),
        # d2l's own features are described by its recipe.
        "features": {} if config.recipe == "d2l" else record_layout(config).roles(),
        "vocab_sha256": vocab_sha256,
        "inputs": [{"path": p, "bytes": size} for p, size in inputs],
        "shards": [dict(s, path=layout.final_paths[s["shard"]]) for s in by_shard],
        # a packed shard's records are rows of several instances
        "total_instances": sum(s.get("instances", s["records"]) for s in shards),
        "counters": dict(sorted(counters.items())),
        "dedup": dedup or {"mode": "none"},
        "input_problems": list(input_problems),
        "warnings": list(warnings),
        "versions": package_versions(),
    }
    if schema is not None:
        manifest["schema"] = schema
    if config.pack_sequences:
        manifest["packing"] = packing_summary(config, shards, max_predictions_per_row)
    if documents is not None:
        manifest.update(manifest_entries(documents, written,
                                         instances=manifest["total_instances"],
                                         shard_bytes=sum(s["bytes"] for s in shards)))
    _write_json(layout.manifest_path, manifest)
    return manifest
