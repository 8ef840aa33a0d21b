"""A Hugging Face `tokenizer.json` as the pipeline's tokenizer (`--tokenizer_file`):
byte-level BPE, WordPiece or Unigram, whatever the file says, through the
`tokenizers` library itself.

Each line is encoded alone (`add_special_tokens=False`, as fairseq's RoBERTa
preprocessing encodes lines), so a sentence's ids never depend on its
neighbours. The special tokens are the file's: the framing of one and two
segments is read by running its own post-processor on two known sequences, the
mask, pad and unknown tokens from its added tokens. A token that continues the
word of the token before it (`Encoding.word_ids`) carries MARK where it occurs
(transforms.tokenize.chinese_words), so whole-word masking and ALBERT's
token_boundary group a word's tokens for every kind of model alike.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import os
from typing import Sequence

from bert_pretraining_data.transforms.handoff.files import open_binary
from bert_pretraining_data.transforms.tokenize.chinese_words import ID_BITS, MARK
from bert_pretraining_data.transforms.tokenize.engines import (TOKENIZERS, Unencodable,
                                                               fast_engine)
from bert_pretraining_data.transforms.tokenize.vocabulary import (Framing, Opener, Vocabulary,
                                                                  VocabularyError,
                                                                  read_vocabulary_file)

FLAG = "--tokenizer_file"
PARALLELISM = "TOKENIZERS_PARALLELISM"  # the library's switch for its thread pool
# Two texts whose encodings the post-processor frames, to read its framing.
_PROBE_A, _PROBE_B = "hello world", "good morning"


@dataclasses.dataclass(frozen=True)
class JsonVocabulary(Vocabulary):
    """A tokenizer.json's tokens in id order, its framing and special ids, and
    the file's bytes, which the tokenizer loads (on each worker)."""

    framing: Framing = Framing(0, 0)  # the file's, in place of Vocabulary's
    mask: int = 0
    pad: int = 0
    unk: int = -1  # byte-level BPE has no unknown token
    data: bytes = dataclasses.field(default=b"", repr=False, compare=False)
    lowercases: bool = False  # its normalizer lowercases text
    model: str = "BPE"  # its model's kind: BPE, WordPiece, Unigram, WordLevel
    source: str = dataclasses.field(default="tokenizer.json", compare=False)  # where it was read

    def own_flags(self) -> dict[str, object]:
        """The file decides what --do_lower_case and --tokenization say of a
        vocab.txt, which --tokenizer_file refuses: the manifest records the file's."""
        return {"do_lower_case": self.lowercases, "tokenization": self.model}

    @property
    def cls_id(self) -> int:
        return self.framing.cls_id

    @property
    def sep_id(self) -> int:
        return self.framing.sep_id

    @property
    def mask_id(self) -> int:
        return self.mask

    @property
    def unk_id(self) -> int:
        return self.unk

    @property
    def pad_id(self) -> int:
        return self.pad

    def continuation_flags(self) -> list[bool]:
        """No id continues a word by itself: continuations are marked where
        they occur, from the library's word ids."""
        return [False] * len(self.tokens)

    def tokenizer(self):
        """The library's tokenizer of this file, encoding lines as they are:
        the file's own truncation and padding, if any, switched off."""
        return _library_tokenizer(self.data)


@functools.lru_cache(maxsize=4)
def _library_tokenizer(data: bytes):
    """One library tokenizer a process for each file: the run's check, its
    tokenize steps and the disk estimate each ask for one, and loading a
    file of many merges takes a tenth of a second or more (the library's
    tokenizer is shared between threads: it encodes without changing)."""
    from tokenizers import Tokenizer

    return _as_pipeline_encodes(Tokenizer.from_str(data.decode("utf-8")))


def _as_pipeline_encodes(tokenizer):
    """The tokenizer set to encode lines as they are: no truncation or padding
    the file may ask for, and text that spells a special token (`</s>`,
    `[MASK]`, WikiText's `<unk>`) encoded as text, as FullTokenizer does, so
    that a corpus cannot put a separator or a mask into the data."""
    tokenizer.no_truncation()
    tokenizer.no_padding()
    tokenizer.encode_special_tokens = True
    return tokenizer


