"""What a gs:// run asks of Cloud Storage, through a counting, fault-injecting
proxy in front of the emulator (tests/gcs_proxy.py).

- Objects created grow with the output's shards, not with bundles or input
  splits, on the runner's shuffle (Dataflow's path); the bucket-file path
  adds an object per bundle and shard (printed beside; the DirectRunner runs
  a stage as one bundle, Dataflow as thousands: bench/scale_model.py).
- Transient storage faults (503, 429, dropped connections) on a share of all
  requests: the run completes with the same shards and manifest.
- Lost responses (the request forwarded, storage applies it, the response
  dropped, the client retries): the run completes with the same shards and
  manifest, or fails in one line with nothing published.
"""

from __future__ import annotations

import json

import pytest

from conftest import DATA, UNCASED_VOCAB
from helpers.gcs_emulator import gcs  # noqa: F401  (fixture)
from helpers.gcs_proxy import proxy
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.pipeline.publish import PublishError

NUM_SHARDS = 16
FLAGS = [f"--input_file={DATA / 'wiki_small.txt'}", f"--vocab_file={UNCASED_VOCAB}",
         "--dupe_factor=2", f"--num_shards={NUM_SHARDS}", "--max_seq_length=64",
         "--max_predictions_per_seq=10"]
MANY_SPLITS = "--input_split_bytes=2000"  # wiki_small.txt (132 KB) in 66 splits
# Objects a run creates besides its shards: the probe that the output location
# is writable (deleted at once), the four staging lists (shards, input
# problems, the dedup summary, the figures), the dataset's copy of its
# vocabulary and the manifest.
OTHER_OBJECTS = 7


def _run_through_proxy(gcs, name: str, *extra: str, failure_share: float = 0.0,  # noqa: F811
                       lost_share: float = 0.0, seed: int = 7):
    with proxy(gcs.endpoint, failure_share=failure_share, lost_share=lost_share,
               seed=seed) as (endpoint, stats):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("STORAGE_EMULATOR_HOST", endpoint)
            manifest = run([*FLAGS, f"--output_dir={gcs.url(name)}", *extra])
    return manifest, stats


def _outputs(gcs, name: str) -> dict[str, bytes]:  # noqa: F811
    return {path.split("/", 1)[1]: gcs.read(path) for path in gcs.names(f"{name}/")}


@pytest.mark.slow
def test_objects_grow_with_shards_not_with_splits_on_the_runner_shuffle(gcs):  # noqa: F811
    _, one_split = _run_through_proxy(gcs, "req-runner-1", "--shuffle=runner")
    _, many_splits = _run_through_proxy(gcs, "req-runner-66", "--shuffle=runner", MANY_SPLITS)
    _, buckets = _run_through_proxy(gcs, "req-files-66", "--shuffle=files", MANY_SPLITS)
    for label, stats in [("runner, 1 split", one_split), ("runner, 66 splits", many_splits),
                         ("files, 66 splits", buckets)]:
        print(f"{label}: {stats.objects_created} objects created, {stats.total} requests "
              f"({dict(sorted(stats.requests.items()))}; in batches "
              f"{dict(sorted(stats.batched.items()))})")

    # Each shard is written once to staging and copied once to its final name.
    assert one_split.objects_created == many_splits.objects_created == (
        2 * NUM_SHARDS + OTHER_OBJECTS)
    assert many_splits.requests["upload"] == one_split.requests["upload"]
    # At least one bucket file per shard besides the same 39 objects.
    assert buckets.objects_created >= many_splits.objects_created + NUM_SHARDS
    runner_out = _outputs(gcs, "req-runner-66")
    files_out = _outputs(gcs, "req-files-66")
    shards = sorted(n for n in runner_out if n.endswith(".tfrecord"))
    assert len(shards) == NUM_SHARDS
    assert [runner_out[n] for n in shards] == [files_out[n] for n in shards]


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", ["runner", "files"])
def test_transient_storage_faults_are_retried_and_change_nothing(gcs, shuffle):  # noqa: F811
    # A run makes ~60-100 requests: 10% of them fail, so that several do.
    failure_share = 0.1
    clean_name, faulty_name = f"faults-{shuffle}-clean", f"faults-{shuffle}-injected"
    _run_through_proxy(gcs, clean_name, f"--shuffle={shuffle}")
    _, stats = _run_through_proxy(gcs, faulty_name, f"--shuffle={shuffle}",
                                  failure_share=failure_share)
    failed = sum(stats.faults.values())
    print(f"{shuffle}, {failure_share:.0%} faults: {failed} of {stats.total + failed} "
          f"requests failed ({dict(sorted(stats.faults.items()))}); the run completed")

    assert failed >= 3
    clean_out, faulty_out = _outputs(gcs, clean_name), _outputs(gcs, faulty_name)
    assert sorted(clean_out) == sorted(faulty_out)
    for name, data in clean_out.items():
        if name != "manifest.json":
            assert faulty_out[name] == data, name
    # The manifests differ only in where they were written.
    clean_manifest = clean_out["manifest.json"].replace(clean_name.encode(),
                                                        faulty_name.encode())
    assert json.loads(faulty_out["manifest.json"]) == json.loads(clean_manifest)


