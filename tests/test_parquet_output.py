"""--output_format=parquet on a corpus not used in its development (UD English
EWT dev): the same instances as the TFRecord run, read back through Hugging
Face `datasets` (the independent reader), byte-identical across workers and
shuffle paths, a fraction of the bytes, and usable by the loaders and HF's
own collator."""

from __future__ import annotations

import collections
import pathlib

import numpy as np
import pytest

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.loaders.manifest import DatasetError, read_manifest
from bert_pretraining_data.loaders.records import read_instances
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.main import run

CORPUS = DATA / "en_ewt-ud-dev.sentences.txt"
OBJECTIVES = {
    "nsp": [],
    "sop_ngram": ["--next_sentence=sop", "--ngram=3"],
    "full_sequences": ["--next_sentence=none"],
    "electra": ["--next_sentence=none", "--masking=none"],
    "unmasked_nsp": ["--masking=none"],
    "packed": ["--pack_sequences"],
    "packed_full_sequences": ["--pack_sequences", "--next_sentence=none",
                              "--max_sequences_per_pack=4"],
}


def build(out: pathlib.Path, *flags: str) -> pathlib.Path:
    run([f"--input_file={CORPUS}", f"--output_dir={out}", f"--vocab_file={UNCASED_VOCAB}",
         "--dupe_factor=2", "--num_shards=2", *flags])
    return out


def _instances(out: pathlib.Path) -> list[tuple]:
    """The dataset's instances as the project's loaders read them (a packed
    row's in its order, with their place in it)."""
    return [(tuple(i.input_ids), tuple(i.segment_ids), tuple(i.masked_lm_positions),
             tuple(i.masked_lm_ids), i.next_sentence_label,
             None if i.token_boundary is None else tuple(i.token_boundary), i.sequence)
            for i in read_instances(read_manifest(str(out)))]


def _datasets_instances(out: pathlib.Path, **load) -> list[tuple]:
    import datasets

    files = sorted(str(p) for p in out.glob("part-*.parquet"))
    rows = datasets.load_dataset("parquet", data_files=files, split="train", **load)
    empty: tuple = ()
    return [(tuple(r["input_ids"]), tuple(r["segment_ids"]),
             tuple(r.get("masked_lm_positions", empty)), tuple(r.get("masked_lm_ids", empty)),
             r.get("next_sentence_labels"),
             tuple(r["token_boundary"]) if "token_boundary" in r else None, None)
            for r in rows]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[pathlib.Path, pathlib.Path]]:
    """(TFRecord run, Parquet run) per objective, same flags otherwise."""
    root = tmp_path_factory.mktemp("formats")
    return {name: (build(root / f"{name}-tfrecord", *flags),
                   build(root / f"{name}-parquet", *flags, "--output_format=parquet"))
            for name, flags in OBJECTIVES.items()}


def _datasets_rows(out: pathlib.Path) -> list[tuple]:
    """A packed dataset's instances as `datasets` reads the rows, taken apart
    by their sequence index (input_mask) as a trainer would."""
    import datasets

    files = sorted(str(p) for p in out.glob("part-*.parquet"))
    instances = []
    for row in datasets.load_dataset("parquet", data_files=files, split="train"):
        sequence_of = np.array(row["input_mask"])
        positions, ids = np.array(row["masked_lm_positions"]), np.array(row["masked_lm_ids"])
        for s in range(sequence_of.max()):
            where = np.flatnonzero(sequence_of == s + 1)
            start, end = where[0], where[-1] + 1
            assert row["positions"][start:end] == list(range(end - start))
            own = (positions >= start) & (positions < end)
            labels = row.get("next_sentence_labels")
            if labels is not None:
                assert row["next_sentence_positions"][s] == start
            instances.append((tuple(row["input_ids"][start:end]),
                              tuple(row["segment_ids"][start:end]),
                              tuple((positions[own] - start).tolist()),
                              tuple(ids[own].tolist()),
                              None if labels is None else labels[s], None, s))
    return instances


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_datasets_reads_the_tfrecord_runs_instances_in_shard_order(runs, objective):
    tfrecord, parquet = runs[objective]
    expected = _instances(tfrecord)
    got = (_datasets_rows if "packed" in objective else _datasets_instances)(parquet)
    assert collections.Counter(got) == collections.Counter(expected)
    assert got == expected  # shard by shard, in the TFRecord shards' order
    assert sorted(p.name for p in parquet.glob("part-*")) == [
        "part-00000-of-00002.parquet", "part-00001-of-00002.parquet"]
    assert read_manifest(str(parquet)).output_format == "parquet"
    assert _instances(parquet) == expected  # the project's loaders read it alike


