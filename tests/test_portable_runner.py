"""The path Dataflow runs, on this machine: the pipeline proto sent to a job
service, run through the Fn API by an SDK harness in another process, as
Runner v2 runs it. Beam's `local_job_service_main` takes the job, its
`worker_pool_main` (an EXTERNAL environment, bound to loopback) starts the
harnesses with the venv's python, and `--runner=PortableRunner` must give the
DirectRunner's shards byte for byte: TFRecord and Parquet, both shuffle
paths, on sample_text and WikiText-2's valid split. The test starts both
services and ends them (their whole process groups) when it is done.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
from typing import Iterator

import pytest

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.pipeline.main import run

STARTUP_SECONDS = 60
CORPORA = {"sample_text": DATA / "sample_text.txt",
           "wikitext2_valid": DATA / "wikitext2_valid.raw.txt"}
# Each corpus with both formats and both shuffle paths, each pair once.
RUNS = [("sample_text", "tfrecord", "files"), ("sample_text", "parquet", "runner"),
        ("wikitext2_valid", "tfrecord", "runner"), ("wikitext2_valid", "parquet", "files")]
FLAGS = ("--num_shards=3", "--dupe_factor=2", "--random_seed=5")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serving(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def _service(module: str, port_flag: str, log: pathlib.Path) -> Iterator[int]:
    """`python -m module` listening on a free loopback port, in a process
    group of its own (the harnesses it starts are in it), ended afterwards."""
    port = _free_port()
    # the worker pool starts each harness as `python -c ...`: the venv's python
    env = dict(os.environ, PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent),
                                                  os.environ.get("PATH", "")]))
    with open(log, "wb") as handle:
        process = subprocess.Popen([sys.executable, "-m", module, f"{port_flag}={port}"],
                                   stdout=handle, stderr=subprocess.STDOUT, env=env,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _serving(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{module} did not start:\n{log.read_text()}")
            time.sleep(0.2)
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def portable(tmp_path_factory) -> Iterator[list[str]]:
    """The flags that run a pipeline on the local job service and worker pool."""
    logs = tmp_path_factory.mktemp("portable-services")
    with _service("apache_beam.runners.portability.local_job_service_main", "--port",
                  logs / "job_service.log") as jobs, \
            _service("apache_beam.runners.worker.worker_pool_main", "--service_port",
                     logs / "worker_pool.log") as workers:
        yield ["--runner=PortableRunner", f"--job_endpoint=localhost:{jobs}",
               "--environment_type=EXTERNAL", f"--environment_config=localhost:{workers}"]


def _shards(out: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("part-*"))}


@pytest.mark.slow
@pytest.mark.parametrize("corpus, output_format, shuffle", RUNS)
def test_the_portable_runner_writes_the_direct_runners_shards(portable, tmp_path, corpus,
                                                             output_format, shuffle):
    flags = [f"--input_file={CORPORA[corpus]}", f"--vocab_file={UNCASED_VOCAB}", *FLAGS,
             f"--output_format={output_format}", f"--shuffle={shuffle}"]
    direct = run([*flags, f"--output_dir={tmp_path / 'direct'}"])
    ported = run([*flags, f"--output_dir={tmp_path / 'portable'}", *portable])
    assert _shards(tmp_path / "portable") == _shards(tmp_path / "direct")
    assert len(_shards(tmp_path / "direct")) == 3
    assert ported["total_instances"] == direct["total_instances"] > 0
    assert ported["counters"]["instances"] == direct["counters"]["instances"]
