"""How a worker process manages memory: glibc's allocator reuses big
buffers, and Python's cycle collector runs as often as the pipeline needs.

The allocator. The pipeline allocates buffers of tens of MB per unit of work
and per shard flush (record entries, shard buffers, bucket reads:
transforms.instances.units_kernel, transforms.write.shuffle_entries). glibc returns every block above
its mmap threshold (128 KiB, raised to at most 32 MiB as big blocks are
freed) to the kernel when it is freed, and shrinks its heap above a trim
threshold, so the next unit's buffer is fresh memory that the kernel maps and
zeroes page by page: millions of minor page faults, a quarter of a run's CPU
spent in the kernel on short documents. Above these thresholds blocks still
go back to the kernel, so a worker keeps at most ~TRIM_THRESHOLD of freed
memory. Measured on 20 MB of 1-2 sentence documents (bench/corpus.py
`tiny`), one worker: 2.48 M minor faults and 11.3 system CPU-s with glibc's
defaults, 0.88 M and 6.5 s with these, for 10% more peak RSS (1,271 against
1,160 MiB); thresholds of 1 GiB saved little more (0.60 M, 5-7 s) for 26%
more RSS.

The cycle collector. Nearly every object the pipeline makes (Beam's
windowed values, documents, lines, batches) is freed by reference counting;
the collector is only for reference cycles. But CPython starts a young
collection every 700 net allocations of container objects, and promotes
survivors into older generations that it then walks whole: with documents
held in batches and materialized collections, a 20 MB run of one worker
collected 750-1,950 times and spent 0.5-0.6 CPU-s on web and wikitext
documents and 1.8 on tiny ones with `--dedup=exact` (timed by gc.callbacks;
17% of that run's CPU). A young collection every YOUNG_COLLECTION net
allocations makes that 5-7 collections and 0.13-0.18 CPU-s, with the same
peak RSS; the older generations keep CPython's ratios (10, 10), so cycles
are still freed, a little later.

Both are process-wide settings made in the running process, so the DoFns
call this from `setup` (on the DirectRunner's processes and in a Dataflow
worker alike, with no container or launcher change) and the command line
calls it before building the pipeline. Elsewhere than glibc the allocator
part does nothing.
"""

from __future__ import annotations

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
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc (macOS, musl without mallopt)
        return
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
