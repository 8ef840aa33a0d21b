"""What documents put through the runner's shuffle: dedup's rows in their
compact encoding (one element per bundle and partition, decided as the rows
themselves), and the batches of documents zstd-compressed when a coder
encodes them, unchanged for their consumers."""

from __future__ import annotations

import pickle

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.coders import registry
from apache_beam.pipeline import PipelineVisitor
from apache_beam.pvalue import TaggedOutput
from hypothesis import given, strategies as st

from conftest import DATA, UNCASED_VOCAB
from bert_pretraining_data.pipeline.build import build_pipeline
from bert_pretraining_data.pipeline.main import run
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.pipeline.prepare import prepare
from bert_pretraining_data.transforms.counters import FIGURES
from bert_pretraining_data.transforms.dedup.beam import FingerprintDocuments
from bert_pretraining_data.transforms.dedup.clusters import (BandRows, ExactRows, candidate_pairs,
                                                             digest_array, exact_groups)
from bert_pretraining_data.transforms.dedup.decisions import (Fingerprints, find_candidates,
                                                              fingerprint_batch, group_copies)
from bert_pretraining_data.transforms.handoff.compressed import CompressedList
from bert_pretraining_data.transforms.instances.beam import BatchDocuments
from bert_pretraining_data.transforms.read.mixture import source_key
from bert_pretraining_data.transforms.tokenize.beam import TokenizeDocument

DIGESTS = st.binary(min_size=16, max_size=16)


def _documents(name: str) -> list[tuple[str, list[str]]]:
    blocks = (DATA / name).read_text(encoding="utf-8").split("\n\n")
    return [(f"{name}:{i:012d}", block.strip().split("\n"))
            for i, block in enumerate(blocks) if block.strip()]


def _same_rows(found: ExactRows | BandRows, expected: ExactRows | BandRows) -> None:
    assert type(found) is type(expected)
    assert np.array_equal(found.digests, expected.digests)
    assert found.digests.shape == expected.digests.shape
    if isinstance(found, ExactRows):
        assert found.keys == expected.keys
    else:
        assert np.array_equal(found.keys, expected.keys) and found.keys.dtype == np.uint64


# --- dedup's rows -----------------------------------------------------------------

@given(st.lists(st.tuples(DIGESTS, st.text(max_size=300)), max_size=40))
def test_exact_rows_round_trip_with_any_keys(rows):
    """Any text (non-ASCII, empty, over 127 characters), any count, none included."""
    expected = ExactRows(digest_array([digest for digest, _ in rows]), [key for _, key in rows])
    _same_rows(ExactRows.decoded(expected.encoded()), expected)


@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), DIGESTS), max_size=40))
def test_band_rows_round_trip(rows):
    expected = BandRows(np.array([key for key, _ in rows], dtype=np.uint64),
                        digest_array([digest for _, digest in rows]))
    _same_rows(BandRows.decoded(expected.encoded()), expected)


def test_many_rows_are_compressed_and_one_row_is_not():
    """zstd where it saves bytes; a partition's lone document would grow by
    the frame's header, so it travels as it is: 1 byte beyond its 16 and its key."""
    documents = _documents("wikitext2_valid.txt")
    _, exact, _ = fingerprint_batch(documents, Fingerprints(mode="exact"))
    rows = exact[0]
    raw = rows.digests.nbytes + sum(len(key.encode()) + 1 for key in rows.keys)
    assert len(rows.encoded()) < raw / 2
    one = ExactRows(rows.digests[:1], ["enwiki/part-00017.txt:000031415926"])
    assert len(one.encoded()) == 1 + 16 + 1 + len(one.keys[0])
    _same_rows(ExactRows.decoded(one.encoded()), one)
    _same_rows(ExactRows.decoded(rows.encoded()), rows)


ORIGINALS = _documents("sample_text.txt") + _documents("wiki_small.txt")
# A third of them copied under other keys, and the first twice under one key.
COPIES = (ORIGINALS + [(f"z.txt:{i:012d}", lines) for i, (_, lines) in enumerate(ORIGINALS[::3])]
          + [("sha:\u00e9t\u00e9", ORIGINALS[0][1])] * 2)


