"""What changed since the previous version: a refresh's account of its documents.

A refresh asks its run to keep a `DocumentHistory`: the run hashes every
document it reads (transforms.hashes), compares the hashes with the previous
version's, and publishes them with the shards. The manifest then records
(loaders.manifest.VersionRecord)

    documents: {count, hash, files: [{path, documents, bytes, sha256}]}
    changes:   {previous_version,
                documents: {previous, current, added, removed, unchanged},
                instances: {previous, current}, bytes: {previous, current},
                splits: {split: {documents, instances, near_copies_dropped:
                                 {previous, current}}}  (held-out splits only),
                sources: {source: {documents, instances, output_tokens:
                                   {previous, current},
                                   quality: {rule: {documents, lines: {previous,
                                                                       current}}}}}
                         (mixtures only; quality where the source's filters removed
                         something in either version),
                quality: {rule: {documents, lines: {previous, current}}}
                         (rules that removed something in either version)}

(changes null for a root's first version, its documents null when the
previous version did not record its documents).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.loaders.manifest import DatasetManifest, SplitRecord, VersionRecord
from bert_pretraining_data.transforms.hashes.document_hashes import hash_files_for
from bert_pretraining_data.transforms.quality.rule_table import removed_by_rule
from bert_pretraining_data.transforms.split.held_out import SPLITS, TRAIN

HASH_LIST_NAME = "document_hashes.json"  # the staging list the manifest is made from
HASH_FILE_PREFIX = "document-hashes"
HASH_DESCRIPTION = ("first 8 bytes (big-endian) of the sha256 of a document's lines as "
                    "read, joined by \\n, UTF-8; each file sorted, file i of n holding the "
                    "hashes whose first byte b has b * n // 256 == i")


@dataclasses.dataclass(frozen=True)
class PreviousVersion:
    """What a run is compared with: a published version, as its manifest says."""

    path: str
    instances: int
    bytes: int
    documents: int | None  # None: made before versions recorded their documents
    hash_files: tuple[str, ...] | None
    splits: dict[str, SplitRecord] | None = None  # its held-out splits' figures
    mixture: dict | None = None  # its mixture's figures
    quality: dict | None = None  # what each quality rule removed (rule_table.removed_by_rule)

    @classmethod
    def of(cls, path: str, manifest: DatasetManifest) -> "PreviousVersion":
        """The version in directory `path`, as its manifest says; its hash files
        are looked up beside the manifest, wherever it says they were written."""
        recorded = manifest.refresh.documents if manifest.refresh else None
        return cls(path=path, instances=manifest.total_instances, bytes=manifest.shard_bytes,
                   documents=recorded["count"] if recorded else None,
                   hash_files=tuple(FileSystems.join(path, FileSystems.split(f["path"])[1])
                                    for f in recorded["files"]) if recorded else None,
                   splits=manifest.splits, mixture=manifest.mixture,
                   quality=removed_by_rule(manifest.counters))


@dataclasses.dataclass(frozen=True)
class DocumentPlan:
    """A run's hash files (where each is staged and published) and the
    version they are compared with."""

    previous: PreviousVersion | None
    staged: tuple[str, ...]
    final: tuple[str, ...]

    @property
    def previous_hash_files(self) -> tuple[str, ...] | None:
        return self.previous.hash_files if self.previous else None


@dataclasses.dataclass(frozen=True)
class DocumentHistory:
    """Asks a run to record its documents and compare them with `previous`
    (None: the first version of a root)."""

    previous: PreviousVersion | None = None

    def plan(self, *, staging_dir: str, output_dir: str, input_bytes: int) -> DocumentPlan:
        count = hash_files_for(input_bytes)
        output_dir = output_dir.rstrip("/")
        return DocumentPlan(
            previous=self.previous,
            staged=tuple(FileSystems.join(staging_dir, f"{HASH_FILE_PREFIX}-{i:05d}")
                         for i in range(count)),
            final=tuple(FileSystems.join(output_dir, f"{HASH_FILE_PREFIX}-{i:05d}-of-{count:05d}")
                        for i in range(count)))


def _sum(items: Sequence[dict], name: str) -> int:
    return sum(item[name] for item in items)


def compared(previous: dict[str, dict[str, int]], current: dict[str, dict[str, int]],
             fields: Sequence[str]) -> dict[str, dict[str, dict[str, int]]]:
    """Each part's figures in both versions, the previous version's parts
    first (a part one of them lacks counts 0)."""
    names = list(previous) + [name for name in current if name not in previous]
    return {name: {field: {"previous": previous.get(name, {}).get(field, 0),
                           "current": current.get(name, {}).get(field, 0)}
                   for field in fields} for name in names}


def split_changes(previous: dict[str, SplitRecord] | None,
                  current: dict[str, SplitRecord] | None) -> dict | None:
    """Each split's documents and instances in both versions (None when
    neither has held-out splits). A document keeps its side across versions
    (transforms.split.held_out), so a held-out split only grows by new
    documents and shrinks by removed ones."""
    if not previous and not current:
        return None

    def figures(records: dict[str, SplitRecord] | None) -> dict[str, dict[str, int]]:
        return {name: dataclasses.asdict(record) for name, record in sorted(
            (records or {}).items(), key=lambda item: SPLITS.index(item[0]))}

    return compared(figures(previous), figures(current),
                    ("documents", "instances", "near_copies_dropped"))


def source_changes(previous: dict | None, current: dict | None) -> dict | None:
    """Each mixture source's documents, instances and output tokens in both
    versions, and what its quality filters removed, rule by rule (None when
    neither is a mixture)."""
    if not previous and not current:
        return None

    def figures(mixture: dict | None) -> dict[str, dict]:
        return {source["name"]: source for source in (mixture or {}).get("sources", [])}

    before, after = figures(previous), figures(current)
    changes = compared(before, after, ("documents", "instances", "output_tokens"))
    for name, parts in changes.items():
        quality = compared(before.get(name, {}).get("quality") or {},
                           after.get(name, {}).get("quality") or {}, ("documents", "lines"))
        if quality:
            parts["quality"] = quality
    return changes


def version_record(plan: DocumentPlan, written: Sequence[dict], *, instances: int,
                   shard_bytes: int, splits: dict[str, SplitRecord] | None = None,
                   mixture: dict | None = None, quality: dict | None = None) -> VersionRecord:
    """The manifest's account of a refresh's version, from the hash files as
    the pipeline wrote them (`written`, one dict per file), the run's
    instances and shard bytes, its held-out `splits`, its `mixture` and
    what each quality rule removed."""
    written = sorted(written, key=lambda item: item["file"])
    current = _sum(written, "documents")
    documents = {"count": current, "hash": HASH_DESCRIPTION, "files": [
        {"path": plan.final[w["file"]], "documents": w["documents"], "bytes": w["bytes"],
         "sha256": w["sha256"]} for w in written]}
    previous = plan.previous
    if previous is None:
        return VersionRecord(documents, changes=None)
    counted = None
    if previous.hash_files is not None:
        counted = {"previous": _sum(written, "previous_documents"), "current": current,
                   **{name: _sum(written, name) for name in ("added", "removed", "unchanged")}}
    changes = {
        "previous_version": previous.path, "documents": counted,
        "instances": {"previous": previous.instances, "current": instances},
        "bytes": {"previous": previous.bytes, "current": shard_bytes}}
    for key, parts in (("splits", split_changes(previous.splits, splits)),
                       ("sources", source_changes(previous.mixture, mixture)),
                       ("quality", compared(previous.quality or {}, quality or {},
                                            ("documents", "lines")))):
        if parts:
            changes[key] = parts
    return VersionRecord(documents, changes=changes)


def summary(changes: dict | None) -> str:
    """One line for the log: what changed since the previous version."""
    if changes is None:
        return "first version under this root: nothing to compare with"
    name = FileSystems.split(changes["previous_version"].rstrip("/"))[1]
    documents = changes["documents"]
    counted = ("documents not compared (the previous version has no document hashes)"
               if documents is None else
               f"documents {documents['added']:,} added, {documents['removed']:,} removed, "
               f"{documents['unchanged']:,} unchanged ({documents['previous']:,} -> "
               f"{documents['current']:,})")
    instances, size = changes["instances"], changes["bytes"]
    held_out = "".join(
        f"; {split} documents {figures['documents']['previous']:,} -> "
        f"{figures['documents']['current']:,}"
        for split, figures in changes.get("splits", {}).items() if split != TRAIN)
    dropped = {side: sum(figures["documents"][side] for figures in
                         changes.get("quality", {}).values()) for side in ("previous", "current")}
    quality = (f"; documents dropped by quality rules {dropped['previous']:,} -> "
               f"{dropped['current']:,}" if changes.get("quality") else "")
    return (f"since {name}: {counted}; instances {instances['previous']:,} -> "
            f"{instances['current']:,}; bytes {size['previous']:,} -> {size['current']:,}"
            + held_out + quality)
