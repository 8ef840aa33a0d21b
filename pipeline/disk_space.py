"""Disk space for a run with a local output: its size estimated before it
starts (a warning when the disk holds less), and a full disk reported in one
line, the staging directory removed and nothing published.

The estimate runs the run's own stages (its tokenizer, instance kernels and
row writer) over SAMPLE_BYTES of the input (windows spread over it) and scales what they
write by the input's size and --dupe_factor, so every flag that changes the
output changes it as it changes the run. Its error on the bench shapes:
docs/disk-space.md#how-close-the-estimate-is (bench/disk_estimate.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import pickle
import posixpath
import shutil
import zlib
from typing import Callable, Iterator

import numpy as np

from bert_pretraining_data.pipeline.command_line import quiet_beam_logs
from bert_pretraining_data.pipeline.input_sample import (sample_documents, sample_entries,
                                                         sample_texts)
from bert_pretraining_data.pipeline.prepare import Prepared
from bert_pretraining_data.pipeline.publish import PublishError, remove_tree
from bert_pretraining_data.transforms.dedup.decisions import Fingerprints, fingerprint_batch
from bert_pretraining_data.transforms.handoff.shuffle.entries import EntryBatch
from bert_pretraining_data.transforms.read.documents import document_key
from bert_pretraining_data.transforms.write.formats import output_format
from bert_pretraining_data.transforms.write.parquet_rows import ROW_GROUP_ROWS

# Input bytes the estimate reads: dozens of long articles, and a fraction
# of a second of tokenizing; in windows of 64 KB spread over the input.
SAMPLE_BYTES = 1 << 20

# A local run warns below the estimate and this much more: the estimate is
# 8% low to 2% high on the bench shapes (docs/disk-space.md#how-close-the-estimate-is).
WARNING_MARGIN = 1.1

_FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


@dataclasses.dataclass(frozen=True)
class SpaceEstimate:
    """What a run writes under its output directory, estimated."""

    output_bytes: int  # the shards it publishes
    # --shuffle=files' temporary files: the bucket files (deleted once the shards
    # are written) and the batch files of dedup's and the tokenized documents
    # (kept until the run ends)
    temporary_bytes: int
    sample_bytes: int  # the input bytes the estimate read

    @property
    def peak_bytes(self) -> int:
        return self.output_bytes + self.temporary_bytes

    def describe(self) -> str:
        temporary = (f" + {_size(self.temporary_bytes)} of temporary files"
                     if self.temporary_bytes else "")
        return (f"about {_size(self.peak_bytes)} ({_size(self.output_bytes)} of output"
                f"{temporary}; estimated from {_size(self.sample_bytes)} of the input)")


def _size(count: float) -> str:
    """Bytes for a person: 812 B, 4.2 MB, 16.7 TB (powers of 1000, as df -H)."""
    unit = 0
    while count >= 1000 and unit < 4:
        count, unit = count / 1000, unit + 1
    return f"{count:,.0f} B" if unit == 0 else f"{count:,.1f} {'KMGT'[unit - 1]}B"


def estimate_space(prepared: Prepared) -> SpaceEstimate | None:
    """The run's output and temporary bytes, or None where the input's text
    size is unknown before it is read (compressed files, tables, dumps), the
    recipe is d2l (its vocabulary is learned by the run) or the run is a
    mixture (each source's copies are its own, alpha's decided by the run):
    pipeline.input_sample."""
    config = prepared.config
    sampled = sample_documents(config, prepared.stages, prepared.vocab, prepared.inputs,
                               SAMPLE_BYTES, scaled=True)
    if sampled is None:
        return None
    documents, sample_bytes = sampled
    total = sum(size for _, size in prepared.inputs)
    batches = sample_entries(config, prepared.stages, documents, 0, 1)
    # A compressed format's copies of the sample, up to a row group's rows:
    # it compresses a few hundred rows worse than a shard's (a small input
    # has no more). A TFRecord's bytes a record do not depend on the count.
    compressed = output_format(config.output_format).compressed(config.flags())
    per_copy = sum(len(batch.keys) for batch in batches)
    copies = min(config.dupe_factor, -(-ROW_GROUP_ROWS // max(1, per_copy))) if compressed else 1
    if copies > 1:
        batches += sample_entries(config, prepared.stages, documents, 1, copies)
    entries, keys, bounds = _joined(batches)
    written = _shard_bytes(prepared, entries, keys, bounds)
    # A file's own bytes (Parquet's footer and schema) are paid once a shard.
    fixed = _shard_bytes(prepared, entries[:0], keys[:0], bounds[:1])
    scale = total / sample_bytes * config.dupe_factor / copies
    batches_bytes = sum(len(document) for _, document in documents) * total / sample_bytes
    if config.dedup != "none":
        batches_bytes += _dedup_batch_bytes_per_input_byte(prepared.inputs) * total
    return SpaceEstimate(output_bytes=int((written - fixed) * scale
                                          + fixed * len(prepared.output.shard_names)),
                         temporary_bytes=int(entries.nbytes * scale + batches_bytes)
                         if config.shuffle == "files" else 0, sample_bytes=sample_bytes)


def _dedup_batch_bytes_per_input_byte(inputs: list[tuple[str, int]]) -> float:
    """What --shuffle=files' dedup batch files hold per input byte: a sample's
    documents pickled as the dedup stage batches them (key, lines, digest);
    1.0-1.6 on the bench shapes, the short documents' keys the most."""
    texts, sampled = sample_texts(inputs, SAMPLE_BYTES)
    name = posixpath.basename(inputs[0][0])
    batch, _, _ = fingerprint_batch([(document_key(name, number), lines)
                                     for number, lines in enumerate(texts)],
                                    Fingerprints(mode="exact"))
    return len(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)) / max(1, sampled)


