"""A mixture's per-instance source id: stamped on the shuffle entries
(transforms.handoff.shuffle.instances.stamp_source), written by every row
writer as the `source` feature or column (one value per sequence), and read
back by the loaders (records, the PyTorch collator, tf.data); entries and
records without it are today's."""

from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

from bert_pretraining_data.loaders.manifest import Shard, read_manifest
from bert_pretraining_data.loaders.records import (InstanceDecoder, decode_example, read_instances,
                                                   read_shard, sequences_of)
from bert_pretraining_data.loaders.tf_data import tf_dataset
from bert_pretraining_data.loaders.torch_data import IGNORE_INDEX, Collator, make_dataloader
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.pipeline.stages import StageSettings, record_layout
from bert_pretraining_data.transforms.handoff.shuffle.entries import (ENTRY_HEADER, EntryBatch,
                                                                      scan_entries)
from bert_pretraining_data.transforms.handoff.shuffle.instances import (HEADER_SIZE, entry_source,
                                                                       entry_tokens, stamp_source)
from bert_pretraining_data.transforms.handoff.tokenized_documents import compact_document
from bert_pretraining_data.transforms.instances.units import FlatSample, unit_instances
from bert_pretraining_data.transforms.pack.plan import prediction_budget
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
from bert_pretraining_data.transforms.write.formats.parquet import PARQUET
from bert_pretraining_data.transforms.write.parquet_rows import ParquetRows
from bert_pretraining_data.transforms.write.rows import InstanceRows, PackedRows
from bert_pretraining_data.transforms.write.tf_example import RecordLayout
from bert_pretraining_data.transforms.write.tfrecord import read_records
from conftest import DATA, UNCASED_VOCAB

SEQ, PREDICTIONS, DEPTH = 64, 10, 3
# 300: both bytes of the entry's uint16, and a two-byte varint in a record.
SOURCES = (0, 300, 2)
FLAGS = [f"--input_file={DATA / 'sample_text.txt'}", f"--vocab_file={UNCASED_VOCAB}",
         "--output_dir=unused", f"--max_seq_length={SEQ}",
         f"--max_predictions_per_seq={PREDICTIONS}", "--short_seq_prob=0.3"]


