"""A real Cloud Storage emulator on loopback, for the gs:// tests.

`gcp-storage-emulator` (PyPI, a test extra) serves the GCS JSON API over HTTP.
google-cloud-storage sends every request to `STORAGE_EMULATOR_HOST` when it is
set, and Beam's `gcsio` builds its client from google-cloud-storage, so the
pipeline's own `FileSystems` calls (match, open, create, rename, delete) reach
the emulator unchanged: nothing in Beam or in the pipeline is patched.

One thing is set up besides the variable: Beam looks for Google credentials
once per process and, finding none, retries for about 25 seconds before it
connects anonymously. The fixture records "no credentials" in that cache up
front, which is the state Beam would reach anyway (and on a developer machine
that has credentials, it keeps them from being sent to the emulator).

Tests read and write objects with google-cloud-storage directly, so what they
check does not go through the code under test.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Iterator

import pytest

BUCKET = "bert-data-test"
STARTUP_SECONDS = 30


@dataclasses.dataclass(frozen=True)
class Emulator:
    """A running emulator: its endpoint and one bucket that exists."""

    endpoint: str
    bucket: str

    def _client(self):
        from google.cloud import storage

        return storage.Client(project="emulator")  # anonymous: the emulator is set

    def url(self, name: str) -> str:
        return f"gs://{self.bucket}/{name}"

    def upload(self, local: pathlib.Path | str, name: str) -> str:
        """Copies a local file to an object; returns its gs:// path."""
        blob = self._client().bucket(self.bucket).blob(name)
        blob.upload_from_filename(str(local))
        return self.url(name)

    def upload_bytes(self, data: bytes, name: str) -> str:
        self._client().bucket(self.bucket).blob(name).upload_from_string(data)
        return self.url(name)

    def read(self, name: str) -> bytes:
        return self._client().bucket(self.bucket).blob(name).download_as_bytes()

    def names(self, prefix: str) -> list[str]:
        """Object names under a prefix, sorted."""
        blobs = self._client().list_blobs(self.bucket, prefix=prefix)
        return sorted(b.name for b in blobs)

    def delete(self, name: str) -> None:
        self._client().bucket(self.bucket).blob(name).delete()


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_serving(process: subprocess.Popen, endpoint: str, log: pathlib.Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gcp-storage-emulator exited with {process.returncode}:\n"
                               + log.read_text(errors="replace"))
        try:
            with _DIRECT.open(f"{endpoint}/storage/v1/b/{BUCKET}", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"gcp-storage-emulator did not answer within {STARTUP_SECONDS} s:\n"
                       + log.read_text(errors="replace"))


@contextlib.contextmanager
def running_emulator() -> Iterator[Emulator]:
    """Starts the emulator in memory on a free loopback port, points
    google-cloud-storage (and so Beam) at it, and stops it afterwards."""
    from apache_beam.internal.gcp import auth

    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        log = pathlib.Path(tmp) / "emulator.log"
        with open(log, "wb") as log_handle:
            process = subprocess.Popen(
                [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
                 "--port", str(port), "--in-memory", "--default-bucket", BUCKET],
                stdout=log_handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            _wait_until_serving(process, endpoint, log)
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("STORAGE_EMULATOR_HOST", endpoint)
                for name in ("NO_PROXY", "no_proxy"):  # if a proxy is set, not for loopback
                    patch.setenv(name, ",".join(filter(None, [os.environ.get(name),
                                                              "127.0.0.1"])))
                patch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
                patch.setattr(auth._Credentials, "_credentials_init", True)
                patch.setattr(auth._Credentials, "_credentials", None)
                yield Emulator(endpoint=endpoint, bucket=BUCKET)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def gcs() -> Iterator[Emulator]:
    """A module's emulator (import this fixture into the test module)."""
    with running_emulator() as emulator:
        yield emulator