@pytest.mark.parametrize("by_source", [False, True])
def test_group_copies_of_encoded_rows_decide_as_the_rows_themselves(by_source):
    documents = ([(source_key(i % 3, f"s{i % 3}", key), lines)
                  for i, (key, lines) in enumerate(COPIES)] if by_source else COPIES)
    fingerprints = Fingerprints(mode="near", partitions=3)
    parts: dict[int, list[ExactRows]] = {}
    bands: dict[int, list[BandRows]] = {}
    for start in range(0, len(documents), 4):  # several batches, as one bundle makes them
        _, exact, band_rows = fingerprint_batch(documents[start:start + 4], fingerprints)
        for partition, rows in exact.items():
            parts.setdefault(partition, []).append(rows)
        for partition, rows in band_rows.items():
            bands.setdefault(partition, []).append(rows)
    assert sorted(parts) == [0, 1, 2]
    dropped = 0
    for partition, rows in parts.items():
        whole = ExactRows(np.concatenate([part.digests for part in rows]),
                          [key for part in rows for key in part.keys])
        found = group_copies((partition, [part.encoded() for part in rows]), by_source)
        assert found == exact_groups(whole, by_source)
        dropped += len(found.drops)
    # the key shared by two copies goes once; under two sources, it is two keys
    assert dropped == len(ORIGINALS[::3]) + 1 + by_source
    for partition, rows in bands.items():
        whole = BandRows(np.concatenate([part.keys for part in rows]),
                         np.concatenate([part.digests for part in rows]))
        assert find_candidates((partition, [part.encoded() for part in rows])) == \
            candidate_pairs(whole)


def _bundle(fn: FingerprintDocuments, batches: list[list[tuple[str, list[str]]]]) -> list:
    """What one bundle of `batches` emits, finish_bundle's values unwrapped;
    its figures checked against the rows' bytes and left out."""
    fn.start_bundle()
    out = [element for batch in batches for element in fn.process(batch)]
    for element in fn.finish_bundle():
        out.append(TaggedOutput(element.tag, element.value.value))
    (figures,) = [element.value for element in out
                  if isinstance(element, TaggedOutput) and element.tag == FIGURES]
    assert figures == {"dedup_shuffle_bytes": sum(
        len(element.value[1]) for element in out
        if isinstance(element, TaggedOutput) and element.tag == "exact")}
    return [element for element in out
            if not (isinstance(element, TaggedOutput) and element.tag == FIGURES)]


@pytest.mark.parametrize("max_buffer_bytes", [1 << 20, 1])
def test_a_bundles_rows_travel_once_per_partition_unless_the_buffer_fills(max_buffer_bytes):
    fingerprints = Fingerprints(mode="exact", partitions=3)
    batches = [COPIES[start:start + 4] for start in range(0, len(COPIES), 4)]
    out = _bundle(FingerprintDocuments(fingerprints=fingerprints, compress=True,
                                       max_buffer_bytes=max_buffer_bytes), batches)
    documents = [element for element in out if not isinstance(element, TaggedOutput)]
    assert [type(batch) for batch in documents] == [CompressedList] * len(batches)
    assert [document[:2] for batch in documents for document in batch] == COPIES
    rows = [element.value for element in out if isinstance(element, TaggedOutput)]
    assert {element.tag for element in out if isinstance(element, TaggedOutput)} == {"exact"}
    partitions = [partition for partition, _ in rows]
    if max_buffer_bytes > 1:
        assert sorted(partitions) == [0, 1, 2]
    else:
        assert len(partitions) > 3
    decoded = [ExactRows.decoded(data) for _, data in rows]
    assert sorted(key for part in decoded for key in part.keys) == sorted(key for key, _ in COPIES)
    by_partition: dict[int, list[bytes]] = {}
    for partition, data in rows:
        by_partition.setdefault(partition, []).append(data)
    drops = sorted(key for partition, data in by_partition.items()
                   for key in group_copies((partition, data)).drops)
    _, exact, _ = fingerprint_batch(COPIES, fingerprints)
    assert drops == sorted(key for rows in exact.values() for key in exact_groups(rows).drops)


