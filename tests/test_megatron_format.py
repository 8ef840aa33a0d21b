"""Megatron-LM / NeMo indexed datasets (.bin + .idx) as megatron-core itself reads them.

Real documents (sample_text.txt and the start of wiki_small.txt: a line is a
sentence, a blank line ends a document) are tokenized by the project's
WordPiece and written by IndexedDatasetWriter as uint16 (Megatron's own choice
for bert-base-uncased) and as int32; megatron-core's IndexedDataset, in a venv
of its own, must give back every sentence's ids as the tokenizer encodes that
line alone, the documents' ends as its document_indices, and the dtype. Its
BERT sampler (helpers.build_mapping, which cuts the sentence pairs) must keep
each sample inside one document and draw from every document of two or more
sentences. The fast tests pin the bytes: a layout built by hand from the
format's description, determinism, and the one-line error of an id that does
not fit.
"""

from __future__ import annotations

import bisect
import io
import itertools
import pathlib
import struct

import numpy as np
import pytest

from conftest import DATA, UNCASED_VOCAB
from helpers.client_venvs import MEGATRON_CORE, client_python, run_client
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec
from bert_pretraining_data.transforms.write.megatron import (
    BIN_SUFFIX, IDX_SUFFIX, IndexedDatasetWriter, megatron_dtype)

# numpy and packaging, its other dependencies, come with it.
WIKI_DOCUMENTS = 4
# The int32 dataset also holds ids a uint16 could not.
WIDE_DOCUMENT = [[65535, 65536, 100_000], [2**31 - 1], [0, 1]]

_READ = """
import json, sys
import numpy
from megatron.core.datasets import helpers
from megatron.core.datasets.indexed_dataset import IndexedDataset

dataset = IndexedDataset(sys.argv[1])
count = len(dataset)
# The BERT dataset's sample index: 125 = a 128-token sample less [CLS] and two [SEP].
mapping = helpers.build_mapping(dataset.document_indices, dataset.sequence_lengths, 1, 10**6,
                                125, 0.1, 1234, False, 2)
print(json.dumps({
    "sequences": [dataset[i].tolist() for i in range(count)],
    "slice": [sequence.tolist() for sequence in dataset[0:count]],
    "got": [dataset.get(i, offset=1).tolist() for i in range(count)],
    "dtypes": sorted({dataset[i].dtype.name for i in range(count)}),
    "index_dtype": numpy.dtype(dataset.index.dtype).name,
    "document_indices": dataset.document_indices.tolist(),
    "samples": mapping[:, :2].tolist(),
}))
"""


def _documents(path: pathlib.Path) -> list[list[str]]:
    """The file's documents: runs of non-blank lines."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [list(run) for blank, run in itertools.groupby(lines, key=lambda line: not line.strip())
            if not blank]


@pytest.fixture(scope="module")
def documents(uncased_vocab) -> list[list[list[int]]]:
    """sample_text.txt, the first wiki_small.txt documents and a one-sentence
    document, each sentence as the tokenizer encodes its line alone."""
    tokenizer = TokenizerSpec(str(UNCASED_VOCAB), True).tokenizer(uncased_vocab)
    wiki = _documents(DATA / "wiki_small.txt")
    texts = (_documents(DATA / "sample_text.txt") + wiki[:WIKI_DOCUMENTS]
             + [wiki[WIKI_DOCUMENTS][:1]])
    return [[tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)) for line in text]
            for text in texts]


def _write(prefix: pathlib.Path, documents: list[list[list[int]]],
           dtype: np.dtype) -> IndexedDatasetWriter:
    with open(f"{prefix}{BIN_SUFFIX}", "wb") as bin_file:
        writer = IndexedDatasetWriter(bin_file, dtype)
        for document in documents:
            writer.add_document(document)
    pathlib.Path(f"{prefix}{IDX_SUFFIX}").write_bytes(writer.index_bytes())
    return writer


@pytest.mark.slow
@pytest.mark.parametrize("wide", [False, True], ids=["uint16", "int32"])
def test_megatron_core_reads_every_sentence_and_document(documents, uncased_vocab, tmp_path,
                                                          wide):
    dtype = np.dtype(np.int32) if wide else megatron_dtype(len(uncased_vocab))
    assert dtype == (np.int32 if wide else np.uint16)
    documents = [*documents, WIDE_DOCUMENT] if wide else documents
    assert all(sentence for document in documents for sentence in document)
    sentences = [sentence for document in documents for sentence in document]
    ends = list(itertools.accumulate(len(document) for document in documents))

    writer = _write(tmp_path / "corpus", documents, dtype)
    assert (writer.sequences, writer.documents, writer.tokens) == (
        len(sentences), len(documents), sum(map(len, sentences)))
    read = run_client(client_python("megatron-core", MEGATRON_CORE), _READ,
                      str(tmp_path / "corpus"))

    assert read["sequences"] == sentences
    assert read["slice"] == sentences
    assert read["got"] == [sentence[1:] for sentence in sentences]
    assert read["document_indices"] == [0, *ends]
    assert read["index_dtype"] == dtype.name
    assert read["dtypes"] == [dtype.name]
    # Every sample is a run of sentences of one document, and every document
    # of two or more sentences gives samples (a shorter one is there, and none).
    assert min(map(len, documents)) == 1
    sampled = set()
    for begin, end in read["samples"]:
        document = bisect.bisect_right(ends, begin)
        assert begin < end <= ends[document]
        sampled.add(document)
    assert sampled == {i for i, document in enumerate(documents) if len(document) >= 2}


def test_the_bytes_are_megatrons_layout_and_deterministic():
    documents = [[[5, 6, 7], [8]], [], [[], [9, 10]], [np.array([300], dtype=np.int64)]]
    written = []
    for _ in range(2):
        bin_file = io.BytesIO()
        writer = IndexedDatasetWriter(bin_file, np.uint16)
        for document in documents:
            writer.add_document(document)
        written.append((bin_file.getvalue(), writer.index_bytes()))
    assert written[0] == written[1]
    bin_bytes, idx_bytes = written[0]
    assert bin_bytes == struct.pack("<7H", 5, 6, 7, 8, 9, 10, 300)
    assert idx_bytes == (b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, 4, 4)
                         + struct.pack("<4i", 3, 1, 2, 1) + struct.pack("<4q", 0, 6, 8, 12)
                         + struct.pack("<4q", 0, 2, 3, 4))
    assert (writer.sequences, writer.documents, writer.tokens) == (4, 3, 7)


def test_an_empty_writer_indexes_no_document():
    writer = IndexedDatasetWriter(io.BytesIO(), np.int32)
    assert writer.index_bytes() == (b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 4, 0, 1)
                                    + struct.pack("<q", 0))


@pytest.mark.parametrize("bad, dtype", [(65536, np.uint16), (-1, np.uint16),
                                        (2**31, np.int32)])
def test_an_id_that_does_not_fit_raises_one_line_and_writes_nothing(bad, dtype):
    bin_file = io.BytesIO()
    writer = IndexedDatasetWriter(bin_file, dtype)
    with pytest.raises(ValueError, match=f"^token id {bad} does not fit [^\n]+$"):
        writer.add_document([[1, 2], [3, bad]])
    assert (bin_file.getvalue(), writer.sequences, writer.documents) == (b"", 0, 0)


def test_the_dtype_is_megatrons_choice_for_the_vocabulary():
    assert [megatron_dtype(size).name for size in (30522, 65499, 65500, 250_000)] == [
        "uint16", "uint16", "int32", "int32"]
    with pytest.raises(ValueError, match="not float32"):
        IndexedDatasetWriter(io.BytesIO(), np.float32)
