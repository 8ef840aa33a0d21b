"""A dataset as its manifest describes it: shards, record counts, flags, vocabulary.

`manifest.json` is written last by the pipeline, so a location with one holds
a finished dataset. The loaders read it so that a user does not repeat
max_seq_length or max_predictions_per_seq, and so that every record has a
global index (shard order, then position) that seeds dynamic masking.
Its keys are defined here once (`DatasetManifest`), for the pipeline that
writes it and every reader.

Shard paths are looked up beside the manifest first and at their recorded
path second, so a dataset copied elsewhere (gs:// to local disk) still loads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from bert_pretraining_data.transforms.handoff import files
from bert_pretraining_data.transforms.split.held_out import SPLITS, TRAIN
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary
from bert_pretraining_data.transforms.write.formats import output_format
from bert_pretraining_data.transforms.write.formats.output_format import OutputFormat
from bert_pretraining_data.transforms.write.formats.tfrecord import TFRECORD
from bert_pretraining_data.transforms.write.shard_record import ShardRecord

MANIFEST_NAME = "manifest.json"
# In a refresh's --output_root: one line, the name of the newest complete
# version (pipeline.versions), the one a reader given the root reads.
LATEST_NAME = "LATEST"
# The manifest's layout; a reader of version 1 reads every manifest written so far.
FORMAT_VERSION = 1
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
    format: OutputFormat = TFRECORD  # what reads its records


# Flags a manifest records only since they exist: an older dataset was made
# as these say.
_FLAGS_OLDER_MANIFESTS_LACK = {
    "recipe": "bert", "output_format": "tfrecord", "masking": "static", "padding": "fixed",
    "next_sentence": "nsp", "whole_word_segmenter": "none", "ngram": 0,
    "favor_shorter_ngram": True, "max_ngram_size": 0}
# The dedup figures of a run that did not dedup (and of manifests older than --dedup).
NO_DEDUP = {"mode": "none"}


def manifest_format(output_format: str) -> str:
    """The manifest's `format`: its shards' file format, and FORMAT_VERSION
    to tell its own layout from a later one."""
    return f"bert-pretraining-{output_format}/{FORMAT_VERSION}"


def _implied_features(flags: dict[str, Any]) -> dict[str, str]:
    """The features of a bert dataset older than its manifest's record of
    them: the original's names (padded, or not with --padding=none)."""
    # the writer's, loaded only for such a manifest
    from bert_pretraining_data.transforms.write.tf_example import RecordLayout

    return RecordLayout(padded=flags["padding"] == "fixed").roles()


@dataclasses.dataclass(frozen=True)
class Packing:
    """A packed dataset's rows (--pack_sequences): their budgets, how many
    instances each holds and how full they are."""

    max_sequences_per_pack: int
    max_predictions_per_row: int
    rows: int
    instances: int
    tokens: int
    token_slots: int  # rows * max_seq_length
    filled: float  # tokens / token_slots, to 6 places
    rows_by_depth: dict[str, int]  # instances a row holds ("1", "2", ...) -> rows


@dataclasses.dataclass(frozen=True)
class VersionRecord:
    """A refresh's version's own two keys (pipeline.changes makes them): its
    documents' hash files, and what changed since the previous version (None
    for the first version under its root)."""

    documents: dict[str, Any]
    changes: dict[str, Any] | None


@dataclasses.dataclass(frozen=True)
class SplitRecord:
    """One split of a dataset with held-out splits (--validation_fraction,
    --test_fraction), each in a folder of its own named after it. Training's
    shards, features and packing are the manifest's own (so a reader that
    knows no splits reads training); a held-out split, written once per
    document and masked with a seed of its own, records its own."""

    fraction: float  # the share of documents its texts' hashes draw
    documents: int  # tokenized documents in it
    tokens: int  # their tokens
    instances: int
    near_copies_dropped: int  # training: documents dropped as near copies of held-out ones
    seed: int  # its instances' and masks' seed
    dupe_factor: int  # copies of each document
    masking: str  # static, or training's none
    shards: list[ShardRecord] | None = None  # held-out: its shards
    features: dict[str, str] | None = None
    schema: dict[str, str] | None = None
    packing: Packing | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SplitRecord":
        packing, shards = data.get("packing"), data.get("shards")
        return cls(**{**data, "packing": Packing(**packing) if packing else None,
                      "shards": [ShardRecord.from_json(s) for s in shards] if shards else shards})


