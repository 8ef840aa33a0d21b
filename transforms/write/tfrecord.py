"""TFRecord framing on plain file handles, so Beam's FileSystems can carry it.

`tf.io.TFRecordWriter` writes only to TensorFlow's own filesystems, and the
workers need TensorFlow for nothing else; framing by hand lets the shard
writer use `apache_beam.io.filesystems` and hash the bytes as it writes. A
record is: uint64 little-endian length, masked crc32c of those 8 bytes, the
data, masked crc32c of the data. `frame` (compiled) uses the crc32c of the C
library google_crc32c's wheel bundles, the CPU's instruction, where it is
there (docs/design-notes.md, transforms.write.tfrecord); readers verify
every record.
"""

from __future__ import annotations

import functools
import pathlib
import struct
from collections.abc import Iterator
from typing import BinaryIO

import google_crc32c
import numpy as np
from llvmlite import binding
from numba import njit, types

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER_SIZE = _LENGTH.size + _CRC.size
_MASK_DELTA = 0xA282EAD8
HEADER_SIZE = _HEADER_SIZE  # bytes before a record's data
FOOTER_SIZE = _CRC.size  # bytes after it


def masked_crc32c(data: bytes) -> int:
    """The CRC TFRecord stores: crc32c rotated right by 15 bits plus a constant."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _crc_tables() -> np.ndarray:
    """Slicing-by-8 tables of crc32c (Castagnoli, reflected polynomial
    0x82F63B78), flat: table k is [256 * k, 256 * (k + 1))."""
    tables = np.zeros((8, 256), dtype=np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        tables[0, byte] = crc
    for k in range(1, 8):
        for byte in range(256):
            previous = int(tables[k - 1, byte])
            tables[k, byte] = (previous >> 8) ^ tables[0, previous & 0xFF]
    return tables.ravel()


_TABLES = _crc_tables()
_U8, _U16, _U24, _BYTE = np.uint32(8), np.uint32(16), np.uint32(24), np.uint32(0xFF)


@njit(cache=True)
def _crc32c_tables(data: np.ndarray, start: int, end: int) -> int:
    """crc32c of data[start:end] (uint8), eight bytes a step; uint32
    throughout (numba turns mixed signed/unsigned arithmetic into floats)."""
    t = _TABLES
    crc = np.uint32(0xFFFFFFFF)
    i = start
    while i + 8 <= end:
        word = crc ^ (np.uint32(data[i]) | (np.uint32(data[i + 1]) << _U8)
                      | (np.uint32(data[i + 2]) << _U16) | (np.uint32(data[i + 3]) << _U24))
        crc = (t[1792 + (word & _BYTE)] ^ t[1536 + ((word >> _U8) & _BYTE)]
               ^ t[1280 + ((word >> _U16) & _BYTE)] ^ t[1024 + (word >> _U24)]
               ^ t[768 + data[i + 4]] ^ t[512 + data[i + 5]] ^ t[256 + data[i + 6]]
               ^ t[data[i + 7]])
        i += 8
    while i < end:
        crc = t[(crc ^ data[i]) & _BYTE] ^ (crc >> _U8)
        i += 1
    return np.int64(crc ^ np.uint32(0xFFFFFFFF))


def _load_crc32c_library() -> bool:
    """Loads the crc32c library of google_crc32c's wheel (it dispatches to the
    CPU's crc32 instruction) so that compiled code can call it by name;
    false where there is none (a source build, another platform)."""
    package = pathlib.Path(google_crc32c.__file__).parent
    for path in sorted(package.parent.glob("google_crc32c.libs/libcrc32c*.so*")):
        try:
            binding.load_library_permanently(str(path))
        except RuntimeError:
            continue
        return True
    return False


# crc32c_extend(crc, data pointer, length) of crc32c/crc32c.h; the pointer
# passed as the address it is (numba's arrays give theirs as an integer).
_extend = types.ExternalFunction("crc32c_extend",
                                 types.uint32(types.uint32, types.uintp, types.uintp))


@njit(cache=True)
def _crc32c_library(data: np.ndarray, start: int, end: int) -> int:
    return np.int64(_extend(np.uint32(0), data.ctypes.data + start, end - start))


_crc32c = _crc32c_library if _load_crc32c_library() else _crc32c_tables


@njit(cache=True)
def _put_masked_crc(out: np.ndarray, pos: int, start: int, end: int) -> None:
    crc = _crc32c(out, start, end)
    masked = (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
    for b in range(4):
        out[pos + b] = (masked >> (8 * b)) & 0xFF


@njit(cache=True)
def frame(out: np.ndarray, start: int, length: int) -> int:
    """Frames the `length` data bytes at out[start + HEADER_SIZE:] in place:
    writes the header before them and the footer after; returns the end."""
    for b in range(8):
        out[start + b] = (length >> (8 * b)) & 0xFF
    _put_masked_crc(out, start + 8, start, start + 8)
    data = start + 12
    _put_masked_crc(out, data + length, data, data + length)
    return data + length + 4


@functools.lru_cache(maxsize=4096)
def _length_header(size: int) -> bytes:
    """Length and its CRC: records of one dataset have few distinct sizes."""
    length = _LENGTH.pack(size)
    return length + _CRC.pack(masked_crc32c(length))


def frame_record(data: bytes) -> bytes:
    """One record's bytes exactly as they appear in a TFRecord file."""
    return b"".join((_length_header(len(data)), data, _CRC.pack(masked_crc32c(data))))


def write_record(handle: BinaryIO, data: bytes) -> None:
    """Appends one framed record to a writable binary handle."""
    handle.write(frame_record(data))


def _read_exactly(handle: BinaryIO, size: int) -> bytes:
    """Reads `size` bytes; fewer only at end of file (handles may return short reads)."""
    chunks = []
    remaining = size
    while remaining:
        chunk = handle.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_records(handle: BinaryIO) -> Iterator[bytes]:
    """Yields the records of a TFRecord stream, verifying both CRCs of each.

    Raises:
      ValueError: a truncated record or a CRC mismatch, naming the record index
        and byte offset.
    """
    index = 0
    offset = 0
    while True:
        header = _read_exactly(handle, _HEADER_SIZE)
        if not header:
            return
        if len(header) < _HEADER_SIZE:
            raise ValueError(
                f"truncated TFRecord: record {index} at byte {offset} has a "
                f"{len(header)}-byte header, expected {_HEADER_SIZE}")
        length_bytes = header[:_LENGTH.size]
        (length_crc,) = _CRC.unpack_from(header, _LENGTH.size)
        if masked_crc32c(length_bytes) != length_crc:
            raise ValueError(
                f"corrupted TFRecord: length CRC mismatch in record {index} at byte {offset}")
        (length,) = _LENGTH.unpack(length_bytes)
        data = _read_exactly(handle, length)
        footer = _read_exactly(handle, _CRC.size)
        if len(data) < length or len(footer) < _CRC.size:
            raise ValueError(
                f"truncated TFRecord: record {index} at byte {offset} declares "
                f"{length} data bytes but the file ends early")
        if masked_crc32c(data) != _CRC.unpack(footer)[0]:
            raise ValueError(
                f"corrupted TFRecord: data CRC mismatch in record {index} at byte {offset}")
        yield data
        index += 1
        offset += _HEADER_SIZE + length + _CRC.size