# --- batches compressed when encoded ------------------------------------------------

def _text_batch() -> CompressedList:
    batch, _, _ = fingerprint_batch(_documents("wikitext2_valid.txt"), Fingerprints(mode="exact"))
    return CompressedList(batch)


def _tokenized_batch() -> CompressedList:
    tokenize = TokenizeDocument(vocab_file=str(UNCASED_VOCAB))
    tokenize.setup()
    tokenize.start_bundle()
    batcher = BatchDocuments(compress=True)
    batcher.start_bundle()
    batches = [batch for document in _documents("wikitext2_valid.txt")
               for tokenized in tokenize.process(document)
               for batch in batcher.process(tokenized)]
    batches += [last.value for last in batcher.finish_bundle()]
    assert all(type(batch) is CompressedList for batch in batches)
    return max(batches, key=len)


# The step whose main output the batch is, in a --shuffle=runner graph.
PRODUCERS = {"text": "Deduplicate/FingerprintDocuments/ParDo(FingerprintDocuments)",
             "tokenized": "BatchDocuments"}


@pytest.fixture(scope="module", params=sorted(PRODUCERS))
def batch(request) -> tuple[str, CompressedList]:
    return request.param, _text_batch() if request.param == "text" else _tokenized_batch()


def test_a_batch_round_trips_through_pickle_smaller_than_its_list(batch):
    _, batch = batch
    data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(data)
    assert type(back) is CompressedList and back == batch and list(back) == list(batch)
    assert len(data) < 0.8 * len(pickle.dumps(list(batch), protocol=pickle.HIGHEST_PROTOCOL))


@pytest.fixture(scope="module")
def runner_graph(tmp_path_factory) -> dict[str, object]:
    """Each step's main output's element type in a --shuffle=runner graph."""
    config, beam_args = parse_args([f"--input_file={DATA / 'sample_text.txt'}",
                                    f"--vocab_file={UNCASED_VOCAB}", "--shuffle=runner",
                                    f"--output_dir={tmp_path_factory.mktemp('out')}"])
    prepared = prepare(config, beam_args)
    pipeline = beam.Pipeline()
    build_pipeline(pipeline, config=config, stages=prepared.stages,
                   patterns=prepared.patterns, output=prepared.output)
    types = {}

    class Types(PipelineVisitor):
        def visit_transform(self, node):
            if None in node.outputs:
                types[node.full_label] = node.outputs[None].element_type

        enter_composite_transform = visit_transform

    pipeline.visit(Types())
    return types


def test_the_runners_coder_carries_each_batch_compressed(batch, runner_graph):
    """Beam picks the coder of a PCollection from the type its step declares
    (from Beam 2.78, its annotations too): the batches' steps declare Any, so
    the coder pickles a batch whole, compressed on the way, and it arrives as
    a CompressedList, which consumers iterate as the list. From `list[...]`
    Beam would pick a ListCoder, which encodes the items one by one."""
    producer, batch = batch
    coder = registry.get_coder(runner_graph[PRODUCERS[producer]])
    data = coder.encode(batch)
    back = coder.decode(data)
    assert type(back) is CompressedList and back == batch
    assert len(data) < 0.8 * len(coder.encode(list(batch)))


@pytest.mark.slow
def test_a_dedup_run_counts_what_its_rows_put_through_the_shuffle(tmp_path):
    manifest = run([f"--input_file={DATA / 'sample_text.txt'},{DATA / 'wiki_small.txt'}",
                    f"--output_dir={tmp_path}", f"--vocab_file={UNCASED_VOCAB}",
                    "--dedup=exact", "--dupe_factor=1", "--num_shards=1",
                    "--max_seq_length=64", "--max_predictions_per_seq=10", "--progress=none"])
    counted = manifest["counters"]["dedup_shuffle_bytes"]
    assert 0 < counted < 64 * manifest["counters"]["documents"]
