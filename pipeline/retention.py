"""Retention: `--keep_versions=N` deletes the versions a refresh no longer needs.

Once LATEST points at the new version, complete versions (those with a
fingerprint.json) other than the N newest, and incomplete ones older than the
newest complete version, are deleted; never LATEST's, a version being
written, or a name that is not a version's. A writer holds a lease,
`<root>/<version>.writing`, from before its first object until LATEST moved,
so overlapping refreshes keep each other's versions. Why that is safe: LATEST
is read first, then the versions listed, then the leases, and a live writer's
lease exists before its directory has any object. (Why retention:
docs/design-notes.md, pipeline.retention.)
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Sequence

from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.loaders.manifest import MANIFEST_NAME
from bert_pretraining_data.pipeline.publish import remove_tree
from bert_pretraining_data.pipeline.versions import FINGERPRINT_NAME, VERSION_NAME, read_latest

LEASE_SUFFIX = ".writing"
LEASE_HOURS = 48


@dataclasses.dataclass(frozen=True)
class Version:
    """A version directory under the root, as one listing found it; complete
    once its fingerprint.json exists (written after the manifest, just
    before LATEST moves)."""

    name: str
    complete: bool


def expired(versions: Sequence[Version], *, latest: str | None, keep: int) -> list[str]:
    """The versions retention deletes, leases aside (see the module
    docstring), oldest first. Pure: what a listing found in, names out."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    complete = sorted(v.name for v in versions if v.complete)
    if not complete:
        return []
    kept = set(complete[-keep:]) | {latest}
    newest = complete[-1]
    return sorted(v.name for v in versions if v.name not in kept
                  and (v.complete or v.name < newest))


def list_versions(root: str) -> list[Version]:
    """Every version directory under the root (one listing of its objects)."""
    prefix = root.rstrip("/") + "/"
    found: dict[str, bool] = {}
    for meta in FileSystems.match([FileSystems.join(root, "**")])[0].metadata_list:
        parts = meta.path[len(prefix):].split("/") if meta.path.startswith(prefix) else []
        if len(parts) < 2 or not VERSION_NAME.fullmatch(parts[0]):
            continue
        found[parts[0]] = found.get(parts[0], False) or parts[1:] == [FINGERPRINT_NAME]
    return [Version(name, complete) for name, complete in sorted(found.items())]


def lease_path(root: str, version: str) -> str:
    return FileSystems.join(root, version + LEASE_SUFFIX)


def take_lease(root: str, version: str, *, now: datetime.datetime | None = None) -> None:
    """Marks `version` as being written (before any of its objects exists)."""
    started = now or datetime.datetime.now(datetime.timezone.utc)
    record = {"version": version, "started": started.isoformat(),
              "expires": (started + datetime.timedelta(hours=LEASE_HOURS)).isoformat()}
    with FileSystems.create(lease_path(root, version)) as handle:
        handle.write((json.dumps(record) + "\n").encode("utf-8"))


def release_lease(root: str, version: str) -> None:
    path = lease_path(root, version)
    if FileSystems.exists(path):
        FileSystems.delete([path])


def is_leased(root: str, version: str, *, now: datetime.datetime) -> bool:
    """Whether a live (unexpired) lease says `version` is being written."""
    path = lease_path(root, version)
    if not FileSystems.exists(path):
        return False
    with FileSystems.open(path) as handle:
        text = handle.read()
    try:
        expires = datetime.datetime.fromisoformat(json.loads(text)["expires"])
    except (ValueError, KeyError, TypeError):  # not a lease this tool wrote
        return False
    return now < expires


def delete_version(root: str, version: str) -> None:
    """Deletes a version: its manifest first (so no reader takes the rest for
    a dataset), then its fingerprint, then everything else, and the expired
    lease of a writer that died, if one is left."""
    directory = FileSystems.join(root, version)
    for name in (MANIFEST_NAME, FINGERPRINT_NAME):
        path = FileSystems.join(directory, name)
        if FileSystems.exists(path):
            FileSystems.delete([path])
    remove_tree(directory)
    release_lease(root, version)


def apply_retention(root: str, keep: int, *, delete: bool = True,
                    now: datetime.datetime | None = None) -> list[str]:
    """Deletes (or, with delete=False, only finds) the expired versions under
    the root; returns their names. LATEST is read first, then the versions
    listed, then the leases read (see the module docstring)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    latest = read_latest(root)
    candidates = expired(list_versions(root), latest=latest, keep=keep)
    doomed = [name for name in candidates if not is_leased(root, name, now=now)]
    if delete:
        for name in doomed:
            delete_version(root, name)
    return doomed
