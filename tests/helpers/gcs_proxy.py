"""A loopback HTTP proxy in front of the GCS emulator that counts and fails requests.

Tests point google-cloud-storage (and so Beam's gcsio) at the proxy instead
of the emulator (`STORAGE_EMULATOR_HOST`). The proxy forwards every request
and records its method and kind. Two kinds of faults, each on a share of
requests drawn by a seeded generator:

- `failure_share`: the proxy answers the request itself, without forwarding
  it: 503, 429, or a connection closed before any response. The storage
  never sees it, so a retried request is the only attempt it applies.
- `lost_share`: the proxy forwards the request, the storage applies it, and
  the response is lost (the connection is closed instead). The client
  retries an operation that already happened: a copy whose source a later
  delete may already have removed, a delete of an object already gone, an
  upload already finalized. Drawn per kind of request (one generator each),
  so which copies and deletes lose their response does not depend on how
  uploads and reads interleave with them.

And one targeted fault, `lost_finishing`: the response to the request that
finishes a resumable upload (the chunk whose Content-Range gives the total)
of each object whose name matches the pattern is lost, once per object: the
client retries a finished upload, which real GCS answers with the object and
the emulator with 404.

Bounded: it serves only loopback and stops with the test.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import http.client
import json
import random
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

FAULTS = ("503", "429", "drop")
LOST = "lost"  # the fault counted for a response dropped after forwarding
# Response headers the proxy recomputes instead of copying.
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length"}


def request_kind(method: str, path: str) -> str:
    """A request's kind, named as GCS's JSON API operations."""
    parsed = urllib.parse.urlparse(path)
    query = urllib.parse.parse_qs(parsed.query)
    if parsed.path.startswith("/upload/"):
        return "upload" if method == "POST" else "upload-chunk"
    if "/rewriteTo/" in parsed.path or "/copyTo/" in parsed.path:
        return "copy"
    if parsed.path.startswith("/batch/"):
        return "batch"
    if method == "DELETE":
        return "delete"
    if parsed.path.endswith("/o") and method == "GET":
        return "list"
    if method == "GET" and query.get("alt") == ["media"] or parsed.path.startswith("/download/"):
        return "download"
    if method == "GET":
        return "metadata"
    return f"{method.lower()}-other"


_BATCHED = re.compile(rb"^(GET|POST|PUT|DELETE|PATCH) (\S+) HTTP/", re.MULTILINE)


def _query(url: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlparse(url).query)


def batched_kinds(body: bytes) -> list[str]:
    """The kinds of the requests inside a batch request's multipart body."""
    return [request_kind(method.decode(), path.decode())
            for method, path in _BATCHED.findall(body)]


@dataclasses.dataclass
class Stats:
    """What the proxy saw: HTTP requests by kind (forwarded ones, lost
    responses included), the operations inside batch requests by kind, the
    faults it injected, and the kinds of the requests (and of the operations
    inside batches) whose response it lost."""

    requests: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    batched: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    faults: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    lost: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    lost_batched: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    @property
    def objects_created(self) -> int:
        """Uploads started plus copies, batched or not (a rename is a copy,
        then a delete)."""
        return self.requests["upload"] + self.requests["copy"] + self.batched["copy"]

    @property
    def total(self) -> int:
        return sum(self.requests.values())


class _Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, target: str, failure_share: float, lost_share: float, seed: int,
                 lost_finishing: str | None = None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lost_finishing = re.compile(lost_finishing) if lost_finishing else None
        self.watched_uploads: set[str] = set()  # upload ids of the objects it matches
        parsed = urllib.parse.urlparse(target)
        self.target = (parsed.hostname, parsed.port)
        self.failure_share = failure_share
        self.lost_share = lost_share
        self.seed = seed
        self.rng = random.Random(seed)
        self.lost_rngs: dict[str, random.Random] = {}
        self.lock = threading.Lock()
        self.stats = Stats()

    def decide(self, kind: str, body: bytes, headers=None, path: str = "") -> str | None:
        """A fault to inject, or None (the request is counted and forwarded);
        LOST: forwarded and counted too, but its response is dropped."""
        if self.lost_finishing and kind == "upload-chunk" and headers is not None:
            upload = _query(path).get("upload_id", [""])[0]
            total = (headers.get("Content-Range") or "").rpartition("/")[2]
            with self.lock:
                if upload in self.watched_uploads and total not in ("", "*"):
                    self.watched_uploads.discard(upload)  # once: the retry goes through
                    self.stats.requests[kind] += 1
                    self.stats.faults[LOST] += 1
                    self.stats.lost["finishing"] += 1
                    return LOST
        with self.lock:
            fault = None
            if self.failure_share and self.rng.random() < self.failure_share:
                fault = self.rng.choice(FAULTS)
                self.stats.faults[fault] += 1
                return fault
            self.stats.requests[kind] += 1
            if kind == "batch":
                self.stats.batched.update(batched_kinds(body))
            rng = self.lost_rngs.setdefault(kind, random.Random(f"{self.seed}:{kind}"))
            if self.lost_share and rng.random() < self.lost_share:
                fault = LOST
                self.stats.faults[LOST] += 1
                self.stats.lost[kind] += 1
                if kind == "batch":
                    self.stats.lost_batched.update(batched_kinds(body))
            return fault


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Proxy

    def log_message(self, *args) -> None:  # quiet
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        kind = request_kind(self.command, self.path)
        fault = self.server.decide(kind, body, self.headers, self.path)
        if fault == "drop":
            self._hang_up()
            return
        if fault not in (None, LOST):
            message = b'{"error": {"code": %s, "message": "injected"}}' % fault.encode()
            self.send_response(int(fault))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            self.wfile.write(message)
            return
        connection = http.client.HTTPConnection(*self.server.target, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
        try:
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        if fault == LOST:  # the storage applied it; the client never hears
            self._hang_up()
            return
        headers = response.getheaders()
        if kind == "upload" and self.server.lost_finishing:
            headers = self._watch(body, headers)
        self.send_response(response.status)
        for name, value in headers:
            if name.lower() not in _HOP_HEADERS:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _watch(self, body: bytes, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """An upload's response headers, its session's Location sent through
        the proxy (the emulator names itself), its upload id watched when
        the object's name (in the request's metadata) matches."""
        try:
            name = json.loads(body or b"{}").get("name", "")
        except ValueError:
            name = ""
        target = "%s:%d" % self.server.target
        here = "%s:%d" % self.server.server_address[:2]
        rewritten = []
        for header, value in headers:
            if header.lower() == "location":
                value = value.replace(target, here)
                if self.server.lost_finishing.search(name):
                    with self.server.lock:
                        self.server.watched_uploads.update(_query(value).get("upload_id", []))
            rewritten.append((header, value))
        return rewritten

    def _hang_up(self) -> None:
        self.close_connection = True
        self.connection.shutdown(2)  # no response at all

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward


@contextlib.contextmanager
def proxy(target: str, *, failure_share: float = 0.0, lost_share: float = 0.0,
          seed: int = 0, lost_finishing: str | None = None) -> Iterator[tuple[str, Stats]]:
    """Serves a proxy to `target` (the emulator's endpoint) on a free loopback
    port; yields (its endpoint, its live Stats)."""
    server = _Proxy(target, failure_share, lost_share, seed, lost_finishing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.stats
    finally:
        server.shutdown()
        server.server_close()
