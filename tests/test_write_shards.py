"""TFRecord framing and the deterministic, memory-bounded shard writer."""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import subprocess
import sys

import apache_beam as beam
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import BeamAssertException, assert_that, equal_to

from bert_pretraining_data.transforms.handoff.shuffle.entries import (EntryBatch, scan_entries,
                                                                      shard_of, split_by_shard)
from bert_pretraining_data.transforms.randomness import stable_hash as shuffle_key
from bert_pretraining_data.transforms.write import beam as beam_module
from bert_pretraining_data.transforms.write import rows as rows_module, tfrecord
from bert_pretraining_data.transforms.write.beam import (SHARDS, WriteShards, _DeleteBucketsFn,
                                                         _WriteShardFn, bucket_dir, bucket_path,
                                                         file_digest, read_tfrecord_file,
                                                         shard_path, write_shard_file)
from bert_pretraining_data.transforms.write.rows import RawRecords
from bert_pretraining_data.transforms.write.shard_record import ShardRecord
from bert_pretraining_data.transforms.write.tfrecord import frame_record, read_records, write_record
from helpers.records import encode_example

RECORDS = [b"", b"x", b"hello world", bytes(range(256)) * 40, b"\x00" * 70000]


def tf_read(path: str, compression_type: str = "") -> list[bytes]:
    return [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression_type)]


# --- TFRecord framing ----------------------------------------------------------------


# Lengths at the instruction kernel's edges: its three streams take 384 bytes
# (3 x 128) and 3,072 (3 x 1,024) at a time, then 8 bytes an instruction, then 1.
EDGES = [0, 1, 7, 8, 9, 383, 384, 385, 391, 392, 767, 768, 3071, 3072, 3073, 3456, 3463,
         6144 + 384 + 7, 9000]


def test_frame_checksums_with_the_cpus_crc32_instruction():
    """CI's machine and Dataflow's workers are x86-64 with SSE 4.2."""
    assert tfrecord._crc32c is tfrecord._crc32c_instruction


def _check_kernels(data: bytes, start: int) -> None:
    import google_crc32c
    import numpy as np

    array = np.frombuffer(data, dtype=np.uint8)
    expected = google_crc32c.value(data[start:])
    assert tfrecord._crc32c_instruction(array, start, len(array)) == expected
    assert tfrecord._crc32c_tables(array, start, len(array)) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=10_000), st.integers(0, 9))
def test_both_crc32c_kernels_are_google_crc32cs(data, start):
    _check_kernels(data, min(start, len(data)))


def test_both_crc32c_kernels_hold_at_the_streams_edges():
    rng = random.Random(7)
    for length in EDGES:
        for start in (0, 3):
            _check_kernels(rng.randbytes(start + length), start)


@pytest.mark.slow
def test_the_kernels_hold_for_numbas_generic_cpu_too(tmp_path):
    """The Flex Template image compiles for NUMBA_CPU_NAME=generic, which knows
    no SSE 4.2: the instruction is inline assembly, which holds there too."""
    done = subprocess.run(
        [sys.executable, "-c", "import test_write_shards as t; t.test_frame_checksums_with_the_"
         "cpus_crc32_instruction(); t.test_both_crc32c_kernels_hold_at_the_streams_edges()"],
        capture_output=True, text=True, timeout=600, cwd=os.path.dirname(__file__),
        env=dict(os.environ, NUMBA_CPU_NAME="generic", NUMBA_CACHE_DIR=str(tmp_path),
                 PYTHONPATH=os.path.dirname(__file__)))
    assert done.returncode == 0, done.stderr


def test_write_record_is_read_by_tf_data(tmp_path):
    path = str(tmp_path / "plain.tfrecord")
    with open(path, "wb") as handle:
        for record in RECORDS:
            write_record(handle, record)
    assert tf_read(path) == RECORDS


