"""Dataflow: the job graph Beam's DataflowRunner builds (dry run: no credentials,
nothing submitted), how workers get this package, and our checks that fail
before Beam or Dataflow would."""

from __future__ import annotations

import importlib.metadata
import sys

import apache_beam
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from conftest import DATA, UNCASED_VOCAB
from helpers.gcs_emulator import gcs  # noqa: F401  (fixture)
from bert_pretraining_data.pipeline.dataflow import check_dataflow_options, is_dataflow, launch
from bert_pretraining_data.pipeline.main import main, run
from bert_pretraining_data.pipeline.beam_options import (ConfigError, lock_path,
                                                         locked_versions,
                                                         with_worker_requirements)
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.pipeline.refresh import refresh
from bert_pretraining_data.pipeline.versions import LATEST_NAME

# The design card's stages, as labelled in build.py (CreateInstances is
# instance creation, masking and encoding compiled into one step), and the
# template's own step.
STAGES = ["ReadDocuments", "Tokenize", "SampleRandomDocuments", "SpreadDocuments",
          "FanOutDupes", "CreateInstances", "WriteShards", "ListShards", "Publish"]
IMAGE = "us-central1-docker.pkg.dev/my-project/beam/bert-pretraining-data:test"


@pytest.fixture(scope="module")
def paths(gcs):  # noqa: F811
    return {"input": gcs.upload(DATA / "sample_text.txt", "df/corpus/sample_text.txt"),
            "vocab": gcs.upload(UNCASED_VOCAB, "df/vocab.txt"),
            "output": gcs.url("df/out"), "temp": gcs.url("df/tmp")}


def _dataflow_flags(paths: dict, *extra: str) -> list[str]:
    return [f"--input_file={paths['input']}", f"--vocab_file={paths['vocab']}",
            f"--output_dir={paths['output']}", "--runner=DataflowRunner",
            "--project=my-project", "--region=us-central1",
            f"--temp_location={paths['temp']}", "--dry_run=True", *extra]


def _environment(job):
    (environment,) = job.proto_pipeline.components.environments.values()
    return environment


@pytest.mark.slow
@pytest.mark.locked_venv  # the workers' lock is sent from a launcher on its Beam
def test_dry_run_job_has_every_stage_and_stages_setup_py(gcs, paths):  # noqa: F811
    result = launch(_dataflow_flags(paths, "--setup_file=./setup.py", "--num_workers=2",
                                    "--max_num_workers=8", "--job_name=bert-data-test"))
    job = result.job
    top_level = {t.unique_name for t in job.proto_pipeline.components.transforms.values()
                 if "/" not in t.unique_name}
    assert set(STAGES) <= top_level
    names = {t.unique_name for t in job.proto_pipeline.components.transforms.values()}
    # Records reach their shards through Dataflow Shuffle, not bucket files.
    assert {"WriteShards/GroupByShard", "WriteShards/BufferByShard",
            "SpreadDocuments"} <= names
    assert not any("Bucket" in name for name in names)
    # The random-next sample reaches instance creation as a side input.
    (create,) = [t for t in job.proto_pipeline.components.transforms.values()
                 if t.unique_name == "CreateInstances/ParDo(CreateInstances)"]
    assert len(create.inputs) == 2
    staged = {d.role_payload for d in _environment(job).dependencies}
    assert any(b"workflow.tar.gz" in p for p in staged)  # setup.py's sdist
    # ... which workers install without extras: the pipeline's dependencies
    # travel as a requirements file.
    assert any(p.endswith(b"requirements.txt") for p in staged)
    assert job.options.get_all_options()["num_workers"] == 2
    assert gcs.names("df/out") == []  # a dry run writes nothing


