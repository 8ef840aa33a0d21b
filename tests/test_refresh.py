"""Scheduled refresh: unchanged corpus -> skipped; changed -> new version and
LATEST, with what changed since the version before; failed run -> LATEST
untouched; --keep_versions deletes old versions, never one being written.
Real pipeline runs on a tiny corpus."""

from __future__ import annotations

import datetime
import json
import pathlib
import shutil

import pytest

from conftest import DATA, UNCASED_VOCAB
from helpers.gcs_emulator import gcs  # noqa: F401  (fixture)
from bert_pretraining_data.loaders.manifest import read_manifest
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.inspect_data import report
from bert_pretraining_data.pipeline.main import create_dataset
from bert_pretraining_data.pipeline.refresh import Fingerprint, input_states, main, promote, refresh
from bert_pretraining_data.pipeline.versions import FINGERPRINT_NAME
from bert_pretraining_data.pipeline.versions import LATEST_NAME
from bert_pretraining_data.pipeline.versions import read_latest
from bert_pretraining_data.pipeline.versions import version_name
from helpers.records import read_examples
from helpers.tokenizer_files import modernbert_bpe, roberta_bpe

FLAGS = ["--dupe_factor=1", "--num_shards=2", "--max_seq_length=64",
         "--max_predictions_per_seq=10"]
MONDAY = datetime.datetime(2025, 1, 6, 3, 0, tzinfo=datetime.timezone.utc)
NEXT_MONDAY = MONDAY + datetime.timedelta(days=7)


@pytest.fixture
def corpus(tmp_path) -> pathlib.Path:
    directory = tmp_path / "corpus"
    directory.mkdir()
    shutil.copy(DATA / "sample_text.txt", directory / "a.txt")
    return directory


def _argv(corpus: pathlib.Path, root: pathlib.Path | str, *extra: str) -> list[str]:
    return [f"--input_file={corpus}/*.txt", f"--vocab_file={UNCASED_VOCAB}",
            f"--output_root={root}", *FLAGS, *extra]


