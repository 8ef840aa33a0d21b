"""Varints (LEB128, protobuf's): 7 bits a byte, the high bit set on all but
the last. One definition for every byte layout that uses them: the records'
wire format (transforms.write.tf_example, transforms.d2l.example), the
instances in flight (transforms.handoff.shuffle.instances) and the dedup
rows (transforms.dedup.clusters); compiled for the kernels, plain for Python.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def varint_size(value: int) -> int:
    """Bytes of a non-negative value's varint."""
    size = 1
    while value > 0x7F:
        value >>= 7
        size += 1
    return size


@njit(cache=True, inline="always")
def put_varint(out, pos: int, value: int) -> int:
    """Writes a non-negative value's varint at out[pos:]; returns its end."""
    while value > 0x7F:
        out[pos] = (value & 0x7F) | 0x80
        value >>= 7
        pos += 1
    out[pos] = value
    return pos + 1


@njit(cache=True)
def get_varint(data, pos: int):
    """(value, end) of the varint at data[pos:]."""
    value = np.int64(0)
    shift = 0
    while data[pos] & 0x80:
        value |= np.int64(data[pos] & 0x7F) << shift
        shift += 7
        pos += 1
    return value | (np.int64(data[pos]) << shift), pos + 1


def varint(value: int) -> bytes:
    """The varint of an int64 (a negative one as protobuf writes it: ten
    bytes of two's complement)."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"value {value} does not fit in int64")
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varints(data: bytes, offset: int, count: int) -> tuple[list[int], int]:
    """`count` varints of `data` from `offset` on, and the offset after them."""
    values = []
    for _ in range(count):
        value = shift = 0
        while data[offset] & 0x80:
            value |= (data[offset] & 0x7F) << shift
            shift += 7
            offset += 1
        values.append(value | data[offset] << shift)
        offset += 1
    return values, offset
