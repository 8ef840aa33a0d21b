"""FullTokenizer-exact WordPiece tokenization, compiled.

A line, or Tokenize's document of lines, is one compiled call
(transforms.tokenize.wordpiece_kernel) over a per-code-point table of what
the original makes of each character. The
functions below, with the cleanup and CJK spacing Deduplicate and create-vocab
share (transforms.handoff.words), are the one definition of those character
semantics, with Python's own Unicode database, and fill the table for each
character when it is first seen (docs/design-notes.md,
transforms.tokenize.wordpiece). Per
character is exact because the original's per-word steps are per character
but for two, both kept: lower-casing U+03A3 (Final_Sigma) and the 38
characters NFD may reorder (a line holding one goes word by word in Python).
So the original's quirks hold: lower-casing per word, `[MASK]` in raw text
split as punctuation, only Cc/Cf removed, `[UNK]` for words over 200
characters.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import accumulate
from typing import Sequence

import numpy as np

from bert_pretraining_data.transforms.handoff.tokenized_documents import TokenizedDocument
from bert_pretraining_data.transforms.handoff.words import cleaned_character, is_cjk, split_words
from bert_pretraining_data.transforms.tokenize import wordpiece_kernel as jit
from bert_pretraining_data.transforms.tokenize.compiled_calls import (WHOLE_DOCUMENT_CHARACTERS,
                                                                      CompactWriter, direct)
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary, load_vocabulary

# C0/C1 controls other than tab, LF and CR, DEL, and U+FFFD (a decoding
# repair): the characters the tokenizer deletes that signal damaged text.
_DAMAGE_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd]")
# An ASCII word after cleaning holds no space or control character, so every
# non-alphanumeric character in it is one of the original's punctuation marks.
_ASCII_PIECES_RE = re.compile(r"[0-9A-Za-z]+|[^0-9A-Za-z]")
def count_control_characters(lines: Sequence[str]) -> int:
    """Control characters (and U+FFFD) in a document's lines, which
    tokenization deletes exactly as the original does; counted so that
    damaged input shows. One scan of the joined text, counted only where it
    finds one: most documents have none (a short document's lines: 0.45 µs,
    against 0.92 a line at a time)."""
    text = "".join(lines)
    return len(_DAMAGE_RE.findall(text)) if _DAMAGE_RE.search(text) else 0


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _split_on_punctuation(word: str) -> list[str]:
    if word.isascii():
        return _ASCII_PIECES_RE.findall(word)
    pieces: list[str] = []
    start = 0
    for i, char in enumerate(word):
        if _is_punctuation(char):
            if start < i:
                pieces.append(word[start:i])
            pieces.append(char)
            start = i + 1
    if start < len(word):
        pieces.append(word[start:])
    return pieces


def _strip_accents(word: str) -> str:
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFD", word)
                   if unicodedata.category(c) != "Mn")


def basic_pieces(word: str, *, do_lower_case: bool) -> list[str]:
    """What the original's BasicTokenizer makes of one word of `split_words`:
    lower-cased and accent-stripped if asked, split at punctuation. These are
    the strings WordPiece segments (and that a vocabulary learner counts)."""
    if do_lower_case:
        word = _strip_accents(word.lower())
    # The original re-splits its joined output on whitespace.
    return [part for piece in _split_on_punctuation(word) for part in piece.split()]


class _CharacterTable:
    """What the original makes of each code point, for the compiled tokenizer
    (transforms.tokenize.wordpiece_kernel's `kinds` and `outputs`), one per
    `do_lower_case`, shared by the process's tokenizers and filled on first
    sight. Zeroed arrays cost memory only where a row is written."""

    _tables: dict[bool, "_CharacterTable"] = {}

    def __init__(self, lower: bool) -> None:
        self.lower = lower
        self.kinds = np.zeros(0x110000, dtype=np.uint8)
        self.outputs = np.zeros((0x110000, 1 + jit.MAX_OUTPUTS), dtype=np.int32)

    @classmethod
    def of(cls, lower: bool) -> "_CharacterTable":
        if lower not in cls._tables:
            cls._tables[lower] = cls(lower)
        return cls._tables[lower]

    def fill(self, code_points: Sequence[int]) -> None:
        for cp in code_points:
            kind, outputs = self._row(cp)
            self.outputs[cp, 0] = len(outputs)
            self.outputs[cp, 1:1 + len(outputs)] = outputs
            self.kinds[cp] = kind  # last: a row is complete once its kind is set

    def _row(self, cp: int) -> tuple[int, list[int]]:
        translation = cleaned_character(cp)
        char = chr(cp)
        if translation is None:
            return jit.DROP, []
        if translation == " " or char.isspace():  # str.split() also splits at U+2028/9
            return jit.SPACE, []
        kind = jit.CJK if is_cjk(char) else jit.NORMAL
        if self.lower:
            kind |= _sigma_class(char)
            if cp == _CAPITAL_SIGMA:
                return jit.SIGMA | _sigma_class(char), []
            char = _strip_accents(char.lower())
        if len(char) > jit.MAX_OUTPUTS or any(
                unicodedata.combining(c) or c.isspace() for c in char):
            return jit.COMPLEX, []
        return kind, [ord(c) | (jit.PUNCT if _is_punctuation(c) else 0) for c in char]


_CAPITAL_SIGMA = 0x3A3


def _sigma_class(char: str) -> int:
    """The character's class for Python's Final_Sigma rule (a U+03A3 after a
    cased character, case-ignorables skipped, and before none, lower-cases to
    U+03C2), read from Python's own lower-casing."""
    if (char + "\u03a3").lower()[-1] == "\u03c2":
        return jit.CASED  # cased, and not skipped as case-ignorable
    if ("A" + char + "\u03a3").lower()[-1] == "\u03c2":
        return jit.CASE_IGNORABLE
    return 0


class FullTokenizer:
    """Text to WordPiece ids or tokens, identical to BERT's FullTokenizer.

    Constructed as the original is, `FullTokenizer(vocab_file=...,
    do_lower_case=...)`, it has the original's interface (`tokenize`,
    `convert_tokens_to_ids`, `convert_ids_to_tokens`, `vocab` and `inv_vocab`
    dicts), so code written against BERT's `tokenization.py` runs unchanged;
    `vocab_file` is a path (local, or gs:// as the original's tf.gfile reads
    it: transforms.handoff.files) or a loaded Vocabulary (`vocabulary`).

    Build it once per process (it holds the vocabulary's hash table and its
    scratch buffers); it is not meant to be pickled to Beam workers: construct
    it in `DoFn.setup`.
    """

    def __init__(self, vocab_file: "str | Vocabulary", do_lower_case: bool = True) -> None:
        vocab = (vocab_file if isinstance(vocab_file, Vocabulary)
                 else load_vocabulary(vocab_file))
        self.vocabulary = vocab
        self.vocab = vocab.ids  # token -> id, in id order, as the original's
        self.inv_vocab = dict(enumerate(vocab.tokens))
        self.do_lower_case = do_lower_case
        self._characters = _CharacterTable.of(do_lower_case)
        self._slots, self._chars, self._params = _wordpiece_table(vocab)
        self._piece = np.zeros(jit.PIECE_CAPACITY, dtype=np.int32)
        self._hashes = np.zeros(max(1, *self._params[:jit.UNK]), dtype=np.int64)
        self._missing = np.zeros(257, dtype=np.int64)
        self._writer = CompactWriter()
        self._reserve(256, 16)
        self._line_ids = direct(jit.line_ids, "", *self._arguments)
        self._lines_compact = direct(jit.lines_compact, "", self._ends[:0],
                                     *self._document_arguments, self._writer.room(0, 0),
                                     self._writer.counts)

    def _reserve(self, characters: int, lines: int) -> None:
        """Room for the ids of this many characters, in up to this many lines
        (the arguments after the text are kept in tuples; the compact buffer
        is the writer's, CompactWriter.room)."""
        self._out = np.zeros(characters * jit.MAX_OUTPUTS, dtype=np.int32)
        self._capacity, self._line_capacity = characters, lines
        table = self._characters
        self._arguments = (table.kinds, table.outputs, self._slots, self._chars, self._params,
                           self._piece, self._hashes, self._out, self._missing)
        self._ends = np.zeros(lines, dtype=np.int64)
        self._document_arguments = (*self._arguments, np.zeros(lines + 1, dtype=np.int64))

    def tokenize_to_ids(self, text: str) -> list[int]:
        """WordPiece ids of one line of text."""
        if len(text) > self._capacity:
            self._reserve(len(text), self._line_capacity)
        count = self._line_ids(text, *self._arguments)
        while count == jit.MISSING:  # characters seen for the first time
            self._characters.fill(self._missing[1:1 + self._missing[0]].tolist())
            count = self._line_ids(text, *self._arguments)
        if count == jit.COMPLEX_LINE:
            return self._python_ids(text)
        return self._out[:count].tolist()

    def compact_lines(self, lines: Sequence[str]) -> TokenizedDocument | None:
        """A document's lines, each a sentence, as Tokenize hands them on, in one
        compiled call (no list of ids is made); None when a line holds a
        character whose output depends on its word, or the document is longer
        than WHOLE_DOCUMENT_CHARACTERS (`tokenize_to_ids` then takes the lines
        one by one: the buffers stay a line's size, and a long document's
        calls cost little beside its text)."""
        text = "".join(lines)
        if len(text) > WHOLE_DOCUMENT_CHARACTERS:
            return None
        if len(text) > self._capacity or len(lines) > self._line_capacity:
            self._reserve(max(len(text), self._capacity), max(len(lines), self._line_capacity))
        ends = self._ends[:len(lines)]
        ends[:] = list(accumulate(map(len, lines)))
        compact = self._writer.room(len(lines), len(text) * jit.MAX_OUTPUTS)
        counts = self._writer.counts
        status = self._lines_compact(text, ends, *self._document_arguments, compact, counts)
        while status == jit.MISSING:  # characters seen for the first time
            self._characters.fill(self._missing[1:1 + self._missing[0]].tolist())
            status = self._lines_compact(text, ends, *self._document_arguments, compact, counts)
        if status == jit.COMPLEX_LINE:
            return None
        return self._writer.document(compact, len(lines))

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of one line of text, as the original returns them."""
        return self.convert_ids_to_tokens(self.tokenize_to_ids(text))

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        tokens = self.vocabulary.tokens
        return [tokens[i] for i in ids]

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self.vocab[t] for t in tokens]

    def _python_ids(self, text: str) -> list[int]:
        """A line holding a character whose output depends on its word: the
        original's steps word by word, then the same compiled WordPiece."""
        ids: list[int] = []
        for word in split_words(text):
            for part in basic_pieces(word, do_lower_case=self.do_lower_case):
                self._piece[:min(len(part), jit.PIECE_CAPACITY)] = [
                    ord(c) for c in part[:jit.PIECE_CAPACITY]]
                count = jit.wordpiece(self._piece, len(part), self._slots, self._chars,
                                      self._params, self._hashes, self._out, 0)
                ids += self._out[:count].tolist()
        return ids


def _wordpiece_table(vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slots, chars, params) of transforms.tokenize.wordpiece_kernel: every token as a
    key looked up at a word start, and every `##` token's rest as a key
    looked up after `##`, as the original's `"##" + substr in vocab`. (Flat
    lists of strings and ints: a tuple per token would make the garbage
    collector walk all of Beam's objects.)"""
    tokens = list(vocab.ids)
    ids = list(vocab.ids.values())
    tails = [i for i, token in enumerate(tokens) if token.startswith("##") and len(token) > 2]
    chars, starts, lengths = jit.flat_keys(tokens + [tokens[i][2:] for i in tails])
    continuations = np.zeros(len(lengths), dtype=np.int64)
    continuations[len(tokens):] = 1
    key_ids = np.array(ids + [ids[i] for i in tails], dtype=np.int64)
    slots = jit.build_slots(chars, starts, lengths, continuations, key_ids)
    params = np.zeros(3, dtype=np.int64)
    params[jit.MAX_HEAD] = lengths[:len(tokens)].max()
    params[jit.MAX_TAIL] = lengths[len(tokens):].max(initial=0)
    params[jit.UNK] = vocab.unk_id
    return slots, chars, params