def test_streaming_reads_the_same_rows(runs):
    tfrecord, parquet = runs["nsp"]
    assert _datasets_instances(parquet, streaming=True) == _instances(tfrecord)


def test_columns_are_unpadded_and_narrow(runs):
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, parquet = runs["sop_ngram"]
    schema = pq.read_schema(sorted(parquet.glob("part-*.parquet"))[0])
    assert schema.names == ["input_ids", "masked_lm_ids", "masked_lm_positions",
                            "next_sentence_labels", "segment_ids", "token_boundary"]
    assert schema.field("input_ids").type.value_type == pa.uint16()  # 30,522 ids
    assert schema.field("segment_ids").type.value_type == pa.uint8()
    assert schema.field("next_sentence_labels").type == pa.uint8()
    manifest = read_manifest(str(parquet)).content
    assert manifest.format == "bert-pretraining-parquet/1"
    assert manifest.schema == {field.name: str(field.type) for field in schema}


def test_parquet_is_at_most_a_third_of_the_tfrecord_bytes(runs):
    tfrecord, parquet = runs["nsp"]
    tf_bytes = sum(p.stat().st_size for p in tfrecord.glob("part-*"))
    pq_bytes = sum(p.stat().st_size for p in parquet.glob("part-*"))
    assert pq_bytes <= tf_bytes / 3, (pq_bytes, tf_bytes)


@pytest.mark.slow
def test_shards_are_byte_identical_across_workers_and_shuffle_paths(runs, tmp_path):
    _, reference = runs["nsp"]
    for name, flags in [("runner", ["--shuffle=runner"]),
                        ("two", ["--direct_num_workers=2",
                                 "--direct_running_mode=multi_processing", "--shuffle=files"])]:
        out = build(tmp_path / name, "--output_format=parquet", *flags)
        for shard in sorted(reference.glob("part-*")):
            assert (out / shard.name).read_bytes() == shard.read_bytes(), (name, shard.name)


_REWRITE = """
import hashlib, sys
import pyarrow.parquet as pq
from bert_pretraining_data.transforms.write.parquet_rows import parquet_file
shard = pq.ParquetFile(sys.argv[1])
tables = [shard.read_row_group(g) for g in range(shard.num_row_groups)]
print(hashlib.sha256(b"".join(parquet_file(lambda: iter(tables), shard.schema_arrow))).hexdigest())
"""


@pytest.mark.parametrize("threads", ["1", "4"])
def test_the_writers_bytes_do_not_depend_on_polars_threads(runs, threads):
    """Workers have as many polars threads as cores (POLARS_MAX_THREADS is read
    at import, hence a process each): the shard's rows, written again with 1
    or 4 threads, give the shard's bytes."""
    import hashlib
    import os
    import subprocess
    import sys

    _, parquet = runs["nsp"]
    shard = sorted(parquet.glob("part-*.parquet"))[0]
    digest = subprocess.run([sys.executable, "-c", _REWRITE, str(shard)], check=True,
                            capture_output=True, text=True,
                            env={**os.environ, "POLARS_MAX_THREADS": threads}).stdout.strip()
    assert digest == hashlib.sha256(shard.read_bytes()).hexdigest()


