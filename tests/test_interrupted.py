"""Killed runs publish nothing; reruns and retried DoFns give the same bytes."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.pipeline.warm_up import warm_up
from bert_pretraining_data.transforms.instances import InstanceConfig
from bert_pretraining_data.transforms.masking import MaskingConfig
from bert_pretraining_data.transforms.compact_documents import compact_document
from bert_pretraining_data.transforms.stages import (CreateRecords, Instance, MaskTokens,
                                                     TokenizeDocument)

FLAGS = [f"--input_file={DATA / 'wikitext2_valid.txt'}", f"--vocab_file={UNCASED_VOCAB}",
         "--dupe_factor=4", "--num_shards=4"]
MASKING = MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=20, vocab_size=30522,
                        mask_id=103, cls_id=101, sep_id=102)


def _command(out) -> list[str]:
    return [sys.executable, "-m", "bert_pretraining_data.pipeline", f"--output_dir={out}", *FLAGS]


def _digests(out) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.iterdir()) if p.name.startswith("part-")}


@pytest.mark.slow
def test_a_killed_run_publishes_nothing_and_the_rerun_is_byte_identical(tmp_path):
    # Compile the kernels first (once per checkout): a clean run that compiled them
    # would take longer than the run killed at a fraction of its time.
    warm_up()
    clean = tmp_path / "clean"
    started = time.monotonic()
    subprocess.run(_command(clean), check=True, capture_output=True, timeout=600)
    took = time.monotonic() - started

    # Kill the same run half-way through, timed by the clean run: once it has
    # prepared its output (a busy machine can slow its start-up), while it
    # reads, builds instances or writes shards.
    out = tmp_path / "out"
    proc = subprocess.Popen(_command(out), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    started = time.monotonic()
    while not (out / ".staging").exists() and time.monotonic() - started < 600:
        time.sleep(0.05)
    time.sleep(took * 0.3)
    assert proc.poll() is None, "the run ended before it could be killed mid-way"
    os.killpg(proc.pid, signal.SIGKILL)  # the runner and any worker processes
    proc.wait(timeout=60)
    assert (out / ".staging").exists()  # it had started writing
    assert not (out / "manifest.json").exists()
    assert not any(p.name.startswith("part-") for p in out.iterdir())

    subprocess.run(_command(out), check=True, capture_output=True, timeout=600)
    assert (out / "manifest.json").exists() and not (out / ".staging").exists()
    assert _digests(out) == _digests(clean) and len(_digests(out)) == 4


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
    records = CreateRecords(instances=instances, masking=masking, seed=5)
    records.setup()
    unit = [("doc:0", tokenized[1], (2, 5)), ("other:1", sample[0][1], (0, 3))]
    [batch] = list(records.process(unit, sample))
    [again] = list(records.process(unit, sample))
    assert len(batch) and batch.keys.tolist() == again.keys.tolist()
    assert batch.entries.tobytes() == again.entries.tobytes()

    # MaskTokens (the d2l recipe's masking step)
    unmasked = (("doc:0", 3), [Instance(tokens=[101, 7, 8, 9, 102, 10, 102],
                                        segment_ids=[0] * 5 + [1] * 2,
                                        is_random_next=False)] * 3)
    mask = MaskTokens(config=masking, seed=5)
    [masked] = list(mask.process(unmasked))
    assert list(mask.process(unmasked)) == [masked]
    assert all(instance.masked_lm_positions for instance in masked[1])

