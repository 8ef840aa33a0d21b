"""`--progress`: a local run's progress as it goes, for a person watching.

On a terminal, one live line; in a log (stderr not a terminal), a line
every 30 seconds; the input bytes read of the total (known from the matched
files; not for compressed inputs, whose text size is unknown), documents,
instances, the rate and an ETA. A Dataflow job prints its console URL
instead (pipeline.prepare.run_to_completion).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import threading
import time
from typing import Iterator, TextIO

from pipeline.options import Config, runner_name
from transforms.progress import read_progress

LIVE_SECONDS = 1.0
LOG_SECONDS = 30.0
PROGRESS_MODES = ("auto", "none")


def progress_line(totals: dict[str, int], *, total_bytes: int | None, elapsed: float) -> str:
    """One line: bytes read (of the total), documents, instances, rate, ETA."""
    done = totals.get("bytes", 0)
    rate = done / elapsed if elapsed > 0 else 0.0
    read = f"{done / 1e6:,.1f} MB"
    eta = ""
    if total_bytes:
        read += f" of {total_bytes / 1e6:,.1f} MB ({min(done / total_bytes, 1):.0%})"
        if rate > 0 and done < total_bytes:
            left = int((total_bytes - done) / rate)
            eta = f", ETA {left // 60}:{left % 60:02d}"
    return (f"progress: {read} read, {totals.get('documents', 0):,} documents, "
            f"{totals.get('instances', 0):,} instances, {rate / 1e6:,.2f} MB/s{eta}")


def local_progress(config: Config, beam_args, inputs) -> contextlib.AbstractContextManager:
    """`reporting` for a run on this machine (the DirectRunner) unless
    --progress=none; otherwise a context that yields no directory."""
    runner = runner_name(beam_args)
    if config.progress == "none" or (runner and "direct" not in runner.lower()):
        return contextlib.nullcontext(None)
    # The percentage compares text bytes with file bytes: only for plain text.
    plain = config.input_format == "text" and not any(
        path.endswith((".gz", ".bz2")) for path, _ in inputs)
    return reporting(total_bytes=sum(size for _, size in inputs) if plain else None)


@contextlib.contextmanager
def reporting(*, total_bytes: int | None, stream: TextIO | None = None,
              live: bool | None = None) -> Iterator[str]:
    """Yields the directory the run's ProgressSinks write to, and prints their
    totals to `stream` (stderr) until the block ends, then a last line with
    the final counts. `live`: a line redrawn in place (default: on a tty)."""
    stream = stream or sys.stderr
    directory = tempfile.mkdtemp(prefix="bert-progress-")
    live = stream.isatty() if live is None else live
    stop = threading.Event()
    start = time.monotonic()

    def show(final: bool = False) -> None:
        line = progress_line(read_progress(directory), total_bytes=total_bytes,
                             elapsed=time.monotonic() - start)
        if live:
            stream.write("\r\x1b[K" + line + ("\n" if final else ""))
        else:
            stream.write(line + "\n")
        stream.flush()

    def loop() -> None:
        while not stop.wait(LIVE_SECONDS if live else LOG_SECONDS):
            show()

    thread = threading.Thread(target=loop, name="progress", daemon=True)
    thread.start()
    try:
        yield directory
    finally:
        stop.set()
        thread.join()
        show(final=True)
        shutil.rmtree(directory, ignore_errors=True)
