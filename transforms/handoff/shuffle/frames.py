"""The frames that carry shuffle entries through the runner's shuffle
(Dataflow Shuffle, billed by the byte).

A bundle's entries for one shard travel as one frame. On a large job a frame
holds few instances: a bundle's buffer is spread over tens of thousands of
shards, so a 750 GB job's frames hold one to a few instances each, of
unrelated documents, and zstd cannot learn token ids' statistics from so
little. So the driver learns them from the run's own instances (a sample of
its input through its tokenizer and kernels, pipeline/input_sample.py) into a
codebook every worker holds: the ids by frequency, so that an instance's ids
travel as their ranks (varints: one byte for the 128 most frequent; the
layout's own walk, transforms.handoff.shuffle.instances), and a zstd
dictionary of instances so written. On documents the codebook never saw,
a 750 GB job's frames (two to twelve instances) take 0.53-0.59x of the bytes
of the layout before issue 45 with it and 0.65-0.75x without
(bench/shuffle_bytes.py).

A frame, format version 1:
  version   uint8    FRAME_VERSION
  payload            a zstd frame of the entries (their ids as ranks with a
                     codebook), level 2, with the codebook's dictionary; no
                     magic number, content size, checksum or dictionary id,
                     which would take 3-5% of a small frame
  checksum  uint32   crc32c of the version and the payload, little-endian
zstd can decode a changed byte of its payload into other ids without an
error; crc32c finds any one changed byte (any burst of up to 32 bits), so a
reader refuses a frame whose bytes are not those written, and one of another
version, before it decodes anything. A frame is read only by the run that
wrote it, whose workers share the codebook.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable

import google_crc32c
import numpy as np
import zstandard
from numba import njit

from bert_pretraining_data.transforms.handoff.shuffle.entries import (ENTRY_HEADER, EntryBatch,
                                                                      entry_end, grow,
                                                                      set_entry_length)
from bert_pretraining_data.transforms.handoff.shuffle.instances import (instance_header,
                                                                        unmasked_ids,
                                                                        with_fixed_ids,
                                                                        with_varint_ids)

# Level 2: with the codebook it compresses ~1.7x as fast as level 3 for 1-2%
# more bytes, about even at Dataflow's prices (bench/README.md, shuffle_bytes.py).
ENTRY_ZSTD_LEVEL = 2

# The dictionary's size: 64 KiB took 8-10% fewer bytes than 16 KiB in small
# frames (bench/README.md, shuffle_bytes.py); the workers hold it once.
DICTIONARY_BYTES = 64 << 10

# The frames' format (see the module's docstring); a reader reads this version only.
FRAME_VERSION = 1
_VERSION = bytes([FRAME_VERSION])
_CHECKSUM = struct.Struct("<I")
# crc32c of a frame with its checksum is this constant (the CRC's residue)
# exactly when the checksum is that of the bytes before it: one pass checks a frame.
_INTACT_CRC = 0x48674BC7

# Fewer sampled instances than this make no codebook (zstd needs some
# hundreds to train on; a run this small has frames of many instances anyway).
MIN_CODEBOOK_SAMPLES = 256


@dataclasses.dataclass(frozen=True)
class EntryCodebook:
    """What every worker's frames are written with: the ids seen in the
    sample, most frequent first (id frequent_ids[r] travels as rank r, an id
    not among them as len(frequent_ids) + id), and a zstd dictionary of
    instances written so."""

    frequent_ids: np.ndarray  # int64
    dictionary: bytes


def entry_codebook(batches: Iterable[EntryBatch]) -> EntryCodebook | None:
    """The codebook of these instances' entries, or None when they are too
    few (or too alike) for zstd to train a dictionary on."""
    batches = list(batches)
    if sum(map(len, batches)) < MIN_CODEBOOK_SAMPLES:
        return None
    counts = np.bincount(np.concatenate([_instance_ids(b.entries, b.bounds) for b in batches]))
    frequent = np.argsort(-counts, kind="stable")[:np.count_nonzero(counts)].astype(np.int64)
    rank_of = _rank_of(frequent)
    samples = []
    for batch in batches:
        ranked, ends = _recoded(batch.entries, True, rank_of, len(frequent))
        samples += [ranked[start:end].tobytes() for start, end in zip([0, *ends[:-1]], ends)]
    try:
        dictionary = zstandard.train_dictionary(DICTIONARY_BYTES, samples,
                                                level=ENTRY_ZSTD_LEVEL).as_bytes()
    except zstandard.ZstdError:
        return None
    return EntryCodebook(frequent_ids=frequent, dictionary=dictionary)


class EntryFrames:
    """Compresses a shard's entries into a frame and back, with the run's
    codebook (or none: plain zstd). Its zstd contexts are made on first use,
    so it is built in a DoFn's setup, once per worker thread."""

    def __init__(self, codebook: EntryCodebook | None) -> None:
        self._codebook = codebook
        self._dictionary = (zstandard.ZstdCompressionDict(codebook.dictionary)
                            if codebook is not None else None)
        self._rank_of = _rank_of(codebook.frequent_ids) if codebook is not None else None
        self._compressor: zstandard.ZstdCompressor | None = None
        self._decompressor: zstandard.ZstdDecompressor | None = None

    def compress(self, entries: bytes) -> bytes:
        """One frame of `entries` (whole shuffle entries of instances)."""
        if self._compressor is None:
            parameters = zstandard.ZstdCompressionParameters.from_level(
                ENTRY_ZSTD_LEVEL, format=zstandard.FORMAT_ZSTD1_MAGICLESS,
                write_content_size=False, write_checksum=False, write_dict_id=False)
            self._compressor = zstandard.ZstdCompressor(dict_data=self._dictionary,
                                                        compression_params=parameters)
        if self._codebook is not None:
            data = np.frombuffer(entries, dtype=np.uint8)
            entries = _recoded(data, True, self._rank_of,
                               len(self._codebook.frequent_ids))[0]
        frame = _VERSION + self._compressor.compress(entries)
        return frame + _CHECKSUM.pack(google_crc32c.value(frame))

    def decompress(self, frame: bytes, source: str = "shuffle frame") -> bytes:
        """The entries `compress` made `frame` of; `source` names the frame in
        an error.

        Raises:
          ValueError: the frame is shorter than its version and checksum, of
            another format version, or not the bytes written (its checksum).
        """
        if len(frame) < len(_VERSION) + _CHECKSUM.size:
            raise ValueError(f"{source}: {len(frame)} bytes, too short for a frame's version "
                             f"and checksum ({len(_VERSION) + _CHECKSUM.size} bytes)")
        if frame[0] != FRAME_VERSION:
            raise ValueError(f"{source}: format version {frame[0]}, and this reader reads "
                             f"version {FRAME_VERSION} only (a worker of another release, or "
                             "the byte changed)")
        if google_crc32c.value(frame) != _INTACT_CRC:
            (stored,) = _CHECKSUM.unpack_from(frame, len(frame) - _CHECKSUM.size)
            computed = google_crc32c.value(frame[:-_CHECKSUM.size])
            raise ValueError(f"{source}: checksum mismatch (crc32c {computed:#010x}, stored "
                             f"{stored:#010x}, {len(frame)} bytes): the frame changed between "
                             "its writer and this reader")
        if self._decompressor is None:
            self._decompressor = zstandard.ZstdDecompressor(
                dict_data=self._dictionary, format=zstandard.FORMAT_ZSTD1_MAGICLESS)
        payload = frame[len(_VERSION):-_CHECKSUM.size]
        entries = self._decompressor.decompressobj().decompress(payload)
        if self._codebook is None:
            return entries
        frequent = self._codebook.frequent_ids
        return _recoded(np.frombuffer(entries, dtype=np.uint8), False, frequent,
                        -len(frequent))[0].tobytes()