@dataclasses.dataclass(frozen=True)
class DatasetManifest:
    """Every key of manifest.json, typed: a field per key, so that the
    pipeline that writes it and every reader name each key once, and the
    values an older manifest lacks are decided in one place (`from_json`)."""

    format: str  # manifest_format(): the shards' file format, the manifest's version
    flags: dict[str, Any]  # every flag of the run
    features: dict[str, str]  # bert: feature name on disk -> what it holds; d2l: {}
    vocab_sha256: str | None  # of the vocabulary the run used (None: not recorded)
    inputs: list[dict[str, Any]]  # each input file's path and bytes
    shards: list[ShardRecord]  # the writer's account of each shard, and its path
    total_instances: int  # a packed record holds several
    counters: dict[str, int]
    dedup: dict[str, Any]  # the dedup stage's figures
    input_problems: list[dict[str, Any]]  # inputs read in part, or not at all
    warnings: list[str]
    versions: dict[str, str]  # of Python, its Unicode database and the packages
    schema: dict[str, str] | None = None  # Parquet: each column's type; MDS: its encoding
    packing: Packing | None = None  # --pack_sequences
    refresh: VersionRecord | None = None  # a version written by a refresh
    splits: dict[str, SplitRecord] | None = None  # held-out splits: each split, training first
    decontamination: dict[str, Any] | None = None  # --decontaminate: what was removed
    mixture: dict[str, Any] | None = None  # --mixture: its sources and what each made
    tokenizer_engine: str | None = None  # --tokenizer_file: what encoded it (tokenizers, fastokens)

    def to_json(self) -> dict[str, Any]:
        """The manifest as written: a key per field that is set (a refresh's
        two at the top level; `changes` null for the first version)."""
        data = {key: value for key, value in dataclasses.asdict(self).items()
                if value is not None}
        data.update(data.pop("refresh", {}))
        data["shards"] = [shard.to_json() for shard in self.shards]
        if self.splits:
            data["splits"] = {name: {key: value for key, value in split.items()
                                     if value is not None}
                              for name, split in data["splits"].items()}
            for name, split in self.splits.items():
                if split.shards is not None:
                    data["splits"][name]["shards"] = [shard.to_json() for shard in split.shards]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "DatasetManifest":
        """Reads a manifest written by any version so far. What an older one
        lacks is what its run did: the flags it predates at their defaults,
        the original's features (their names by `padding`), total_instances
        its shards' records, no dedup, no input problems or warnings; what
        it did not record is empty (inputs, counters, versions) or None
        (vocab_sha256)."""
        flags = {**_FLAGS_OLDER_MANIFESTS_LACK, **data["flags"]}
        shards = [ShardRecord.from_json(shard) for shard in data["shards"]]
        packing = data.get("packing")
        documents = data.get("documents")
        return cls(
            format=data.get("format", manifest_format(flags["output_format"])),
            flags=flags,
            features=data["features"] if "features" in data else _implied_features(flags),
            vocab_sha256=data.get("vocab_sha256"),
            inputs=data.get("inputs", []),
            shards=shards,
            total_instances=data.get("total_instances", sum(s.records for s in shards)),
            counters=data.get("counters", {}),
            dedup=data.get("dedup", dict(NO_DEDUP)),
            input_problems=data.get("input_problems", []),
            warnings=data.get("warnings", []),
            versions=data.get("versions", {}),
            schema=data.get("schema"),
            packing=Packing(**{field.name: packing[field.name]
                               for field in dataclasses.fields(Packing)}) if packing else None,
            refresh=VersionRecord(documents, data["changes"]) if documents else None,
            splits={name: SplitRecord.from_json(split)
                    for name, split in data["splits"].items()} if "splits" in data else None,
            decontamination=data.get("decontamination"),
            mixture=data.get("mixture"), tokenizer_engine=data.get("tokenizer_engine"))

    @property
    def split_names(self) -> tuple[str, ...]:
        """The dataset's splits: ("train",) when it has no held-out split."""
        return tuple(name for name in SPLITS if name in self.splits) if self.splits else (TRAIN,)

    def split(self, name: str) -> "DatasetManifest":
        """The manifest as a reader of one split sees it: that split's shards,
        instances, features and packing, and the flags it was made with (a
        held-out split: one copy per document, its seed and masking)."""
        if name not in self.split_names:
            raise DatasetError(f"no split {name!r} in this dataset; it has "
                               f"{', '.join(self.split_names)}")
        if name == TRAIN:
            return self
        record = self.splits[name]
        return dataclasses.replace(
            self, shards=record.shards, total_instances=record.instances,
            features=record.features, schema=record.schema, packing=record.packing,
            flags={**self.flags, "dupe_factor": record.dupe_factor, "random_seed": record.seed,
                   "masking": record.masking})

    def all_shards(self) -> list[ShardRecord]:
        """Every split's shards, training's first (what publishing moves)."""
        held_out = [self.splits[name].shards for name in self.split_names[1:]]
        return [*self.shards, *(shard for shards in held_out for shard in shards)]

    @property
    def changes(self) -> dict[str, Any] | None:
        """What changed since the previous version (a refresh's), else None."""
        return self.refresh.changes if self.refresh else None

    @property
    def shard_bytes(self) -> int:
        """The shards' bytes together (a refresh compares its versions by them)."""
        return sum(s.bytes or 0 for s in self.all_shards())