def _versions(root: pathlib.Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def test_version_names_sort_by_time_and_keep_the_digest():
    early = version_name(MONDAY, "ab" * 32)
    late = version_name(NEXT_MONDAY, "00" * 32)
    assert early == "20250106T030000Z-abababab"
    assert early < late


@pytest.mark.parametrize("now", [MONDAY, MONDAY - datetime.timedelta(hours=1)],
                         ids=["same-second", "clock-behind"])
def test_a_version_sorts_after_the_one_it_follows(now):
    before = version_name(MONDAY, "ff" * 32)
    after = version_name(now, "00" * 32, after=before)
    assert after == "20250106T030001Z-00000000" > before
    assert version_name(now, "00" * 32, after="v1") == version_name(now, "00" * 32)


def test_promote_replaces_latest_and_records_the_fingerprint(tmp_path):
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    built_from = Fingerprint.of({"inputs": [], "flags": {"dupe_factor": 1}})
    promote(str(tmp_path), "v1", built_from)
    promote(str(tmp_path), "v2", built_from)
    assert read_latest(str(tmp_path)) == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == [LATEST_NAME, "v1", "v2"]
    recorded = json.loads((tmp_path / "v2" / FINGERPRINT_NAME).read_text())
    assert recorded["digest"] == built_from.digest and recorded["flags"] == {"dupe_factor": 1}


def test_latest_only_moves_forward(tmp_path):
    """Two refreshes overlapped: the one that started first finishes last."""
    for name in ("v1", "v2"):
        (tmp_path / name).mkdir()
    built_from = Fingerprint.of({"inputs": []})
    assert promote(str(tmp_path), "v2", built_from) == "v2"
    assert promote(str(tmp_path), "v1", built_from) == "v2"
    assert read_latest(str(tmp_path)) == "v2"
    assert (tmp_path / "v1" / FINGERPRINT_NAME).exists()  # complete, just not LATEST


def test_a_latest_that_names_no_version_is_an_error(tmp_path):
    (tmp_path / LATEST_NAME).write_text("../elsewhere\n")
    with pytest.raises(ValueError, match="not a version name"):
        read_latest(str(tmp_path))


def test_input_states_change_with_content_of_equal_size(corpus):
    before = input_states(f"{corpus}/*.txt")
    data = (corpus / "a.txt").read_bytes()
    (corpus / "a.txt").write_bytes(data.upper())  # same size
    after = input_states(f"{corpus}/*.txt")
    assert [s["bytes"] for s in before] == [s["bytes"] for s in after] == [len(data)]
    assert before != after


@pytest.mark.parametrize("flag", ["--output_dir=/tmp/x", "--overwrite", "--output_file=x"])
def test_placement_flags_are_refused(corpus, tmp_path, flag):
    with pytest.raises(ConfigError, match="chosen by the refresh"):
        refresh(_argv(corpus, tmp_path / "root", flag))


@pytest.mark.parametrize("flags, message", [
    (["--keep_versions=0"], "--keep_versions must be at least 1"),
    (["--list_expired_versions"], "add --keep_versions=N"),
])
def test_retention_flags_are_checked_in_one_line(corpus, tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        main(_argv(corpus, tmp_path / "root", *flags))
    assert exit_.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("create-pretraining-data-refresh: error: ") and message in line


@pytest.mark.slow
def test_unchanged_corpus_is_skipped_and_a_change_makes_a_new_version(corpus, tmp_path, capsys):
    root = tmp_path / "root"
    first = refresh(_argv(corpus, root), now=MONDAY)
    assert first["status"] == "published" and first["changes"] is None
    assert (root / LATEST_NAME).read_text() == first["version"] + "\n"
    version_dir = root / first["version"]
    shards = sorted(str(p) for p in version_dir.glob("part-*"))
    assert len(read_examples(shards, 64, 10)) == first["total_instances"] > 0
    manifest = json.loads((version_dir / "manifest.json").read_text())
    assert manifest["documents"]["count"] == manifest["counters"]["documents"] == 3
    assert sorted(p.name for p in root.iterdir()) == [first["version"], LATEST_NAME]  # no lease

    again = refresh(_argv(corpus, root), now=NEXT_MONDAY)
    assert again == {"status": "unchanged", "version": first["version"],
                     "fingerprint": first["fingerprint"]}
    assert _versions(root) == [first["version"]]

    with open(corpus / "a.txt", "a") as handle:
        handle.write("\nA brand new document.\nWith two sentences.\n")
    main(_argv(corpus, root))  # the CLI: its log says what changed
    printed = capsys.readouterr()
    changed = json.loads(printed.out)
    assert changed["status"] == "published" and changed["version"] > first["version"]
    assert read_latest(str(root)) == changed["version"]
    assert _versions(root) == [first["version"], changed["version"]]
    assert (version_dir / "manifest.json").exists()  # the old version stays whole
    shard_bytes = sum(s["bytes"] for s in manifest["shards"])
    recorded = json.loads((root / changed["version"] / "manifest.json").read_text())
    assert recorded["changes"] == changed["changes"] == {
        "previous_version": str(version_dir),
        "documents": {"previous": 3, "current": 4, "added": 1, "removed": 0, "unchanged": 3},
        "instances": {"previous": first["total_instances"],
                      "current": changed["total_instances"]},
        "bytes": {"previous": shard_bytes,
                  "current": sum(s["bytes"] for s in recorded["shards"])}}
    assert (f"since {first['version']}: documents 1 added, 0 removed, 3 unchanged (3 -> 4); "
            f"instances {first['total_instances']:,} -> ") in printed.err

    listed = refresh(_argv(corpus, root, "--random_seed=7", "--keep_versions=1",
                           "--list_expired_versions"), now=NEXT_MONDAY)
    assert listed == {"status": "listed", "latest": changed["version"], "keep_versions": 1,
                      "expired_versions": [first["version"]]}
    assert _versions(root) == [first["version"], changed["version"]]  # nothing deleted

    # On a clock behind the last version's (or in its second), it still sorts after it.
    flags_changed = refresh(_argv(corpus, root, "--random_seed=7", "--keep_versions=2"),
                            now=NEXT_MONDAY)
    assert flags_changed["status"] == "published"
    assert read_latest(str(root)) == flags_changed["version"] > changed["version"]
    assert flags_changed["fingerprint"] != changed["fingerprint"]
    assert flags_changed["changes"]["documents"] == {  # the same documents, other flags
        "previous": 4, "current": 4, "added": 0, "removed": 0, "unchanged": 4}
    assert flags_changed["expired_versions"] == [first["version"]]
    assert _versions(root) == [changed["version"], flags_changed["version"]]

    # Given the root, the loaders and inspect-pretraining-data read the version LATEST names.
    newest = root / flags_changed["version"]
    assert read_manifest(str(root)).path == str(newest / "manifest.json")
    assert report(str(root), num_instances=1).startswith(
        f"refresh root {root}: 2 version(s) ({changed['version']}, {flags_changed['version']}); "
        f"LATEST names {flags_changed['version']}, which this report reads\n"
        f"dataset: {newest / 'manifest.json'}")
    assert "refresh root" not in report(str(newest), num_instances=1)


@pytest.mark.slow
def test_failed_run_leaves_latest_untouched(corpus, tmp_path):
    root = tmp_path / "root"
    first = refresh(_argv(corpus, root), now=MONDAY)
    (corpus / "b.txt").write_text("Another document.\nIt changes the fingerprint.\n")

    def crash_midway(argv, **unused):
        output_dir = pathlib.Path(argv[-1].split("=", 1)[1])
        (output_dir / ".staging").mkdir(parents=True)
        (output_dir / ".staging" / "shard-00000").write_bytes(b"half")
        raise RuntimeError("worker lost")

    with pytest.raises(RuntimeError, match="worker lost"):
        refresh(_argv(corpus, root), now=NEXT_MONDAY, run_pipeline=crash_midway)
    assert read_latest(str(root)) == first["version"]
    assert _versions(root) == [first["version"]]  # the failed version was cleared
    assert sorted(p.name for p in root.iterdir()) == [first["version"], LATEST_NAME]


@pytest.mark.slow
def test_retention_never_deletes_a_version_being_written(corpus, tmp_path):
    """Two CLI refreshes of one root overlap: A starts first; while A is still
    writing, B (started later) publishes and applies --keep_versions=1. A's
    directory, older than B's, is kept (A's lease), A completes, and LATEST
    stays on B, the newer; A's own retention then deletes A."""
    root = tmp_path / "root"
    other_corpus = tmp_path / "other"
    shutil.copytree(corpus, other_corpus)
    (other_corpus / "b.txt").write_text("Another document.\nIt is B's alone.\n")
    seen = {}

    def b_publishes_meanwhile(argv, **kwargs):
        a_dir = pathlib.Path(argv[-1].split("=", 1)[1])
        (a_dir / ".staging").mkdir(parents=True)
        (a_dir / ".staging" / "bucket").write_bytes(b"A is writing")
        seen["b"] = refresh(_argv(other_corpus, root, "--keep_versions=1"), now=NEXT_MONDAY)
        seen["a_dir_after_b"] = sorted(p.name for p in a_dir.rglob("*"))
        return create_dataset(argv, **kwargs)

    a = refresh(_argv(corpus, root, "--keep_versions=1"), now=MONDAY,
                run_pipeline=b_publishes_meanwhile)
    assert seen["b"]["status"] == "published" and seen["b"]["expired_versions"] == []
    assert seen["a_dir_after_b"] == [".staging", "bucket"]
    assert a["status"] == "published" and a["version"] < seen["b"]["version"]
    assert read_latest(str(root)) == seen["b"]["version"]
    assert a["expired_versions"] == [a["version"]]
    assert sorted(p.name for p in root.iterdir()) == [seen["b"]["version"], LATEST_NAME]


@pytest.mark.slow
def test_launch_only_publishes_and_promotes_inside_the_job(corpus, tmp_path):
    """The Flex Template mode, on the DirectRunner: the job's own last steps
    publish the version and move LATEST; an unchanged corpus runs an empty job."""
    root = tmp_path / "root"
    launched = refresh(_argv(corpus, root, "--launch_only"), now=MONDAY)
    assert launched["status"] == "launched"
    assert read_latest(str(root)) == launched["version"]
    manifest = json.loads((root / launched["version"] / "manifest.json").read_text())
    assert manifest["total_instances"] == sum(s["records"] for s in manifest["shards"]) > 0

    driver = refresh(_argv(corpus, tmp_path / "driver-root"), now=MONDAY)
    assert driver["fingerprint"] == launched["fingerprint"]
    driven = json.loads(pathlib.Path(driver["manifest"]).read_text())
    assert [s["sha256"] for s in manifest["shards"]] == [s["sha256"] for s in driven["shards"]]
    assert manifest["counters"] == driven["counters"]  # figures, staged by the pipeline

    again = refresh(_argv(corpus, root, "--launch_only"), now=NEXT_MONDAY)
    assert again["status"] == "unchanged"
    assert _versions(root) == [launched["version"]]

    # The job records what changed, moves LATEST, releases its lease, keeps 1 version.
    (corpus / "b.txt").write_text("Another document.\nIt changes the fingerprint.\n")
    second = refresh(_argv(corpus, root, "--launch_only", "--keep_versions=1"),
                     now=NEXT_MONDAY)
    assert second["status"] == "launched" and read_latest(str(root)) == second["version"]
    assert sorted(p.name for p in root.iterdir()) == [second["version"], LATEST_NAME]
    recorded = json.loads((root / second["version"] / "manifest.json").read_text())
    assert recorded["changes"]["documents"] == {
        "previous": 3, "current": 4, "added": 1, "removed": 0, "unchanged": 3}


@pytest.mark.slow
def test_refresh_on_gcs(gcs, corpus):  # noqa: F811
    gcs.upload(corpus / "a.txt", "refresh/corpus/a.txt")
    argv = [f"--input_file={gcs.url('refresh/corpus/*.txt')}",
            f"--vocab_file={gcs.upload(UNCASED_VOCAB, 'refresh/vocab.txt')}",
            f"--output_root={gcs.url('refresh/data')}", *FLAGS]
    first = refresh(argv, now=MONDAY)
    assert gcs.read("refresh/data/LATEST") == (first["version"] + "\n").encode()
    assert refresh(argv, now=NEXT_MONDAY)["status"] == "unchanged"

    gcs.upload_bytes(b"A new document on the bucket.\nIt has two lines.\n",
                     "refresh/corpus/b.txt")
    second = refresh(argv, now=NEXT_MONDAY)
    assert second["status"] == "published"
    assert second["changes"]["documents"] == {
        "previous": 3, "current": 4, "added": 1, "removed": 0, "unchanged": 3}
    assert gcs.read("refresh/data/LATEST") == (second["version"] + "\n").encode()
    top = {name.split("/")[2] for name in gcs.names("refresh/data/")}
    assert top == {LATEST_NAME, first["version"], second["version"]}  # no temporary left
    assert f"refresh/data/{second['version']}/{FINGERPRINT_NAME}" in gcs.names("refresh/data/")
    root = gcs.url("refresh/data")  # the root on a bucket, listed through gcsfs
    assert report(root, num_instances=1).startswith(
        f"refresh root {root}: 2 version(s) ({first['version']}, {second['version']}); "
        f"LATEST names {second['version']}, which this report reads\n")

    gcs.delete("refresh/corpus/a.txt")
    third = refresh([*argv, "--keep_versions=1"], now=NEXT_MONDAY + datetime.timedelta(days=7))
    assert third["changes"]["documents"] == {
        "previous": 4, "current": 1, "added": 0, "removed": 3, "unchanged": 1}
    assert third["expired_versions"] == [first["version"], second["version"]]
    assert {name.split("/")[2] for name in gcs.names("refresh/data/")} == {
        LATEST_NAME, third["version"]}


@pytest.mark.parametrize("output_format, shards", [
    ("parquet", ["part-00000-of-00002.parquet", "part-00001-of-00002.parquet"]),
    ("mds", ["part-00000-of-00002", "part-00001-of-00002"])])
def test_columnar_versions_refresh_report_changes_and_expire(corpus, tmp_path, output_format,
                                                             shards):
    """--output_format=parquet or mds through a refresh: each version's shards
    read back, the change report counts documents and bytes, retention keeps
    the newest."""
    from bert_pretraining_data.loaders.records import read_instances

    root = tmp_path / "root"
    parquet = f"--output_format={output_format}"
    first = refresh(_argv(corpus, root, parquet), now=MONDAY)
    version_dir = root / first["version"]
    assert sorted(p.name for p in version_dir.glob("part-*")) == shards
    assert len(list(read_instances(read_manifest(str(version_dir))))) == first[
        "total_instances"] > 0
    with open(corpus / "a.txt", "a") as handle:
        handle.write("\nA brand new document.\nWith two sentences.\n")
    changed = refresh(_argv(corpus, root, parquet, "--keep_versions=1"), now=NEXT_MONDAY)
    assert changed["status"] == "published"
    assert changed["changes"]["documents"]["added"] == 1
    recorded = read_manifest(str(root / changed["version"]))
    assert changed["changes"]["bytes"]["current"] == sum(
        s.bytes for s in recorded.content.shards)
    assert recorded.content.format == f"bert-pretraining-{output_format}/1"
    assert changed["expired_versions"] == [first["version"]]
    assert _versions(root) == [changed["version"]]


# Counters of the bytes and files a run put through, which vary with the runner's
# bundles from one run to the next (docs/output.md).
BUNDLE_MEASURES = ("dedup_shuffle_bytes", "shuffle_entry_bytes", "bucket_files")


@pytest.mark.slow
@pytest.mark.parametrize("recipe, make_tokenizer", [("bert", modernbert_bpe),
                                                    ("roberta", roberta_bpe)])
def test_a_launch_only_refresh_writes_the_manifest_a_local_one_writes(tmp_path, recipe,
                                                                      make_tokenizer):
    """The Flex Template's mode (--launch_only: the job publishes itself, here on
    the DirectRunner) and a local run publish through one function from what
    the pipeline staged: on a tokenizer.json, a held-out split and a mixture,
    their manifests differ in their paths alone (versions and times agree in
    one process), the figures of every stage included. The bert recipe with
    ModernBERT's framing, and the RoBERTa recipe with RoBERTa's (issue 53:
    launch-only jobs took the bert recipe alone)."""
    make_tokenizer((DATA / "wikitext2_valid.txt").read_text().splitlines(),
                   tmp_path / "tokenizer.json", vocab_size=2000)
    (tmp_path / "mixture.json").write_text(json.dumps({"sources": [
        {"name": "wiki", "input_file": str(DATA / "wiki_small.txt")},
        {"name": "sample", "input_file": str(DATA / "sample_text.txt"), "weight": 2}]}))
    flags = [f"--mixture={tmp_path / 'mixture.json'}",
             f"--tokenizer_file={tmp_path / 'tokenizer.json'}", "--validation_fraction=0.2",
             "--max_seq_length=64", "--max_predictions_per_seq=10", f"--recipe={recipe}"]
    manifests = {}
    for name, mode in (("job", ["--launch_only"]), ("local", [])):
        version = refresh([*flags, f"--output_root={tmp_path / name}", *mode],
                          now=MONDAY)["version"]
        manifests[name] = (tmp_path / name / version / "manifest.json").read_text()
    in_job = json.loads(manifests["job"].replace(str(tmp_path / "job"), str(tmp_path / "local")))
    local = json.loads(manifests["local"])
    for manifest in (in_job, local):  # they measure how the runner bundled the work
        assert all(manifest["counters"].pop(name) > 0 for name in BUNDLE_MEASURES)
    assert in_job == local
    assert in_job["flags"]["recipe"] == recipe and in_job["counters"]["documents"] > 0
    # RoBERTa's training split is masked at load time
    assert in_job["flags"]["masking"] == ("static" if recipe == "bert" else "none")
    assert in_job["tokenizer_engine"] and in_job["mixture"]["sources"][1]["copies"] > 0
