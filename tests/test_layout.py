"""The shape of the code: a Beam-free core, a few visible Beam shells, stages as
folders that data flows through one way.

Every module under transforms/ computes without Apache Beam except the Beam
shells (DoFns, PTransforms and the Beam file I/O they use): one `beam.py` per
stage folder, and the counters. The loaders are the training environment's
install, so they are Beam-free too. A core module imports without Beam (each
check runs in a fresh interpreter whose import of `apache_beam` fails) and
names no `apache_beam` in its source, not even inside a function.

The stage folders are in pipeline order (STAGES); a stage imports only earlier
stages, so each can be read, tested and changed knowing only what comes before
it. What one stage hands to a later one, and the words several stages share,
live in transforms/handoff/, which, like the top-level modules, imports no
stage folder.

Between loaders/ and transforms/ too, imports go one way: the loaders read
what the core defines (the manifest's splits, the record formats, masking), so
they import the core but no Beam shell, and nothing in transforms/ imports the
loaders.
"""

from __future__ import annotations

import ast
import io
import pathlib
import shutil
import subprocess
import sys
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "bert_pretraining_data"
TRANSFORMS = f"{PACKAGE}.transforms"
LOADERS = f"{PACKAGE}.loaders"
# The stage folders of transforms/, in pipeline order.
STAGES = ("read", "quality", "dedup", "hashes", "decontaminate", "split", "tokenize", "vocab", "instances",
          "pack", "write", "d2l")
HANDOFF = "handoff"
# The only modules of transforms/ that import Beam.
BEAM_SHELLS = {
    "transforms/counters.py",
    "transforms/handoff/beam.py",
    "transforms/read/beam.py",
    "transforms/quality/beam.py",
    "transforms/dedup/beam.py",
    "transforms/tokenize/beam.py",
    "transforms/instances/beam.py",
    "transforms/write/beam.py",
    "transforms/hashes/beam.py",
    "transforms/decontaminate/beam.py",
    "transforms/split/beam.py",
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


def _sources(folder: str, root: pathlib.Path = ROOT) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in (root / folder).rglob("*.py"))


def _core() -> list[str]:
    return [path for path in _sources("transforms") + _sources("loaders")
            if path not in BEAM_SHELLS]


def _failing_without_beam(paths: list[str]) -> list[str]:
    result = subprocess.run([sys.executable, "-c", _BLOCKED_IMPORT, *map(_module, paths)],
                            capture_output=True, text=True, cwd=ROOT, check=True)
    return [line for line in result.stdout.splitlines() if line]


def imports(path: str, source: str) -> list[tuple[int, str]]:
    """(line, module) for every import statement anywhere in the source (inside
    functions too), relative ones resolved; `from m import n` gives m and m.n,
    since n may be a module."""
    package = _module(path).split(".")
    if not path.endswith("__init__.py"):
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [(node.lineno, module)]
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def _folder(module: str) -> str | None:
    """The folder of transforms/ a module is in (None: a top-level module or
    not in transforms/)."""
    prefix, _, rest = module.partition(TRANSFORMS + ".")
    folder = rest.split(".")[0]
    return folder if not prefix and (folder in STAGES or folder == HANDOFF) else None


def backward_imports(path: str, source: str) -> list[str]:
    """A module of transforms/ importing a stage folder it may not: one after
    its own stage, or any stage from the hand-off folder or the top level."""
    own = _folder(_module(path))
    allowed = STAGES[:STAGES.index(own) + 1] if own in STAGES else ()
    why = (f"which comes after {own}" if own in STAGES else
           "and the hand-off folder imports none" if own == HANDOFF else
           "and a top-level module imports none")
    found = {}
    for line, module in imports(path, source):
        stage = _folder(module)
        if stage in STAGES and stage not in allowed:
            found.setdefault((line, stage), f"{path}:{line}: imports stage {stage}, {why}")
    return list(found.values())


def _is_within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def wrong_way_imports(path: str, source: str) -> list[str]:
    """A module of transforms/ importing the loaders, or one of loaders/
    importing a Beam shell of transforms/ (the loaders are the training
    environment's install, without Beam)."""
    shells = [_module(shell) for shell in sorted(BEAM_SHELLS)]
    found = []
    for line, module in imports(path, source):
        if path.startswith("transforms/") and _is_within(module, LOADERS):
            found.append(f"{path}:{line}: imports the loaders, which import the core, "
                         "never the other way")
        elif path.startswith("loaders/"):
            found += [f"{path}:{line}: imports the Beam shell {shell}, and the loaders import none"
                      for shell in shells if _is_within(module, shell)]
    return list(dict.fromkeys(found))  # `from m import n` names m and m.n on one line


def wrong_way_imports_below(root: pathlib.Path) -> list[str]:
    """wrong_way_imports of every module of transforms/ and loaders/ under `root`."""
    return [found for path in _sources("transforms", root) + _sources("loaders", root)
            for found in wrong_way_imports(path, (root / path).read_text())]


