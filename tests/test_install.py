"""The distribution as users install it, outside this checkout.

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
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import DATA, UNCASED_VOCAB
from gcs_emulator import gcs  # noqa: F401  (fixture)
from records import decode_records

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDERS = ("pipeline", "transforms", "loaders")
NAMESPACE = "bert_pretraining_data"
INSTALL_TIMEOUT = 1200

# Run in the light venv: the light install must not have the heavy packages,
# and the loaders must read the datasets (local and in a bucket) without them.
_READ_WITH_TORCH = """
import importlib.util, json, sys
heavy = [m for m in ("apache_beam", "tensorflow", "tensorflow_transform")
         if importlib.util.find_spec(m) is not None]
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
print(json.dumps({"heavy": heavy, "instances": instances, "d2l_fields": len(d2l_batch),
                  "from_bucket": instances_of(bucket),
                  "dynamic_read": read,
                  "dynamic_expected": sum(s.records for s in read_manifest(dynamic).shards),
                  "dynamic_masked": masked}))
"""


def _run(command: list[str], cwd: pathlib.Path, *, check: bool = True,
         timeout: int = 600) -> subprocess.CompletedProcess:
    # A clean environment: nothing of this checkout's venv or PYTHONPATH leaks in.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{command} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _venv(path: pathlib.Path, *requirements: str) -> pathlib.Path:
    _run([sys.executable, "-m", "venv", str(path)], cwd=path.parent)
    _run([str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", *requirements],
         cwd=path.parent, timeout=INSTALL_TIMEOUT)
    return path / "bin"


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


@pytest.mark.slow
def test_the_wheel_holds_one_namespace_and_its_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {NAMESPACE, f"{NAMESPACE}-0.1.0.dist-info"}
    assert {name.split("/")[1] for name in names if name.startswith(f"{NAMESPACE}/")} == set(FOLDERS)
    assert f"{NAMESPACE}/pipeline/worker_requirements.txt" in names
    metadata = zipfile.ZipFile(wheel).read(f"{NAMESPACE}-0.1.0.dist-info/METADATA").decode()
    base = [line for line in metadata.splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert not any(heavy in line for line in base
                   for heavy in ("apache-beam", "tensorflow", "torch")), base


@pytest.mark.slow
def test_installed_wheels_build_data_and_a_light_install_trains_on_it(
        wheel, tmp_path, gcs):  # noqa: F811
    work = _training_repository(tmp_path / "training-repo")
    static, dynamic = work / "data" / "static", work / "data" / "dynamic"
    common = [f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
              "--max_seq_length=64", "--max_predictions_per_seq=10"]

    # (a) The pipeline install: the console script, and `python -m`, whose
    # sys.path starts with the working directory and its own folders.
    full = _venv(tmp_path / "venv-pipeline", f"{wheel}[pipeline]")
    _run([str(full / "create-pretraining-data"), *common, f"--output_dir={static}"], cwd=work)
    _run([str(full / "python"), "-m", f"{NAMESPACE}.pipeline", *common,
          f"--output_dir={dynamic}", "--masking=none", "--padding=none", "--dupe_factor=1"],
         cwd=work)
    for folder in FOLDERS:  # nothing installed answers to the generic names
        probe = _run([str(full / "python"), "-I", "-c",
                      f"import importlib.util; print(importlib.util.find_spec('{folder}'))"],
                     cwd=tmp_path)
        assert probe.stdout.strip() == "None"

    # (b) The light install reads it with the PyTorch loader, also from a bucket.
    for path in sorted(static.iterdir()):
        gcs.upload(path, f"installed/{path.name}")
    torch_pin = f"torch=={importlib.metadata.version('torch')}"  # the CPU build CI uses
    light = _venv(tmp_path / "venv-light", f"{wheel}[torch,gcs]", torch_pin)
    read = json.loads(_run([str(light / "python"), "-c", _READ_WITH_TORCH, str(static),
                            str(dynamic), gcs.url("installed")], cwd=work).stdout)
    assert read["heavy"] == []
    (shard,) = sorted(static.glob("*.tfrecord"))
    expected = [record["input_ids"][:sum(record["input_mask"])]
                for record in decode_records(str(shard))]
    assert len(expected) > 100 and read["instances"] == expected == read["from_bucket"]
    assert read["d2l_fields"] == 7
    assert read["dynamic_read"] == read["dynamic_expected"] > 0
    assert read["dynamic_masked"] > read["dynamic_read"]  # several masks per instance

    inspect = _run([str(light / "inspect-pretraining-data"), str(static)], cwd=work)
    assert f"{len(expected):,}" in inspect.stdout
    refused = _run([str(light / "create-pretraining-data"), *common,
                    f"--output_dir={work / 'nothing'}"], cwd=work, check=False)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "create-pretraining-data: error: Apache Beam is not installed here: building data "
        "needs the pipeline's dependencies; install them with "
        "pip install 'bert-pretraining-data[pipeline]'"]
    assert not (work / "nothing").exists()