def _rank_of(frequent: np.ndarray) -> np.ndarray:
    """rank_of[id]: frequent ids their rank, the others len(frequent) + id."""
    size = int(frequent.max()) + 1 if len(frequent) else 0
    rank_of = np.arange(size, dtype=np.int64) + len(frequent)
    rank_of[frequent] = np.arange(len(frequent), dtype=np.int64)
    return rank_of


@njit(cache=True)
def _instance_ids(entries, bounds):
    """Every unmasked id of the entries' instances, one after another."""
    total = 0
    for i in range(len(bounds) - 1):
        total += instance_header(entries, bounds[i] + ENTRY_HEADER)[0]
    ids = np.empty(total, dtype=np.int64)
    at = 0
    for i in range(len(bounds) - 1):
        unmasked_ids(entries, bounds[i] + ENTRY_HEADER, ids, at)
        at += instance_header(entries, bounds[i] + ENTRY_HEADER)[0]
    return ids


@njit(cache=True)
def _recoded(data, to_ranks, table, offset):
    """Concatenated entries with each instance's ids as ranks (`to_ranks`:
    table rank_of, offset the ranked ids' count) or back (table the frequent
    ids, offset minus their count), their length fields to match; and where
    each entry ends in what is returned."""
    out = np.empty(len(data) + len(data) // 2 + 16, dtype=np.uint8)
    ends = []
    pos = o = 0
    while pos < len(data):
        end = entry_end(data, pos)
        out = grow(out, o + ENTRY_HEADER)
        out[o:o + ENTRY_HEADER] = data[pos:pos + ENTRY_HEADER]
        if to_ranks:
            out, stop = with_varint_ids(data, pos + ENTRY_HEADER, end, out, o + ENTRY_HEADER,
                                        table, offset)
        else:
            out, stop = with_fixed_ids(data, pos + ENTRY_HEADER, end, out, o + ENTRY_HEADER,
                                       table, offset)
        o = set_entry_length(out, o, stop - (o + ENTRY_HEADER))
        ends.append(o)
        pos = end
    return out[:o], ends
