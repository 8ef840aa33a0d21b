"""A dataset as its manifest describes it: shards, record counts, flags, vocabulary.

`manifest.json` is written last by the pipeline, so a location with one holds
a finished dataset. The loaders read it so that a user does not repeat
max_seq_length or max_predictions_per_seq, and so that every record has a
global index (shard order, then position) that seeds dynamic masking.

Shard paths are looked up beside the manifest first and at their recorded
path second, so a dataset copied elsewhere (gs:// to local disk) still loads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from bert_pretraining_data.loaders import files
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary

MANIFEST_NAME = "manifest.json"
# An --output_dir dataset's vocabulary, beside its manifest: its vocab.txt, its
# SentencePiece model or its tokenizer.json.
VOCAB_NAME = "vocab.txt"
SENTENCEPIECE_NAME = "sentencepiece.model"
TOKENIZER_JSON_NAME = "tokenizer.json"


def vocabulary_name(flags: dict[str, Any]) -> str:
    """What a dataset made with these flags calls its copy of the vocabulary."""
    spec = TokenizerSpec.of(flags)
    if spec.tokenizer_file:
        return TOKENIZER_JSON_NAME
    return SENTENCEPIECE_NAME if spec.sentencepiece else VOCAB_NAME


class DatasetError(ValueError):
    """A dataset that cannot be loaded as asked; the message says what to fix."""


@dataclasses.dataclass(frozen=True)
class Shard:
    path: str
    records: int
    first_index: int  # global index of the shard's first record


@dataclasses.dataclass(frozen=True)
class Manifest:
    """A read manifest: its path, its JSON (`data`) and its shards, resolved."""

    path: str
    data: dict[str, Any] = dataclasses.field(repr=False)
    shards: tuple[Shard, ...]

    @property
    def flags(self) -> dict[str, Any]:
        return self.data["flags"]

    @property
    def recipe(self) -> str:
        return self.flags.get("recipe", "bert")  # manifests older than --recipe

    @property
    def output_format(self) -> str:
        return self.flags.get("output_format", "tfrecord")  # manifests older than Parquet

    @property
    def masking(self) -> str:
        return self.flags.get("masking", "static")

    @property
    def padding(self) -> str:
        return self.flags.get("padding", "fixed")

    @property
    def max_seq_length(self) -> int:
        return self.flags["max_seq_length"]

    @property
    def max_predictions_per_seq(self) -> int:
        return self.flags["max_predictions_per_seq"]

    @property
    def features(self) -> dict[str, str]:
        """A bert dataset's feature names -> what each holds (the original's
        names): v2 names, ALBERT's token_boundary and ELECTRA's layout read
        alike. Manifests older than this record imply the original's."""
        # the writer's, loaded if needed
        from bert_pretraining_data.transforms.write.tf_example import RecordLayout

        recorded = self.data.get("features")
        if recorded:
            return dict(recorded)
        return RecordLayout(padded=self.padding == "fixed").roles()

    @property
    def total_records(self) -> int:
        """Records in the shards: instances, or packed rows."""
        return sum(s.records for s in self.shards)

    @property
    def total_instances(self) -> int:
        return self.data.get("total_instances", self.total_records)

    @property
    def packing(self) -> dict[str, Any] | None:
        """The packed rows' summary (--pack_sequences), else None."""
        return self.data.get("packing")

    @property
    def packed(self) -> bool:
        return self.packing is not None

    @property
    def max_predictions_per_record(self) -> int:
        """Predictions a padded record has room for: max_predictions_per_seq,
        or a packed row's budget."""
        if self.packing:
            return self.packing["max_predictions_per_row"]
        return self.max_predictions_per_seq

    @property
    def max_sequences_per_record(self) -> int:
        return self.packing["max_sequences_per_pack"] if self.packing else 1

    @property
    def tokenizer(self) -> TokenizerSpec:
        """The tokenizer the dataset was made with, from its flags."""
        return TokenizerSpec.of(self.flags)

    @property
    def vocab_path(self) -> str | None:
        """The vocab.txt or sentencepiece.model beside the manifest (every
        --output_dir dataset has one; d2l's is computed), else the file given
        (--vocab_file, --spm_model_file, --sp_model_file: datasets written
        with --output_file, or before the pipeline copied the vocabulary)."""
        beside = files.join(files.dirname(self.path), vocabulary_name(self.flags))
        if self.recipe == "d2l" or files.exists(beside):
            return beside
        return self.tokenizer.path


