"""One version set everywhere: the .venv/ holds its Python's lock, and the
locks, the Flex Template image and what a Dataflow job sends its workers agree
(pipeline/locks/, `make lock`; docs/install.md#the-lock).

Every supported Python has two locks from setup.py's ranges: the .venv/'s
(venv-py3XX.txt: the [test] extra and pip) and the workers' (workers-py3XX.txt:
the [pipeline] extra, each version the .venv/'s). The Dockerfile builds on the
Beam its workers' lock pins and installs that lock; a --setup_file job sends
its Python's workers' lock. setup.py and worker_requirements.txt keep ranges.
"""

from __future__ import annotations

import importlib.metadata
import pathlib
import re
import shutil

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from helpers.dockerfile import build_args, dockerfile_steps
from bert_pretraining_data.pipeline import beam_options
from bert_pretraining_data.pipeline.beam_options import (LOCKS, WORKER_REQUIREMENTS,
                                                         lock_differences, lock_path,
                                                         locked_versions, requirement_lines)
from bert_pretraining_data.pipeline.cli import PIPELINE_PYTHONS

ROOT = pathlib.Path(__file__).resolve().parents[1]
DISTRIBUTION = "bert-pretraining-data"
PYTHONS = [(3, minor) for minor in range(PIPELINE_PYTHONS[0][1], PIPELINE_PYTHONS[1][1] + 1)]
# The image's install: its Python's workers' lock, then the package without dependencies.
IMAGE_LOCK = 'pipeline/locks/workers-py$(echo ${PYTHON_VERSION} | tr -d .).txt'


def _in_root(path: pathlib.Path, root: pathlib.Path) -> pathlib.Path:
    return root / path.relative_to(ROOT)


def _needed_by_workers(root: pathlib.Path) -> set[str]:
    """What the workers' lock must hold: the base install, Beam and the
    pipeline's dependencies (worker_requirements.txt)."""
    base = [Requirement(r) for r in importlib.metadata.requires(DISTRIBUTION)]
    names = {r.name for r in base if r.marker is None}
    names |= {Requirement(line).name for line in requirement_lines(
        _in_root(WORKER_REQUIREMENTS, root).read_text())}
    return {canonicalize_name(name) for name in names | {"apache-beam"}}


def lock_disagreements(root: pathlib.Path) -> list[str]:
    """Where a checkout's locks, Dockerfile and workers' requirements
    disagree, a line each; none means one version set everywhere."""
    problems = []
    for python in PYTHONS:
        venv_lock = _in_root(lock_path("venv", python), root)
        workers_lock = _in_root(lock_path("workers", python), root)
        missing = [p.name for p in (venv_lock, workers_lock) if not p.is_file()]
        if missing:
            problems += [f"no {name}: run make lock" for name in missing]
            continue
        venv, workers = locked_versions(venv_lock, python), locked_versions(workers_lock, python)
        for name, version in sorted(workers.items()):
            if venv.get(name) != version:
                problems.append(f"{workers_lock.name} pins {name}=={version}, "
                                f"{venv_lock.name} {venv.get(name)}")
        for name in sorted(_needed_by_workers(root) - set(workers)):
            problems.append(f"{workers_lock.name} lacks {name}")
    steps = dockerfile_steps(root / "deploy" / "Dockerfile")
    args = build_args(steps)
    image_python = tuple(int(part) for part in args["PYTHON_VERSION"].split("."))
    image_lock = _in_root(lock_path("workers", image_python), root)
    if image_lock.is_file():
        locked_beam = locked_versions(image_lock, image_python).get("apache-beam")
        if args["BEAM_VERSION"] != locked_beam:
            problems.append(f"Dockerfile BEAM_VERSION {args['BEAM_VERSION']}, "
                            f"{image_lock.name} apache-beam {locked_beam}")
    else:
        problems.append(f"no {image_lock.name} for the Dockerfile's Python")
    installs = [a for i, a in steps if i == "RUN" and "pip install" in a]
    if not any(f'pip install --no-cache-dir -r "{IMAGE_LOCK}"' in a
               and "pip install --no-cache-dir --no-deps ." in a for a in installs):
        problems.append("the Dockerfile does not install its Python's workers' lock, then "
                        "the package without dependencies")
    return problems


