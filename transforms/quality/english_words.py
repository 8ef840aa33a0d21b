"""English words and sentences as spaCy's English tokenizer and sentencizer
find them: what datatrove's C4, Gopher and FineWeb filters count, so that the
quality rules decide as they do (docs/quality.md, "Agreement").

spaCy itself splits ~0.6 MB of text a CPU-second, more than a whole run
spends on it; this module reproduces its tokenizer (spaCy's
Tokenizer.__call__: whitespace-separated chunks, special cases, prefixes and
suffixes stripped in turn, URLs whole, infixes, then the special cases found
among the tokens) and its sentencizer from their rules, which
english_words.json holds as spaCy 3.8.18's English defaults give them
(tests/helpers/spacy_english.py writes the file; the tests hold this module
to spaCy's own tokens and sentences). Each chunk's tokens are cached: a
text's chunks repeat, and a known chunk costs a dictionary lookup in C.
"""

from __future__ import annotations

import importlib.resources
import itertools
import json
import re
import unicodedata
from typing import Sequence

_RULES = json.loads(importlib.resources.files(__package__).joinpath("english_words.json")
                    .read_text(encoding="utf-8"))
_PREFIX = re.compile(_RULES["prefix"]).search
_SUFFIX = re.compile(_RULES["suffix"]).search
_INFIXES = re.compile(_RULES["infix"]).finditer
_URL = re.compile(_RULES["url"]).match
_SPECIAL: dict[str, tuple[str, ...]] = {text: tuple(tokens)
                                        for text, tokens in _RULES["special"].items()}


def _by_first_token(patterns: list[list[str]]) -> dict[str, list[tuple[str, ...]]]:
    """The special cases looked for among the tokens, by their first token (one
    token alone is already that special case's own text: nothing to look for)."""
    found: dict[str, list[tuple[str, ...]]] = {}
    for tokens in sorted(map(tuple, patterns)):
        if len(tokens) > 1:
            found.setdefault(tokens[0], []).append(tokens)
    return found


_MATCHED = _by_first_token(list(_RULES["matched"].values()))
# The characters that end a sentence for spaCy's sentencizer.
_SENTENCE_ENDS = frozenset(_RULES["sentence_ends"])
# Whitespace that spaCy makes a token of: anything but one space between chunks.
_WHITESPACE_TOKEN = re.compile(r"\s{2,}|[^\S ]")


def _parts(text: str) -> list[str]:
    """`text` split at its whitespace tokens. A printable text (every
    whitespace character but the space is not) without two spaces in a row,
    most lines, has none: the expression is skipped."""
    if text.isprintable() and "  " not in text:
        return [text]
    return _WHITESPACE_TOKEN.split(text)


def _length(match: re.Match | None) -> int:
    return match.end() - match.start() if match else 0


def _infix_split(text: str) -> list[str]:
    """A chunk's remainder split at its infixes (an infix at its start is none)."""
    tokens, start = [], 0
    for match in _INFIXES(text):
        if match.start() == 0:
            continue
        if match.start() != start:
            tokens.append(text[start:match.start()])
        if match.start() != match.end():
            tokens.append(match.group())
        start = match.end()
    if text[start:]:
        tokens.append(text[start:])
    return tokens


def _affix_tokens(chunk: str) -> tuple[str, ...]:
    """One whitespace-free chunk's tokens (spaCy's _split_affixes then _attach_tokens)."""
    prefixes: list[str] = []
    suffixes: list[str] = []
    text, last = chunk, 0
    while text and len(text) != last and text not in _SPECIAL:
        last = len(text)
        prefix_length = _length(_PREFIX(text))
        if prefix_length and text[prefix_length:] in _SPECIAL:
            prefixes.append(text[:prefix_length])
            text = text[prefix_length:]
            break
        suffix_length = _length(_SUFFIX(text[prefix_length:]))
        if suffix_length and text[:-suffix_length] in _SPECIAL:
            suffixes.append(text[-suffix_length:])
            text = text[:-suffix_length]
            break
        if prefix_length and suffix_length and prefix_length + suffix_length <= len(text):
            prefixes.append(text[:prefix_length])
            suffixes.append(text[-suffix_length:])
            text = text[prefix_length:-suffix_length]
        elif prefix_length:
            prefixes.append(text[:prefix_length])
            text = text[prefix_length:]
        elif suffix_length:
            suffixes.append(text[-suffix_length:])
            text = text[:-suffix_length]
    if not text:
        middle: tuple[str, ...] | list[str] = ()
    elif text in _SPECIAL:
        middle = _SPECIAL[text]
    elif _URL(text):
        middle = (text,)
    else:
        middle = _infix_split(text)
    return (*prefixes, *middle, *reversed(suffixes))


