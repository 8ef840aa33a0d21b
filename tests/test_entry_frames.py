"""The frames that carry shuffle entries through the runner's shuffle
(transforms.handoff.shuffle.frames): a codebook learned on the driver from the
run's own instances, frames that give back exactly what went in (the kernels'
instances through entries and frames into the same records), a lone
instance's frame much smaller with the codebook than without, on documents
the codebook never saw, and a frame refused in one line when any byte of it
changed, when it is cut short or when it is of another format version."""

from __future__ import annotations

import collections
import gzip
import shutil

import google_crc32c
import numpy as np
import pytest

from bert_pretraining_data.pipeline.input_sample import sample_documents, sample_entries
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.pipeline.prepare import prepare
from bert_pretraining_data.transforms.handoff.shuffle.entries import (EntryBatch, scan_entries,
                                                                      split_by_shard)
from bert_pretraining_data.transforms.handoff.shuffle.frames import (DICTIONARY_BYTES,
                                                                     FRAME_VERSION,
                                                                     MIN_CODEBOOK_SAMPLES,
                                                                     EntryFrames, entry_codebook)
from bert_pretraining_data.transforms.handoff.shuffle.instances import (max_instance_size,
                                                                       put_instance, stamp_source)
from bert_pretraining_data.transforms.write.beam import _WriteShardFn
from conftest import DATA, UNCASED_VOCAB

WIKITEXT = DATA / "wikitext2_valid.txt"


def _prepared(tmp_path, corpus=WIKITEXT, *flags):
    config, beam_args = parse_args([f"--input_file={corpus}", f"--vocab_file={UNCASED_VOCAB}",
                                    f"--output_dir={tmp_path / 'out'}", *flags])
    return prepare(config, beam_args)


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """WikiText-2 valid's instances as the driver makes them for the dictionary."""
    prepared = _prepared(tmp_path_factory.mktemp("sampled"), WIKITEXT, "--shuffle=runner")
    config, stages = prepared.config, prepared.stages
    documents, _ = sample_documents(config, stages, prepared.vocab, prepared.inputs, 1 << 20)
    batches = sample_entries(config, stages, documents, 0, 1)
    entries = [batch.entries[batch.bounds[i]:batch.bounds[i + 1]].tobytes()
               for batch in batches for i in range(len(batch))]
    return prepared, batches, entries


def test_a_runner_run_learns_its_codebook_and_its_splits_share_it(tmp_path, sampled):
    prepared = _prepared(tmp_path, WIKITEXT, "--shuffle=runner", "--validation_fraction=0.01")
    codebook = prepared.stages.entry_codebook
    assert codebook is not None and 0 < len(codebook.dictionary) <= DICTIONARY_BYTES
    ranks = codebook.frequent_ids
    assert len(set(ranks.tolist())) == len(ranks) and ranks.max() < len(prepared.vocab)
    assert prepared.stages.held_out.entry_codebook is codebook
    assert sampled[0].stages.entry_codebook is not None


def test_inputs_read_whole_learn_it_from_their_first_documents(tmp_path, monkeypatch):
    """A compressed file (and a WET file, Parquet, a dump) cannot be cut into
    windows: the codebook is learned from its first documents, and the run
    puts fewer bytes through the shuffle than without one, for the same shards."""
    from bert_pretraining_data.pipeline import prepare as prepare_module
    from bert_pretraining_data.pipeline.main import run
    from helpers.corpora import write_wet

    packed = tmp_path / "wikitext.txt.gz"
    with open(WIKITEXT, "rb") as plain, gzip.open(packed, "wb") as out:
        shutil.copyfileobj(plain, out)
    pages = (DATA / "en_ewt-ud-test.paragraphs.txt").read_text(encoding="utf-8").split("\n\n")
    wet = write_wet(tmp_path / "crawl.warc.wet.gz",
                    [(f"https://example.org/{n}", page) for n, page in enumerate(pages)])
    for corpus in (packed, wet):
        assert _prepared(tmp_path, corpus, "--shuffle=runner").stages.entry_codebook is not None
    flags = [f"--input_file={packed}", f"--vocab_file={UNCASED_VOCAB}", "--shuffle=runner",
             "--dupe_factor=2"]
    learned = run([*flags, f"--output_dir={tmp_path / 'learned'}"])
    monkeypatch.setattr(prepare_module, "entry_codebook_of", lambda *args: None)
    without = run([*flags, f"--output_dir={tmp_path / 'without'}"])
    assert (learned["counters"]["shuffle_entry_bytes"]
            < 0.9 * without["counters"]["shuffle_entry_bytes"])
    assert ([p.read_bytes() for p in sorted((tmp_path / "learned").glob("part-*"))]
            == [p.read_bytes() for p in sorted((tmp_path / "without").glob("part-*"))])