@dataclasses.dataclass(frozen=True)
class Manifest:
    """A read manifest: its path, what it says to the reader of one split
    (`content`), its shards, resolved, and the whole manifest (`whole`:
    every split's figures)."""

    path: str
    content: DatasetManifest = dataclasses.field(repr=False)
    shards: tuple[Shard, ...]
    whole: DatasetManifest = dataclasses.field(repr=False)

    @property
    def flags(self) -> dict[str, Any]:
        return self.content.flags

    @property
    def held_out(self) -> bool:
        """Whether this is a held-out split's view (validation, test)."""
        return self.content is not self.whole

    @property
    def recipe(self) -> str:
        return self.flags["recipe"]

    @property
    def output_format(self) -> str:
        return self.flags["output_format"]

    def check_records(self) -> None:
        """Raises a one-line DatasetError where the shards hold no records
        these loaders read (a tokenized corpus, as Megatron-LM's)."""
        fmt = output_format(self.output_format)
        if not fmt.makes_instances:
            raise DatasetError(f"{self.path}: {fmt.not_read_here}")

    @property
    def masking(self) -> str:
        return self.flags["masking"]

    @property
    def padding(self) -> str:
        return self.flags["padding"]

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
        alike."""
        return dict(self.content.features)

    @property
    def total_records(self) -> int:
        """Records in the shards: instances, or packed rows."""
        return sum(s.records for s in self.shards)

    @property
    def total_instances(self) -> int:
        return self.content.total_instances

    @property
    def packing(self) -> Packing | None:
        """The packed rows' summary (--pack_sequences), else None."""
        return self.content.packing

    @property
    def packed(self) -> bool:
        return self.packing is not None

    @property
    def max_predictions_per_record(self) -> int:
        """Predictions a padded record has room for: max_predictions_per_seq,
        or a packed row's budget."""
        if self.packing:
            return self.packing.max_predictions_per_row
        return self.max_predictions_per_seq

    @property
    def max_sequences_per_record(self) -> int:
        return self.packing.max_sequences_per_pack if self.packing else 1

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
    (looked up in the pattern's directory); of a refresh's root, the manifest
    of the version its LATEST names."""
    if location.endswith(".json"):
        return location
    directory = location if files.is_dir(location) else files.dirname(location)
    found = files.join(directory, MANIFEST_NAME)
    latest = None if files.exists(found) else latest_version(directory)
    return files.join(directory, latest, MANIFEST_NAME) if latest else found


def latest_version(root: str) -> str | None:
    """The version a refresh's root's LATEST names (None: not a refresh's root)."""
    path = files.join(root, LATEST_NAME)
    return files.read_bytes(path).decode("utf-8").strip() if files.exists(path) else None


def published_versions(root: str) -> list[str]:
    """A refresh's root's versions that hold a manifest (a version is
    published manifest first; retention may be deleting older ones)."""
    return [name for name in files.list_names(root)
            if files.exists(files.join(root, name, MANIFEST_NAME))]


def _resolve_shard(recorded: str, base_dir: str, manifest_path: str, file: str = "") -> str:
    """A shard in the folder it was written in below `base_dir` (beside the
    manifest, or in its split's or its mixture source's folder), else at its
    recorded path; looked up by `file`, the suffix of the path of one of its
    files (an indexed dataset's `.idx`, an MDS shard set's `/shard...`)."""
    beside = files.join(base_dir, files.basename(recorded))
    folder = files.basename(files.dirname(recorded))  # a mixture's source's folder
    for candidate in (beside, files.join(base_dir, folder, files.basename(recorded)),
                      recorded):
        if files.exists(candidate + file):
            return candidate
    raise DatasetError(f"{manifest_path}: shard {files.basename(recorded)} is missing "
                       f"(looked in {base_dir} and at {recorded}); copy the whole dataset")


def read_manifest(location: str, split: str = TRAIN) -> Manifest:
    """Reads and checks the manifest at or for `location`, as a reader of
    `split` sees it (a dataset without held-out splits has only "train")."""
    path = find_manifest(location)
    if not files.exists(path):
        raise DatasetError(f"no {files.basename(path)} at {path}: a dataset written by "
                           "create-pretraining-data has one (it is written last, so a "
                           "directory without one holds no finished dataset)")
    try:
        whole = DatasetManifest.from_json(json.loads(files.read_bytes(path)))
        if "max_seq_length" not in whole.flags:  # in every manifest; not in another JSON
            raise KeyError("max_seq_length")
    except (ValueError, KeyError, TypeError) as err:
        raise DatasetError(f"{path}: not a manifest of create-pretraining-data "
                           f"({type(err).__name__}: {err})") from None
    content = whole.split(split)
    entries = sorted(content.shards, key=lambda s: s.shard)
    # a split's shards are in a folder named after it
    base_dir = files.join(files.dirname(path), split) if whole.splits else files.dirname(path)
    shards = []
    first = 0
    # an indexed dataset's shard is a prefix of its .bin and .idx, looked up by
    # the .idx; an MDS shard set a folder, read as its one shard file
    fmt = output_format(whole.flags["output_format"])
    data_file = fmt.data_file(whole.flags)
    for entry in entries:
        found = _resolve_shard(entry.path, base_dir, path, data_file[0])
        shards.append(Shard(found + data_file[1], entry.records, first, fmt))
        first += entry.records
    return Manifest(path=path, content=content, shards=tuple(shards), whole=whole)


def read_vocabulary_bytes(manifest: Manifest, vocab_file: str | None = None) -> bytes:
    """The vocabulary the dataset was made with, checked against its sha256.

    `vocab_file` overrides the recorded path (e.g. a local copy of a gs:// file).
    """
    path = vocab_file or manifest.vocab_path
    if not path or not files.exists(path):
        raise DatasetError(f"{manifest.path}: vocabulary {path!r} not found; pass "
                           "vocab_file= (--vocab_file) pointing at a copy of it")
    data = files.read_bytes(path)
    expected = manifest.content.vocab_sha256
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
