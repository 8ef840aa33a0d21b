"""The C allocator of a worker process, set so that big buffers are reused.

The pipeline allocates buffers of tens of MB per unit of work and per shard
flush (record entries, shard buffers, bucket reads: transforms.jit_records,
transforms.sharding). glibc returns every block above its mmap threshold
(128 KiB, raised to at most 32 MiB as big blocks are freed) to the kernel
when it is freed, and shrinks its heap above a trim threshold, so the next
unit's buffer is fresh memory that the kernel maps and zeroes page by page:
millions of minor page faults, a quarter of a run's CPU spent in the kernel
on short documents. Above these thresholds blocks still go back to the
kernel, so a worker keeps at most ~TRIM_THRESHOLD of freed memory.

Measured on 20 MB of 1-2 sentence documents (bench/corpus.py `tiny`), one
worker: 2.48 M minor faults and 11.3 system CPU-s with glibc's defaults,
0.88 M and 6.5 s with these, for 10% more peak RSS (1,271 against 1,160 MiB);
thresholds of 1 GiB saved little more (0.60 M, 5-7 s) for 26% more RSS.

`mallopt` sets them in the running process (what environment variables
such as MALLOC_MMAP_THRESHOLD_ would do at its start), so the DoFns call
this from `setup`: on the DirectRunner's processes and in a Dataflow worker
alike, with no container or launcher change. Elsewhere than glibc it does
nothing.
"""

from __future__ import annotations

import ctypes

MMAP_THRESHOLD = 128 << 20
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_done = False


def reuse_large_buffers() -> None:
    """Sets this process's glibc thresholds (once); a no-op without glibc."""
    global _done
    if _done:
        return
    _done = True
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc (macOS, musl without mallopt)
        return
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