def test_bucket_files_and_runs_without_shards_go_without(tmp_path):
    assert _prepared(tmp_path, WIKITEXT, "--shuffle=files").stages.entry_codebook is None
    # instances that never cross the runner's shuffle: no codebook to learn
    megatron = _prepared(tmp_path, WIKITEXT, "--shuffle=runner", "--output_format=megatron")
    assert megatron.stages.entry_codebook is None
    config, beam_args = parse_args([f"--input_file={WIKITEXT}", f"--vocab_file={UNCASED_VOCAB}",
                                    f"--output_file={tmp_path / 'reference.tfrecord'}",
                                    "--reference_compatible", "--shuffle=runner"])
    assert prepare(config, beam_args).stages.entry_codebook is None


def _batch(entries: list[bytes]) -> EntryBatch:
    """Whole shuffle entries (key, length, instance) as a batch."""
    data, keys, bounds = scan_entries(b"".join(entries))
    return EntryBatch(keys=keys, entries=data, bounds=bounds)


def _wide_and_stamped(entries: list[bytes]) -> list[bytes]:
    """Instances with 4-byte ids (one id over 65,535) and source ids: every
    layout the frames' rank coding must walk."""
    rng = np.random.default_rng(0)
    made = []
    for i in range(40):
        n, k = int(rng.integers(6, 60)), int(rng.integers(0, 6))
        tokens = rng.integers(0, 70_000 if i % 2 else 30_000, n)
        positions = np.sort(rng.choice(n, size=k, replace=False))
        out = np.zeros(max_instance_size(n, k), dtype=np.uint8)
        end = put_instance(out, 0, tokens, n // 2, i % 2, positions, tokens[positions] + 1,
                           np.ones(n, np.uint8), i % 3 == 0, 103)
        made.append((i, out[:end].tobytes()))
    stamped = stamp_source(EntryBatch.of(made), 5)
    return entries[:50] + [stamped.entries[stamped.bounds[i]:stamped.bounds[i + 1]].tobytes()
                           for i in range(len(stamped))]


def test_frames_give_back_what_went_in(sampled):
    _, batches, entries = sampled
    codebook = entry_codebook(batches)
    entries = _wide_and_stamped(entries)
    for frames in (EntryFrames(None), EntryFrames(codebook)):
        for size in (1, 7, 300):
            for at in range(0, 2 * size, size):
                data = b"".join(entries[at:at + size])
                assert frames.decompress(frames.compress(data)) == data
        assert frames.decompress(frames.compress(b"")) == b""


def test_a_lone_instance_frame_is_much_smaller_with_the_codebook(sampled):
    _, _, entries = sampled
    half = len(entries) // 2  # learned from one half's documents, measured on the other's
    codebook = entry_codebook([_batch(entries[:half])])
    measured = entries[half:]
    with_codebook = sum(len(EntryFrames(codebook).compress(e)) for e in measured)
    without = sum(len(EntryFrames(None).compress(e)) for e in measured)
    assert with_codebook < 0.8 * without < 0.8 * sum(map(len, measured))


def test_too_few_instances_make_no_codebook(sampled):
    _, _, entries = sampled
    assert entry_codebook([_batch(entries[:MIN_CODEBOOK_SAMPLES - 1])]) is None
    assert entry_codebook([_batch(entries[:MIN_CODEBOOK_SAMPLES])]) is not None


