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
# `StreamingDataset`'s imports on a local folder, found by trying: installed
# with --no-deps, since the library's own requirements pull the cloud SDKs,
# matplotlib and a torchvision that cannot load beside the CPU torch at hand
# (its C ops are built for CUDA torch; STREAMING_IMPORTS stands two names in for it).
MOSAICML_STREAMING = (
    "--no-deps", "mosaicml-streaming==0.13.0", "numpy==2.1.3",
    # torch's own imports
    "torch==2.13.0", "typing-extensions>=4.10", "filelock>=3", "sympy>=1.13", "mpmath>=1.3",
    # compression and hashing (streaming.base.compression, .hashing)
    "zstd>=1.5.2.5,<2", "xxhash>=3,<4", "Brotli>=1.0.9", "python-snappy>=0.6.1,<1", "cramjam>=2",
    # streaming.base.dataloader's BatchEncoding
    "transformers==4.57.6", "tokenizers==0.22.2", "huggingface-hub==0.36.2", "safetensors>=0.4",
    "regex>=2022", "pyyaml>=6", "requests>=2.32", "urllib3>=2", "idna>=3", "certifi>=2024",
    "packaging>=24", "tqdm>=4.64,<5",
    # the image encodings and the registry of streaming.base
    "pillow>=10", "catalogue>=2,<3",
)
# StreamingDataset's gs:// downloads: google-cloud-storage and what it imports.
MOSAICML_STREAMING_GCS = (
    *MOSAICML_STREAMING, "google-cloud-storage==3.17.1", "google-cloud-core==2.8.0",
    "google-api-core==2.44.0", "google-auth==2.63.0", "google-resumable-media==2.11.0",
    "google-crc32c==1.9.0", "googleapis-common-protos==1.76.0", "protobuf==6.33.6",
    "proto-plus==1.29.0", "cachetools==6.2.6", "pyasn1==0.6.5", "pyasn1-modules==0.4.2",
    "rsa==4.9.1", "charset-normalizer==3.5.3", "cryptography==50.0.2", "cffi==2.1.1",
    "pycparser==3.12",
)
# A client script's first lines, before it imports `streaming`.
STREAMING_IMPORTS = """
import importlib.machinery, sys, types

import transformers  # before the stand-in below, which it would take for torchvision

# streaming's top-level package imports its vision datasets, which read no
# MDS: the two names of torchvision they take stand in for it.
for name, attribute, value in (("torchvision", None, None),
                               ("torchvision.datasets", "VisionDataset",
                                type("VisionDataset", (), {})),
                               ("torchvision.transforms", None, None),
                               ("torchvision.transforms.functional", "to_tensor", None)):
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    if attribute:
        setattr(module, attribute, value)
    sys.modules[name] = module
"""


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