@pytest.mark.slow
def test_lost_responses_complete_the_run_or_fail_in_one_line(gcs):  # noqa: F811
    """A quarter of the responses lost after storage applied the request: the
    retried copy of publish's batched renames finds it done, its retried
    delete finds the object gone, a retried upload finds it finalized."""
    lost_share = 0.25
    clean, _ = _run_through_proxy(gcs, "lost-clean", "--shuffle=runner")
    # Seed 23: among the lost responses, the batch of the renames' copies (twice) and
    # that of their deletes (twice).
    with proxy(gcs.endpoint, lost_share=lost_share, seed=23) as (endpoint, stats):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("STORAGE_EMULATOR_HOST", endpoint)
            try:
                run([*FLAGS, f"--output_dir={gcs.url('lost-injected')}", "--shuffle=runner"])
                failure = None
            except PublishError as err:
                failure = str(err)
    print(f"{lost_share:.0%} of responses lost: {stats.faults['lost']} of {stats.total} "
          f"requests ({dict(sorted(stats.lost.items()))}; inside lost batches "
          f"{dict(sorted(stats.lost_batched.items()))}); requests by kind "
          f"{dict(sorted(stats.requests.items()))}; "
          + ("the run completed" if failure is None else f"the run failed: {failure}"))
    assert stats.lost_batched["copy"] >= NUM_SHARDS and stats.lost_batched["delete"] >= NUM_SHARDS
    assert stats.lost["upload"] >= 1 and stats.faults["lost"] >= 10
    if failure is not None:  # the other outcome allowed: one line, nothing published
        assert "\n" not in failure and "nothing was published" in failure
        assert "lost-injected/manifest.json" not in gcs.names("lost-injected/")
        return

    clean_out, lost_out = _outputs(gcs, "lost-clean"), _outputs(gcs, "lost-injected")
    assert sorted(clean_out) == sorted(lost_out)
    for name, data in clean_out.items():
        if name != "manifest.json":
            assert lost_out[name] == data, name
    manifest = clean_out["manifest.json"].replace(b"lost-clean", b"lost-injected")
    assert json.loads(lost_out["manifest.json"]) == json.loads(manifest)
    assert json.loads(manifest)["total_instances"] == clean["total_instances"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", ["files", "runner"])
def test_a_shard_upload_whose_last_response_is_lost_is_done(gcs, shuffle):  # noqa: F811
    """issue 53: the response to a shard upload's last request lost, the
    client's retry of the finished upload answered 404 (the emulator's answer;
    GCS returns the object) ended in Beam's and the client's tracebacks. A
    shard the storage holds byte for byte is written: the same shards as a
    clean run."""
    clean, _ = _run_through_proxy(gcs, f"finish-clean-{shuffle}", f"--shuffle={shuffle}")
    with proxy(gcs.endpoint, lost_finishing=r"/\.staging/shard-\d{5}$", seed=0) as (endpoint, stats):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("STORAGE_EMULATOR_HOST", endpoint)
            run([*FLAGS, f"--output_dir={gcs.url(f'finish-lost-{shuffle}')}",
                 f"--shuffle={shuffle}"])
    assert stats.lost["finishing"] == NUM_SHARDS
    clean_out = _outputs(gcs, f"finish-clean-{shuffle}")
    lost_out = _outputs(gcs, f"finish-lost-{shuffle}")
    assert sorted(clean_out) == sorted(lost_out)
    for name, data in clean_out.items():
        if name != "manifest.json":
            assert lost_out[name] == data, name
    assert clean["total_instances"] > 0
