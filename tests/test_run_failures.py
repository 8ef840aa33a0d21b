"""A run that fails after it started ends in one line naming the step and
what failed (pipeline.prepare.run_failure), exit code 1, nothing published:
a worker's error raised in this process, and one a worker process relays
as its traceback's text (the DirectRunner's multi_processing mode)."""

from __future__ import annotations

import pytest

from bert_pretraining_data.pipeline.prepare import run_failure
from bert_pretraining_data.transforms.write.beam import ShardWriteError

RELAYED = """Error processing instruction bundle_23. Original traceback is
Traceback (most recent call last):
  File "apache_beam/runners/common.py", line 1512, in apache_beam.runners.common.DoFnRunner.process
    raise ValueError("cannot")
google.api_core.exceptions.NotFound: 404 PUT http://127.0.0.1:4443/upload/storage/v1/b/b/o: \
No such object [while running 'WriteShards/ParDo(_WriteShardFn)']
"""


@pytest.mark.parametrize("err, line", [
    (ValueError("Encountered an unknown token [while running 'Tokenize/ParDo(T)']"),
     "the run failed in step 'Tokenize/ParDo(T)': ValueError: Encountered an unknown token; "
     "nothing was published"),
    (ShardWriteError("writing gs://b/out/part-00001: NotFound: 404\nmore\n"
                     "[while running 'WriteShards/ParDo(_WriteShardFn)']"),
     "the run failed in step 'WriteShards/ParDo(_WriteShardFn)': writing gs://b/out/part-00001: "
     "NotFound: 404 more; nothing was published"),
    (RuntimeError(RELAYED),
     "the run failed in step 'WriteShards/ParDo(_WriteShardFn)': NotFound: 404 PUT "
     "http://127.0.0.1:4443/upload/storage/v1/b/b/o: No such object; nothing was published"),
    (KeyError("shard"), "the run failed: KeyError: 'shard'; nothing was published"),
])
def test_a_failure_is_one_line_naming_the_step(err, line):
    assert str(run_failure(err)) == line


def test_a_long_failure_is_cut():
    line = str(run_failure(ValueError("x" * 5000)))
    assert len(line) < 700 and "\n" not in line and line.endswith("...; nothing was published")
