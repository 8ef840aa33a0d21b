"""What a TFRecord record's checksums cost: the CPU's crc32 instruction, the
table-driven kernel, and google-crc32c's C library, per record of the sizes
records have.

Not a test: it prints figures. `frame` checksums every record twice (its
length and its data) in compiled code; its crc32c is the instruction kernel on
x86-64 and the slicing-by-8 tables elsewhere (transforms/write/tfrecord.py).
google-crc32c's library is reached here through its Python API, over one
buffer of all the records (its speed without a call per record) and a call
per record (what a writer in Python would pay). Sizes: a 128-token record
(752 bytes), a 512-token one (~2.9 KB), and short and packed rows. Each
figure is the minimum over `--rounds` rounds of `--megabytes` of records,
taken in turn (instruction, tables, library, ...), so drift hits them alike.

    python bench/crc32c.py --rounds 7
"""

from __future__ import annotations

import argparse
import time

import google_crc32c
import numpy as np
from numba import njit

from bert_pretraining_data.transforms.write.tfrecord import (_crc32c, _crc32c_instruction,
                                                             _crc32c_tables)

SIZES = (160, 752, 1400, 2900, 8400)


@njit(cache=True)
def _checksum_records(kernel, data: np.ndarray, size: int) -> int:
    """Every record of `size` bytes in `data`, checksummed one by one."""
    total = 0
    for start in range(0, len(data) - size + 1, size):
        total ^= kernel(data, start, start + size)
    return total


def _per_record_calls(raw: bytes, size: int) -> int:
    total = 0
    for start in range(0, len(raw) - size + 1, size):
        total ^= google_crc32c.value(raw[start:start + size])
    return total


def measure(megabytes: float, rounds: int) -> dict[str, dict[int, float]]:
    """Nanoseconds per record, by kernel and record size (the rounds' minimum)."""
    data = np.random.default_rng(0).integers(0, 256, int(megabytes * 2**20), dtype=np.uint8)
    raw = data.tobytes()
    kernels = {
        "instruction (frame's on x86-64)": lambda size: _checksum_records(
            _crc32c_instruction, data, size),
        "tables (frame's elsewhere)": lambda size: _checksum_records(_crc32c_tables, data, size),
        "google-crc32c, one call a buffer": lambda size: google_crc32c.value(raw),
        "google-crc32c, one call a record": lambda size: _per_record_calls(raw, size),
    }
    for size in SIZES:  # compile, and the kernels agree
        small = data[:size * 4]
        assert (_checksum_records(_crc32c_instruction, small, size)
                == _checksum_records(_crc32c_tables, small, size)
                == _per_record_calls(small.tobytes(), size))
    best = {name: {size: float("inf") for size in SIZES} for name in kernels}
    for _ in range(rounds):
        for size in SIZES:
            records = len(data) // size
            for name, kernel in kernels.items():
                start = time.perf_counter()
                kernel(size)
                elapsed = time.perf_counter() - start
                best[name][size] = min(best[name][size], elapsed / records * 1e9)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"frame's kernel here: {_crc32c.py_func.__name__}")
    print(f"ns per record ({args.megabytes:g} MB of records, min of {args.rounds} rounds)")
    best = measure(args.megabytes, args.rounds)
    print(f"{'kernel':36s}" + "".join(f"{size:>9d} B" for size in SIZES))
    for name, figures in best.items():
        print(f"{name:36s}" + "".join(f"{figures[size]:11.1f}" for size in SIZES))


if __name__ == "__main__":
    main()