@pytest.fixture
def planted(tmp_path) -> pathlib.Path:
    """A copy of what the check reads, to plant mismatches in."""
    shutil.copytree(LOCKS, tmp_path / "pipeline" / "locks")
    shutil.copy(WORKER_REQUIREMENTS, tmp_path / "pipeline")
    (tmp_path / "deploy").mkdir()
    shutil.copy(ROOT / "deploy" / "Dockerfile", tmp_path / "deploy")
    return tmp_path


def test_the_locks_and_the_image_agree():
    assert lock_disagreements(ROOT) == []


def test_a_planted_mismatch_is_named(planted):
    dockerfile = planted / "deploy" / "Dockerfile"
    text = dockerfile.read_text()
    beam = build_args(dockerfile_steps(dockerfile))["BEAM_VERSION"]
    dockerfile.write_text(text.replace(f"ARG BEAM_VERSION={beam}", "ARG BEAM_VERSION=2.60.0"))
    assert lock_disagreements(planted) == [
        f"Dockerfile BEAM_VERSION 2.60.0, workers-py311.txt apache-beam {beam}"]
    dockerfile.write_text(text.replace(" && pip install --no-cache-dir --no-deps .", ""))
    assert lock_disagreements(planted) == [
        "the Dockerfile does not install its Python's workers' lock, then the package "
        "without dependencies"]
    dockerfile.write_text(text)

    workers = planted / "pipeline" / "locks" / "workers-py312.txt"
    lines = workers.read_text().splitlines(keepends=True)
    numpy = next(i for i, line in enumerate(lines) if line.startswith("numpy=="))
    version = lines[numpy].split("==")[1].split()[0]
    lines[numpy] = lines[numpy].replace(f"=={version}", "==1.26.0", 1)
    tensorflow = next(i for i, line in enumerate(lines) if line.startswith("tensorflow=="))
    del lines[tensorflow]
    workers.write_text("".join(lines))
    assert lock_disagreements(planted) == [
        f"workers-py312.txt pins numpy==1.26.0, venv-py312.txt {version}",
        "workers-py312.txt lacks tensorflow"]

    (planted / "pipeline" / "locks" / "venv-py310.txt").unlink()
    assert "no venv-py310.txt: run make lock" in lock_disagreements(planted)


@pytest.mark.locked_venv
def test_the_venv_holds_its_pythons_lock_and_nothing_else():
    """Every package of the running venv but the project itself has the
    lock's version, and every pin is installed."""
    assert lock_differences() == {}


def test_a_package_off_the_lock_is_named(monkeypatch, tmp_path):
    planted = tmp_path / LOCKS.name
    shutil.copytree(LOCKS, planted)
    lock = planted / lock_path("venv").name
    text = lock.read_text()
    numpy = re.search(r"^numpy==(\S+)", text, re.MULTILINE).group(1)
    lock.write_text(text.replace(f"numpy=={numpy}", "numpy==1.26.0").replace(
        "\nzstandard==", "\nzstandard-planted==1.0\nzstandard=="))
    monkeypatch.setattr(beam_options, "LOCKS", planted)
    differences = lock_differences()
    assert differences["numpy"] == ("1.26.0", importlib.metadata.version("numpy"))
    assert differences["zstandard-planted"] == ("1.0", None)


def test_setup_py_and_the_worker_requirements_keep_ranges():
    """Library users get ranges; pins are the locks' (torch in [test] excepted:
    the CPU build CI has on disk)."""
    requirements = [Requirement(r) for r in importlib.metadata.requires(DISTRIBUTION)]
    pinned = {str(r) for r in requirements
              if any(s.operator in ("==", "===") for s in r.specifier)}
    assert pinned == {'torch==2.13.0; extra == "test"'}
    for line in requirement_lines(WORKER_REQUIREMENTS.read_text()):
        assert not re.search(r"==|===", line), line
