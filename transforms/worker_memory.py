"""How a worker process manages memory: glibc keeps big freed buffers for
reuse, and Python's cycle collector runs rarely.

Buffers of tens of MB per unit of work and per shard flush would otherwise go
back to the kernel when freed, and the next be fresh memory mapped and zeroed
page by page; a worker keeps at most ~TRIM_THRESHOLD of freed memory. Nearly
every object is freed by reference counting, yet CPython's young collection
every 700 container allocations walks the batches of documents held again and
again, and its final collection at exit walks every object left. Process-wide:
the DoFns call this from `setup`, the command line before building the
pipeline. (Why these thresholds: docs/design-notes.md, transforms.worker_memory.)
"""

from __future__ import annotations

import atexit
import ctypes
import gc

MMAP_THRESHOLD = 128 << 20
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
YOUNG_COLLECTION = 100_000
_done = False


def tune_worker_memory() -> None:
    """Sets this process's allocator and collector thresholds (once)."""
    global _done
    if _done:
        return
    _done = True
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION, older, oldest)
    # CPython's final collection at exit walks every object left (~0.3 CPU s
    # in a worker); frozen, they are skipped. atexit's functions run before it.
    atexit.register(gc.freeze)
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc (macOS, musl without mallopt)
        return
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
