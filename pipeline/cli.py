"""The console scripts that build data, behind a check for their dependencies,
in a process set up to run the pipeline (`pipeline_process`).

The base install is the loaders' (a training environment); the tools that
build data need the `[pipeline]` extra, and without it each says so in one
line instead of an ImportError traceback, or, on a Python newer than the
pipeline supports (where the extra installs nothing), which Pythons it needs.
`inspect-pretraining-data` needs only the base install and is not wrapped.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import os
import sys
from typing import Iterator

PIPELINE_EXTRA = "pip install 'bert-pretraining-data[pipeline]'"
# The oldest and newest CPython the pipeline runs on: tfx-bsl, tensorflow-transform's
# compiled half, publishes wheels for these (setup.py marks the [pipeline] extra with
# this range; the Makefile and docs/install.md list it too, tests/test_install.py checks).
PIPELINE_PYTHONS = ((3, 10), (3, 13))


def missing_pipeline(prog: str, python: tuple[int, int]) -> str:
    """The one-line error of a tool that builds data, run where Apache Beam is not
    installed, on Python `python` (major, minor)."""
    if python > PIPELINE_PYTHONS[1]:
        low, high = (".".join(map(str, version)) for version in PIPELINE_PYTHONS)
        return (f"{prog}: error: building data needs Python {low} to {high}: tfx-bsl "
                f"(tensorflow-transform's compiled half) has no wheels for Python "
                f"{python[0]}.{python[1]}, so the [pipeline] extra installs nothing here; "
                f"run it with Python {low} to {high}")
    return (f"{prog}: error: Apache Beam is not installed here: building data needs the "
            f"pipeline's dependencies; install them with {PIPELINE_EXTRA}")


@contextlib.contextmanager
def pipeline_process() -> Iterator[None]:
    """Sets up this process to run the pipeline (or drive its workers, which
    inherit the environment), around the imports of the pipeline's code: they
    make ~400k objects that live as long as the process, which the collector
    would walk as they come (~0.2 CPU s), so it is off meanwhile and they are
    frozen (never walked again). Nothing here multiplies matrices, yet the
    OpenBLAS of numpy and of scipy (numba imports it) would each start a
    thread per core that spins ~0.1 CPU s before it sleeps: one thread, set
    before numpy is imported. (docs/design-notes.md, pipeline.cli.)"""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from bert_pretraining_data.transforms.worker_memory import tune_worker_memory
    tune_worker_memory()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _main(prog: str, module: str) -> None:
    if importlib.util.find_spec("apache_beam") is None:
        print(missing_pipeline(prog, sys.version_info[:2]), file=sys.stderr)
        sys.exit(2)
    with pipeline_process():
        entry = importlib.import_module(module)
    entry.main()  # what is left at exit is frozen then (tune_worker_memory)


def create_pretraining_data() -> None:
    _main("create-pretraining-data", "bert_pretraining_data.pipeline.main")


def create_pretraining_data_refresh() -> None:
    _main("create-pretraining-data-refresh", "bert_pretraining_data.pipeline.refresh")


def create_vocab() -> None:
    _main("create-vocab", "bert_pretraining_data.pipeline.create_vocab")
