"""Venvs of the libraries that read our output (megatron-core, ...), apart from ours.

A format is right when its consumer's own reader takes it, and that reader's
library (with its torch) does not belong in the pipeline's venv: each client
gets a venv outside the checkout, built once per requirement list and kept
between runs (a test that builds one is `slow`). The marker file is written
only after pip succeeded, so a venv left half-built by an interrupted run is
built again; a lock keeps two xdist workers from building the same venv.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
from collections.abc import Sequence

# Overrides where the client venvs live.
ROOT_VARIABLE = "BERT_PRETRAINING_DATA_CLIENT_VENVS"
BASE_PYTHON = "python3.11"
MARKER = "installed.json"
INSTALL_TIMEOUT = 1800
RUN_TIMEOUT = 600
# megatron-core's reader on the CPU: its other needs (numpy, packaging) come with it.
MEGATRON_CORE = ("megatron-core==0.16.1", "torch==2.13.0")


def clients_root() -> pathlib.Path:
    """Where the client venvs are kept: $BERT_PRETRAINING_DATA_CLIENT_VENVS,
    else beside the install tests' wheelhouse in the user's cache."""
    if os.environ.get(ROOT_VARIABLE):
        return pathlib.Path(os.environ[ROOT_VARIABLE])
    cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))
    return cache / "bert-pretraining-data" / "clients"


def _clean_environment() -> dict[str, str]:
    """This process's environment less what would leak our venv into the client's."""
    return {key: value for key, value in os.environ.items()
            if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYENV_VERSION")}


def _run(command: list[str], cwd: pathlib.Path, timeout: int) -> subprocess.CompletedProcess:
    proc = subprocess.run(command, cwd=cwd, env=_clean_environment(), capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def client_python(name: str, requirements: Sequence[str]) -> pathlib.Path:
    """The python of the venv `name` with `requirements` installed, built on
    first use. Pin torch (`torch==2.13.0`: the CPU build at hand); an unpinned
    torch downloads a CUDA build of several GB."""
    digest = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:12]
    venv = clients_root() / f"{name}-{digest}"
    python = venv / "bin" / "python"
    marker = venv / MARKER
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.is_file():
            base = shutil.which(BASE_PYTHON)
            if base is None:
                raise RuntimeError(f"{BASE_PYTHON} is not on PATH: it builds the client venvs")
            shutil.rmtree(venv, ignore_errors=True)
            _run([base, "-m", "venv", str(venv)], cwd=venv.parent, timeout=RUN_TIMEOUT)
            _run([str(python), "-m", "pip", "install", "--quiet", *requirements], cwd=venv,
                 timeout=INSTALL_TIMEOUT)
            marker.write_text(json.dumps(sorted(requirements)) + "\n")
    return python


def run_client(python: pathlib.Path, script: str, *args: str) -> object:
    """Runs `script` with `args` in the client venv (from its own folder, so
    nothing of the checkout is importable) and returns the JSON of its last
    stdout line; a failing script raises with its stderr."""
    proc = _run([str(python), "-c", script, *map(str, args)], cwd=python.parents[1],
                timeout=RUN_TIMEOUT)
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"the client printed nothing; its stderr:\n{proc.stderr}")
    return json.loads(lines[-1])
