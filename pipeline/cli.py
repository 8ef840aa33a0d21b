"""The console scripts that build data, behind a check for their dependencies.

The base install is the loaders' (a training environment); the tools that build
data need the `[pipeline]` extra. Run without it, each says so in one line
instead of an ImportError traceback from deep inside its imports.
`inspect-pretraining-data` needs only the base install and is not wrapped.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

PIPELINE_EXTRA = "pip install 'bert-pretraining-data[pipeline]'"


def _main(prog: str, module: str) -> None:
    if importlib.util.find_spec("apache_beam") is None:
        print(f"{prog}: error: Apache Beam is not installed here: building data needs the "
              f"pipeline's dependencies; install them with {PIPELINE_EXTRA}", file=sys.stderr)
        sys.exit(2)
    importlib.import_module(module).main()


def create_pretraining_data() -> None:
    _main("create-pretraining-data", "bert_pretraining_data.pipeline.main")


def create_pretraining_data_refresh() -> None:
    _main("create-pretraining-data-refresh", "bert_pretraining_data.pipeline.refresh")


def create_vocab() -> None:
    _main("create-vocab", "bert_pretraining_data.pipeline.create_vocab")