def _error(source: str, problem: str) -> VocabularyError:
    return VocabularyError(f"{source}: {problem}")


def _special(added: dict, name: str) -> int | None:
    """The id of the special added token spelled `[NAME]` or `<name>`."""
    for token_id, token in sorted(added.items()):
        if token.special and token.content.strip("[]<>").lower() == name:
            return token_id
    return None


def _framing(tokenizer, source: str) -> Framing:
    """The framing the file's post-processor applies, read by running it."""
    a = tokenizer.encode(_PROBE_A, add_special_tokens=False)
    b = tokenizer.encode(_PROBE_B, add_special_tokens=False)
    single = tokenizer.post_process(a, None, True)
    pair = tokenizer.post_process(a, b, True)
    ids, n_a, n_b = list(single.ids), len(a.ids), len(b.ids)
    shape = ("frames one segment as " + " ".join(single.tokens) + " and two as "
             + " ".join(pair.tokens))
    unknown = _error(source, f"its post-processor {shape}; the pipeline needs CLS A SEP and "
                             "CLS A SEP (SEP) B SEP: use a tokenizer.json whose post-processor "
                             "is BertProcessing, RobertaProcessing or such a TemplateProcessing")
    if len(ids) != n_a + 2 or ids[1:-1] != a.ids or set(single.type_ids) != {0}:
        raise unknown
    cls_id, sep_id = ids[0], ids[-1]
    pair_ids = list(pair.ids)
    separators = len(pair_ids) - n_a - n_b - 2
    expected = [cls_id, *a.ids, *[sep_id] * separators, *b.ids, sep_id]
    if separators not in (1, 2) or pair_ids != expected:
        raise unknown
    b_types = set(pair.type_ids[n_a + 1 + separators:])
    if set(pair.type_ids[:n_a + 1 + separators]) != {0} or len(b_types) != 1:
        raise unknown
    return Framing(cls_id, sep_id, separators, b_types.pop())


def parse_tokenizer_json(data: bytes, *, source: str = "tokenizer.json") -> JsonVocabulary:
    """Reads and validates a tokenizer.json: it loads in the library, frames
    segments as the kernels write them, and has mask and pad tokens.

    Raises:
      VocabularyError: one line saying what is wrong and what to pass instead.
    """
    if importlib.util.find_spec("tokenizers") is None:
        raise _error(source, "reading a tokenizer.json needs the tokenizers library: pip "
                             "install 'bert-pretraining-data[tokenizers]'")
    if not data.strip():
        raise _error(source, f"the tokenizer file is empty; pass the tokenizer.json of the "
                             f"model to train as {FLAG}")
    try:
        tokenizer = _library_tokenizer(data)
    except Exception as err:  # the library raises a plain Exception on bad JSON
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise _error(source, f"not a tokenizer.json the tokenizers library can load "
                             f"({reason}); pass a Hugging Face tokenizer.json") from None
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    tokens = tuple(tokenizer.id_to_token(i) for i in range(size))
    if None in tokens:
        raise _error(source, f"its ids are not 0..{size - 1} (id {tokens.index(None)} has no "
                             "token); re-save it with the tokenizers library")
    added = tokenizer.get_added_tokens_decoder()
    mask, pad = _special(added, "mask"), _special(added, "pad")
    if mask is None:
        raise _error(source, "it has no mask token (a special added token [MASK] or "
                             "<mask>); masked-LM data needs one: add it when training the "
                             "tokenizer (create-vocab --special_tokens does)")
    if pad is None:
        raise _error(source, "it has no pad token (a special added token [PAD] or <pad>); "
                             "add it when training the tokenizer")
    unk = _special(added, "unk")
    normalizer = tokenizer.normalizer
    return JsonVocabulary(
        tokens=tokens, sha256=hashlib.sha256(data).hexdigest(),
        framing=_framing(tokenizer, source), mask=mask, pad=pad,
        unk=-1 if unk is None else unk, data=data,
        lowercases=normalizer is not None and normalizer.normalize_str("A") == "a",
        model=type(tokenizer.model).__name__, source=source)


