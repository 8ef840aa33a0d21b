"""The distribution as users install it, outside this checkout, on every Python it supports.

A wheel is built from a copy of the sources (setup.py and the three folders
only), installed with the `[pipeline]` extra into one fresh venv and with the
light `[torch]` install into another, both in a temporary directory that has
its own `pipeline/`, `transforms/` and `loaders/` folders, as a training
repository often does. Those folders refuse to be imported: any import of a
top-level `pipeline`, `transforms` or `loaders` module fails the run. The
pipeline venv writes a dataset; the light venv (`[torch,gcs]`), which has
neither Apache Beam nor TensorFlow, reads it with the PyTorch loader, from the
directory and from a copy in a bucket (the GCS emulator), and the instances it
reads are compared with the records as TensorFlow reads them here.

The suite runs on one Python; the other Pythons the package supports (3.10 to
3.13, those of them this machine has: on PATH or under pyenv) each get the base
install in a fresh venv, which reads the same dataset (`inspect-pretraining-data`,
the records, and dynamic masking compiled by that Python's numba, compared with
this process's masks), and the newest of them also gets `[pipeline]` and writes
the dataset again: its shards must be byte-identical to this Python's.
PyTorch is installed only for the suite's Python, whose CPU build CI has at hand.
"""

from __future__ import annotations

import ast
import atexit
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import zipfile

import pytest
from packaging.requirements import Requirement

from conftest import DATA, UNCASED_VOCAB
from helpers.gcs_emulator import gcs  # noqa: F401  (fixture)
from helpers.records import decode_records
from bert_pretraining_data.loaders.dynamic_masking import dynamic_masking, mask_for_epoch
from bert_pretraining_data.loaders.manifest import read_manifest
from bert_pretraining_data.loaders.records import read_instances
from bert_pretraining_data.pipeline.beam_options import lock_path
from bert_pretraining_data.pipeline.cli import PIPELINE_PYTHONS, missing_pipeline

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDERS = ("pipeline", "transforms", "loaders")
NAMESPACE = "bert_pretraining_data"
INSTALL_TIMEOUT = 1200
PYTHONS = [f"{PIPELINE_PYTHONS[0][0]}.{minor}"
           for minor in range(PIPELINE_PYTHONS[0][1], PIPELINE_PYTHONS[1][1] + 1)]
THIS_PYTHON = "{}.{}".format(*sys.version_info[:2])
# Wheels the install tests download, kept between runs: pip's own HTTP cache
# stores nothing here (the index's responses carry no caching headers), and the
# [pipeline] wheels of one Python are ~0.9 GB.
WHEELHOUSE = (pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))
              / "bert-pretraining-data" / "wheels")
COMMON_FLAGS = [f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
                "--max_seq_length=64", "--max_predictions_per_seq=10"]
DYNAMIC_FLAGS = ["--masking=none", "--padding=none", "--dupe_factor=1"]
MASKING_SEED = 3

# Run in every light venv (the base install, and [torch,gcs]): the heavy packages
# are not installed; the records are read; the unmasked dataset is masked at
# load time by numba, compiled by this venv's Python.
_READ_BASE = """
import importlib.util, json, sys
heavy = [m for m in ("apache_beam", "tensorflow", "tensorflow_transform")
         if importlib.util.find_spec(m) is not None]
from bert_pretraining_data.loaders import read_manifest
from bert_pretraining_data.loaders.dynamic_masking import dynamic_masking, mask_for_epoch
from bert_pretraining_data.loaders.records import read_instances
static, dynamic, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
manifest = read_manifest(dynamic)
masking = dynamic_masking(manifest)
print(json.dumps({
    "heavy": heavy, "python": "%d.%d" % sys.version_info[:2],
    "instances": [i.input_ids.tolist() for i in read_instances(read_manifest(static))],
    "masks": [[m.tokens, m.positions, m.labels]
              for m in (mask_for_epoch(i, masking, seed) for i in read_instances(manifest))]}))
"""

