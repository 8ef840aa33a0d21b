"""TFRecord framing on plain file handles, so Beam's FileSystems can carry it.

`tf.io.TFRecordWriter` only writes to paths TensorFlow's own filesystems know,
and TensorFlow is not needed on the workers for anything else. Framing a record
by hand lets the shard writer go through `apache_beam.io.filesystems`
(local, gs://, compression by extension) and hash the bytes as it writes them.

A record is: uint64 little-endian length, masked crc32c of those 8 bytes, the
data, masked crc32c of the data.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from typing import BinaryIO

import google_crc32c

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER_SIZE = _LENGTH.size + _CRC.size
_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    """The CRC TFRecord stores: crc32c rotated right by 15 bits plus a constant."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


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


def read_tfrecord_file(path: str) -> list[bytes]:
    """All records of one file on any Beam filesystem; `.gz` etc. by extension."""
    # Imported here: the loaders read records with this module, without Beam.
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(path) as handle:
        return list(read_records(handle))