def test_gzip_written_through_filesystems_is_read_by_tf_data(tmp_path):
    path = str(tmp_path / "data.tfrecord.gz")
    with FileSystems.create(path, compression_type=CompressionTypes.GZIP) as handle:
        for record in RECORDS:
            write_record(handle, record)
    assert tf_read(path, "GZIP") == RECORDS
    assert read_tfrecord_file(path) == RECORDS  # compression from the extension


def test_tf_writer_output_is_read_and_framed_identically(tmp_path):
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in RECORDS:
            writer.write(record)
    with open(path, "rb") as handle:
        assert list(read_records(handle)) == RECORDS
    with open(path, "rb") as handle:
        assert handle.read() == b"".join(frame_record(r) for r in RECORDS)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_shard_file_framed_in_many_chunks_equals_tfs_own_writer(tmp_path, compression):
    rng = random.Random(3)
    records = [rng.randbytes(rng.randint(0, 3000)) for _ in range(2000)] + RECORDS  # ~3 MB
    ours = str(tmp_path / ("ours.tfrecord" + (".gz" if compression else "")))
    # Framed by the compiled writer, in key order: the records' order.
    rows = RawRecords().rows(*scan_entries(entries(list(enumerate(records)))))
    stats = write_shard_file(ours, rows.chunks, records=rows.records, compression=compression)
    theirs = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(theirs) as writer:
        for record in records:
            writer.write(record)
    with open(theirs, "rb") as handle:
        expected = handle.read()
    with open(ours, "rb") as handle:
        data = handle.read()
    assert (gzip.decompress(data) if compression else data) == expected
    assert stats == {"records": len(records), "bytes": len(data),
                     "sha256": hashlib.sha256(data).hexdigest()}


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_local_shards_pages_are_released_as_it_is_written(tmp_path, monkeypatch, compression):
    """Every RELEASE_BYTES, the pages written since the release before last
    are advised away (all of the file but its last windows, in order); a
    gzip stream has no descriptor to advise; the bytes are as written."""
    calls = []
    advise = os.posix_fadvise
    monkeypatch.setattr(beam_module, "RELEASE_BYTES", 4096)
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, offset, length, advice: (
        calls.append((offset, length, advice)), advise(fd, offset, length, advice))[1])
    rng = random.Random(5)
    chunks = [rng.randbytes(rng.randint(1, 3000)) for _ in range(400)]
    path = str(tmp_path / ("shard.tfrecord" + (".gz" if compression else "")))
    stats = write_shard_file(path, chunks, records=0, compression=compression)
    with open(path, "rb") as handle:
        data = handle.read()
    assert (gzip.decompress(data) if compression else data) == b"".join(chunks)
    assert stats["bytes"] == len(data)
    if compression:
        assert calls == []
        return
    assert len(calls) > 100 and {advice for *_, advice in calls} == {os.POSIX_FADV_DONTNEED}
    assert calls[0][0] == calls[1][0] == 0  # then each from where the one before last ended
    assert all(later == offset + length
               for (offset, length, _), (later, _, _) in zip(calls, calls[2:]))
    covered = calls[-1][0] + calls[-1][1]
    assert len(data) - 2 * (4096 + 3000) <= covered <= len(data)


def test_a_file_that_refuses_page_advice_is_written_whole(tmp_path, monkeypatch):
    calls = []

    def refuse(*args):
        calls.append(args)
        raise OSError(29, "Illegal seek")

    monkeypatch.setattr(beam_module, "RELEASE_BYTES", 4096)
    monkeypatch.setattr(os, "posix_fadvise", refuse)
    chunks = [bytes([i]) * 3000 for i in range(20)]
    path = str(tmp_path / "shard.tfrecord")
    write_shard_file(path, chunks, records=0)
    with open(path, "rb") as handle:
        assert handle.read() == b"".join(chunks)
    assert len(calls) == 1  # advice stops at the first refusal


