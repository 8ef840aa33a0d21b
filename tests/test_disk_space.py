"""Disk space: a full disk ends a run in one line with nothing published and
the staging directory removed (on a real small filesystem, and raised inside
Beam's writer), and the estimate a local run warns with is near what runs
write, extrapolated from a part of the input."""

from __future__ import annotations

import errno
import gzip
import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.pipeline import disk_space
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.pipeline.prepare import prepare
from bert_pretraining_data.pipeline.publish import PublishError
from bert_pretraining_data.transforms.write import beam as write_beam

# A corpus the estimate was not developed on.
CORPUS = DATA / "en_ewt-ud-test.paragraphs.txt"
FLAGS = [f"--input_file={CORPUS}", f"--vocab_file={UNCASED_VOCAB}", "--dupe_factor=3",
         "--max_seq_length=64", "--max_predictions_per_seq=10", "--progress=none"]


def _small_filesystem() -> list[str] | None:
    """The command prefix that runs a shell in a private mount namespace
    (where it may mount a tmpfs), or None where this machine allows none."""
    if shutil.which("unshare") is None:
        return None
    prefix = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
    probe = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True)
    return prefix if probe.returncode == 0 else None


@pytest.mark.slow
@pytest.mark.parametrize("output_format,shuffle", [("tfrecord", "files"),
                                                   ("parquet", "runner"), ("mds", "runner")])
def test_a_full_disk_ends_the_run_in_one_line_with_nothing_left(tmp_path, output_format,
                                                                shuffle):
    """The issue's repro, smaller: the CLI on a 256 KB filesystem. Bucket files
    fill it with --shuffle=files, the shard writer with --shuffle=runner."""
    prefix = _small_filesystem()
    if prefix is None:
        pytest.skip("this machine mounts no tmpfs in a private mount namespace (unshare)")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = ('mount -t tmpfs -o size=256k tmpfs "$DISK" || exit 99\n'
              '"$@" 2>"$ERR"; echo $? >"$RC"\n'
              'ls -A "$DISK" >"$LIST"; ls -A "$DISK/out" >>"$LIST" 2>/dev/null\n'
              'df -k "$DISK" | tail -1 >"$DF"\n')
    env = dict(os.environ, DISK=str(disk), ERR=str(tmp_path / "err"),
               RC=str(tmp_path / "rc"), LIST=str(tmp_path / "list"), DF=str(tmp_path / "df"))
    subprocess.run([*prefix, "sh", "-c", script, "sh", sys.executable, "-m",
                    "bert_pretraining_data.pipeline", *FLAGS, "--dupe_factor=10",
                    f"--output_dir={disk / 'out'}", f"--output_format={output_format}",
                    f"--shuffle={shuffle}"], env=env, check=True)
    assert (tmp_path / "rc").read_text().split() == ["1"]
    lines = (tmp_path / "err").read_text().splitlines()
    warning, error = lines  # nothing else: no Beam traceback
    assert warning.startswith(f"create-pretraining-data: warning: {disk / 'out'} has ")
    assert "it will likely fail for space" in warning
    assert error.startswith("create-pretraining-data: error: no space left on the device "
                            f"writing {disk / 'out' / '.staging'} (")
    assert "this run needs about" in error and "nothing was published" in error
    # The output directory is left empty: no staging, no shards, no manifest.
    assert (tmp_path / "list").read_text().split() == ["out"]
    used_kb = int((tmp_path / "df").read_text().split()[2])
    assert used_kb < 64


def _fill_the_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("writer", ["write_shard_file", "FileSystems"])
def test_a_full_disk_inside_beam_is_one_error_and_no_log(tmp_path, monkeypatch, caplog,
                                                         writer):
    """Raised in the shard writer, or in the bucket files' create: the
    PublishError names the staging directory and the estimate, the staging
    directory is gone, no manifest, and Beam logs no traceback of it."""
    if writer == "write_shard_file":
        monkeypatch.setattr(write_beam, "write_shard_file", _fill_the_disk)
        flags = ["--shuffle=runner"]
    else:
        real = write_beam.FileSystems

        class Full:
            def __getattr__(self, name):
                return _fill_the_disk if name == "create" else getattr(real, name)
        monkeypatch.setattr(write_beam, "FileSystems", Full())
        flags = ["--shuffle=files"]
    out = tmp_path / "out"
    with caplog.at_level(logging.ERROR), pytest.raises(PublishError) as raised:
        run([*FLAGS, f"--output_dir={out}", "--direct_running_mode=in_memory", *flags])
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"no space left on the device writing {out / '.staging'} (")
    assert "this run needs about" in message
    assert not (out / ".staging").exists() and not (out / "manifest.json").exists()
    assert not [r for r in caplog.records if "No space left" in r.getMessage()
                or (r.exc_info and "No space left" in str(r.exc_info[1]))]