def _shard_bytes(prepared: Prepared, entries: np.ndarray, keys: np.ndarray,
                 bounds: np.ndarray) -> int:
    """The bytes of a shard of these entries, as the shard writer writes it."""
    chunks = [bytes(chunk) for chunk in prepared.stages.rows.rows(entries, keys, bounds).chunks]
    if prepared.config.compression == "gzip":
        return sum(len(zlib.compress(chunk, 6)) for chunk in chunks)
    return sum(map(len, chunks))


def _joined(batches: list[EntryBatch]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The batches' entries, keys and bounds as one batch's."""
    bounds, offset = [np.zeros(1, dtype=np.int64)], 0
    for batch in batches:
        bounds.append(batch.bounds[1:] + offset)
        offset += len(batch.entries)
    return (np.concatenate([b.entries for b in batches] or [np.zeros(0, dtype=np.uint8)]),
            np.concatenate([b.keys for b in batches] or [np.zeros(0, dtype=np.int64)]),
            np.concatenate(bounds))


def free_bytes(path: str) -> int | None:
    """Free bytes on the local filesystem that holds (or will hold) `path`;
    None for an object store's path."""
    if "://" in path:
        return None
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def space_warning(prepared: Prepared, estimate: Callable[[], SpaceEstimate | None]) -> str | None:
    """A line when the output's local disk has less free space than the run
    needs (its estimate, made only for a local output, and WARNING_MARGIN
    for the estimate's error)."""
    where = prepared.output.folder
    free = free_bytes(where)
    if free is None:
        return None
    needed = estimate()
    if needed is None or free >= needed.peak_bytes * WARNING_MARGIN:
        return None
    return (f"{where} has {_size(free)} free; this run needs "
            f"{needed.describe()}: it will likely fail for space (free some, or choose "
            "an output location on a larger disk)")


def is_full_disk(err: BaseException) -> bool:
    """Whether `err` is a full disk or quota, raised here or carried as text
    in the runner's exception (a worker's OSError comes back as a message)."""
    seen: BaseException | None = err
    walked: set[int] = set()  # a chain can loop: an error raised while handling its own cause
    while seen is not None and id(seen) not in walked:
        if isinstance(seen, OSError) and seen.errno in _FULL_DISK:
            return True
        walked.add(id(seen))
        seen = seen.__cause__ or seen.__context__
    return _names_full_disk(str(err))


def _names_full_disk(text: str) -> bool:
    """Whether a message carries a full disk's or quota's OSError."""
    return any(f"[Errno {code}]" in text for code in _FULL_DISK)


@contextlib.contextmanager
def full_disk_reported(prepared: Prepared, estimate: Callable[[], SpaceEstimate | None]
                       ) -> Iterator[None]:
    """Turns a full disk while the run writes into a PublishError of one line
    (where, how much was free, what the run needs), after removing the
    staging directory, so that nothing is published and the disk is freed."""
    try:
        with quiet_beam_logs(lambda err: is_full_disk(err) if isinstance(err, BaseException)
                             else _names_full_disk(err)):
            yield
    except Exception as err:  # also a PublishError: the disk may fill as it publishes
        if not is_full_disk(err):
            raise
        staging = prepared.output.staging_dir
        with contextlib.suppress(Exception):  # the report matters more than the sweep
            remove_tree(staging)
        free = free_bytes(prepared.output.folder)
        had = f" ({_size(free)} free without it)" if free is not None else ""
        needed = estimate()
        need = needed.describe() if needed is not None else "more"
        raise PublishError(
            f"no space left on the device writing {staging}{had}; this run needs {need}; "
            "nothing was published and the staging directory was removed: free space, or "
            "choose an output location on a larger disk") from err