def test_tf_gzip_writer_output_is_read_by_extension(tmp_path):
    path = str(tmp_path / "tf.tfrecord.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for record in RECORDS:
            writer.write(record)
    assert read_tfrecord_file(path) == RECORDS


def corrupt_and_read(tmp_path, position: int) -> None:
    data = bytearray(b"".join(frame_record(r) for r in [b"first", b"second record"]))
    data[position] ^= 0x01
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    read_tfrecord_file(str(path))


@pytest.mark.parametrize("position, message", [
    (0, "length CRC mismatch in record 0 at byte 0"),
    (9, "length CRC mismatch in record 0 at byte 0"),
    (14, "data CRC mismatch in record 0 at byte 0"),
    (18, "data CRC mismatch in record 0 at byte 0"),
    (21 + 12 + 3, "data CRC mismatch in record 1 at byte 21"),
])
def test_a_corrupted_byte_is_detected(tmp_path, position, message):
    with pytest.raises(ValueError, match=message):
        corrupt_and_read(tmp_path, position)


@pytest.mark.parametrize("cut", [5, 12, 20, 28])
def test_a_truncated_file_is_detected(tmp_path, cut):
    data = b"".join(frame_record(r) for r in [b"first", b"second record"])
    path = tmp_path / "short.tfrecord"
    path.write_bytes(data[:21 + cut])
    with pytest.raises(ValueError, match="truncated TFRecord: record 1 at byte 21"):
        read_tfrecord_file(str(path))


# --- shuffle keys and buckets ---------------------------------------------------------


def test_shuffle_key_is_the_documented_hash():
    parts = [b"s" + "doc-\u00e9".encode("utf-8"), b"i3", b"?1", b"b\x00\xff"]
    framed = b"".join(len(p).to_bytes(8, "big") + p for p in parts)
    expected = int.from_bytes(hashlib.blake2b(framed, digest_size=8).digest(), "big") >> 1
    assert shuffle_key("doc-\u00e9", 3, True, b"\x00\xff") == expected


def test_shuffle_key_is_the_same_in_another_process():
    code = ("from bert_pretraining_data.transforms.randomness import stable_hash as shuffle_key; "
            "print(shuffle_key('doc', 7, ('a', 1)))")
    outputs = {
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
        for seed in ("1", "2")}
    assert outputs == {str(shuffle_key("doc", 7, ("a", 1)))}


def test_shuffle_key_differs_across_inputs():
    variants = [("ab", "c"), ("a", "bc"), ("abc",), (1,), ("1",), (b"1",), (True,), (1.0,),
                (1, 2), (2, 1), ((1, 2),), (None,), ()]
    keys = [shuffle_key(*v) for v in variants]
    assert len(set(keys)) == len(keys)
    many = {shuffle_key("doc", i) for i in range(10000)}
    assert len(many) == 10000 and all(0 <= k < 2**63 for k in many)
    assert max(many) > 2**62  # the top bit is used


def test_shuffle_key_rejects_parts_without_a_stable_encoding():
    with pytest.raises(TypeError, match="got object"):
        shuffle_key(object())


def test_shard_of_is_the_remainder():
    assert [shard_of(k, 4) for k in (0, 5, 2**64 - 1)] == [0, 1, 3]
    with pytest.raises(ValueError):
        shard_of(3, 0)


def entries(pairs) -> bytes:
    return EntryBatch.of(pairs).entries.tobytes()


def test_entries_sort_by_key_then_record_and_truncation_is_detected(monkeypatch):
    monkeypatch.setattr(rows_module, "WRITE_CHUNK_BYTES", 7)  # a record a chunk
    pairs = [(5, b"b"), (2**63 - 1, b""), (5, b"a"), (0, bytes(range(256)) * 300), (5, b"a")]
    data = entries(pairs)
    rows = RawRecords().rows(*scan_entries(data))
    chunks = [bytes(chunk) for chunk in rows.chunks]
    assert rows.records == len(chunks) == len(pairs)
    assert b"".join(chunks) == b"".join(frame_record(r) for _, r in sorted(pairs))
    with pytest.raises(ValueError, match="b.bucket: truncated shuffle entry"):
        scan_entries(data[:-1], source="b.bucket")


def test_a_batch_splits_into_its_shards_in_order():
    pairs = [(key, b"r%d" % key) for key in (9, 4, 7, 14, 2, 3)]
    parts = [(shard, part.tobytes()) for shard, part in split_by_shard(EntryBatch.of(pairs), 7)]
    assert parts == [(0, entries([(7, b"r7"), (14, b"r14")])), (2, entries([(9, b"r9"), (2, b"r2")])),
                     (3, entries([(3, b"r3")])), (4, entries([(4, b"r4")]))]
    for num_shards in (1, 2):  # one shard: the batch as it is
        [(shard, whole)] = split_by_shard(EntryBatch.of([(6, b"x"), (2, b"y")]), num_shards)
        assert shard == 0 and whole.tobytes() == entries([(6, b"x"), (2, b"y")])
    assert split_by_shard(EntryBatch.of([]), 3) == []


def test_path_helpers_share_one_layout():
    assert bucket_dir("gs://b/run", 3) == "gs://b/run/buckets/shard-00003"
    assert bucket_path("gs://b/run", 3, "ab12") == "gs://b/run/buckets/shard-00003/ab12.bucket"
    assert shard_path("gs://b/run", "part-00000-of-00004.tfrecord") == (
        "gs://b/run/part-00000-of-00004.tfrecord")


# --- WriteShards ----------------------------------------------------------------------

NUM_SHARDS = 7
EMPTY_SHARDS = (5, 6)


def make_pairs() -> list[tuple[int, bytes]]:
    """~300 records, none in shards 5 and 6; ties on key and exact duplicates."""
    pairs = [(shuffle_key("doc", i), b"record-%d" % i) for i in range(400)]
    pairs = [(k, r) for k, r in pairs if shard_of(k, NUM_SHARDS) not in EMPTY_SHARDS]
    key = pairs[0][0]
    pairs += [(key, b"same key, other record"), (key, b"a record sorting first"), pairs[1]]
    return pairs


def shard_names(n: int = NUM_SHARDS) -> list[str]:
    return [f"part-{i:05d}-of-{n:05d}.tfrecord" for i in range(n)]


def expected_shards(pairs) -> list[list[bytes]]:
    shards = [[] for _ in range(NUM_SHARDS)]
    for key, record in sorted(pairs):
        shards[key % NUM_SHARDS].append(record)
    return shards


def in_batches(pairs, sizes=(1, 3, 0, 7, 2)):
    """The pairs cut into batches of uneven sizes, an empty one among them."""
    batches, start = [], 0
    while start < len(pairs):
        size = sizes[len(batches) % len(sizes)]
        batches.append(EntryBatch.of(pairs[start:start + size]))
        start += size
    return batches


def run_write_shards(staging_dir, pairs, *, reshuffle=False, workers=1, compression=None,
                     max_buffer_bytes=None, shuffle="files", check=None):
    options = PipelineOptions([f"--direct_num_workers={workers}",
                               "--direct_running_mode=multi_threading"])
    p = test_pipeline.TestPipeline(options=options)
    results = (p
               | beam.Create(in_batches(pairs), reshuffle=reshuffle)
               | WriteShards(staging_dir=str(staging_dir), shard_names=shard_names(),
                             compression=compression, max_buffer_bytes=max_buffer_bytes,
                             shuffle=shuffle))[SHARDS]
    if check is not None:
        assert_that(results, check)
    result = p.run()
    result.wait_until_finish()
    return result


def counter(result, name: str) -> int:
    query = result.metrics().query(
        MetricsFilter().with_namespace("bert_data").with_name(name))
    return sum(c.committed for c in query["counters"])


def shard_bytes(staging_dir) -> list[bytes]:
    return [(staging_dir / name).read_bytes() for name in shard_names()]


def bucket_files_left(staging_dir) -> list[str]:
    return [f for _, _, files in os.walk(staging_dir / "buckets") for f in files]


def test_records_land_in_their_shard_sorted_and_empty_shards_are_written(tmp_path):
    pairs = make_pairs()
    shards = expected_shards(pairs)
    expected_results = []
    for index, (name, records) in enumerate(zip(shard_names(), shards)):
        data = b"".join(frame_record(r) for r in records)
        expected_results.append(ShardRecord(shard=index, name=name, records=len(records),
                                            bytes=len(data),
                                            sha256=hashlib.sha256(data).hexdigest()))

    result = run_write_shards(tmp_path, pairs, check=equal_to(expected_results))

    by_record = {}
    for key, record in pairs:
        by_record.setdefault(record, set()).add(key)
    total = 0
    for index, name in enumerate(shard_names()):
        records = read_tfrecord_file(str(tmp_path / name))
        total += len(records)
        keys = [min(k for k in by_record[r] if k % NUM_SHARDS == index) for r in records]
        assert keys == sorted(keys)
        assert records == shards[index]
    assert total == len(pairs)
    for index in EMPTY_SHARDS:
        assert (tmp_path / shard_names()[index]).read_bytes() == b""
    assert tf_read(str(tmp_path / shard_names()[0])) == shards[0]
    assert counter(result, "records_written") == len(pairs)
    assert bucket_files_left(tmp_path) == []


@pytest.mark.parametrize("shuffle", ["files", "runner"])
@pytest.mark.parametrize("seed, reshuffle, workers, max_buffer_bytes", [
    (1, False, 1, None),
    (2, True, 1, None),
    (3, True, 3, None),
    (4, False, 3, 500),
])
def test_shards_are_byte_identical_whatever_the_order_bundles_and_shuffle(
        tmp_path, seed, reshuffle, workers, max_buffer_bytes, shuffle):
    pairs = make_pairs()
    random.Random(seed).shuffle(pairs)
    result = run_write_shards(tmp_path, pairs, reshuffle=reshuffle, workers=workers,
                              max_buffer_bytes=max_buffer_bytes, shuffle=shuffle)
    expected = [b"".join(frame_record(r) for r in records) for records in expected_shards(pairs)]
    assert shard_bytes(tmp_path) == expected
    assert bucket_files_left(tmp_path) == []
    if shuffle == "runner":  # no bucket file at all
        assert counter(result, "bucket_files") == 0 and not (tmp_path / "buckets").exists()
    elif max_buffer_bytes is not None:
        # Several flushes per bundle: many more bucket files than shards.
        assert counter(result, "bucket_files") > 3 * NUM_SHARDS


def test_the_runners_shuffle_carries_zstd_frames_and_counts_their_bytes(tmp_path):
    """Through the runner's shuffle each blob is a zstd frame (Dataflow bills the
    Shuffle by the byte), the bucket files stay raw; `shuffle_entry_bytes`
    counts what went through, and the shards are the same bytes."""
    pairs = [(shuffle_key("doc", i), b"a record of some repeated text %d " % (i % 7) * 20)
             for i in range(300)]
    raw = sum(len(EntryBatch.of([pair]).entries) for pair in pairs)
    runner = run_write_shards(tmp_path / "runner", pairs, shuffle="runner")
    files = run_write_shards(tmp_path / "files", pairs, shuffle="files")
    assert counter(files, "shuffle_entry_bytes") == raw
    assert 0 < counter(runner, "shuffle_entry_bytes") < raw / 5
    assert shard_bytes(tmp_path / "runner") == shard_bytes(tmp_path / "files") != [b""] * 7


def test_gzip_shards_are_readable_and_byte_identical_across_runs(tmp_path):
    rng = random.Random(5)
    pairs = []
    for i in range(200):
        n = rng.randint(5, 128)
        record = encode_example(
            input_ids=[rng.randint(0, 30521) for _ in range(n)], segment_ids=[0] * n,
            masked_lm_positions=[1], masked_lm_ids=[rng.randint(0, 30521)],
            next_sentence_label=i % 2, max_seq_length=128, max_predictions_per_seq=20)
        pairs.append((shuffle_key("gz", i), record))
    pairs = [(k, r) for k, r in pairs if shard_of(k, NUM_SHARDS) != 6]

    def digests_match_files(staging_dir):
        def check(results):
            for result in results:
                path = shard_path(str(staging_dir), result.name)
                if file_digest(path) != (result.bytes, result.sha256):
                    raise BeamAssertException(f"digest mismatch for {path}")
            if sorted(r.shard for r in results) != list(range(NUM_SHARDS)):
                raise BeamAssertException(f"missing shards in {results}")
        return check

    runs = []
    for run, (seed, reshuffle) in enumerate([(1, False), (2, True)]):
        staging_dir = tmp_path / f"run{run}"
        shuffled = list(pairs)
        random.Random(seed).shuffle(shuffled)
        run_write_shards(staging_dir, shuffled, reshuffle=reshuffle, compression="gzip",
                         check=digests_match_files(staging_dir))
        runs.append(shard_bytes(staging_dir))
        assert bucket_files_left(staging_dir) == []
    assert runs[0] == runs[1]

    shards = expected_shards(pairs)
    for index, name in enumerate(shard_names()):
        path = str(tmp_path / "run0" / name)
        assert tf_read(path, "GZIP") == shards[index]
        # Gzip magic, deflate, no flags, mtime 0: no timestamp in the header.
        assert runs[0][index][:8] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00"
        assert gzip.decompress(runs[0][index]) == b"".join(frame_record(r) for r in shards[index])
    assert runs[0][6] and tf_read(str(tmp_path / "run0" / shard_names()[6]), "GZIP") == []
    parsed = tf.io.parse_single_example(
        shards[0][0], {"input_ids": tf.io.FixedLenFeature([128], tf.int64)})
    assert parsed["input_ids"].shape == (128,)


def test_stale_bucket_files_of_failed_bundles_are_ignored_and_removed(tmp_path):
    pairs = make_pairs()
    stale = bucket_path(str(tmp_path), 0, "from-a-failed-bundle")
    with FileSystems.create(stale) as handle:
        handle.write(entries([(NUM_SHARDS * 3, b"must not appear")]))
    run_write_shards(tmp_path, pairs)
    assert read_tfrecord_file(str(tmp_path / shard_names()[0])) == expected_shards(pairs)[0]
    assert bucket_files_left(tmp_path) == []


def test_a_retried_shard_write_and_cleanup_give_the_same_result(tmp_path):
    staging_dir = str(tmp_path)
    paths = []
    for token, pairs in [("b", [(14, b"late"), (7, b"x")]), ("a", [(0, b"early")])]:
        paths.append(bucket_path(staging_dir, 0, token))
        with FileSystems.create(paths[-1]) as handle:
            handle.write(entries(pairs))
    write = _WriteShardFn(staging_dir=staging_dir, shard_names=["s0", "s1"], compression=None,
                          rows=RawRecords(), codebook=None)
    write.setup()
    first = list(write.process((0, [paths[0], None, paths[1]])))
    second = list(write.process((0, [None, paths[1], paths[0]])))
    assert first == second
    assert read_tfrecord_file(shard_path(staging_dir, "s0")) == [b"early", b"x", b"late"]
    cleanup = _DeleteBucketsFn(staging_dir=staging_dir)
    assert list(cleanup.process(first[0])) == [first[0][0]]
    assert list(cleanup.process(first[0])) == [first[0][0]]  # already gone: fine
    assert not any(FileSystems.exists(p) for p in paths)


@pytest.mark.parametrize("kwargs, message", [
    (dict(shard_names=[]), "at least one shard"),
    (dict(shard_names=["a", "a"]), "unique"),
    (dict(shard_names=["a"], compression="zstd"), "compression"),
])
def test_bad_arguments_fail_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WriteShards(staging_dir="/tmp/x", **kwargs)