def test_a_shard_streams_out_as_it_is_written(uncased_vocab, monkeypatch):
    """The writer hands a shard's file over while it is written, so a worker
    holds a few row groups, not the shard: when the first piece reaches the
    shard's file, most row groups are not yet built; the pieces make the
    whole file, a row group of ROW_GROUP_ROWS rows at a time."""
    import io

    import pyarrow.parquet as pq

    from bert_pretraining_data.pipeline.options import parse_args
    from bert_pretraining_data.pipeline.stages import StageSettings
    from bert_pretraining_data.transforms.instances.units import FlatSample, unit_instances
    from bert_pretraining_data.transforms.handoff.tokenized_documents import compact_document
    from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
    from bert_pretraining_data.transforms.write import parquet_rows
    from bert_pretraining_data.transforms.handoff.shuffle.entries import scan_entries

    monkeypatch.setattr(parquet_rows, "ROW_GROUP_ROWS", 10)
    config, _ = parse_args([f"--input_file={CORPUS}", "--output_dir=unused",
                            f"--vocab_file={UNCASED_VOCAB}", "--output_format=parquet"])
    stages = StageSettings.of(config, uncased_vocab)
    tokenizer = FullTokenizer(uncased_vocab)
    documents = [(f"ewt:{number}", compact_document([tokenizer.tokenize_to_ids(line)
                                                     for line in text.splitlines()]))
                 for number, text in enumerate(CORPUS.read_text(encoding="utf-8")
                                               .split("\n\n")[:40])]
    batch, _ = unit_instances([(key, document, (0, 2)) for key, document in documents],
                              sample=FlatSample.of(documents), seed=11,
                              kernels=stages.instance_kernels())
    tables = []
    table = parquet_rows.ParquetRows._table
    monkeypatch.setattr(parquet_rows.ParquetRows, "_table",
                        lambda *args: tables.append(1) or table(*args))
    written = stages.rows.rows(*scan_entries(batch.entries))
    chunks = [bytes(next(written.chunks))]
    built_by_first = len(tables)
    chunks += [bytes(chunk) for chunk in written.chunks]
    metadata = pq.ParquetFile(io.BytesIO(b"".join(chunks))).metadata
    groups = -(-written.records // 10)
    assert written.records > 150 and metadata.num_rows == written.records
    assert metadata.num_row_groups == groups == len(tables)
    assert [metadata.row_group(g).num_rows for g in range(groups - 1)] == [10] * (groups - 1)
    assert built_by_first < groups // 2, (built_by_first, groups)


def test_a_writer_that_stops_ends_its_thread():
    """A shard's file that fails mid-way (a full disk) closes the chunks: the
    writer's thread ends rather than waiting on a reader that is gone."""
    import threading

    from bert_pretraining_data.transforms.write.parquet_rows import _streamed

    def write(sink):
        for _ in range(1000):
            sink.write(b"x" * 100)
    chunks = _streamed(write)
    assert bytes(next(chunks)) == b"x" * 100
    chunks.close()
    assert not [t for t in threading.enumerate() if t.name == "parquet-writer"]


def test_the_pytorch_loader_gives_the_tfrecord_runs_batches(runs):
    from bert_pretraining_data.loaders.torch_data import make_dataloader

    # unmasked: masked at load time, alike; packed: block-diagonal batches
    for objective in ("nsp", "unmasked_nsp", "packed"):
        tfrecord, parquet = runs[objective]
        for a, b in zip(make_dataloader(str(tfrecord), batch_size=16, seed=3),
                        make_dataloader(str(parquet), batch_size=16, seed=3)):
            assert a.keys() == b.keys()
            for key in a:
                assert np.array_equal(a[key].numpy(), b[key].numpy()), (objective, key)


def test_hf_collator_trains_a_tiny_bert_on_unmasked_rows(runs):
    """datasets + HF's DataCollatorForLanguageModeling, as a run_mlm.py user
    would read --masking=none Parquet data, into a BertForPreTraining step."""
    import datasets
    import torch
    import transformers

    _, parquet = runs["unmasked_nsp"]
    rows = datasets.load_dataset("parquet", data_files=sorted(
        str(p) for p in parquet.glob("part-*.parquet")), split="train")
    rows = rows.rename_columns({"segment_ids": "token_type_ids",
                                "next_sentence_labels": "next_sentence_label"})
    rows = rows.remove_columns(["masked_lm_positions", "masked_lm_ids"])
    from tokenizers.implementations import BertWordPieceTokenizer

    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=BertWordPieceTokenizer(str(UNCASED_VOCAB), lowercase=True),
        unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]", cls_token="[CLS]",
        mask_token="[MASK]")
    assert len(tokenizer) == 30522
    collate = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    batch = collate([rows[i] for i in range(8)])
    assert (batch["labels"] != -100).any()
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(transformers.BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128))
    loss = model(**batch).loss
    loss.backward()
    assert np.isfinite(loss.item()) and loss.item() > 1