# Run in the [torch,gcs] venv: the PyTorch and d2l loaders, also from a bucket.
_READ_WITH_TORCH = """
import json, sys
from bert_pretraining_data.loaders import make_dataloader, read_manifest
static, dynamic, bucket = sys.argv[1:4]

def instances_of(dataset):
    return [ids[mask.bool()].tolist()
            for batch in make_dataloader(dataset, batch_size=16, shuffle=False)
            for ids, mask in zip(batch["input_ids"], batch["attention_mask"])]

instances = instances_of(static)
d2l_batch = next(iter(make_dataloader(static, batch_size=8, style="d2l")))
masked = read = 0
for batch in make_dataloader(dynamic, batch_size=16, seed=3):  # masks made at load time
    read += len(batch["input_ids"])
    masked += int((batch["labels"] != -100).sum())
print(json.dumps({"instances": instances, "d2l_fields": len(d2l_batch),
                  "from_bucket": instances_of(bucket),
                  "dynamic_read": read,
                  "dynamic_expected": sum(s.records for s in read_manifest(dynamic).shards),
                  "dynamic_masked": masked}))
"""


def _run(command: list[str], cwd: pathlib.Path, *, check: bool = True,
         timeout: int = 600) -> subprocess.CompletedProcess:
    # A clean environment: nothing of this checkout's venv or PYTHONPATH leaks in.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYENV_VERSION")}
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{command} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _pip_install(python: pathlib.Path, *requirements: str) -> None:
    """Installs from the wheelhouse alone, held to the lock of the venv's Python
    (as a constraint: the versions CI tested, whatever the index serves today);
    what it lacks is downloaded into it first (pip resolves for `python`, from
    the package indexes pip is set up with)."""
    version = re.search(r"^version\s*=\s*(\d+)\.(\d+)", (python.parents[1] / "pyvenv.cfg")
                        .read_text(), re.MULTILINE).groups()
    locked = ["-c", str(lock_path("venv", tuple(map(int, version))))]
    offline = [str(python), "-m", "pip", "install", "--quiet", "--no-compile", "--no-index",
               "--find-links", str(WHEELHOUSE), *locked, *requirements]
    if _run(offline, cwd=python.parent, check=False, timeout=INSTALL_TIMEOUT).returncode:
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        _run([str(python), "-m", "pip", "download", "--quiet", "-d", str(WHEELHOUSE),
              *locked, *requirements], cwd=python.parent, timeout=INSTALL_TIMEOUT)
        for ours in WHEELHOUSE.glob(f"{NAMESPACE}-*.whl"):  # the wheel under test, copied
            ours.unlink()
        _run(offline, cwd=python.parent, timeout=INSTALL_TIMEOUT)


def _venv(path: pathlib.Path, *requirements: str, python: str = sys.executable) -> pathlib.Path:
    """A fresh venv of `python` with `requirements`; prints how long that took."""
    start = time.monotonic()
    _run([python, "-m", "venv", str(path)], cwd=path.parent)
    _pip_install(path / "bin" / "python", *requirements)
    print(f"install {path.name}: {time.monotonic() - start:.0f} s")
    return path / "bin"


def _interpreter(version: str) -> str | None:
    """A CPython `version` ("3.12") here: this one, python3.12 on PATH if it
    runs, else the newest pyenv build of it."""
    if version == THIS_PYTHON:
        return sys.executable
    pyenv = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))
    builds = sorted(pyenv.glob(f"versions/{version}.*/bin/python{version}"),
                    key=lambda p: [int(n) for n in p.parts[-3].split(".") if n.isdigit()])
    for candidate in [shutil.which(f"python{version}"), *map(str, reversed(builds))]:
        if candidate and subprocess.run(
                [candidate, "-c", f"import sys; assert sys.version.startswith('{version}.')"],
                capture_output=True).returncode == 0:
            return candidate
    return None


OTHER_PYTHONS = [v for v in PYTHONS if v != THIS_PYTHON]
# The one other Python that also builds data: the newest here.
PIPELINE_ELSEWHERE = next((v for v in reversed(OTHER_PYTHONS) if _interpreter(v)), None)


def _training_repository(path: pathlib.Path) -> pathlib.Path:
    """A working directory with its own pipeline/, transforms/, loaders/."""
    for folder in FOLDERS:
        (path / folder).mkdir(parents=True)
        (path / folder / "__init__.py").write_text(
            f"raise ImportError('the training repository\\'s own {folder}/ was imported')\n")
    return path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    """The wheel, built from setup.py and the three folders alone."""
    source = tmp_path_factory.mktemp("source")
    shutil.copy(ROOT / "setup.py", source)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, source / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist),
          str(source)], cwd=dist, timeout=INSTALL_TIMEOUT)
    (built,) = dist.glob("*.whl")
    return built


