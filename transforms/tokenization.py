"""FullTokenizer-exact WordPiece tokenization, an order of magnitude faster.

BERT's `FullTokenizer` (BasicTokenizer then WordpieceTokenizer) walks every
character in Python. Its steps split into two kinds:

* line-level character maps (drop NUL / U+FFFD / Cc / Cf, turn whitespace
  into spaces, put spaces around CJK ideographs) then `str.split()`; here they
  run in C through `str.translate` and one regex substitution;
* everything after the split (lower-casing, accent stripping, punctuation
  splitting, greedy longest-match WordPiece) is a pure function of one
  whitespace-separated word; here each distinct word is computed once and its
  ids are cached, so the Python work per word is one dict lookup.

Both keep the original's semantics exactly, including its quirks: lower-casing
per word (Greek final sigma), `[MASK]` in raw text split as punctuation,
only Cc/Cf removed (private-use and unassigned characters survive), `[UNK]`
for words over 200 characters, Python's own Unicode database.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import chain
from typing import Sequence

from bert_pretraining_data.transforms.vocabulary import Vocabulary, load_vocabulary

MAX_INPUT_CHARS_PER_WORD = 200
_CACHE_LIMIT = 1 << 18  # distinct words kept; cleared when full (memory bound)

# The original's CJK blocks (Unified Ideographs, extensions A-E, compatibility).
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)
# C0/C1 controls other than tab, LF and CR, DEL, and U+FFFD (a decoding
# repair): the characters the tokenizer deletes that signal damaged text.
_DAMAGE_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd]")
# An ASCII word after cleaning holds no space or control character, so every
# non-alphanumeric character in it is one of the original's punctuation marks.
_ASCII_PIECES_RE = re.compile(r"[0-9A-Za-z]+|[^0-9A-Za-z]")


def is_cjk(char: str) -> bool:
    """A CJK ideograph, by the original's blocks (`_is_chinese_char`)."""
    cp = ord(char)
    return any(first <= cp <= last for first, last in _CJK_RANGES)


def _translation(cp: int) -> str | None:
    """What the original's `_clean_text` and CJK spacing make of one character:
    NUL, U+FFFD, Cc and Cf dropped, whitespace (tab, LF, CR, Zs) a space, a CJK
    ideograph spaced, anything else itself."""
    char = chr(cp)
    if cp in (0, 0xFFFD):
        return None
    if char in "\t\n\r":
        return " "
    if is_cjk(char):
        return f" {char} "
    category = unicodedata.category(char)
    if category == "Zs":
        return " "
    return None if category in ("Cc", "Cf") else char


class _CharacterMap(dict):
    """The `str.translate` map, filled one character at its first sight.

    A corpus uses a few thousand of the 1.1 M code points; building the whole
    table took ~0.5 s in every process that tokenizes (each worker).
    """

    def __missing__(self, cp: int) -> str | None:
        self[cp] = translation = _translation(cp)
        return translation


_CHARACTERS = _CharacterMap()


def split_words(text: str) -> list[str]:
    """The original's text cleanup, CJK spacing and whitespace split."""
    return text.translate(_CHARACTERS).split()


def count_control_characters(text: str) -> int:
    """Control characters (and U+FFFD) in a line, which tokenization deletes
    exactly as the original does; counted so that damaged input shows."""
    return len(_DAMAGE_RE.findall(text))


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


class FullTokenizer:
    """Text to WordPiece ids or tokens, identical to BERT's FullTokenizer.

    Constructed as the original is, `FullTokenizer(vocab_file=...,
    do_lower_case=...)`, it has the original's interface (`tokenize`,
    `convert_tokens_to_ids`, `convert_ids_to_tokens`, `vocab` and `inv_vocab`
    dicts), so code written against BERT's `tokenization.py` runs unchanged;
    `vocab_file` may also be a loaded Vocabulary (`vocabulary`).

    Build it once per process (it holds a vocabulary and a word cache); it is
    not meant to be pickled to Beam workers: construct it in `DoFn.setup`.
    """

    def __init__(self, vocab_file: "str | Vocabulary", do_lower_case: bool = True) -> None:
        vocab = (vocab_file if isinstance(vocab_file, Vocabulary)
                 else load_vocabulary(vocab_file))
        self.vocabulary = vocab
        self.vocab = vocab.ids  # token -> id, in id order, as the original's
        self.inv_vocab = dict(enumerate(vocab.tokens))
        self.do_lower_case = do_lower_case
        self._ids = vocab.ids
        self._unk = (vocab.unk_id,)
        # Longest candidate worth looking up, at a word start and after `##`.
        self._max_head = max(len(t) for t in vocab.tokens)
        self._max_tail = max((len(t) - 2 for t in vocab.tokens if t.startswith("##")),
                             default=0)
        self._word_cache: dict[str, tuple[int, ...]] = {}
        self._piece_cache: dict[str, tuple[int, ...]] = {}

    def tokenize_to_ids(self, text: str) -> list[int]:
        """WordPiece ids of one line of text."""
        words = split_words(text)
        try:  # all words seen before: the whole line runs in C
            return list(chain.from_iterable(map(self._word_cache.__getitem__, words)))
        except KeyError:  # compute the new words, then the line runs in C again
            cache = self._word_cache
            missing = [word for word in words if word not in cache]
            if len(cache) + len(missing) >= _CACHE_LIMIT:  # the cache will be cleared
                return [i for word in words for i in self._word_ids(word)]
            for word in missing:
                self._word_ids(word)
            return list(chain.from_iterable(map(cache.__getitem__, words)))

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of one line of text, as the original returns them."""
        return self.convert_ids_to_tokens(self.tokenize_to_ids(text))

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        tokens = self.vocabulary.tokens
        return [tokens[i] for i in ids]

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self._ids[t] for t in tokens]

    def _word_ids(self, word: str) -> tuple[int, ...]:
        cached = self._word_cache.get(word)
        if cached is not None:
            return cached
        ids: list[int] = []
        for part in basic_pieces(word, do_lower_case=self.do_lower_case):
            piece_ids = self._piece_cache.get(part)
            if piece_ids is None:
                piece_ids = self._remember(self._piece_cache, part, self._wordpiece(part))
            ids += piece_ids
        return self._remember(self._word_cache, word, tuple(ids))

    @staticmethod
    def _remember(cache: dict, key: str, value: tuple[int, ...]) -> tuple[int, ...]:
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[key] = value
        return value

    def _wordpiece(self, piece: str) -> tuple[int, ...]:
        """Greedy longest-match-first, `##` continuations, `[UNK]` if stuck."""
        length = len(piece)
        if length > MAX_INPUT_CHARS_PER_WORD:
            return self._unk
        lookup = self._ids.get
        ids: list[int] = []
        start = 0
        while start < length:
            if start == 0:
                end, prefix = min(length, self._max_head), ""
            else:
                end, prefix = min(length, start + self._max_tail), "##"
            found = None
            while end > start:
                found = lookup(prefix + piece[start:end])
                if found is not None:
                    break
                end -= 1
            if found is None:
                return self._unk
            ids.append(found)
            start = end
        return tuple(ids)
