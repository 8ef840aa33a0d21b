"""What an output format is, in one place: its shards' files and names, the
flags that belong to it and what it refuses, the row writer it takes, how a
shard is found and read. The pipeline, publishing, the disk estimate, the
loaders and inspect-pretraining-data ask a format's adapter
(transforms.write.formats) and branch on no format's name.

An adapter imports no Beam and nothing heavier than the loaders' install:
its row writer, the one heavy part, is imported when a run asks for it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, BinaryIO, Callable, Iterator, Mapping

import numpy as np

Flags = Mapping[str, Any]  # a run's flags: Config.flags(), or a manifest's
Features = dict[str, np.ndarray]  # a record's features as a loader decodes them

INSTANCES, SENTENCES = "instances", "sentences"


class ShardsNotReadHere(ValueError):
    """Shards the loaders cannot read: a format of no records, or a library
    its reader needs is not installed (the message says what to do)."""


class WriterNotInstalled(ValueError):
    """The library a format's writer needs is not installed (the message names it)."""


@dataclasses.dataclass(frozen=True)
class OutputFormat:
    """An output format. `holds`: what its records are, INSTANCES, or
    SENTENCES (the tokenized corpus, from which a trainer makes its own
    samples); `unpadded`: rows of unpadded lists, whose lengths imply
    input_mask and masked_lm_weights; `own_flags`: the flags that apply to
    this format alone; `label`: how a message names its shards;
    `empty_masked_lm`: --masking=none keeps empty masked_lm features, as the
    records of the loaders' first load-time masking had (new layouts never
    had them); `not_read_here`: why the loaders read no records of it."""

    name: str
    holds: str = INSTANCES
    unpadded: bool = False
    own_flags: tuple[str, ...] = ()
    label: str = "TFRecord"
    empty_masked_lm: bool = True
    not_read_here: str | None = None

    @property
    def makes_instances(self) -> bool:
        return self.holds == INSTANCES

    def shard_suffix(self, flags: Flags) -> str:
        """What follows part-NNNNN-of-NNNNN in a shard's path."""
        return ""

    def shard_files(self, flags: Flags) -> tuple[str, ...]:
        """What a shard is, as suffixes of its path: one file (""), or files
        beside a prefix, or a folder's files ("/name")."""
        return ("",)

    def data_file(self, flags: Flags) -> tuple[str, str]:
        """(the suffix a shard is found by, the suffix of the file a loader
        opens), each after the shard's path."""
        return "", ""

    def index_files(self, folders: list[str]) -> list[str]:
        """The file published beside the shards of each folder of shards, if any."""
        return []

    def index_bytes(self, shard_paths: list[str], read: Callable[[str], bytes]) -> bytes:
        """The content of a folder's index file (index_files), from its shards'
        published files (`read`: a file's bytes)."""
        raise NotImplementedError(f"{self.name} shards have no index file")

    def compressed(self, flags: Flags) -> bool:
        """Whether the shards are compressed (the disk estimate's ratio)."""
        return False

    def checks(self, config: Any, given: frozenset[str]) -> list[tuple[bool, str]]:
        """What this format refuses of a run's flags (`given`: those on the
        command line): (holds, the one-line error when it does not) each; its
        own flags are checked by the caller."""
        return []

    def row_writer(self, rows: Any, vocab_size: int, config: Any) -> Any:
        """The shard writer's rows in this format, from the records' rows
        (transforms.write.rows); raises ValueError for a vocabulary it cannot
        hold, WriterNotInstalled for a missing library."""
        return rows

    def corpus_dtype(self, vocab_size: int) -> str | None:
        """A tokenized corpus' ids' numpy type (formats that hold SENTENCES)."""
        return None

    def records(self, handle: BinaryIO, path: str, start: int
                ) -> Iterator[tuple[int, "bytes | Features"]]:
        """(position, record) of the shard at `path` (opened: `handle`) from
        position `start` on (earlier ones may be given too): serialized
        Examples, or features."""
        raise ShardsNotReadHere(self.not_read_here)


class UnpaddedFormat(OutputFormat):
    """A format of unpadded rows, one list of values per feature, compressed
    inside each file: what it refuses."""

    def checks(self, config: Any, given: frozenset[str]) -> list[tuple[bool, str]]:
        name = self.name
        return [
            (not ("padding" in given and config.padding == "fixed"),
             f"--output_format={name} writes unpadded rows (their lengths imply input_mask "
             "and masked_lm_weights); drop --padding=fixed"),
            (config.compression is None, f"--output_format={name} compresses inside each "
             f"file (--{name}_compression); drop --compression and --gzip_compress"),
            (not config.reference_compatible, "--reference_compatible reproduces the "
             f"original's TFRecord files; drop --output_format={name}"),
            (config.recipe != "d2l", f"--recipe=d2l writes d2l's TFRecord features; drop "
             f"--output_format={name}"),
            (bool(config.output_dir), f"--output_format={name} writes part-NNNNN-of-NNNNN "
             "shards: use --output_dir"),
        ]
