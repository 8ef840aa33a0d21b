"""The shape of the code: a Beam-free core, a few visible Beam shells, stages as folders.

Every module under transforms/ computes without Apache Beam except the Beam
shells (DoFns, PTransforms and the Beam file I/O they use): one `beam.py` per
stage folder, and the counters. The loaders are the training environment's
install, so they import without Beam too. Each check runs in a fresh
interpreter whose import of `apache_beam` fails.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "bert_pretraining_data"
# The only modules of transforms/ that import Beam.
BEAM_SHELLS = {
    "transforms/counters.py",
    "transforms/read/beam.py",
    "transforms/dedup/beam.py",
    "transforms/tokenize/beam.py",
    "transforms/instances/beam.py",
    "transforms/write/beam.py",
    "transforms/hashes/beam.py",
    "transforms/vocab/beam.py",
    "transforms/d2l/beam.py",
}
MAX_TOP_LEVEL_MODULES = 6

_BLOCKED_IMPORT = """
import importlib, sys

class BlockBeam:
    def find_spec(self, name, path=None, target=None):
        if name == "apache_beam" or name.startswith("apache_beam."):
            raise ImportError("apache_beam is blocked")

sys.meta_path.insert(0, BlockBeam())
failed = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ImportError as err:
        failed.append(f"{name}: {err}")
print("\\n".join(failed))
"""


def _module(path: str) -> str:
    parts = pathlib.PurePosixPath(path).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def _sources(folder: str) -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / folder).rglob("*.py"))


def _failing_without_beam(paths: list[str]) -> list[str]:
    result = subprocess.run([sys.executable, "-c", _BLOCKED_IMPORT, *map(_module, paths)],
                            capture_output=True, text=True, cwd=ROOT, check=True)
    return [line for line in result.stdout.splitlines() if line]


def test_the_core_and_the_loaders_import_without_beam():
    core = [path for path in _sources("transforms") + _sources("loaders")
            if path not in BEAM_SHELLS]
    assert len(core) > 40
    assert _failing_without_beam(core) == []


def test_the_beam_shells_are_the_listed_modules():
    shells = sorted(BEAM_SHELLS)
    assert all((ROOT / path).is_file() for path in shells)
    failing = _failing_without_beam(shells)
    assert [line.split(":")[0] for line in failing] == [_module(path) for path in shells]


def test_transforms_is_stage_folders_with_few_top_level_modules():
    top = [path.name for path in (ROOT / "transforms").glob("*.py") if path.name != "__init__.py"]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    stages = sorted(path.parent.name for path in (ROOT / "transforms").glob("*/__init__.py"))
    assert {"read", "dedup", "tokenize", "instances", "write"} <= set(stages)
    for stage in stages:  # each folder says what it holds
        assert (ROOT / "transforms" / stage / "__init__.py").read_text().startswith('"""')
