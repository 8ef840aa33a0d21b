"""One shard as its writer accounts for it and a manifest lists it.

The shard writers make a ShardRecord, publishing places it at its final path
and the manifest lists it; the loaders and inspect-pretraining-data read it
back. Its JSON keys are named here alone, so a manifest's shard entries are
the same bytes as before the type (a key per field that is set, the row
writer's own figures beside them).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

# A file's account: {"bytes": ..., "sha256": ...}
FileRecord = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ShardRecord:
    """A shard: which one, its records and bytes, and what its rows say of
    themselves (`figures`: instances, tokens, rows_by_depth, documents, as
    its row writer counts them)."""

    shard: int  # its place among its part's shards (a mixture's, numbered on at publishing)
    records: int  # rows: instances, packed rows, or a tokenized corpus' sentences
    name: str | None = None  # its staging name (a writer's; a hand-made manifest may lack it)
    bytes: int | None = None  # None: the reference run, which records no bytes
    sha256: str | None = None  # a one-file shard's
    files: dict[str, FileRecord] | None = None  # a shard of several files: each one's
    path: str | None = None  # where it is published, once placed
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)
    # the Parquet or MDS columns' types, staged for the manifest's schema and
    # not listed with the shard
    columns: dict[str, Any] | None = None

    @property
    def instances(self) -> int:
        """Its instances: a packed row holds several."""
        return self.figures.get("instances", self.records)

    @property
    def tokens(self) -> int:
        """Its tokens, as its row writer counted them (packed rows, a tokenized corpus)."""
        return self.figures["tokens"]

    def placed(self, path: str, shard: int | None = None) -> "ShardRecord":
        """This shard at its final path (and, among a mixture's, its place)."""
        return dataclasses.replace(self, path=path, shard=self.shard if shard is None else shard)

    def listed(self) -> "ShardRecord":
        """This shard as a manifest lists it: its columns are the manifest's schema."""
        return dataclasses.replace(self, columns=None)

    def file_digests(self, file_names: Sequence[str]) -> list[tuple[int, str] | None]:
        """(bytes, sha256) of each file recorded: of `file_names` for a shard
        of several files, else of its one file (None: none recorded)."""
        if self.files is not None:
            return [(self.files[name]["bytes"], self.files[name]["sha256"])
                    for name in file_names]
        return [(self.bytes, self.sha256) if self.sha256 is not None else None]

    def to_json(self) -> dict[str, Any]:
        """A key per field that is set, the figures beside them."""
        data = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)
                if field.name != "figures" and getattr(self, field.name) is not None}
        return {**self.figures, **data}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ShardRecord":
        """A shard entry as any version so far wrote it (and as a writer
        counts it: its keys, and its rows' figures)."""
        named = {field.name for field in dataclasses.fields(cls)} - {"figures"}
        return cls(**{key: value for key, value in data.items() if key in named},
                   figures={key: value for key, value in data.items() if key not in named})
