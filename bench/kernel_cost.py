"""What this machine's kernel charges per gigabyte: written through the page
cache, and of fresh anonymous memory touched.

Not a test: it prints figures. A pipeline run's system time is mostly these
two costs times its bytes written (records, and on the DirectRunner the
shuffle's bucket files) and the memory it maps, so a run's system share
depends on the machine as much as on the code: on this project's virtual
machine the first round's write cost seven times a later round's (pages just
freed are reused). Each round writes `--gigabytes` to a file in `--dir`
(deleted after) and touches as many bytes of a fresh anonymous mapping, one
byte a page; system CPU seconds from `resource.getrusage`.

    python bench/kernel_cost.py --gigabytes 2 --rounds 3
"""

from __future__ import annotations

import argparse
import dataclasses
import mmap
import os
import pathlib
import resource
import tempfile
import time

GIB = 1 << 30
CHUNK = 8 << 20
PAGE = mmap.PAGESIZE


def _system_seconds() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


@dataclasses.dataclass(frozen=True)
class Round:
    """One round's system CPU seconds per GiB (and the write's wall seconds per GiB)."""

    write: float
    write_wall: float
    touch: float


def measure_round(directory: pathlib.Path, size: int) -> Round:
    """Writes `size` bytes (whole chunks) to a file in `directory`, deletes it,
    then touches a fresh anonymous mapping of `size` bytes."""
    chunk = os.urandom(min(CHUNK, size))
    chunks = max(1, size // len(chunk))
    path = directory / f"kernel-cost-{os.getpid()}.bin"
    start, wall = _system_seconds(), time.perf_counter()
    try:
        with open(path, "wb") as handle:
            for _ in range(chunks):
                handle.write(chunk)
        written_s, wall_s = _system_seconds() - start, time.perf_counter() - wall
    finally:
        path.unlink(missing_ok=True)
    gibibytes = chunks * len(chunk) / GIB
    mapping = mmap.mmap(-1, chunks * len(chunk))
    try:
        start = _system_seconds()
        for offset in range(0, len(mapping), PAGE):
            mapping[offset] = 1
        touched_s = _system_seconds() - start
    finally:
        mapping.close()
    return Round(write=written_s / gibibytes, write_wall=wall_s / gibibytes,
                 touch=touched_s / gibibytes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=2.0, help="bytes per round, in GiB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=pathlib.Path, default=pathlib.Path(tempfile.gettempdir()),
                        help="where the file is written (the pipeline's output's filesystem)")
    args = parser.parse_args(argv)
    print(f"{args.gigabytes:g} GiB a round, written to {args.dir}; system CPU s per GiB")
    for index in range(args.rounds):
        measured = measure_round(args.dir, int(args.gigabytes * GIB))
        print(f"round {index + 1}: written {measured.write:.2f} (wall {measured.write_wall:.2f})"
              f"  fresh memory touched {measured.touch:.2f}", flush=True)


if __name__ == "__main__":
    main()