@pytest.mark.slow
@pytest.mark.locked_venv  # the workers' lock is sent from a launcher on its Beam
def test_dry_run_from_the_cli_prints_the_job_and_exits_0(gcs, paths, capsys):  # noqa: F811
    main(_dataflow_flags(paths, "--setup_file=./setup.py", "--max_num_workers=8",
                         "--job_name=bert-data-cli"))
    out = capsys.readouterr().out
    assert out.startswith("dry run: Dataflow job bert-data-cli in my-project/us-central1")
    for stage in ["ReadDocuments", "CreateInstances", "WriteShards", "Publish"]:
        assert stage in out
    assert "to 8 workers" in out
    assert f"setup file ./setup.py with requirements {lock_path('workers')}" in out
    assert gcs.names("df/out") == []


@pytest.mark.slow
def test_dry_run_with_the_template_image_uses_it_for_workers(paths):
    job = launch(_dataflow_flags(paths, f"--sdk_container_image={IMAGE}")).job
    environment = _environment(job)
    assert IMAGE.encode() in environment.payload
    assert not any(b"workflow.tar.gz" in d.role_payload for d in environment.dependencies)


@pytest.mark.slow
def test_refresh_launch_only_builds_a_dataflow_job_and_moves_nothing(gcs, paths):  # noqa: F811
    flags = [f for f in _dataflow_flags(paths, f"--sdk_container_image={IMAGE}")
             if not f.startswith("--output_dir")]
    result = refresh([*flags, f"--output_root={gcs.url('df/root')}", "--launch_only"])
    assert result["status"] == "launched"
    assert f"df/root/{LATEST_NAME}" not in gcs.names("df/root")


GOOD = {"input_file": "gs://b/in/*.txt", "vocab_file": "gs://b/vocab.txt",
        "output_dir": "gs://b/out", "runner": "DataflowRunner", "project": "my-project",
        "region": "us-central1", "temp_location": "gs://b/tmp", "setup_file": "./setup.py"}


def _argv(**changes) -> list[str]:
    flags = dict(GOOD, **changes)
    return [f"--{k}={v}" for k, v in flags.items() if v is not None]


@pytest.mark.parametrize("changes, message", [
    ({"project": None}, "--project is required"),
    ({"project": "My_Project"}, "is not a project ID"),
    ({"region": None}, "--region is required"),
    ({"temp_location": None}, "--temp_location=gs://BUCKET/tmp is required"),
    ({"temp_location": "/tmp/beam"}, "--temp_location=/tmp/beam must be a gs:// path"),
    ({"staging_location": "/tmp/staging"}, "--staging_location=/tmp/staging must be"),
    ({"input_file": "gs://b/a.txt,corpus/b.txt"}, "--input_file=corpus/b.txt must be a gs://"),
    ({"vocab_file": "vocab.txt"}, "--vocab_file=vocab.txt must be a gs:// path"),
    ({"output_dir": "out/"}, "--output_dir=out/ must be a gs:// path"),
    ({"setup_file": None}, "workers need this package"),
    ({"job_name": "BERT_data"}, "is not a Dataflow job name"),
    ({"num_workers": 9, "max_num_workers": 4}, "--num_workers=9 is above --max_num_workers=4"),
    ({"output_dir": None, "output_file": "gs://b/x.tfrecord", "reference_compatible": "true"},
     "--reference_compatible runs in this process"),
], ids=lambda value: str(value)[:40])
def test_options_dataflow_would_reject_fail_first_in_one_line(changes, message):
    config, beam_args = parse_args(_argv(**changes))
    with pytest.raises(ConfigError, match=message.replace("*", r"\*")):
        check_dataflow_options(config, beam_args)
    # main.run checks before matching inputs (which would fail first on gs://b).
    with pytest.raises(ConfigError, match=message.replace("*", r"\*")):
        run(_argv(**changes))


@pytest.mark.parametrize("extra", [
    {"sdk_container_image": IMAGE, "setup_file": None},
    {"extra_packages": "dist/bert-pretraining-data-0.1.0.tar.gz", "setup_file": None},
])
def test_ways_to_ship_the_package_are_accepted(extra):
    config, beam_args = parse_args(_argv(**extra))
    check_dataflow_options(config, beam_args)