def find_manifest(location: str) -> str:
    """The manifest of a dataset directory, a manifest path, or a shard pattern
    (looked up in the pattern's directory)."""
    if location.endswith(".json"):
        return location
    directory = location if files.is_dir(location) else files.dirname(location)
    return files.join(directory, MANIFEST_NAME)


def _resolve_shard(recorded: str, base_dir: str, manifest_path: str) -> str:
    beside = files.join(base_dir, files.basename(recorded))
    for candidate in (beside, recorded):
        if files.exists(candidate):
            return candidate
    raise DatasetError(f"{manifest_path}: shard {files.basename(recorded)} is missing "
                       f"(looked in {base_dir} and at {recorded}); copy the whole dataset")


def read_manifest(location: str) -> Manifest:
    """Reads and checks the manifest at or for `location`."""
    path = find_manifest(location)
    if not files.exists(path):
        raise DatasetError(f"no {files.basename(path)} at {path}: a dataset written by "
                           "create-pretraining-data has one (it is written last, so a "
                           "directory without one holds no finished dataset)")
    try:
        data = json.loads(files.read_bytes(path))
        entries = sorted(data["shards"], key=lambda s: s["shard"])
        data["flags"]["max_seq_length"]
    except (ValueError, KeyError, TypeError) as err:
        raise DatasetError(f"{path}: not a manifest of create-pretraining-data "
                           f"({type(err).__name__}: {err})") from None
    base_dir = files.dirname(path)
    shards = []
    first = 0
    for entry in entries:
        shards.append(Shard(_resolve_shard(entry["path"], base_dir, path),
                            entry["records"], first))
        first += entry["records"]
    return Manifest(path=path, data=data, shards=tuple(shards))


def read_vocabulary_bytes(manifest: Manifest, vocab_file: str | None = None) -> bytes:
    """The vocabulary the dataset was made with, checked against its sha256.

    `vocab_file` overrides the recorded path (e.g. a local copy of a gs:// file).
    """
    path = vocab_file or manifest.vocab_path
    if not path or not files.exists(path):
        raise DatasetError(f"{manifest.path}: vocabulary {path!r} not found; pass "
                           "vocab_file= (--vocab_file) pointing at a copy of it")
    data = files.read_bytes(path)
    expected = manifest.data.get("vocab_sha256")
    if expected and hashlib.sha256(data).hexdigest() != expected:
        raise DatasetError(f"{path}: not the vocabulary this dataset was made with "
                           f"(sha256 differs from {expected[:12]}... in {manifest.path})")
    return data


def read_vocabulary(manifest: Manifest, vocab_file: str | None = None) -> Vocabulary:
    """The vocabulary the dataset was made with (read_vocabulary_bytes), parsed
    as its tokenizer reads it: a WordPiece vocab.txt or a SentencePiece model."""
    return manifest.tokenizer.parse_vocabulary(read_vocabulary_bytes(manifest, vocab_file),
                                               source=vocab_file or manifest.vocab_path)


def pad_id(manifest: Manifest, vocabulary: Vocabulary | None = None) -> int:
    """The id input_ids are padded with: a tokenizer.json's pad token
    (RoBERTa's is 1, which its position ids count on), d2l's <pad>, else 0, as
    the original pads whatever the vocabulary. `vocabulary`: the dataset's,
    when it is parsed already."""
    if manifest.tokenizer.tokenizer_file:
        return (vocabulary or read_vocabulary(manifest)).pad_id
    if manifest.recipe == "d2l":
        return read_vocabulary_bytes(manifest).decode("utf-8").split("\n").index("<pad>")
    return 0