def _special_spans(tokens: Sequence[str]) -> list[tuple[int, int]]:
    """(length, start) of each special case found among the tokens."""
    return [(len(pattern), start) for start, token in enumerate(tokens)
            for pattern in _MATCHED.get(token, ())
            if tuple(tokens[start:start + len(pattern)]) == pattern]


# Each chunk's tokens before the last pass, and the chunks among them whose
# tokens hold a special case. A pair, replaced whole when full (a thread
# keeps the pair it began a text with, so both agree), and a chunk goes into
# the set before the dict: a chunk a reader finds in the dict is in the set.
_KNOWN_CHUNKS = 1 << 17
_known: tuple[dict[str, tuple[str, ...]], set[str]] = ({}, set())


def forget_chunks() -> None:
    """Empties the chunk cache (bench/quality_cost.py times each pass as a
    worker's first)."""
    global _known
    _known = ({}, set())


def _learn(chunk: str, known: tuple[dict[str, tuple[str, ...]], set[str]]) -> tuple[str, ...]:
    tokens = _SPECIAL.get(chunk) or ((chunk,) if chunk.isalpha() else _affix_tokens(chunk))
    if len(known[0]) >= _KNOWN_CHUNKS:  # the next texts begin a fresh pair
        forget_chunks()
    if len(tokens) > 1 and _special_spans(tokens):
        known[1].add(chunk)
    known[0][chunk] = tokens
    return tokens


def _first_pass(chunks: Sequence[str]) -> tuple[list[tuple[str, ...]], bool]:
    """Each chunk's tokens, and whether a chunk's own tokens hold a special
    case. The lookups run in C: a text's chunks repeat, letters alone most."""
    known = _known
    tokens = list(map(known[0].get, chunks))
    if None in tokens:
        tokens = [found if found is not None else _learn(chunk, known)
                  for found, chunk in zip(tokens, chunks)]
    return tokens, not known[1].isdisjoint(chunks)


def _last_pass(chunks: Sequence[str]) -> list[str]:
    """The tokens of chunks between two whitespace tokens (joined by single
    spaces), with spaCy's last pass: the special cases found among them,
    longest then first, each token in at most one. A span across chunks
    holds a space: it takes its tokens but changes nothing."""
    per_chunk, found = _first_pass(chunks)
    tokens = list(itertools.chain.from_iterable(per_chunk))
    if not found:
        return tokens
    chunk_of = [index for index, chunk_tokens in enumerate(per_chunk) for _ in chunk_tokens]
    seen: set[int] = set()
    kept = []
    for length, start in sorted(_special_spans(tokens), key=lambda span: (-span[0], span[1])):
        if start not in seen and start + length - 1 not in seen:
            kept.append((start, length))
        seen.update(range(start, start + length))
    for start, length in sorted(kept, reverse=True):
        if chunk_of[start] == chunk_of[start + length - 1]:
            tokens[start:start + length] = _SPECIAL["".join(tokens[start:start + length])]
    return tokens


def words_of(text: str) -> list[str]:
    """`text`'s words: spaCy's English tokens without the whitespace ones,
    as datatrove's word_tokenize returns them. The last pass runs only
    between the whitespace tokens around a chunk whose own tokens hold a
    special case (a few texts in a hundred)."""
    per_chunk, found = _first_pass(text.split())
    if found:
        return [word for part in _parts(text)
                for word in _last_pass(part.split())]
    return list(itertools.chain.from_iterable(per_chunk))


def _punctuation(token: str) -> bool:
    """spaCy's is_punct: every character of Unicode's category P."""
    return not token[0].isalnum() and all(unicodedata.category(c)[0] == "P" for c in token)


def words_and_sentences(text: str) -> tuple[list[str], int]:
    """`text`'s words (as words_of) and how many sentences spaCy's
    sentencizer finds in it (a sentence starts at the first token after a
    sentence-ending character that is not punctuation, a whitespace token
    too), as datatrove's C4 filter counts a line's sentences."""
    words: list[str] = []
    sentences, after_end = 1, False
    for number, part in enumerate(_parts(text)):
        if number and after_end:  # the whitespace token before this part
            sentences, after_end = sentences + 1, False
        tokens = _last_pass(part.split())
        for token in tokens:
            if token in _SENTENCE_ENDS:
                after_end = True
            elif after_end and not _punctuation(token):
                sentences, after_end = sentences + 1, False
        words += tokens
    return words, sentences
