"""A worker process reuses its big buffers instead of taking fresh pages for each."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Allocates, fills and frees a 64 MB buffer ten times; prints the minor page
# faults of the last nine (the first one always maps fresh pages).
_PROBE = """
import json, resource, sys
import numpy as np
if sys.argv[1] == "tuned":
    from bert_pretraining_data.transforms.allocator import reuse_large_buffers
    reuse_large_buffers()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
np.ones(64 << 20, dtype=np.uint8)
start = faults()
for _ in range(9):
    np.ones(64 << 20, dtype=np.uint8)
print(json.dumps(faults() - start))
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_big_buffers_are_reused_not_faulted_in_again():
    huge_pages = 9 * (64 << 20) // (2 << 20)  # numpy asks for 2 MB pages on big arrays
    assert _faults("default") >= huge_pages  # glibc's defaults: fresh pages every time
    assert _faults("tuned") < huge_pages // 10