@dataclasses.dataclass(frozen=True)
class Corpus:
    """Each source's instances (its own copies of the documents), unstamped."""

    batches: list[EntryBatch]
    stages: StageSettings
    vocab_size: int

    def joined(self, stamped: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(entries, keys, bounds) of every source's batch, stamped with its source or not."""
        batches = ([stamp_source(b, s) for b, s in zip(self.batches, SOURCES)] if stamped
                   else self.batches)
        return scan_entries(np.concatenate([b.entries for b in batches]))

    @property
    def source_of_entry(self) -> np.ndarray:
        return np.repeat(SOURCES, [len(b) for b in self.batches])


@pytest.fixture(scope="module")
def corpus(uncased_vocab) -> Corpus:
    config, _ = parse_args(FLAGS)
    stages = StageSettings.of(config, uncased_vocab)
    tokenizer = FullTokenizer(uncased_vocab)
    text = (DATA / "sample_text.txt").read_text(encoding="utf-8")
    documents = [(f"sample:{i}", compact_document([tokenizer.tokenize_to_ids(line)
                                                   for line in document.splitlines()]))
                 for i, document in enumerate(text.split("\n\n"))]
    sample = FlatSample.of(documents)
    batches = [unit_instances([(key, document, (4 * s, 4 * s + 4)) for key, document in documents],
                              sample=sample, kernels=stages.instance_kernels(), seed=12345)[0]
               for s in range(len(SOURCES))]
    assert min(len(b) for b in batches) > 20
    return Corpus(batches, stages, len(uncased_vocab))


def _writers(corpus: Corpus) -> dict:
    budget = prediction_budget(corpus.stages.masking, SEQ, DEPTH)
    packed = PackedRows(RecordLayout(packed=True), SEQ, budget, DEPTH)
    unpadded_packed = PackedRows(RecordLayout(packed=True, padded=False), SEQ, budget, DEPTH)
    unpadded = InstanceRows(RecordLayout(padded=False), SEQ, PREDICTIONS)
    return {"padded": InstanceRows(RecordLayout(), SEQ, PREDICTIONS), "unpadded": unpadded,
            "packed": packed, "packed_unpadded": unpadded_packed,
            "parquet": ParquetRows(unpadded, corpus.vocab_size),
            "parquet_packed": ParquetRows(unpadded_packed, corpus.vocab_size)}


WRITERS = ("padded", "unpadded", "packed", "packed_unpadded", "parquet", "parquet_packed")


def _with_source(rows, source: bool):
    """The row writer with the source feature on or off."""
    if isinstance(rows, ParquetRows):
        return dataclasses.replace(rows, instances=_with_source(rows.instances, source))
    return dataclasses.replace(rows, layout=dataclasses.replace(rows.layout, source=source))


def _layout(rows) -> RecordLayout:
    return (rows.instances if isinstance(rows, ParquetRows) else rows).layout


def _written(rows, entries, keys, bounds) -> tuple[bytes, int]:
    result = rows.rows(entries, keys, bounds)
    return b"".join(bytes(chunk) for chunk in result.chunks), result.records


def _decoded(rows, data: bytes, records: int, tmp_path) -> list:
    """The records the writer wrote, as the loaders decode them (Instances or Rows)."""
    layout = _layout(rows)
    decode = InstanceDecoder("packed" if layout.packed else "bert", layout.roles())
    if isinstance(rows, ParquetRows):
        path = tmp_path / "shard.parquet"
        path.write_bytes(data)
        return [decode(features, index)
                for index, features in read_shard(Shard(str(path), records, 0, PARQUET))]
    return [decode(record, index) for index, record in enumerate(read_records(io.BytesIO(data)))]


def _content(instance) -> tuple:
    """Every feature of an instance but its source."""
    boundary = None if instance.token_boundary is None else tuple(instance.token_boundary)
    return (tuple(instance.input_ids), tuple(instance.segment_ids),
            tuple(instance.masked_lm_positions), tuple(instance.masked_lm_ids),
            instance.next_sentence_label, boundary, instance.sequence)


def _expected_sources(rows, corpus: Corpus, entries, keys, bounds) -> list[int]:
    """Each written instance's source, in the shard's order: its entry's."""
    plan = (rows.instances if isinstance(rows, ParquetRows) else rows).plan(entries, keys, bounds)
    return corpus.source_of_entry[plan.members].tolist()


# --- the entries ------------------------------------------------------------------------------

def test_stamping_inserts_the_id_after_the_header_keeping_keys_and_order(corpus):
    batch = corpus.batches[0]
    stamped = stamp_source(batch, 300)
    assert len(stamped) == len(batch)
    assert np.array_equal(stamped.keys, batch.keys)
    entries, keys, bounds = scan_entries(stamped.entries)  # the lengths are consistent
    assert np.array_equal(keys, batch.keys) and np.array_equal(bounds, stamped.bounds)
    for i in range(len(batch)):
        before = batch.entries[batch.bounds[i]:batch.bounds[i + 1]].tobytes()
        after = stamped.entries[stamped.bounds[i]:stamped.bounds[i + 1]].tobytes()
        header = ENTRY_HEADER + HEADER_SIZE
        assert len(after) == len(before) + 2
        assert after[:8] == before[:8]  # the shuffle key
        assert int.from_bytes(after[8:12], "little") == len(before) - ENTRY_HEADER + 2
        assert after[ENTRY_HEADER] == before[ENTRY_HEADER] | 4
        assert after[ENTRY_HEADER + 1:header] == before[ENTRY_HEADER + 1:header]
        assert after[header:header + 2] == (300).to_bytes(2, "little")
        assert after[header + 2:] == before[header:]
    assert batch.entries[batch.bounds[0] + ENTRY_HEADER] & 4 == 0  # the batch is untouched


def test_stamping_refuses_what_it_cannot_stamp(corpus):
    with pytest.raises(ValueError, match="65535"):
        stamp_source(corpus.batches[0], 1 << 16)
    with pytest.raises(ValueError, match="already"):
        stamp_source(stamp_source(corpus.batches[0], 1), 1)
    empty = stamp_source(EntryBatch.of([]), 5)
    assert len(empty) == 0 and empty.entries.size == 0


def test_a_batch_tells_its_source_and_tokens(corpus, tmp_path):
    rows = _writers(corpus)["unpadded"]
    for batch, source in zip(corpus.batches, SOURCES):
        stamped = stamp_source(batch, source)
        assert entry_source(stamped) == source
        written = _decoded(rows, *_written(rows, *scan_entries(batch.entries)), tmp_path)
        tokens = sum(len(i.input_ids) for i in written)
        assert entry_tokens(stamped) == entry_tokens(batch) == tokens > 0
    with pytest.raises(ValueError, match="without source ids"):
        entry_source(corpus.batches[0])
    entries, keys, bounds = corpus.joined(stamped=True)
    with pytest.raises(ValueError, match=r"several sources: \[0, 2, 300\]"):
        entry_source(EntryBatch(keys=keys, entries=entries, bounds=bounds))


# --- the row writers --------------------------------------------------------------------------

@pytest.mark.parametrize("writer", WRITERS)
def test_records_carry_each_instances_source(corpus, writer, tmp_path):
    rows = _writers(corpus)[writer]
    stamped, plain = corpus.joined(stamped=True), corpus.joined(stamped=False)
    on = _decoded(_with_source(rows, True), *_written(_with_source(rows, True), *stamped),
                  tmp_path)
    off = _decoded(rows, *_written(rows, *plain), tmp_path)
    instances = [i for item in on for i in sequences_of(item)]
    assert [i.source for i in instances] == _expected_sources(rows, corpus, *stamped)
    assert {i.source for i in instances} == set(SOURCES)
    # the same instances in the same rows, only with their source
    assert [[_content(i) for i in sequences_of(item)] for item in on] == [
        [_content(i) for i in sequences_of(item)] for item in off]
    assert all(i.source is None for item in off for i in sequences_of(item))
    if _layout(rows).packed:  # a row's sequences keep their own sources
        assert any(len({i.source for i in row.sequences}) > 1 for row in on)


@pytest.mark.parametrize("writer", WRITERS)
def test_without_the_feature_stamped_entries_write_todays_bytes(corpus, writer):
    rows = _writers(corpus)[writer]
    plain, _ = _written(rows, *corpus.joined(stamped=False))
    stamped, _ = _written(rows, *corpus.joined(stamped=True))
    assert stamped == plain and len(plain) > 1000


@pytest.mark.parametrize("writer", WRITERS)
def test_records_with_the_feature_need_stamped_entries(corpus, writer):
    rows = _with_source(_writers(corpus)[writer], True)
    with pytest.raises(ValueError, match="without a source id"):
        _written(rows, *corpus.joined(stamped=False))


def _as_tensorflow_would(features: dict) -> bytes:
    feature = {name: tf.train.Feature(float_list=tf.train.FloatList(value=values))
               if values.dtype == np.float32 else
               tf.train.Feature(int64_list=tf.train.Int64List(value=values))
               for name, values in features.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
        deterministic=True)


@pytest.mark.parametrize("writer", ("padded", "unpadded", "packed", "packed_unpadded"))
def test_the_source_feature_is_a_padded_per_sequence_int64_list(corpus, writer):
    rows = _writers(corpus)[writer]
    layout = _layout(rows)
    on, _ = _written(_with_source(rows, True), *corpus.joined(stamped=True))
    off, _ = _written(rows, *corpus.joined(stamped=False))
    expected = _expected_sources(rows, corpus, *corpus.joined(stamped=True))
    taken = 0
    for with_source, without in zip(read_records(io.BytesIO(on)), read_records(io.BytesIO(off))):
        features = decode_example(with_source)
        source = features.pop("source")
        assert features.keys() == decode_example(without).keys()
        assert all(np.array_equal(v, decode_example(without)[k]) for k, v in features.items())
        sequences = (int(features["input_mask"].max()) if layout.packed else 1)
        assert source.tolist()[:sequences] == expected[taken:taken + sequences]
        # padded like next_sentence_labels: to the row's sequences, with zeros
        assert len(source) == (DEPTH if layout.packed and layout.padded else sequences)
        assert not source[sequences:].any()
        taken += sequences
        assert with_source == _as_tensorflow_would(decode_example(with_source))
    assert taken == len(expected)


@pytest.mark.parametrize("packed", [False, True])
def test_the_source_column_is_uint16_a_list_when_packed(corpus, packed):
    rows = _with_source(_writers(corpus)["parquet_packed" if packed else "parquet"], True)
    data, _ = _written(rows, *corpus.joined(stamped=True))
    kind = pq.read_schema(io.BytesIO(data)).field("source").type
    assert str(kind) == ("large_list<element: uint16 not null>" if packed else "uint16")


def test_record_layout_asks_for_the_source_with_a_mixture():
    config, _ = parse_args(FLAGS)
    assert not record_layout(config).source
    assert "source" not in record_layout(config).roles()
    mixed = record_layout(dataclasses.replace(config, mixture="mixture.json"))
    assert mixed.source and mixed.roles()["source"] == "source"
    assert dataclasses.replace(mixed, source=False) == record_layout(config)


# --- the loaders, over a dataset on disk ------------------------------------------------------

def _dataset(corpus: Corpus, rows, directory, *, stamped: bool = True) -> list[int]:
    """A one-shard dataset of the rows' records, with the manifest the loaders
    read; returns each instance's source in the shard's order."""
    rows = _with_source(rows, stamped)
    layout = _layout(rows)
    parquet = isinstance(rows, ParquetRows)
    result = rows.rows(*corpus.joined(stamped))
    name = "shard-0.parquet" if parquet else "shard-0.tfrecord"
    (directory / name).write_bytes(b"".join(bytes(chunk) for chunk in result.chunks))
    manifest = {
        "flags": {"max_seq_length": SEQ, "max_predictions_per_seq": PREDICTIONS,
                  "padding": "fixed" if layout.padded else "none", "masking": "static",
                  "random_seed": 7, "vocab_file": str(UNCASED_VOCAB),
                  "output_format": "parquet" if parquet else "tfrecord"},
        "features": layout.roles(),
        "shards": [{"shard": 0, "path": name, "records": result.records}]}
    if layout.packed:
        stats = result.stats
        manifest["packing"] = {
            "max_sequences_per_pack": DEPTH, "max_predictions_per_row": rows.max_predictions,
            "rows": result.records, "instances": stats["instances"], "tokens": stats["tokens"],
            "token_slots": result.records * SEQ, "filled": 0.0,
            "rows_by_depth": {str(d + 1): n for d, n in enumerate(stats["rows_by_depth"])}}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return _expected_sources(rows, corpus, *corpus.joined(stamped))


@pytest.mark.parametrize("writer", WRITERS)
def test_the_loaders_read_each_instances_source(corpus, writer, tmp_path):
    rows = _writers(corpus)[writer]
    expected = _dataset(corpus, rows, tmp_path)
    assert [i.source for i in read_instances(read_manifest(str(tmp_path)))] == expected
    batches = list(make_dataloader(str(tmp_path), batch_size=8, shuffle=False))
    if not _layout(rows).packed:  # style "hf": an id per instance
        assert all(b["source"].shape == b["input_ids"].shape[:1] for b in batches)
        assert np.concatenate([b["source"].numpy() for b in batches]).tolist() == expected
    else:  # style "blocks": an id per sequence, -100 where a row has fewer
        sources = [b["source"] for b in batches]
        assert all(s.shape == b["next_sentence_positions"].shape
                   for s, b in zip(sources, batches))
        for source, batch in zip(sources, batches):  # a token's: source[r, sequence_ids - 1]
            depth = batch["sequence_ids"].max(dim=1).values
            assert ((source != IGNORE_INDEX).sum(dim=1) == depth).all()
        assert [v for s in sources for v in s.flatten().tolist() if v != IGNORE_INDEX] == expected
    # style "flat": every sequence side by side, an id each
    items = list(make_dataloader(str(tmp_path), batch_size=8, shuffle=False).dataset)
    flat = Collator.for_dataset(str(tmp_path), style="flat")(items)
    assert flat["source"].tolist() == expected
    assert flat["source"].shape == flat["next_sentence_positions"].shape


@pytest.mark.parametrize("writer", ("padded", "unpadded", "packed", "packed_unpadded"))
def test_tf_data_parses_the_source_per_sequence(corpus, writer, tmp_path):
    rows = _writers(corpus)[writer]
    expected = _dataset(corpus, rows, tmp_path)
    depth = DEPTH if _layout(rows).packed else 1
    batches = list(tf_dataset(str(tmp_path), batch_size=8, training=False))
    assert all(b["source"].shape[1:] == [depth] and b["source"].dtype == tf.int32
               for b in batches)
    values = np.concatenate([b["source"].numpy() for b in batches])
    if _layout(rows).packed:  # real sequences: by next_sentence_weights (the [CLS] of each)
        weights = np.concatenate([b["next_sentence_weights"].numpy() for b in batches])
        assert not values[weights == 0].any()
        values = values[weights > 0]
    assert values.flatten().tolist() == expected


@pytest.mark.parametrize("writer", ("padded", "packed", "parquet"))
def test_datasets_without_sources_load_as_before(corpus, writer, tmp_path):
    rows = _writers(corpus)[writer]
    _dataset(corpus, rows, tmp_path, stamped=False)
    assert all(i.source is None for i in read_instances(read_manifest(str(tmp_path))))
    batch = next(iter(make_dataloader(str(tmp_path), batch_size=8, shuffle=False)))
    assert "source" not in batch
    if writer != "parquet":
        assert "source" not in next(iter(tf_dataset(str(tmp_path), batch_size=8,
                                                    training=False)))
