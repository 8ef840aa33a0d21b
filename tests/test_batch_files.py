"""The DirectRunner's document batches go to the instances stage through files
(SpreadBatchFiles): whole, and dealt out evenly to its workers, whatever
worker made them."""

from __future__ import annotations

import collections
import os

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from bert_pretraining_data.pipeline.local_runner import new_pipeline
from bert_pretraining_data.transforms.handoff.beam import SpreadBatchFiles

BATCHES = [[(f"doc-{b}-{d}", bytes([b, d]) * (b + d + 1)) for d in range(b % 4 + 1)]
           for b in range(40)]


def test_the_batches_come_back_whole_from_their_files(tmp_path):
    folder = tmp_path / "batches"
    with new_pipeline([]) as p:
        spread = (p | beam.Create(BATCHES, reshuffle=False)
                  | SpreadBatchFiles(str(folder)))
        assert_that(spread, equal_to(BATCHES))
    assert len(list(folder.iterdir())) == len(BATCHES)


def test_two_workers_take_half_the_batches_each_though_one_made_them(tmp_path):
    """One worker makes every batch here (Create without its reshuffle); read
    where they were written, every batch would go to it."""
    with new_pipeline(["--direct_running_mode=multi_processing",
                       "--direct_num_workers=2"]) as p:
        (p | beam.Create(BATCHES, reshuffle=False)
         | SpreadBatchFiles(str(tmp_path / "batches"))
         | beam.Map(lambda batch: os.getpid())
         | beam.io.WriteToText(str(tmp_path / "readers")))
    readers = collections.Counter(
        line for path in tmp_path.glob("readers*") for line in path.read_text().split())
    assert sorted(readers.values()) == [len(BATCHES) // 2] * 2, readers