def beam_names(path: str, source: str) -> list[str]:
    """Every `apache_beam` name in the source's code, imported or not (its
    docstrings and comments may mention it)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [f"{path}:{token.start[0]}: names apache_beam" for token in tokens
            if token.type == tokenize.NAME and token.string == "apache_beam"]


def test_the_core_and_the_loaders_import_without_beam():
    core = _core()
    assert len(core) > 40
    assert _failing_without_beam(core) == []


def test_the_core_and_the_loaders_name_no_apache_beam():
    assert [found for path in _core()
            for found in beam_names(path, (ROOT / path).read_text())] == []


def test_stages_import_only_earlier_stages():
    assert [found for path in _sources("transforms")
            for found in backward_imports(path, (ROOT / path).read_text())] == []


def test_the_checks_find_a_backward_import_and_a_beam_name_inside_a_function():
    later = ("def tokenize(text):\n"
             "    from bert_pretraining_data.transforms.write.rows import RowWriter\n")
    relative = "def tokenize(text):\n    from ..write import rows\n"
    assert backward_imports("transforms/tokenize/sentences.py", later) == [
        "transforms/tokenize/sentences.py:2: imports stage write, which comes after tokenize"]
    assert backward_imports("transforms/tokenize/sentences.py", relative) == [
        "transforms/tokenize/sentences.py:2: imports stage write, which comes after tokenize"]
    assert backward_imports("transforms/write/rows.py", later) == []
    assert backward_imports("transforms/handoff/words.py", "from .shuffle import entries\n"
                            "from bert_pretraining_data.transforms import dedup\n") == [
        "transforms/handoff/words.py:2: imports stage dedup, and the hand-off folder imports none"]
    beam = ('"""Not apache_beam: a docstring."""\n'
            "def read(path):  # nor apache_beam: a comment\n"
            "    import apache_beam\n")
    assert beam_names("transforms/tokenize/vocabulary.py", beam) == [
        "transforms/tokenize/vocabulary.py:3: names apache_beam"]


def test_the_loaders_import_the_core_and_the_core_no_loader():
    assert wrong_way_imports_below(ROOT) == []


def test_the_direction_check_finds_planted_imports_against_it(tmp_path):
    """A copy of the tree with a core module importing a loader (at the top
    and, relatively, inside a function) and a loader importing a Beam shell."""
    for folder in ("transforms", "loaders"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.nb[ic]"))
    (tmp_path / "transforms/tokenize/planted.py").write_text(
        "from bert_pretraining_data.loaders.manifest import read_manifest\n"
        "def vocabulary(path):\n"
        "    from ...loaders import records\n")
    (tmp_path / "loaders/planted.py").write_text(
        "import numpy\n"
        "from bert_pretraining_data.transforms.write import beam\n"
        "from bert_pretraining_data.transforms.write import tfrecord\n")
    assert wrong_way_imports_below(tmp_path) == [
        "transforms/tokenize/planted.py:1: imports the loaders, which import the core, "
        "never the other way",
        "transforms/tokenize/planted.py:3: imports the loaders, which import the core, "
        "never the other way",
        "loaders/planted.py:2: imports the Beam shell "
        "bert_pretraining_data.transforms.write.beam, and the loaders import none"]


def test_the_beam_shells_are_the_listed_modules():
    shells = sorted(BEAM_SHELLS)
    assert all((ROOT / path).is_file() for path in shells)
    failing = _failing_without_beam(shells)
    assert [line.split(":")[0] for line in failing] == [_module(path) for path in shells]


def test_transforms_is_stage_folders_with_few_top_level_modules():
    top = [path.name for path in (ROOT / "transforms").glob("*.py") if path.name != "__init__.py"]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    folders = sorted(path.parent.name for path in (ROOT / "transforms").glob("*/__init__.py"))
    assert folders == sorted((*STAGES, HANDOFF))  # a new folder takes its place in the order
    for folder in folders:  # each folder says what it holds
        assert (ROOT / "transforms" / folder / "__init__.py").read_text().startswith('"""')


def _modules_spelling(name: str, root: pathlib.Path = ROOT) -> list[str]:
    """The package's modules with the string `name` as a literal in code
    (docstrings, comments and prose in longer strings aside)."""
    found = []
    for folder in ("pipeline", "transforms", "loaders"):
        for path in _sources(folder, root):
            tree = ast.parse((root / path).read_text(encoding="utf-8"))
            docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                          if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                          and node.body and isinstance(node.body[0], ast.Expr)}
            if any(isinstance(node, ast.Constant) and node.value == name
                   and id(node) not in docstrings for node in ast.walk(tree)):
                found.append(path)
    return found


def test_an_output_format_is_spelled_in_its_adapter_not_across_the_house():
    """The pipeline, publishing and the loaders ask a format's adapter
    (transforms/write/formats/) what it is: a format's name is no string the
    rest of the code branches on. Parquet is also an input format."""
    assert _modules_spelling("megatron") == ["transforms/write/formats/megatron.py"]
    assert _modules_spelling("mds") == ["transforms/write/formats/mds.py",
                                        "transforms/write/mds.py"]  # its files' format field
    assert _modules_spelling("parquet") == [  # the read stage's input format, the adapter
        "transforms/read/beam.py", "transforms/read/input_formats.py",
        "transforms/read/tables.py", "transforms/write/formats/parquet.py"]
