"""Batches of documents handed to a later stage through files: the DirectRunner's
way (--shuffle=files) to a collection that waits for a side input without
holding it in memory (docs/design-notes.md, pipeline.build)."""

from __future__ import annotations

import pickle
import uuid

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.transforms.handoff.compressed import Batch

_BATCH_SUFFIX = ".batch"


class SpreadBatchFiles(beam.PTransform):
    """Batches of documents -> the same batches, dealt out evenly to the
    workers of the stage after, only their files' paths passing the runner
    (the DirectRunner: --shuffle=files).

    The DirectRunner divides a materialized collection among the workers of
    the stage that reads it by the ~10 MB chunks the stage before sent, not
    by their work: a 200 MB corpus' tokenized batches made 14 chunks, and one
    of two workers got 70 MB of them (its instances took 20 s against 15).
    It also held them all in memory. Written under `folder` (the staging
    directory's, removed when the run ends), the batches pass as paths, which
    a Reshuffle deals out one by one."""

    def __init__(self, folder: str) -> None:
        super().__init__()
        self._folder = folder

    def expand(self, batches):
        return (batches
                | "WriteBatchFiles" >> beam.Map(write_batch_file, self._folder)
                | "DealOut" >> beam.Reshuffle()
                | "ReadBatchFiles" >> beam.Map(read_batch_file))


def write_batch_file(batch: Batch, folder: str) -> str:
    """Writes a batch to a new file under `folder`; returns its path."""
    path = FileSystems.join(folder, uuid.uuid4().hex + _BATCH_SUFFIX)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        pickle.dump(batch, handle, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def read_batch_file(path: str) -> Batch:
    """The batch `write_batch_file` wrote to `path` (a file of this run's staging)."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return pickle.load(handle)
