"""Killed runs publish nothing; reruns, retried DoFns and retried publish steps
give the same bytes."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import subprocess
import sys
import time

import json

import pytest
from apache_beam.io.filesystems import FileSystems

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.pipeline.warm_up import warm_up
from helpers.gcs_emulator import gcs  # noqa: F401  (fixture)
from bert_pretraining_data.pipeline import main as main_module
from bert_pretraining_data.pipeline.dataflow import publish_in_job
from bert_pretraining_data.pipeline.publish import PublishError, publish, staged_paths
from bert_pretraining_data.pipeline.run_manifest import PublishPlan
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig
from bert_pretraining_data.transforms.instances.masking import MaskingConfig
from bert_pretraining_data.transforms.handoff.tokenized_documents import compact_document
from bert_pretraining_data.transforms.instances.beam import CreateInstances
from bert_pretraining_data.transforms.d2l.pairs import SentencePair
from bert_pretraining_data.transforms.d2l.beam import MaskTokens
from bert_pretraining_data.transforms.tokenize.beam import TokenizeDocument

FLAGS = [f"--input_file={DATA / 'wikitext2_valid.txt'}", f"--vocab_file={UNCASED_VOCAB}",
         "--dupe_factor=4", "--num_shards=4"]
MASKING = MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=20, vocab_size=30522,
                        mask_id=103, cls_id=101, sep_id=102)


def _command(out) -> list[str]:
    return [sys.executable, "-m", "bert_pretraining_data.pipeline", f"--output_dir={out}", *FLAGS]


def _digests(out) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.iterdir()) if p.name.startswith("part-")}


def _run(out) -> subprocess.Popen:
    return subprocess.Popen(_command(out), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _wait_for_staging(out, proc: subprocess.Popen) -> None:
    """Returns once the run has prepared its output (or ended)."""
    started = time.monotonic()
    while (not (out / ".staging").exists() and proc.poll() is None
           and time.monotonic() - started < 600):
        time.sleep(0.01)


@pytest.mark.slow
def test_a_killed_run_publishes_nothing_and_the_rerun_is_byte_identical(tmp_path):
    # Compile the kernels first (once per checkout): a clean run that compiled them
    # would take longer than the run killed at a fraction of its time.
    warm_up()
    clean = tmp_path / "clean"
    proc = _run(clean)
    _wait_for_staging(clean, proc)
    staged = time.monotonic()
    assert proc.wait(timeout=600) == 0
    writing = time.monotonic() - staged  # reading, building instances, writing shards

    # Kill the same run part-way through that, timed by the clean run; where the
    # machine's speed changed between the two (another job's disk or CPU) and the
    # run published first, again with a new output, earlier.
    for attempt, fraction in enumerate((0.3, 0.15, 0.05)):
        out = tmp_path / f"out-{attempt}"
        proc = _run(out)
        _wait_for_staging(out, proc)
        time.sleep(writing * fraction)
        if proc.poll() is None and (out / ".staging").exists():
            os.killpg(proc.pid, signal.SIGKILL)  # the runner and any worker processes
            proc.wait(timeout=60)
            if (out / ".staging").exists():  # it had started writing, not yet published
                break
        proc.wait(timeout=600)
    else:
        pytest.fail("every run published before it could be killed part-way")
    assert not (out / "manifest.json").exists()
    assert not any(p.name.startswith("part-") for p in out.iterdir())

    subprocess.run(_command(out), check=True, capture_output=True, timeout=600)
    assert (out / "manifest.json").exists() and not (out / ".staging").exists()
    assert _digests(out) == _digests(clean) and len(_digests(out)) == 4


@pytest.mark.slow
def test_retried_dofns_emit_the_same_elements():
    """A runner retries a failed bundle by running the DoFn on it again."""
    tokenize = TokenizeDocument(vocab_file=str(UNCASED_VOCAB), do_lower_case=True)
    tokenize.setup()
    lines = (DATA / "sample_text.txt").read_text().split("\n\n")[0].splitlines()
    [tokenized] = list(tokenize.process(("doc:0", lines)))
    assert list(tokenize.process(("doc:0", lines))) == [tokenized]

    instances = InstanceConfig(max_seq_length=32, short_seq_prob=0.3, cls_id=101, sep_id=102)
    masking = dataclasses.replace(MASKING, max_predictions_per_seq=5)
    sample = [("other:1", compact_document([[2000, 2001, 2002]] * 4)), tokenized]
    records = CreateInstances(instances=instances, masking=masking, seed=5)
    records.setup()
    unit = [("doc:0", tokenized[1], (2, 5)), ("other:1", sample[0][1], (0, 3))]
    [batch] = list(records.process(unit, sample))
    [again] = list(records.process(unit, sample))
    assert len(batch) and batch.keys.tolist() == again.keys.tolist()
    assert batch.entries.tobytes() == again.entries.tobytes()

    # MaskTokens (the d2l recipe's masking step)
    unmasked = (("doc:0", 3), [SentencePair(tokens=[101, 7, 8, 9, 102, 10, 102],
                                        segment_ids=[0] * 5 + [1] * 2,
                                        is_random_next=False)] * 3)
    mask = MaskTokens(config=masking, seed=5)
    [masked] = list(mask.process(unmasked))
    assert list(mask.process(unmasked)) == [masked]
    assert all(instance.masked_lm_positions for instance in masked[1])



PUBLISH_FLAGS = [f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
                 "--dupe_factor=2", "--num_shards=4", "--max_seq_length=64",
                 "--max_predictions_per_seq=10"]


def _half_published(output_dir: str, monkeypatch) -> dict:
    """Runs the pipeline; its publish step moves half the shards to their final
    names and dies (a worker lost mid-step, or a response lost after storage
    applied the renames). Returns what that publish was given."""
    given = {}

    def dies_half_way(output, manifest, **kwargs):
        given.update(output=output, manifest=manifest, **kwargs)
        half = len(output.final_paths) // 2
        FileSystems.rename(staged_paths(output)[:half], list(output.final_paths[:half]))
        raise RuntimeError("worker lost")

    with monkeypatch.context() as patch:
        patch.setattr(main_module, "publish", dies_half_way)
        with pytest.raises(RuntimeError, match="worker lost"):
            main_module.run([*PUBLISH_FLAGS, f"--output_dir={output_dir}"])
    return given


def _read(path: str) -> bytes:
    with FileSystems.open(path) as handle:
        return handle.read()


def _output_dir(where: str, name: str, tmp_path, request) -> str:
    if where == "local":
        return str(tmp_path / name)
    return request.getfixturevalue("gcs").url(f"retried-publish/{name}")


@pytest.mark.slow
@pytest.mark.parametrize("where", ["local", "gs"])
def test_a_retried_publish_counts_the_renames_already_done(tmp_path, monkeypatch, request,
                                                           where):
    """The retry finds half the staged shards gone and their final names
    holding them: done. It completes with the clean run's bytes."""
    clean = main_module.run([*PUBLISH_FLAGS,
                             f"--output_dir={_output_dir(where, 'clean', tmp_path, request)}"])
    output_dir = _output_dir(where, "retried", tmp_path, request)
    given = _half_published(output_dir, monkeypatch)
    output = given["output"]
    assert not FileSystems.exists(output.manifest_path)
    assert not FileSystems.exists(staged_paths(output)[0])  # moved by the lost attempt

    publish(**given)
    manifest = given["manifest"].to_json()
    assert [_read(s["path"]) for s in manifest["shards"]] == [
        _read(s["path"]) for s in clean["shards"]]
    assert [s["sha256"] for s in manifest["shards"]] == [s["sha256"] for s in clean["shards"]]
    assert json.loads(_read(output.manifest_path)) == manifest
    assert not FileSystems.match([output.staging_dir + "/**"])[0].metadata_list
    if where == "local":  # a job's retry of a publish step that had finished
        # (it finds the manifest written: what it would make a manifest of goes unread)
        plan = PublishPlan(config=None, output=output, vocab_sha256="", inputs=[], replaces=[],
                           max_predictions_per_row=0)
        assert publish_in_job(0, 0, plan=plan) == given["manifest"]


@pytest.mark.slow
def test_a_retried_publish_that_finds_other_bytes_fails_in_one_line(tmp_path, monkeypatch):
    output_dir = tmp_path / "out"
    given = _half_published(str(output_dir), monkeypatch)
    moved = given["output"].final_paths[0]
    with open(moved, "r+b") as handle:  # not what the pipeline wrote
        handle.write(b"X")
    with pytest.raises(PublishError) as failure:
        publish(**given)
    message = str(failure.value)
    assert "\n" not in message and message.startswith(f"publishing {output_dir} failed: ")
    assert "could not be moved" in message and "nothing was published" in message
    assert not (output_dir / "manifest.json").exists()