def test_other_errors_pass_through(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(write_beam, "write_shard_file", broken)
    with pytest.raises(Exception, match="Input/output error") as raised:
        run([*FLAGS, f"--output_dir={tmp_path / 'out'}", "--shuffle=runner"])
    assert not isinstance(raised.value, PublishError)


@pytest.mark.parametrize("output_format", ["tfrecord", "parquet", "mds"])
def test_the_estimate_from_a_part_of_the_input_is_near_what_the_run_writes(
        tmp_path, monkeypatch, output_format):
    """From a third of the input, extrapolated: the shards' bytes within 15%
    (bench/disk_estimate.py measures the bench shapes), and the temporary
    files as the entries the run shuffles and the tokenized documents."""
    monkeypatch.setattr(disk_space, "SAMPLE_BYTES", CORPUS.stat().st_size // 3)
    flags = [*FLAGS, f"--output_dir={tmp_path / 'out'}", f"--output_format={output_format}"]
    estimate = disk_space.estimate_space(prepare(*parse_args(flags)))
    assert estimate.sample_bytes < CORPUS.stat().st_size // 2
    manifest = run(flags)
    written = sum(shard["bytes"] for shard in manifest["shards"])
    assert abs(estimate.output_bytes / written - 1) < 0.15
    assert estimate.temporary_bytes > 0
    runner = disk_space.estimate_space(prepare(*parse_args(
        [*flags, "--shuffle=runner", "--overwrite"])))
    assert runner.temporary_bytes == 0 and runner.output_bytes == estimate.output_bytes


def test_the_estimate_follows_the_flags(tmp_path):
    def estimate(*flags):
        return disk_space.estimate_space(prepare(*parse_args(
            [*FLAGS, f"--output_dir={tmp_path / 'out'}", "--overwrite", *flags])))

    base = estimate()
    assert estimate("--dupe_factor=6").output_bytes == pytest.approx(2 * base.output_bytes,
                                                                     rel=0.1)
    assert estimate("--output_format=parquet").output_bytes < base.output_bytes / 3
    assert estimate("--compression=gzip").output_bytes < base.output_bytes / 2
    compressed = tmp_path / "corpus.txt.gz"
    compressed.write_bytes(gzip.compress(CORPUS.read_bytes()))  # its text's size: unknown
    assert disk_space.estimate_space(prepare(*parse_args(
        [*FLAGS, f"--input_file={compressed}", f"--output_dir={tmp_path / 'gz'}"]))) is None


def test_a_local_run_warns_when_its_disk_is_short(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    run([*FLAGS, f"--output_dir={out}"])
    assert "warning" not in capsys.readouterr().err  # this disk has room
    monkeypatch.setattr(disk_space, "free_bytes", lambda path: 1_000)
    run([*FLAGS, f"--output_dir={out}", "--overwrite"])
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"create-pretraining-data: warning: {out} has 1.0 KB free; this "
                           "run needs about ")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["total_instances"] > 0  # a warning, not a refusal


def test_a_run_to_exact_files_warns_about_their_folder(tmp_path, monkeypatch, capsys):
    """--output_file (the original's flag) has no --output_dir: the warning
    measures and names the folder the files are written in."""
    seen: list[str] = []
    monkeypatch.setattr(disk_space, "free_bytes", lambda path: seen.append(path) or 1_000)
    run([*FLAGS, f"--output_file={tmp_path / 'a.tfrecord'},{tmp_path / 'b.tfrecord'}"])
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"create-pretraining-data: warning: {tmp_path} has 1.0 KB free")
    assert seen == [str(tmp_path)]
    assert (tmp_path / "a.tfrecord").stat().st_size > 0


def test_an_error_chain_that_loops_is_walked_once():
    """An error raised while handling its own cause (as a runner's can be)
    links back to itself: the walk stops, and still finds a full disk in it."""
    outer, inner = RuntimeError("the run failed"), ValueError("a worker failed")
    outer.__context__, inner.__context__ = inner, outer
    assert not disk_space.is_full_disk(outer)
    inner.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert disk_space.is_full_disk(outer)


def test_the_estimate_counts_the_batch_files_documents_wait_in(tmp_path):
    """--shuffle=files holds the documents that wait for the dedup decisions,
    and a split's tokenized documents, in files until the run ends
    (transforms.handoff.beam): about the input's bytes, and half of them."""
    def temporary(*flags: str) -> int:
        return disk_space.estimate_space(prepare(*parse_args(
            [*FLAGS, f"--output_dir={tmp_path / 'out'}", "--overwrite", *flags]))).temporary_bytes

    size = CORPUS.stat().st_size
    assert 0.9 * size < temporary("--dedup=exact") - temporary("--dedup=none") < 2 * size
    tokenized = (2 * temporary("--dedup=none", "--dupe_factor=1")
                 - temporary("--dedup=none", "--dupe_factor=2"))  # what no copy multiplies
    assert 0.3 * size < tokenized < 0.8 * size
