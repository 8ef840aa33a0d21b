"""The console scripts that build data, behind a check for their dependencies.

The base install is the loaders' (a training environment); the tools that
build data need the `[pipeline]` extra, and without it each says so in one
line instead of an ImportError traceback, or, on a Python newer than the
pipeline supports (where the extra installs nothing), which Pythons it needs.
`inspect-pretraining-data` needs only the base install and is not wrapped.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

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


def _main(prog: str, module: str) -> None:
    if importlib.util.find_spec("apache_beam") is None:
        print(missing_pipeline(prog, sys.version_info[:2]), file=sys.stderr)
        sys.exit(2)
    # From the imports on: this process runs the pipeline, or drives its workers.
    from bert_pretraining_data.transforms.worker_memory import tune_worker_memory
    tune_worker_memory()
    importlib.import_module(module).main()


def create_pretraining_data() -> None:
    _main("create-pretraining-data", "bert_pretraining_data.pipeline.main")


def create_pretraining_data_refresh() -> None:
    _main("create-pretraining-data-refresh", "bert_pretraining_data.pipeline.refresh")


def create_vocab() -> None:
    _main("create-vocab", "bert_pretraining_data.pipeline.create_vocab")