@pytest.mark.locked_venv
def test_setup_file_workers_get_the_workers_lock_as_a_requirements_file(tmp_path, monkeypatch):
    beam_args = ["--runner=DataflowRunner", "--setup_file=./setup.py"]
    lock = lock_path("workers")
    assert lock.name == f"workers-py{sys.version_info[0]}{sys.version_info[1]}.txt"
    assert with_worker_requirements(beam_args) == [
        *beam_args, f"--requirements_file={lock}", "--requirements_cache=skip"]
    _, parsed = parse_args(_argv())
    assert parsed[-2:] == [f"--requirements_file={lock}", "--requirements_cache=skip"]
    # The lock pins the [pipeline] extra's every package, Beam the launcher's.
    extra = {canonicalize_name(r.name)
             for r in map(Requirement, importlib.metadata.requires("bert-pretraining-data"))
             if r.marker and r.marker.evaluate({"extra": "pipeline"})}
    assert len(extra) >= 5 and extra <= set(locked_versions(lock))
    assert locked_versions(lock)["apache-beam"] == apache_beam.__version__
    # A cache of the user's own is kept; an image has everything already.
    own_cache = [*beam_args, "--requirements_cache=/tmp/cache"]
    assert with_worker_requirements(own_cache)[-1] == f"--requirements_file={lock}"
    image = ["--setup_file=./setup.py", f"--sdk_container_image={IMAGE}"]
    assert with_worker_requirements(image) == image
    # A requirements file of the user's own must name the pipeline's dependencies.
    theirs = tmp_path / "requirements.txt"
    theirs.write_text("sentencepiece>=0.2\n")
    with pytest.raises(ConfigError, match=r"--requirements_file=.* lacks tensorflow: with "
                                          r"--setup_file, workers get this package's"):
        with_worker_requirements([*beam_args, f"--requirements_file={theirs}"])
    theirs.write_text("--extra-index-url https://example.com/simple\nsentencepiece>=0.2\n"
                      + lock.read_text())
    assert with_worker_requirements([*beam_args, f"--requirements_file={theirs}"]) == [
        *beam_args, f"--requirements_file={theirs}"]
    # A launcher on another Beam than the lock's would start workers (on its
    # Beam) that the lock then breaks: refused before the job is built.
    config, beam_args = parse_args(_argv())
    check_dataflow_options(config, beam_args)
    monkeypatch.setattr(apache_beam, "__version__", "2.99.0")
    with pytest.raises(ConfigError, match=r"^this launcher runs apache-beam 2.99.0, the "
                                          r"workers' lock .* pins .*: install the lock here"):
        check_dataflow_options(config, beam_args)


def test_other_runners_are_not_checked():
    config, beam_args = parse_args(_argv(runner="DirectRunner", input_file="local/*.txt",
                                         project=None, temp_location=None))
    check_dataflow_options(config, beam_args)


@pytest.mark.parametrize("runner, expected", [
    ("DataflowRunner", True), ("TestDataflowRunner", True),
    ("apache_beam.runners.dataflow.dataflow_runner.DataflowRunner", True),
    ("DirectRunner", False), (None, False)])
def test_is_dataflow(runner, expected):
    assert is_dataflow([f"--runner={runner}"] if runner else []) is expected


@pytest.mark.parametrize("flags, named", [
    (["--recipe=d2l", "--output_dir={out}"],
     "--recipe=d2l computes its vocabulary with tf.Transform in a pipeline of its own"),
    ([f"--vocab_file={UNCASED_VOCAB}", "--reference_compatible", "--output_file={out}/a.tfrecord"],
     "--reference_compatible runs in one process, as the original"),
])
def test_a_launch_only_job_refuses_what_it_cannot_build_naming_the_local_command(tmp_path, flags,
                                                                                 named):
    """The Flex Template builds the bert and RoBERTa recipes (issue 53); what it
    refuses is said with the command that runs it and why, before any work."""
    argv = [f"--input_file={DATA / 'sample_text.txt'}",
            *(flag.format(out=tmp_path / "out") for flag in flags)]
    with pytest.raises(ConfigError, match=f"^{named}.*; run it with create-pretraining-data$"):
        launch(argv)
    assert not (tmp_path / "out").exists()
