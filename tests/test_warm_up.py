"""Workers start warm: after `python -m bert_pretraining_data.pipeline.warm_up`, a fresh process
creates records from numba's cache without compiling anything."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from bert_pretraining_data.pipeline.warm_up import KERNELS

ROOT = pathlib.Path(__file__).resolve().parents[1]
# A fresh process runs every kernel the pipeline calls and reports, per
# kernel, (signatures compiled, signatures loaded from numba's cache).
_PROBE = ("import json; from bert_pretraining_data.pipeline.warm_up import warm_up; "
          "print(json.dumps(warm_up()))")


@pytest.mark.slow
def test_after_warm_up_a_fresh_process_compiles_nothing(tmp_path):
    # A copy of the package without numba's cache, as a fresh image has it; the
    # working directory comes first on sys.path, so the copy is what is imported.
    for package in ("pipeline", "transforms", "loaders"):
        shutil.copytree(ROOT / package, tmp_path / "bert_pretraining_data" / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    warm = subprocess.run([sys.executable, "-m", "bert_pretraining_data.pipeline.warm_up"],
                          cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    compiled = int(warm.split("cached: ")[1].split()[0])
    assert compiled >= len(KERNELS)  # the warm-up itself compiled every kernel

    probe = subprocess.run([sys.executable, "-c", _PROBE], cwd=tmp_path, check=True,
                           capture_output=True, text=True).stdout
    stats = json.loads(probe.splitlines()[-1])
    assert len(stats) == len(KERNELS)
    assert all(misses == 0 and hits > 0 for misses, hits in stats.values()), stats