def test_tf_dataset_refuses_parquet_in_one_line(runs):
    from bert_pretraining_data.loaders.tf_data import tf_dataset

    _, parquet = runs["nsp"]
    with pytest.raises(DatasetError, match="Parquet shards") as err:
        tf_dataset(str(parquet), batch_size=2)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("flags, expected", [
    (["--output_format=orc"], "--output_format"),
    (["--output_format=parquet", "--reference_compatible"], "--reference_compatible"),
    (["--output_format=parquet", "--compression=gzip"], "compresses inside each file"),
    (["--output_format=parquet", "--gzip_compress"], "compresses inside each file"),
    (["--output_format=parquet", "--padding=fixed"], "drop --padding=fixed"),
    (["--parquet_compression=snappy"], "applies to --output_format=parquet"),
    (["--output_format=megatron", "--parquet_compression=snappy"],
     "applies to --output_format=parquet"),
    (["--output_format=parquet", "--parquet_compression=lzma"], "--parquet_compression"),
    (["--output_format=parquet", "--recipe=d2l"], "--recipe=d2l writes d2l's TFRecord"),
    (["--output_format=parquet", "--output_file={out}/train.parquet"], "use --output_dir"),
])
def test_flags_parquet_cannot_take_are_refused_in_one_line(tmp_path, flags, expected):
    out = tmp_path / "out"
    flags = [flag.format(out=out) for flag in flags]
    where = ([] if any(flag.startswith("--output_file=") for flag in flags)
             else [f"--output_dir={out}"])
    with pytest.raises(ConfigError) as err:
        run([f"--input_file={CORPUS}", *where, f"--vocab_file={UNCASED_VOCAB}", *flags])
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert not out.exists()


def test_parquet_without_polars_is_refused_in_one_line(tmp_path, monkeypatch):
    from bert_pretraining_data.transforms.write import parquet_rows

    monkeypatch.setattr(parquet_rows, "polars_installed", lambda: False)
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=r"writes with polars.*pip install") as err:
        run([f"--input_file={CORPUS}", f"--output_dir={out}", f"--vocab_file={UNCASED_VOCAB}",
             "--output_format=parquet"])
    assert "\n" not in str(err.value) and not out.exists()


def test_a_slice_of_a_shard_reads_the_same_instances(runs, monkeypatch):
    """A rank's or worker's slice [start, stop) of a shard, as the PyTorch
    loader reads it, is the TFRecord shard's slice, across batch boundaries
    (batches of 100 rows here, whole batches before `start` skipped)."""
    from bert_pretraining_data.loaders.records import InstanceDecoder, read_shard
    from bert_pretraining_data.transforms.write.formats import parquet

    monkeypatch.setattr(parquet, "BATCH_ROWS", 100)
    tfrecord, parquet = (read_manifest(str(out)) for out in runs["nsp"])
    start, stop = 297, 405
    assert parquet.shards[0].records > stop
    decode, decode_tfrecord = InstanceDecoder.of(parquet), InstanceDecoder.of(tfrecord)
    got = [decode(record, index) for index, record in read_shard(parquet.shards[0], start, stop)]
    expected = [decode_tfrecord(record, index)
                for index, record in read_shard(tfrecord.shards[0], start, stop)]
    assert [i.index for i in got] == list(range(start, stop))
    assert [(i.index, i.input_ids.tolist(), i.masked_lm_ids.tolist()) for i in got] == [
        (i.index, i.input_ids.tolist(), i.masked_lm_ids.tolist()) for i in expected]


def test_duckdb_reads_a_datasets_statistics_in_one_query(runs):
    """The SQL recipe of docs/loaders.md over the shards: instances, tokens,
    masked tokens and random-next instances, which the manifest counted as
    the run made them."""
    import duckdb

    out = runs["nsp"][1]
    manifest = read_manifest(str(out))
    ((instances, tokens, masked, random_next),) = duckdb.sql(f"""
        SELECT count(*), sum(len(input_ids)), sum(len(masked_lm_ids)),
               sum(next_sentence_labels)
        FROM read_parquet('{out}/part-*.parquet')""").fetchall()
    counters = manifest.content.counters
    assert instances == manifest.total_instances == counters["instances"]
    assert masked == counters["masked_tokens"]
    assert random_next == counters["random_next_instances"]
    assert tokens == sum(len(i.input_ids) for i in read_instances(manifest))