@pytest.fixture(scope="module")
def codebook(sampled):
    """The codebook of the sampled instances."""
    return entry_codebook(sampled[1])


def test_instances_cross_the_frames_into_the_same_records(sampled, codebook):
    """The whole path: the kernels' instances (and wide and stamped ones) as
    entries, split by shard and framed a batch at a time as WriteShards
    frames a bundle's, each shard's frames decoded and its records written:
    the same entries and the same records as the shard's entries unframed."""
    prepared, batches, _ = sampled
    batches = [*batches, _batch(_wide_and_stamped([]))]
    rows = prepared.stages.rows

    def records(data: bytes) -> bytes:
        return b"".join(rows.rows(*scan_entries(data)).chunks)

    for frames in (EntryFrames(codebook), EntryFrames(None)):
        for num_shards in (1, 7):
            sent = collections.defaultdict(list)  # shard -> (its entries, their frame)
            for batch in batches:
                for shard, entries in split_by_shard(batch, num_shards):
                    sent[shard].append((entries.tobytes(), frames.compress(entries.tobytes())))
            assert len(sent) == num_shards
            for pieces in sent.values():
                entries = b"".join(entries for entries, _ in pieces)
                decoded = b"".join(frames.decompress(frame) for _, frame in pieces)
                assert decoded == entries
                assert records(decoded) == records(entries) != b""


def _refusal(frames: EntryFrames, frame: bytes) -> str:
    with pytest.raises(ValueError) as refused:
        frames.decompress(frame, "shuffle frame 3")
    return str(refused.value)


@pytest.mark.parametrize("with_codebook", [True, False])
def test_a_frame_with_any_byte_changed_or_cut_short_is_refused_in_one_line(
        sampled, codebook, with_codebook):
    frames = EntryFrames(codebook if with_codebook else None)
    frame = frames.compress(b"".join(sampled[2][:3]))
    for at in range(len(frame)):
        for flip in (0x01, 0x80, 0xFF):
            changed = bytearray(frame)
            changed[at] ^= flip
            message = _refusal(frames, bytes(changed))
            expected = (f"shuffle frame 3: format version {FRAME_VERSION ^ flip}, " if at == 0
                        else "shuffle frame 3: checksum mismatch (crc32c 0x")
            assert message.startswith(expected) and "\n" not in message, (at, flip, message)
    assert _refusal(frames, frame[:4]) == ("shuffle frame 3: 4 bytes, too short for a frame's "
                                           "version and checksum (5 bytes)")
    for cut in range(5, len(frame)):
        assert _refusal(frames, frame[:cut]).startswith(
            "shuffle frame 3: checksum mismatch (crc32c 0x")


def test_a_frame_of_another_format_version_is_refused_in_one_line(sampled):
    frames = EntryFrames(None)
    frame = frames.compress(sampled[2][0])
    body = bytes([FRAME_VERSION + 1]) + frame[1:-4]
    forged = body + google_crc32c.value(body).to_bytes(4, "little")
    assert _refusal(frames, forged) == (
        "shuffle frame 3: format version 2, and this reader reads version 1 only (a worker "
        "of another release, or the byte changed)")


def test_the_shard_writer_names_the_frame_it_refuses(tmp_path, sampled):
    prepared, _, entries = sampled
    frames = EntryFrames(None)
    good = frames.compress(entries[0])
    changed = bytearray(frames.compress(entries[1]))
    changed[len(changed) // 2] ^= 0x10
    writer = _WriteShardFn(staging_dir=str(tmp_path), shard_names=["part-0"], compression=None,
                           rows=prepared.stages.rows, codebook=None)
    writer.setup()
    with pytest.raises(ValueError, match=r"^shuffle frame 1 of shard part-0: checksum mismatch"):
        list(writer.process((0, [None, good, bytes(changed)])))
    assert not list(tmp_path.iterdir())  # refused before a shard was written
