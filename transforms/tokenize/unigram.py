"""A Unigram tokenizer.json (SentencePiece's model as the `tokenizers` library
runs it: XLM-R's kind) on this project's compiled Viterbi
(transforms.tokenize.unigram_kernel), for the structures it reproduces:

- normalizers NFC, NFD, NFKC, NFKD (Python's `unicodedata`), Lowercase
  (character by character, as the library lowercases: no final sigma),
  Replace, Prepend, Strip, and SentencePiece's Precompiled character map
  (transforms.tokenize.precompiled_charsmap: what `transformers` writes
  converting a `.model`), or a Sequence of them;
- a Metaspace pre-tokenizer (any replacement character, prepend scheme and
  split), or none;
- a Unigram model without byte fallback, each piece once, and no added
  token but special ones (the pipeline encodes those as text).

Anything else is None here and takes the library. Python's and the `regex`
module's Unicode tables may be older or newer than the library's: the
per-run check (transforms.tokenize.engines.choose_engine) is what makes a
difference on the run's own input send it to the library.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
import unicodedata
from itertools import accumulate
from typing import Callable, Sequence

import numpy as np

from bert_pretraining_data.transforms.handoff.tokenized_documents import TokenizedDocument
from bert_pretraining_data.transforms.tokenize import unigram_kernel as jit
from bert_pretraining_data.transforms.tokenize.compiled_calls import (WHOLE_DOCUMENT_CHARACTERS,
                                                                      CompactWriter, direct)
from bert_pretraining_data.transforms.tokenize.engines import (Unencodable, normalizer_parts,
                                                               plain_added_tokens)
from bert_pretraining_data.transforms.tokenize.precompiled_charsmap import PrecompiledCharsMap
from bert_pretraining_data.transforms.tokenize.wordpiece_kernel import flat_keys

_FORMS = ("NFC", "NFD", "NFKC", "NFKD")
_SIGMA = "\u03a3"
# what the library's Strip removes: Rust's char::is_whitespace, Unicode's
# White_Space (Python's str.strip() would also take U+001C..U+001F)
_WHITE_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def _lowercase(text: str) -> str:
    """The library's Lowercase: each character's lowercase alone (Python's
    str.lower makes a word-final capital sigma a final sigma)."""
    return text.lower() if _SIGMA not in text else "".join(c.lower() for c in text)


# a character repeated n or more times ("c{n,}"), which only a text holding
# n of them in a row can match: `transformers`' SentencePiece conversions
# squeeze runs of spaces with " {2,}"
_RUN = re.compile(r"([^\\.^$*+?{}\[\]|()])\{(\d+),\}")


def _replace(pattern: dict, content: str) -> Callable[[str], str] | None:
    if "String" in pattern:
        return lambda text: text.replace(pattern["String"], content)
    if "Regex" not in pattern:
        return None
    substitute = functools.partial(re.compile(pattern["Regex"]).sub,
                                   content.replace("\\", r"\\"))
    run = _RUN.fullmatch(pattern["Regex"])
    if run is None:
        return substitute
    needle = run.group(1) * int(run.group(2))
    return lambda text: substitute(text) if needle in text else text


def _prepend(prefix: str) -> Callable[[str], str]:
    return lambda text: prefix + text if text else text


def _strip(left: bool, right: bool) -> Callable[[str], str]:
    def strip(text: str) -> str:
        text = text.lstrip(_WHITE_SPACE) if left else text
        return text.rstrip(_WHITE_SPACE) if right else text
    return strip


def _precompiled(charsmap: str | None) -> Callable[[str], str] | None:
    try:
        blob = base64.b64decode(charsmap or "", validate=True)
    except binascii.Error:
        return None
    return PrecompiledCharsMap(blob) if len(blob) > 4 else None


def _normalizer_steps(normalizer: dict | None) -> list[Callable[[str], str]] | None:
    """The normalizer as Python steps, or None for one not reproduced here."""
    steps = [_step(part) for part in normalizer_parts(normalizer)]
    return None if None in steps else steps


def _step(part: dict) -> Callable[[str], str] | None:
    """One normalizer (not a Sequence) as a Python step, or None."""
    kind = part.get("type")
    if kind in _FORMS:
        return functools.partial(unicodedata.normalize, kind)
    return {"Lowercase": lambda: _lowercase,
            "Replace": lambda: _replace(part.get("pattern") or {}, part.get("content", "")),
            "Prepend": lambda: _prepend(part.get("prepend", "")),
            "Strip": lambda: _strip(part.get("strip_left", True), part.get("strip_right", True)),
            "Precompiled": lambda: _precompiled(part.get("precompiled_charsmap")),
            }.get(kind, lambda: None)()


class UnigramKernel:
    """A tokenizer.json's ids on the Viterbi kernel; build with `of`."""

    def __init__(self, steps: list[Callable[[str], str]], pre_tokenizer: dict | None,
                 pieces: Sequence[str], scores: Sequence[float], unk: int) -> None:
        self._steps = steps
        self._replacement = (pre_tokenizer or {}).get("replacement")
        self._prepend = (pre_tokenizer or {}).get("prepend_scheme") in ("always", "first")
        self.params = params = np.zeros(5, dtype=np.int64)  # settings; the word cache counts here
        params[jit.UNK] = unk
        params[jit.REPLACEMENT] = ord(self._replacement) if self._replacement else -1
        params[jit.SPLIT] = bool(pre_tokenizer and pre_tokenizer.get("split", True))
        scores_array = np.array(scores, dtype=np.float64)
        self._tables = (*jit.build_trie(*flat_keys(pieces)), scores_array,
                        params, float(scores_array.min()) - jit.UNK_PENALTY, *jit.word_cache())
        self._writer = CompactWriter()
        self._reserve(256, 16)
        self._lines_ids = direct(jit.lines_ids, "", self._ends[:0], *self._tables,
                                 *self._buffers)

    @classmethod
    def of(cls, tokenizer_json: str) -> "UnigramKernel | None":
        """The kernel of a tokenizer.json as the library saves it, or None
        where the file's structure is not one the kernel reproduces."""
        spec = json.loads(tokenizer_json)
        model = spec.get("model") or {}
        pre = spec.get("pre_tokenizer")
        steps = _normalizer_steps(spec.get("normalizer"))
        pieces = [piece for piece, _ in model.get("vocab") or []]
        if (model.get("type") != "Unigram" or model.get("byte_fallback") or steps is None
                or not pieces or len(set(pieces)) != len(pieces) or "" in pieces
                or (pre is not None and (pre.get("type") != "Metaspace"
                                         or len(pre.get("replacement", "")) != 1))
                or plain_added_tokens(spec)):
            return None
        unk = model.get("unk_id")
        return cls(steps, pre, pieces, [score for _, score in model["vocab"]],
                   -1 if unk is None else unk)

    def _reserve(self, characters: int, lines: int) -> None:
        """Buffers for prepared lines of this many characters in all."""
        size = characters + 1
        self._capacity, self._line_capacity = characters, lines
        self._ends = np.zeros(lines, dtype=np.int64)
        self._out, self._bounds = np.zeros(size, dtype=np.int32), np.zeros(lines + 1, np.int64)
        self._buffers = (np.zeros(size, dtype=np.int32), np.zeros(size, dtype=np.float64),
                         np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64),
                         self._out, self._bounds)

    def prepared(self, line: str) -> str:
        """The line normalized, its spaces the replacement, a prefix added."""
        for step in self._steps:
            line = step(line)
        if self._replacement is not None:
            line = line.replace(" ", self._replacement)
            if self._prepend and line and not line.startswith(self._replacement):
                line = self._replacement + line
        return line

    def _ids(self, texts: list[str]) -> int:
        """The ids of prepared lines, in one call, into `_out` (line l's
        between `_bounds` l and l + 1); returns their count, or
        jit.UNENCODABLE."""
        text = "".join(texts)
        if len(text) > self._capacity or len(texts) > self._line_capacity:
            self._reserve(max(len(text), self._capacity), max(len(texts), self._line_capacity))
        ends = self._ends[:len(texts)]
        ends[:] = list(accumulate(map(len, texts)))
        return self._lines_ids(text, ends, *self._tables, *self._buffers)

    @staticmethod
    def _whole(texts: list[str]) -> bool:
        """Whether a document's prepared lines go in one call: not past
        WHOLE_DOCUMENT_CHARACTERS (its lines then go one by one, so that the
        buffers, kept for the worker's life, stay a line's size)."""
        return sum(map(len, texts)) <= WHOLE_DOCUMENT_CHARACTERS

    def __call__(self, lines: Sequence[str]) -> list[list[int]]:
        """Each line's ids, encoded alone, without special tokens."""
        texts = list(map(self.prepared, lines))
        result = []
        for group in [texts] if self._whole(texts) else [[text] for text in texts]:
            count = self._ids(group)
            if count == jit.UNENCODABLE:  # the library says which line, and why
                raise Unencodable("a character no piece covers, and no unknown id")
            ids, bounds = self._out[:count].tolist(), self._bounds[:len(group) + 1].tolist()
            result.extend(ids[start:end] for start, end in zip(bounds, bounds[1:]))
        return result

    def compact_lines(self, lines: Sequence[str], *, unk: int) -> TokenizedDocument | None:
        """A document's lines, each a sentence, as Tokenize hands them on (no
        list of ids is made), [UNK] counted as `unk`; None for a document
        that `__call__` takes line by line or cannot encode."""
        texts = list(map(self.prepared, lines))
        count = self._ids(texts) if self._whole(texts) else jit.UNENCODABLE
        if count == jit.UNENCODABLE:
            return None
        return self._writer.write(self._out[:count], self._bounds[:len(texts) + 1], unk,
                                  lines=len(texts), tokens=count)