def load_tokenizer_json(path: str, open_file: Opener = open_binary) -> JsonVocabulary:
    """Reads (with `open_file`) and validates a tokenizer.json."""
    data = read_vocabulary_file(path, open_file, what="the tokenizer file", flags=FLAG)
    return parse_tokenizer_json(data, source=path)


def marked_ids(ids: Sequence[int], word_ids: Sequence[int | None]) -> list[int]:
    """The ids with MARK on each that continues the word of the one before it."""
    marked = list(ids)
    for i in range(1, len(marked)):
        if word_ids[i] is not None and word_ids[i] == word_ids[i - 1]:
            marked[i] |= MARK
    return marked


class TextNotEncodable(ValueError):
    """Text the tokenizer.json cannot encode (a model with no unknown token
    meets a character its vocabulary lacks): one line naming the file, the
    text and what to change."""


def not_encodable(vocabulary: JsonVocabulary, line: str, err: Exception) -> TextNotEncodable:
    """The error of `line`, which the library refused with `err`."""
    shown = line if len(line) <= 80 else line[:77] + "..."
    return TextNotEncodable(
        f"{vocabulary.source} cannot encode the line {shown!r} ({err}): give its model an "
        "unknown token (a Unigram's unk_id, a BPE's unk_token) or byte_fallback, or "
        "remove the characters its vocabulary lacks from the corpus")


class JsonTokenizer:
    """The Tokenizer of a tokenizer.json (transforms.tokenize.tokenizer_spec):
    a batch of lines in one call, ids marked where a token continues a word
    when the run groups words (`words`)."""

    def __init__(self, vocabulary: JsonVocabulary, *, words: bool = True,
                 engine: str = TOKENIZERS) -> None:
        # One thread: a runner already keeps a worker process busy per core,
        # and the library's thread pool, woken for every document's batch,
        # costs more CPU (system time most of all) than it saves
        # (docs/tokenizers.md#speed). A user's own setting stands.
        os.environ.setdefault(PARALLELISM, "false")
        self.vocabulary = vocabulary
        self._tokenizer = vocabulary.tokenizer()
        self._words = words
        # The faster engine the run checked (transforms.tokenize.engines); where
        # a worker cannot load it, the library gives the same ids.
        found = fast_engine(vocabulary) if engine != TOKENIZERS and not words else None
        fast = found if found is not None and found.name == engine else None
        self._fast = fast.ids if fast is not None else None
        # Tokenize's whole-document path (transforms.tokenize.document), the
        # faster engine's, which makes no list of ids; None for the library.
        self.compact_lines = fast.compact_lines if fast is not None else None

    def lines_to_ids(self, lines: Sequence[str]) -> list[list[int]]:
        """Each line's ids as the library encodes it alone, in one batch call.

        Without `words`, the library's call that works out neither offsets
        nor word ids: the same ids for less CPU (docs/tokenizers.md#speed)."""
        try:
            if self._fast is not None:
                return self._fast(lines)
        except Unencodable:
            pass  # the library says what it cannot encode
        try:
            if not self._words:
                return [e.ids for e in self._tokenizer.encode_batch_fast(
                    list(lines), add_special_tokens=False)]
            encodings = self._tokenizer.encode_batch(list(lines), add_special_tokens=False)
        except Exception as err:  # noqa: BLE001 - the library raises Exception itself
            raise self._refused(lines, err) from None
        return [marked_ids(e.ids, e.word_ids) for e in encodings]

    def _refused(self, lines: Sequence[str], err: Exception) -> TextNotEncodable:
        """The error of the first of `lines` the library refuses alone."""
        for line in lines:
            try:
                self._tokenizer.encode(line, add_special_tokens=False)
            except Exception as alone:  # noqa: BLE001
                return not_encodable(self.vocabulary, line, alone)
        return not_encodable(self.vocabulary, lines[0] if lines else "", err)

    def tokenize_to_ids(self, text: str) -> list[int]:
        return self.lines_to_ids([text])[0]

    def tokenize(self, text: str) -> list[str]:
        return self._tokenizer.encode(text, add_special_tokens=False).tokens

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self.vocabulary.tokens[i & ID_BITS] for i in ids]

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self.vocabulary.ids[token] for token in tokens]
