"""A worker process reuses its big buffers instead of taking fresh pages for
each, and collects reference cycles without walking its live objects again
and again."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Allocates, fills and frees a 64 MB buffer ten times; prints the minor page
# faults of the last nine (the first one always maps fresh pages).
_FAULTS = """
import json, resource, sys
import numpy as np
if sys.argv[1] == "tuned":
    from bert_pretraining_data.transforms.worker_memory import tune_worker_memory
    tune_worker_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
np.ones(64 << 20, dtype=np.uint8)
start = faults()
for _ in range(9):
    np.ones(64 << 20, dtype=np.uint8)
print(json.dumps(faults() - start))
"""

# Holds 500,000 small lists, as batches of documents do, then drops 20,000
# reference cycles and allocates on; prints the collections of each
# generation and whether every cycle was freed.
_COLLECTIONS = """
import gc, json, sys, weakref
if sys.argv[1] == "tuned":
    from bert_pretraining_data.transforms.worker_memory import tune_worker_memory
    tune_worker_memory()
class Node:
    pass
counts = [0, 0, 0]
gc.callbacks.append(lambda phase, info: phase == "start" and counts.__setitem__(
    info["generation"], counts[info["generation"]] + 1))
held = [[i] for i in range(500_000)]
cycles = []
for _ in range(20_000):
    a, b = Node(), Node()
    a.other, b.other = b, a
    cycles.append(weakref.ref(a))
del a, b
churn = [[i] for i in range(300_000)]
print(json.dumps({"collections": counts, "cycles_alive": sum(r() is not None for r in cycles)}))
"""


def _probe(code: str, mode: str):
    out = subprocess.run([sys.executable, "-c", code, mode], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_big_buffers_are_reused_not_faulted_in_again():
    huge_pages = 9 * (64 << 20) // (2 << 20)  # numpy asks for 2 MB pages on big arrays
    assert _probe(_FAULTS, "default") >= huge_pages  # glibc's defaults: fresh pages every time
    assert _probe(_FAULTS, "tuned") < huge_pages // 10


def test_live_objects_are_walked_rarely_and_cycles_are_still_freed():
    default = _probe(_COLLECTIONS, "default")
    tuned = _probe(_COLLECTIONS, "tuned")
    assert sum(default["collections"]) > 1000  # CPython's: one per 700 allocations
    assert 0 < sum(tuned["collections"]) <= 10
    assert default["cycles_alive"] == 0
    assert tuned["cycles_alive"] == 0  # the 300,000 allocations after them set off a collection


# Holds 200,000 small lists to the end; an atexit function registered first
# runs last, after the worker's, and prints how many objects were frozen then.
_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print(gc.get_freeze_count()))
if sys.argv[1] == "tuned":
    from bert_pretraining_data.transforms.worker_memory import tune_worker_memory
    tune_worker_memory()
held = [[i] for i in range(200_000)]
"""


def test_what_a_worker_holds_at_exit_is_frozen_before_the_final_collection():
    """CPython's final collection walks every object left (~0.3 CPU s in a
    worker, which the DirectRunner waits for as it stops its workers one
    after the other); atexit's functions run before it."""
    assert _probe(_EXIT, "default") == 0
    assert _probe(_EXIT, "tuned") > 200_000