def test_the_package_imports_itself_only_by_its_namespace():
    """No module of the package, its tests or benches imports a top-level
    pipeline/transforms/loaders (which, installed, would be someone else's)."""
    offenders = []
    for folder in (*FOLDERS, "tests", "bench", "deploy"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom)
                         and node.level == 0 else [])
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {name}"
                              for name in names if name.split(".")[0] in FOLDERS]
    assert offenders == []


@pytest.fixture(scope="module")
def venvs(tmp_path_factory) -> pathlib.Path:
    """Where this module's venvs go (~9 GB of small files in all), removed in
    the background once the test run is over: deleting them takes minutes of
    disk time here, which no test should wait for or share its disk with (a
    timed test, test_interrupted, failed beside it)."""
    root = tmp_path_factory.mktemp("venvs")
    atexit.register(subprocess.Popen, ["rm", "-rf", str(root)], start_new_session=True,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return root


@pytest.mark.slow
def test_the_wheel_holds_one_namespace_and_its_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {NAMESPACE, f"{NAMESPACE}-0.1.0.dist-info"}
    assert {name.split("/")[1] for name in names if name.startswith(f"{NAMESPACE}/")} == set(FOLDERS)
    assert f"{NAMESPACE}/pipeline/worker_requirements.txt" in names
    assert f"{NAMESPACE}/transforms/quality/english_words.json" in names
    locks = {name for name in names if name.startswith(f"{NAMESPACE}/pipeline/locks/")}
    assert locks == {f"{NAMESPACE}/pipeline/locks/workers-py3{minor}.txt"
                     for minor in range(PIPELINE_PYTHONS[0][1], PIPELINE_PYTHONS[1][1] + 1)}
    metadata = zipfile.ZipFile(wheel).read(f"{NAMESPACE}-0.1.0.dist-info/METADATA").decode()
    base = [line for line in metadata.splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert not any(heavy in line for line in base
                   for heavy in ("apache-beam", "tensorflow", "torch")), base


def _requirements(wheel: pathlib.Path) -> tuple[str, list[Requirement]]:
    """(Requires-Python, Requires-Dist) as the wheel states them."""
    metadata = zipfile.ZipFile(wheel).read(f"{NAMESPACE}-0.1.0.dist-info/METADATA").decode()
    fields = [line.split(": ", 1) for line in metadata.split("\n\n")[0].splitlines()]
    (python,) = [value for key, value in fields if key == "Requires-Python"]
    return python, [Requirement(value) for key, value in fields if key == "Requires-Dist"]


def _installed_by(requirements: list[Requirement], extra: str, python: str) -> set[str]:
    environment = {"extra": extra, "python_version": python, "python_full_version": f"{python}.0"}
    return {r.name for r in requirements if r.marker is None or r.marker.evaluate(environment)}


@pytest.mark.slow
def test_the_wheel_states_the_pythons_of_each_extra(wheel):
    """The light install and its extras on 3.10 and up; the pipeline's
    requirements only on the Pythons tfx-bsl has wheels for."""
    python, requirements = _requirements(wheel)
    assert python == ">=3.10"
    base = _installed_by(requirements, "", "3.14")
    assert base == {"numpy", "numba", "google-crc32c", "sentencepiece"}
    for version in ("3.10", "3.14"):
        assert _installed_by(requirements, "torch", version) - base == {"torch"}
        assert _installed_by(requirements, "tf", version) - base == {"tensorflow"}
        assert _installed_by(requirements, "gcs", version) - base == {"gcsfs"}
    pipeline = {"apache-beam", "tensorflow", "tensorflow-transform"}
    for version in PYTHONS:
        assert pipeline <= _installed_by(requirements, "pipeline", version), version
    assert PYTHONS[-1] == "3.13"  # tfx-bsl 1.21 has wheels for 3.10 to 3.13
    assert _installed_by(requirements, "pipeline", "3.14") == base  # the tools then say why


def test_the_tools_that_build_data_name_the_pythons_they_run_on():
    assert missing_pipeline("create-vocab", (3, 14)) == (
        "create-vocab: error: building data needs Python 3.10 to 3.13: tfx-bsl "
        "(tensorflow-transform's compiled half) has no wheels for Python 3.14, so the "
        "[pipeline] extra installs nothing here; run it with Python 3.10 to 3.13")
    assert missing_pipeline("create-vocab", (3, 13)).startswith(
        "create-vocab: error: Apache Beam is not installed here")


def _make_chooses(path: str, tmp_path: pathlib.Path, **variables: str) -> str:
    """The venv command `make install` would run with this PATH, or its error."""
    done = subprocess.run([shutil.which("make"), "-n", "-s", "-C", str(ROOT), "install",
                           f"VENV={tmp_path / 'no-venv'}",
                           *(f"{k}={v}" for k, v in variables.items())],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PATH=path))
    lines = done.stdout.splitlines()
    (command,) = ([line for line in lines if line.startswith("echo 'make: ")]
                  or [line for line in lines if " -m venv " in line])
    return command


def test_the_makefile_takes_the_newest_supported_python_that_runs(tmp_path):
    """Stand-in python3.1x answer as a real one would; python3.13 here is a
    shim that fails, as pyenv's does for a version it has but was not asked for."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for version in ("3.14", "3.13", "3.12", "3.11", "3.10"):
        script = bin_dir / f"python{version}"
        script.write_text("#!/bin/sh\nexit 127\n" if version == "3.13" else
                          f"#!/bin/sh\necho {version}\n")
        script.chmod(0o755)
    path = str(bin_dir)  # nothing else: no other Python answers
    makefile_pythons = re.search(r"^PYTHONS := (.*)$", (ROOT / "Makefile").read_text(),
                                 re.MULTILINE).group(1).split()
    assert makefile_pythons == PYTHONS[::-1]
    assert _make_chooses(path, tmp_path) == f"python3.12 -m venv --clear {tmp_path / 'no-venv'}"
    assert _make_chooses(path, tmp_path, PYTHON="python3.10").startswith("python3.10 -m venv")
    assert _make_chooses(path, tmp_path, PYTHON="python3.14") == (
        "echo 'make: python3.14 is Python 3.14; the pipeline runs on Python 3.10 to 3.13: "
        "install one, or name it with PYTHON=/path/to/python3.1x' >&2; exit 1")
    (bin_dir / "python3.12").unlink()
    (bin_dir / "python3.11").unlink()
    (bin_dir / "python3.10").unlink()
    assert _make_chooses(path, tmp_path).startswith(
        "echo 'make: no python3.1x on PATH runs; the pipeline runs on Python 3.10 to 3.13")


@pytest.fixture(scope="module")
def built(wheel, venvs, tmp_path_factory) -> dict[str, pathlib.Path]:
    """The pipeline install of this Python, and the datasets it wrote from a
    training repository: one with static masks, one masked at load time."""
    work = _training_repository(tmp_path_factory.mktemp("built") / "training-repo")
    static, dynamic = work / "data" / "static", work / "data" / "dynamic"
    # The console script, and `python -m`, whose sys.path starts with the
    # working directory and its own folders.
    full = _venv(venvs / f"pipeline-{THIS_PYTHON}", f"{wheel}[pipeline]")
    _run([str(full / "create-pretraining-data"), *COMMON_FLAGS, f"--output_dir={static}"],
         cwd=work)
    _run([str(full / "python"), "-m", f"{NAMESPACE}.pipeline", *COMMON_FLAGS,
          f"--output_dir={dynamic}", *DYNAMIC_FLAGS], cwd=work)
    return {"work": work, "static": static, "dynamic": dynamic, "bin": full}


def _read_with_the_base_install(bin_dir: pathlib.Path, built: dict[str, pathlib.Path],
                                python: str) -> None:
    """What a light install (no Beam, no TensorFlow) of `python` reads: the
    records and inspect's summary as this process reads them, and dynamic masks
    equal to this process's."""
    work, static, dynamic = built["work"], built["static"], built["dynamic"]
    start = time.monotonic()
    read = json.loads(_run([str(bin_dir / "python"), "-c", _READ_BASE, str(static), str(dynamic),
                            str(MASKING_SEED)], cwd=work).stdout)
    assert read["heavy"] == [] and read["python"] == python
    (shard,) = sorted(static.glob("*.tfrecord"))
    expected = [record["input_ids"][:sum(record["input_mask"])]
                for record in decode_records(str(shard))]
    assert len(expected) > 100 and read["instances"] == expected
    manifest = read_manifest(str(dynamic))
    masking = dynamic_masking(manifest)
    masks = [[m.tokens, m.positions, m.labels] for m in
             (mask_for_epoch(i, masking, MASKING_SEED) for i in read_instances(manifest))]
    assert len(masks) == manifest.total_instances > 0
    assert sum(len(positions) for _, positions, _ in masks) > len(masks)  # masks were drawn
    assert read["masks"] == masks
    inspect = _run([str(bin_dir / "inspect-pretraining-data"), str(static)], cwd=work)
    assert f"{len(expected):,}" in inspect.stdout
    print(f"read on {python}: {time.monotonic() - start:.0f} s")


@pytest.mark.slow
def test_installed_wheels_build_data_and_a_light_install_trains_on_it(
        wheel, built, venvs, gcs):  # noqa: F811
    work, static, dynamic = built["work"], built["static"], built["dynamic"]
    for folder in FOLDERS:  # nothing installed answers to the generic names
        probe = _run([str(built["bin"] / "python"), "-I", "-c",
                      f"import importlib.util; print(importlib.util.find_spec('{folder}'))"],
                     cwd=work.parent)
        assert probe.stdout.strip() == "None"

    # The light install reads it with the PyTorch loader, also from a bucket.
    for path in sorted(static.iterdir()):
        gcs.upload(path, f"installed/{path.name}")
    light = _venv(venvs / f"light-{THIS_PYTHON}", f"{wheel}[torch,gcs]")  # the lock's torch
    _read_with_the_base_install(light, built, THIS_PYTHON)
    read = json.loads(_run([str(light / "python"), "-c", _READ_WITH_TORCH, str(static),
                            str(dynamic), gcs.url("installed")], cwd=work).stdout)
    (shard,) = sorted(static.glob("*.tfrecord"))
    expected = [record["input_ids"][:sum(record["input_mask"])]
                for record in decode_records(str(shard))]
    assert read["instances"] == expected == read["from_bucket"]
    assert read["d2l_fields"] == 7
    assert read["dynamic_read"] == read["dynamic_expected"] > 0
    assert read["dynamic_masked"] > read["dynamic_read"]  # several masks per instance

    refused = _run([str(light / "create-pretraining-data"), *COMMON_FLAGS,
                    f"--output_dir={work / 'nothing'}"], cwd=work, check=False)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "create-pretraining-data: error: Apache Beam is not installed here: building data "
        "needs the pipeline's dependencies; install them with "
        "pip install 'bert-pretraining-data[pipeline]'"]
    assert not (work / "nothing").exists()


