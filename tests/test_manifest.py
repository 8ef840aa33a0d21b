"""The typed manifest (loaders.manifest.DatasetManifest): today's manifest.json
files read and write back unchanged, older ones read with the defaults their
runs had, and a run writes exactly the manifest it was given to publish."""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.loaders.manifest import (DatasetManifest, Packing, manifest_format,
                                                    read_manifest)

MANIFESTS = DATA / "manifests"  # written by the pipeline before the typed manifest
FIXTURES = ("tfrecord.json", "parquet_packed.json", "refresh.json")


def _fixture(name: str) -> dict:
    return json.loads((MANIFESTS / name).read_text())


@pytest.mark.parametrize("name", FIXTURES)
def test_todays_manifests_read_and_write_back_unchanged(name):
    text = (MANIFESTS / name).read_text()
    written = DatasetManifest.from_json(json.loads(text)).to_json()
    assert written == json.loads(text)
    assert json.dumps(written, indent=2, sort_keys=True) + "\n" == text


def test_todays_manifests_read_as_typed_values():
    plain = DatasetManifest.from_json(_fixture("tfrecord.json"))
    assert (plain.schema, plain.packing, plain.refresh, plain.changes) == (None, None, None, None)
    assert plain.format == manifest_format("tfrecord")
    assert plain.total_instances == 122 and plain.shard_bytes == 100312

    packed = DatasetManifest.from_json(_fixture("parquet_packed.json"))
    assert packed.format == manifest_format("parquet")
    assert isinstance(packed.packing, Packing)
    assert (packed.packing.max_predictions_per_row, packed.packing.rows,
            packed.packing.rows_by_depth) == (21, 107, {"1": 92, "2": 15, "3": 0})
    assert packed.schema["input_ids"] == "large_list<element: uint16 not null>"

    version = DatasetManifest.from_json(_fixture("refresh.json"))
    assert version.refresh is not None and version.changes is None  # a root's first version
    assert version.refresh.documents["count"] == 3
    assert "changes" in version.to_json() and version.to_json()["changes"] is None


def test_an_older_manifest_reads_with_the_defaults_of_its_run():
    today = _fixture("tfrecord.json")
    older = copy.deepcopy(today)
    for key in ("features", "total_instances", "dedup", "input_problems", "warnings",
                "vocab_sha256"):
        del older[key]
    for flag in ("recipe", "output_format", "masking", "padding", "next_sentence",
                 "whole_word_segmenter", "ngram", "favor_shorter_ngram", "max_ngram_size"):
        del older["flags"][flag]
    read = DatasetManifest.from_json(older)
    # today's run had every default, so its record is what the older one implies
    assert read.flags == today["flags"]
    assert read.features == today["features"]  # the original's names, padded
    assert read.total_instances == sum(s["records"] for s in today["shards"]) == 122
    assert read.dedup == {"mode": "none"}
    assert (read.input_problems, read.warnings, read.vocab_sha256) == ([], [], None)
    assert "vocab_sha256" not in read.to_json()


def test_an_older_unpadded_manifest_implies_the_unpadded_features():
    older = _fixture("tfrecord.json")
    del older["features"]
    older["flags"]["padding"] = "none"
    features = DatasetManifest.from_json(older).features
    assert "input_mask" not in features and features["input_ids"] == "input_ids"


def test_read_manifest_holds_the_typed_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text((MANIFESTS / "parquet_packed.json").read_text())
    (tmp_path / "part-00000-of-00001.parquet").write_bytes(b"")  # resolved beside it
    manifest = read_manifest(str(tmp_path))
    assert manifest.content == DatasetManifest.from_json(_fixture("parquet_packed.json"))
    assert (manifest.recipe, manifest.output_format, manifest.padding) == (
        "bert", "parquet", "none")
    assert (manifest.total_instances, manifest.total_records) == (122, 107)
    assert (manifest.max_predictions_per_record, manifest.max_sequences_per_record) == (21, 3)


@pytest.mark.slow
def test_a_run_writes_the_manifest_it_publishes(tmp_path, monkeypatch):
    from bert_pretraining_data.pipeline import main as main_module

    published = []
    real_publish = main_module.publish

    def recording(output, manifest, **kwargs):
        published.append(manifest)
        real_publish(output, manifest, **kwargs)

    monkeypatch.setattr(main_module, "publish", recording)
    out = tmp_path / "out"
    result = main_module.run([f"--input_file={DATA / 'sample_text.txt'}",
                              f"--vocab_file={UNCASED_VOCAB}", f"--output_dir={out}",
                              "--dupe_factor=1", "--output_format=parquet", "--pack_sequences"])
    (manifest,) = published
    text = pathlib.Path(result.pop("manifest_path")).read_text()
    assert text == json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n"
    assert result == manifest.to_json() == json.loads(text)
    assert manifest.packing is not None and manifest.schema is not None
    assert set(result) == set(_fixture("parquet_packed.json"))  # today's keys, no other


def test_a_shard_entry_is_a_typed_record_that_writes_back_its_keys():
    """A shard's entry is a ShardRecord (transforms.write.shard_record), read
    and written in one place: its fields typed, its row writer's figures
    beside them, and every key written back as read, a Megatron pair's files,
    the reference run's entry without bytes and a held-out split's shards
    included."""
    fixture = _fixture("parquet_packed.json")
    shard, entry = DatasetManifest.from_json(fixture).shards[0], fixture["shards"][0]
    assert (shard.shard, shard.name, shard.records, shard.bytes, shard.sha256, shard.path) == (
        entry["shard"], entry["name"], entry["records"], entry["bytes"], entry["sha256"],
        entry["path"])
    assert (shard.instances, shard.tokens) == (entry["instances"], entry["tokens"])
    assert shard.figures == {"instances": entry["instances"], "tokens": entry["tokens"],
                             "rows_by_depth": entry["rows_by_depth"]}
    assert shard.file_digests([""]) == [(entry["bytes"], entry["sha256"])]

    pair = {"shard": 1, "name": "shard-00001", "records": 7, "documents": 2, "tokens": 90,
            "bytes": 1100, "path": "/out/part-00001-of-00002",
            "files": {"bin": {"bytes": 1000, "sha256": "ab"}, "idx": {"bytes": 100, "sha256": "cd"}}}
    reference = {"shard": 0, "name": "shard-00000", "records": 5, "path": "/out/a.tfrecord"}
    today = _fixture("tfrecord.json")
    split = {"fraction": 0.1, "documents": 3, "tokens": 40, "instances": 5, "seed": 7,
             "near_copies_dropped": 0, "dupe_factor": 1, "masking": "static"}
    with_splits = {**today, "shards": [reference], "splits": {
        "train": {**split, "fraction": 0.9}, "validation": {**split, "shards": [pair]}}}
    manifest = DatasetManifest.from_json(with_splits)
    assert manifest.to_json() == with_splits
    held_out = manifest.splits["validation"].shards[0]
    assert held_out.file_digests(["bin", "idx"]) == [(1000, "ab"), (100, "cd")]
    assert (held_out.records, held_out.tokens, held_out.figures["documents"]) == (7, 90, 2)
    assert manifest.shards[0].instances == 5 and manifest.shards[0].file_digests([""]) == [None]
