"""The layout under a refresh's --output_root, shared by the refresh
(pipeline/refresh.py) and retention (pipeline/retention.py).

    20250105T030000Z-1a2b3c4d/   a version: its time, then its fingerprint's first 8 hex
    20250105T030000Z-1a2b3c4d/fingerprint.json   written once the version is complete
    LATEST                       one line: the name of the newest complete version
"""

from __future__ import annotations

import datetime
import re

from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.loaders.manifest import LATEST_NAME
from bert_pretraining_data.pipeline.beam_options import ConfigError

FINGERPRINT_NAME = "fingerprint.json"
VERSION_NAME = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}")  # what version_name makes


_TIME_FORMAT = "%Y%m%dT%H%M%SZ"


def version_name(now: datetime.datetime, digest: str, *, after: str | None = None) -> str:
    """Sorts by time, and after `after` (the version LATEST named when the
    refresh was planned): a refresh in the same second as the one before it,
    or on a clock behind it, would otherwise sort first and never take LATEST.
    The digest keeps two concurrent runs in one second apart."""
    stamp = now.astimezone(datetime.timezone.utc).replace(microsecond=0)
    if after is not None and VERSION_NAME.fullmatch(after):
        previous = datetime.datetime.strptime(after.split("-", 1)[0], _TIME_FORMAT)
        stamp = max(stamp, previous.replace(tzinfo=datetime.timezone.utc)
                    + datetime.timedelta(seconds=1))
    return f"{stamp:{_TIME_FORMAT}}-{digest[:8]}"


def read_latest(root: str) -> str | None:
    """The version LATEST names, or None before the first refresh."""
    path = FileSystems.join(root, LATEST_NAME)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        name = handle.read().decode("utf-8").strip()
    if not name or "/" in name:
        raise ConfigError(f"{path} holds {name!r}, not a version name; check "
                          "--output_root, or delete LATEST to start over")
    return name
