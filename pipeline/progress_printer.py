"""`--progress`: a local run's progress as it goes, for a person watching.

On a terminal, one live line; in a log (stderr not a terminal), a line
every 30 seconds: while reading, the input bytes read of the total (known
from the matched files; not for compressed or non-text inputs, whose text
size is unknown), documents, rate and ETA; then the share of document copies
made into instances, instances and ETA. A Dataflow job prints its console
URL instead (pipeline.prepare.run_to_completion).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import threading
import time
from typing import Iterator, TextIO

from bert_pretraining_data.pipeline.beam_options import runner_name
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.transforms.progress_sink import read_progress

LIVE_SECONDS = 1.0
LOG_SECONDS = 30.0
PROGRESS_MODES = ("auto", "none")


def _eta(left: float, rate: float, share: float) -> str:
    """", ETA m:ss" at this rate, once 1% is done (before, the rate says little)."""
    if rate <= 0 or left <= 0 or share < 0.01:
        return ""
    seconds = int(left / rate)
    return f", ETA {seconds // 60}:{seconds % 60:02d}"


def progress_line(totals: dict[str, int], *, total_bytes: int | None, dupe_factor: int,
                  elapsed: float, records_elapsed: float) -> str:
    """One line. While reading: bytes read (of the total: share, rate, ETA),
    documents. Once instances are being made (the DirectRunner makes them after
    the whole corpus is read and tokenized): the share of document copies
    done, instances, and the ETA at that pace."""
    done = totals.get("bytes", 0)
    documents = totals.get("documents", 0)
    copies = totals.get("copies", 0)
    if not copies:
        rate = done / elapsed if elapsed > 0 else 0.0
        read = f"{done / 1e6:,.1f} MB"
        eta = ""
        if total_bytes:
            read += f" of {total_bytes / 1e6:,.1f} MB ({min(done / total_bytes, 1):.0%})"
            eta = _eta(total_bytes - done, rate, done / total_bytes)
        return (f"progress: reading {read}, {documents:,} documents, {rate / 1e6:,.2f} MB/s"
                f"{eta}")
    total = max(totals.get("tokenized", 0) * dupe_factor, copies)
    pace = copies / records_elapsed if records_elapsed > 0 else 0.0
    return (f"progress: {documents:,} documents read; records {copies / total:.0%} of "
            f"{total:,} document copies, {totals.get('instances', 0):,} instances"
            f"{_eta(total - copies, pace, copies / total)}")


def local_progress(config: Config, beam_args, inputs) -> contextlib.AbstractContextManager:
    """`reporting` for a run on this machine (the DirectRunner) unless
    --progress=none; otherwise a context that yields no directory."""
    runner = runner_name(beam_args)
    if config.progress == "none" or (runner and "direct" not in runner.lower()):
        return contextlib.nullcontext(None)
    # The percentage compares text bytes with file bytes: only for plain text.
    plain = config.input_format == "text" and not any(
        path.endswith((".gz", ".bz2")) for path, _ in inputs)
    return reporting(total_bytes=sum(size for _, size in inputs) if plain else None,
                     dupe_factor=config.dupe_factor)


@contextlib.contextmanager
def reporting(*, total_bytes: int | None, dupe_factor: int, stream: TextIO | None = None,
              live: bool | None = None) -> Iterator[str]:
    """Yields the directory the run's ProgressSinks write to, and prints their
    totals to `stream` (stderr) until the block ends, then a last line with
    the final counts. `live`: a line redrawn in place (default: on a tty)."""
    stream = stream or sys.stderr
    directory = tempfile.mkdtemp(prefix="bert-progress-")
    live = stream.isatty() if live is None else live
    stop = threading.Event()
    start = time.monotonic()
    records_start: list[float] = []  # when the first document copy was done

    def show(final: bool = False) -> None:
        totals = read_progress(directory)
        now = time.monotonic()
        if totals.get("copies") and not records_start:
            records_start.append(now)
        line = progress_line(totals, total_bytes=total_bytes, dupe_factor=dupe_factor,
                             elapsed=now - start,
                             records_elapsed=now - records_start[0] if records_start else 0.0)
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
