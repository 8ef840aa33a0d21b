"""TFRecord framing on plain file handles, so Beam's FileSystems can carry it.

`tf.io.TFRecordWriter` writes only to TensorFlow's own filesystems, and the
workers need TensorFlow for nothing else; framing by hand lets the shard
writer use `apache_beam.io.filesystems` and hash the bytes as it writes. A
record is: uint64 little-endian length, masked crc32c of those 8 bytes, the
data, masked crc32c of the data. `frame` (compiled) takes crc32c from the
CPU's crc32 instruction on x86-64 (SSE 4.2), written as inline assembly so that
it holds for numba's generic CPU too, elsewhere from slicing-by-8 tables
(docs/design-notes.md, transforms.write.tfrecord); readers verify every record
with google-crc32c, which the tests hold both kernels to.
"""

from __future__ import annotations

import functools
import platform
import struct
from collections.abc import Iterator
from typing import BinaryIO

import google_crc32c
import numpy as np
from llvmlite import binding, ir
from numba import njit, types
from numba.extending import intrinsic

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


def _crc32_instruction(mnemonic: str, crc_bits: int, data_bits: int):
    """A numba intrinsic: the x86-64 instruction `mnemonic` folds a data word
    of `data_bits` into a crc32c held in `crc_bits` (no inversions)."""
    crc_type, data_type = types.Integer(f"uint{crc_bits}"), types.Integer(f"uint{data_bits}")

    def typer(typingctx, crc, data):
        def codegen(context, builder, signature, args):
            function = ir.FunctionType(ir.IntType(crc_bits),
                                       [ir.IntType(crc_bits), ir.IntType(data_bits)])
            return builder.asm(function, f"{mnemonic} $2, $0", "=r,0,r", args,
                               side_effect=False, name=mnemonic)
        return crc_type(crc_type, data_type), codegen

    typer.__name__ = f"_{mnemonic}"
    return intrinsic(typer)


_crc32_u64 = _crc32_instruction("crc32q", 64, 64)  # 8 bytes, little-endian
_crc32_u8 = _crc32_instruction("crc32b", 32, 8)  # one byte


@intrinsic
def _load_u64(typingctx, data, index):
    """The 8 bytes of a uint8 array at `index`, as one unaligned little-endian load."""
    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        address = builder.bitcast(builder.gep(array.data, [args[1]]),
                                  ir.IntType(64).as_pointer())
        return builder.load(address, align=1)
    return types.uint64(data, index), codegen


def _shift_tables(block: int) -> np.ndarray:
    """Tables that carry a raw crc32c (no inversions) past `block` zero bytes:
    the crc is linear in its bits, so the shifted crc is the xor of four
    lookups, one a byte: table k is [256 * k, 256 * (k + 1))."""
    step = _TABLES[:256].tolist()
    columns = []
    for bit in range(32):  # where each bit of the crc goes
        crc = 1 << bit
        for _ in range(block):
            crc = step[crc & 0xFF] ^ (crc >> 8)
        columns.append(crc)
    tables = np.zeros(1024, dtype=np.uint32)
    for k in range(4):
        for byte in range(256):
            for bit in range(8):
                if byte >> bit & 1:
                    tables[256 * k + byte] ^= columns[8 * k + bit]
    return tables


# Blocks of the three streams the instruction kernel runs side by side: a crc32q
# takes three cycles and the CPU starts one a cycle, so three independent
# streams run at three times one's speed; their crcs are then joined by
# shifting (8 lookups a join). Records of 384 bytes and up take streams.
_LONG, _SHORT = 1024, 128
_LONG_SHIFT, _SHORT_SHIFT = _shift_tables(_LONG), _shift_tables(_SHORT)
_U64_BYTE = np.uint64(0xFF)


@njit(cache=True, inline="always")
def _shifted(crc: np.uint64, tables: np.ndarray) -> np.uint64:
    return np.uint64(tables[crc & _U64_BYTE] ^ tables[256 + ((crc >> np.uint64(8)) & _U64_BYTE)]
                     ^ tables[512 + ((crc >> np.uint64(16)) & _U64_BYTE)]
                     ^ tables[768 + (crc >> np.uint64(24))])


@njit(cache=True, inline="always")
def _three_streams(data: np.ndarray, i: int, end: int, crc: np.uint64, block: int,
                   shift: np.ndarray) -> tuple[int, np.uint64]:
    """The raw crc onto each whole 3 * `block` bytes from i: three streams,
    joined; returns where it stopped and the crc."""
    while i + 3 * block <= end:
        first, second, third = crc, np.uint64(0), np.uint64(0)
        for j in range(i, i + block, 8):
            first = _crc32_u64(first, _load_u64(data, j))
            second = _crc32_u64(second, _load_u64(data, j + block))
            third = _crc32_u64(third, _load_u64(data, j + 2 * block))
        crc = _shifted(_shifted(first, shift) ^ second, shift) ^ third
        i += 3 * block
    return i, crc


@njit(cache=True)
def _crc32c_instruction(data: np.ndarray, start: int, end: int) -> int:
    """crc32c of data[start:end] (uint8): three streams while there are
    blocks for them, then eight bytes an instruction."""
    i, crc = _three_streams(data, start, end, np.uint64(0xFFFFFFFF), _LONG, _LONG_SHIFT)
    i, crc = _three_streams(data, i, end, crc, _SHORT, _SHORT_SHIFT)
    while i + 8 <= end:
        crc = _crc32_u64(crc, _load_u64(data, i))
        i += 8
    tail = np.uint32(crc)
    while i < end:
        tail = _crc32_u8(tail, data[i])
        i += 1
    return np.int64(tail ^ np.uint32(0xFFFFFFFF))


def _has_crc32_instruction() -> bool:
    """Whether this CPU runs the crc32 instruction: x86-64 with SSE 4.2, as
    every x86-64 processor since 2008 (Dataflow's included) is."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    # numba initializes LLVM's target and printer; inline assembly needs its parser too
    binding.initialize_native_asmparser()
    return bool(binding.get_host_cpu_features().get("sse4.2"))


_crc32c = _crc32c_instruction if _has_crc32_instruction() else _crc32c_tables


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
