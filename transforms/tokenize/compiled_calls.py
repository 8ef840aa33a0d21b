"""How Tokenize calls its compiled kernels: through their entry points
(`direct`), and into one buffer that a document's compact form and counts are
written to (`CompactWriter`), so that a document's ids never become Python
lists on the way (docs/design-notes.md, transforms.tokenize.compiled_calls)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from bert_pretraining_data.transforms.handoff.tokenized_documents import (
    COMPACT_SIZE, ID_COUNT, SENTENCE_COUNT, UNK_COUNT, TokenizedDocument, compact_size,
    write_counted)

# The longest document a kernel takes in one call (longer ones go line by
# line): its buffers, kept for the worker's life, hold up to 32 bytes a
# character (~2 MB at most).
WHOLE_DOCUMENT_CHARACTERS = 1 << 16
# The largest compact buffer a writer keeps between documents (a longer
# document's is made for it and dropped): the buffer lives as long as the
# worker, and a book-length document should not hold its size in every one.
KEPT_BYTES = 1 << 20


def direct(dispatcher: Any, *arguments: Any) -> Callable[..., Any]:
    """Calls a compiled function once through its dispatcher (compiling it,
    or loading it from numba's cache), then returns its compiled entry point
    for these arguments' types, which skips the dispatcher's per-call typing
    of the arguments (with a str argument it costs more than tokenizing a
    short line; the figure is in docs/design-notes.md,
    transforms.tokenize.compiled_calls). Every later call must pass
    arguments of the same types."""
    dispatcher(*arguments)
    signature = tuple(map(dispatcher.typeof_pyval, arguments))
    return getattr(dispatcher.overloads.get(signature), "entry_point", dispatcher)


class CompactWriter:
    """The buffer and counts a compiled call writes a document into
    (tokenized_documents.write_counted, or a kernel that calls it), and the
    TokenizedDocument read back from them. `write` takes a tokenizer's flat
    ids and line bounds of one kind (arrays of one dtype, or bytes for
    `write_counted_buffers`) through `function`."""

    def __init__(self, function: Any = write_counted) -> None:
        self.counts = np.zeros(4, dtype=np.int64)
        self._kept = np.zeros(0, dtype=np.uint8)
        self._function = function
        self._entry: Callable[..., Any] | None = None

    def room(self, lines: int, tokens: int) -> np.ndarray:
        """A buffer for a compact document of up to this many sentences and
        ids: the kept one, grown up to KEPT_BYTES, or one for this document."""
        size = compact_size(lines, tokens)
        if size <= len(self._kept):
            return self._kept
        if size > KEPT_BYTES:
            return np.zeros(size, dtype=np.uint8)
        self._kept = np.zeros(size, dtype=np.uint8)
        return self._kept

    def document(self, buffer: np.ndarray, lines: int) -> TokenizedDocument:
        """The document a compiled call wrote into `buffer` and `counts`, of `lines` lines."""
        counts = self.counts.tolist()
        sentences = counts[SENTENCE_COUNT]
        return TokenizedDocument(buffer[:counts[COMPACT_SIZE]].tobytes() if sentences else None,
                                 sentences, counts[ID_COUNT], counts[UNK_COUNT],
                                 lines - sentences)

    def write(self, ids: Any, bounds: Any, unk: int, *, lines: int,
              tokens: int) -> TokenizedDocument:
        """The document of `tokens` ids (ids[bounds[l]:bounds[l + 1]] line l's,
        `lines` lines), [UNK] being `unk` (-1: none)."""
        buffer = self.room(lines, tokens)
        if self._entry is None:
            self._entry = direct(self._function, ids, bounds, unk, buffer, self.counts)
        else:
            self._entry(ids, bounds, unk, buffer, self.counts)
        return self.document(buffer, lines)