def _interpreter_or_skip(version: str) -> str:
    python = _interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} here (neither python{version} on PATH nor pyenv's)")
    return python


@pytest.mark.slow
@pytest.mark.parametrize("version", OTHER_PYTHONS)
def test_the_base_install_reads_the_data_on_each_other_python(wheel, built, venvs, version):
    python = _interpreter_or_skip(version)
    _read_with_the_base_install(_venv(venvs / f"base-{version}", str(wheel), python=python),
                                built, version)


@pytest.mark.slow
def test_the_pipeline_on_another_python_writes_the_same_shards(wheel, built, venvs):
    if PIPELINE_ELSEWHERE is None:
        pytest.skip(f"no Python of {', '.join(OTHER_PYTHONS)} here")
    python = _interpreter(PIPELINE_ELSEWHERE)
    full = _venv(venvs / f"pipeline-{PIPELINE_ELSEWHERE}", f"{wheel}[pipeline]", python=python)
    out = built["work"] / "data" / f"static-{PIPELINE_ELSEWHERE}"
    start = time.monotonic()
    _run([str(full / "create-pretraining-data"), *COMMON_FLAGS, f"--output_dir={out}"],
         cwd=built["work"])
    print(f"create-pretraining-data on {PIPELINE_ELSEWHERE}: {time.monotonic() - start:.0f} s")
    theirs = sorted(p.name for p in out.glob("*.tfrecord"))
    assert theirs == sorted(p.name for p in built["static"].glob("*.tfrecord")) != []
    for name in theirs:
        assert (out / name).read_bytes() == (built["static"] / name).read_bytes(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["versions"]["python"].startswith(f"{PIPELINE_ELSEWHERE}.")
    assert manifest["total_instances"] == read_manifest(str(built["static"])).total_instances
