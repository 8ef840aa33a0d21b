"""CompactWriter, Tokenize's one buffer for a document's compact form and
counts, against compact_ids, the layout's writer in Python."""

from __future__ import annotations

import numpy as np

from bert_pretraining_data.transforms.handoff.tokenized_documents import (TokenizedDocument,
                                                                          compact_ids,
                                                                          write_counted,
                                                                          write_counted_buffers)
from bert_pretraining_data.transforms.tokenize.compiled_calls import KEPT_BYTES, CompactWriter

# three lines, the second without ids; 7 is the unknown id
LINES = [[5, 7, 9], [], [7, 70_000 - 1, 2]]


def _expected(lines: list[list[int]], unk: int) -> TokenizedDocument:
    kept = [line for line in lines if line]
    ids = [i for line in kept for i in line]
    return TokenizedDocument(compact_ids(ids, list(map(len, kept))), len(kept), len(ids),
                             ids.count(unk), len(lines) - len(kept))


def _flat(lines: list[list[int]], ids_type, bounds_type) -> tuple[np.ndarray, np.ndarray]:
    bounds = np.cumsum([0, *map(len, lines)]).astype(bounds_type)
    return np.array([i for line in lines for i in line], dtype=ids_type), bounds


def test_the_writer_makes_compact_ids_documents_from_arrays_and_fastokens_bytes():
    """Narrow (ids below 65,536) and wide, from arrays of any dtype a kernel
    gives and from fastokens' buffers; writers of different types made one
    after another each call their own compiled entry (an entry for the
    types compiled last would read int64 ids as int32)."""
    narrow = [[i % 60_000 for i in line] for line in LINES]
    for lines in (narrow, LINES):
        for ids_type in (np.int32, np.int64, np.int32):
            ids, bounds = _flat(lines, ids_type, np.int64)
            document = CompactWriter(write_counted).write(ids, bounds, 7, lines=3,
                                                          tokens=len(ids))
            assert document == _expected(lines, 7), (lines, ids_type)
        ids, bounds = _flat(lines, np.uint32, np.uint64)
        document = CompactWriter(write_counted_buffers).write(
            ids.tobytes(), bounds.tobytes(), 7, lines=3, tokens=len(ids))
        assert document == _expected(lines, 7)
    assert _expected(narrow, 7).compact[:1] == b"H" and _expected(LINES, 7).compact[:1] == b"i"


def test_a_document_without_ids_is_dropped_and_counted():
    ids, bounds = _flat([[], []], np.int32, np.int64)
    assert CompactWriter().write(ids, bounds, -1, lines=2, tokens=0) == (
        TokenizedDocument(None, 0, 0, 0, 2))


def test_the_writer_keeps_no_buffer_past_kept_bytes():
    """A document longer than KEPT_BYTES is written to a buffer of its own:
    the kept one, which lives as long as the worker, stays small."""
    writer = CompactWriter()
    small = [[1, 2, 3]]
    large = [list(range(KEPT_BYTES // 2))]
    for lines in (small, large, small):
        ids, bounds = _flat(lines, np.int32, np.int64)
        assert writer.write(ids, bounds, -1, lines=1, tokens=len(ids)) == _expected(lines, -1)
        assert len(writer.room(1, 3)) < 1024
