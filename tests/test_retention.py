"""--keep_versions (pipeline/retention.py): which versions go, which never do
(LATEST's, the N newest complete, one being written), on a local root and on
the GCS emulator. End-to-end refreshes with retention are in test_refresh.py."""

from __future__ import annotations

import datetime
import pathlib

import pytest

from helpers.gcs_emulator import gcs  # noqa: F401  (fixture)
from bert_pretraining_data.pipeline.retention import (LEASE_HOURS, Version, apply_retention,
                                                      expired, is_leased, lease_path,
                                                      list_versions, take_lease)

NOW = datetime.datetime(2025, 3, 3, 3, 0, tzinfo=datetime.timezone.utc)
V = [f"2025010{day}T030000Z-0000000{day}" for day in range(1, 8)]  # oldest first
COMPLETE_FILES = ("part-00000-of-00001.tfrecord", "manifest.json", "fingerprint.json")
INCOMPLETE_FILES = (".staging/shard-00000",)


def test_the_n_newest_complete_versions_and_latest_are_kept():
    versions = [Version(name, complete=True) for name in V[:5]]
    assert expired(versions, latest=V[4], keep=2) == V[:3]
    assert expired(versions, latest=V[4], keep=5) == []
    # LATEST is kept even when older than the N newest (a refresh overlapped).
    assert expired(versions, latest=V[1], keep=2) == [V[0], V[2]]


def test_incomplete_directories_go_only_when_older_than_the_newest_complete_one():
    versions = [Version(V[0], True), Version(V[1], False), Version(V[2], True),
                Version(V[3], False), Version(V[4], True), Version(V[5], False)]
    # V[5]: newer than every complete version, perhaps being written.
    assert expired(versions, latest=V[4], keep=3) == [V[1], V[3]]
    assert expired(versions, latest=V[4], keep=1) == [V[0], V[1], V[2], V[3]]
    assert expired([Version(V[0], False), Version(V[1], False)], latest=None, keep=1) == []
    with pytest.raises(ValueError, match="at least 1"):
        expired(versions, latest=V[4], keep=0)


def _make(root: pathlib.Path, name: str, files: tuple[str, ...]) -> None:
    for file in files:
        (root / name / file).parent.mkdir(parents=True, exist_ok=True)
        (root / name / file).write_text("x")


@pytest.fixture
def root(tmp_path) -> pathlib.Path:
    """Three complete versions, an old failed one, one being written (older
    than the newest complete: a refresh that started earlier), a newer
    incomplete one, and things that are not versions."""
    root = tmp_path / "root"
    for name in (V[0], V[2], V[5]):
        _make(root, name, COMPLETE_FILES)
    for name in (V[1], V[4], V[6]):
        _make(root, name, INCOMPLETE_FILES)
    _make(root, "notes", ("README",))
    (root / "LATEST").write_text(V[5] + "\n")
    take_lease(str(root), V[4], now=NOW - datetime.timedelta(hours=1))
    return root


def test_listing_finds_the_versions_and_which_are_complete(root):
    assert list_versions(str(root)) == [
        Version(V[0], True), Version(V[1], False), Version(V[2], True),
        Version(V[4], False), Version(V[5], True), Version(V[6], False)]


def test_retention_keeps_latest_the_newest_and_the_one_being_written(root):
    listed = apply_retention(str(root), 1, delete=False, now=NOW)
    assert listed == [V[0], V[1], V[2]]
    assert sorted(p.name for p in root.iterdir() if p.is_dir())[:4] == V[:3] + [V[4]]

    assert apply_retention(str(root), 1, now=NOW) == listed
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [V[4], V[5], V[6], "notes", "LATEST", V[4] + ".writing"])
    assert (root / V[4] / ".staging" / "shard-00000").exists()  # untouched


def test_a_dead_writers_lease_expires(root):
    later = NOW + datetime.timedelta(hours=LEASE_HOURS)
    assert is_leased(str(root), V[4], now=NOW) and not is_leased(str(root), V[4], now=later)
    assert apply_retention(str(root), 1, now=later) == [V[0], V[1], V[2], V[4]]
    assert not pathlib.Path(lease_path(str(root), V[4])).exists()  # its lease went too


@pytest.mark.slow
def test_retention_on_gcs(gcs):  # noqa: F811
    for name in (V[0], V[2], V[5]):
        for file in COMPLETE_FILES:
            gcs.upload_bytes(b"x", f"keep/{name}/{file}")
    for name in (V[1], V[4]):
        gcs.upload_bytes(b"x", f"keep/{name}/{INCOMPLETE_FILES[0]}")
    gcs.upload_bytes(f"{V[5]}\n".encode(), "keep/LATEST")
    root = gcs.url("keep")
    take_lease(root, V[4], now=NOW)
    assert [v.name for v in list_versions(root) if v.complete] == [V[0], V[2], V[5]]
    assert apply_retention(root, 2, delete=False, now=NOW) == [V[0], V[1]]
    assert apply_retention(root, 2, now=NOW) == [V[0], V[1]]
    assert {name.split("/")[1] for name in gcs.names("keep/")} == {
        V[2], V[4], V[5], "LATEST", V[4] + ".writing"}
