"""The engine that encodes a tokenizer.json's lines: the `tokenizers` library
(the one the file is made for), or a faster one where it is exact
(`--tokenizer_engine=auto`): `fastokens`, which reads the same file, for
byte-level BPE; this project's WordPiece kernel (BERT's FullTokenizer,
compiled) for a BERT WordPiece file; and its Viterbi kernel for a Unigram.

fastokens reproduces byte-level BPE as encoders ship it: a BPE model behind
a ByteLevel pre-tokenizer (RoBERTa's, GPT-2's), or behind `Split`
pre-tokenizers and a ByteLevel without its own regex (Llama-3's), with no
normalizer or an NFC or Lowercase one, or a Sequence of them (GPT-NeoX's and
OLMo's NFC: ModernBERT's family); and a SentencePiece BPE as `transformers`
converts one (Gemma's, mmBERT's tokenizer; Llama-2's). A BERT WordPiece file
takes the WordPiece kernel (`wordpiece_case`); a Unigram behind NFKC or
SentencePiece's Precompiled character map and Metaspace (XLM-R's kind), the
Unigram kernel (transforms.tokenize.unigram lists the structures). Anything
else takes `tokenizers`: the normalizers and pre-tokenizers the engines do
not read. fastokens does not read every post-processor,
and ids without special tokens never pass one, so its copy of the file has
none; nor special added tokens, whose text the pipeline encodes as text
(other added tokens stay: the library splits them out of any text). The
faster engines give ids only, no word ids, so a run that groups words
(whole-word masking, ALBERT's token_boundary) takes `tokenizers` too.

Exact is checked, not trusted: before any work, the run encodes a stable
sample of its own input's lines with both engines, and a single difference
sends the whole run to `tokenizers`, with a warning that names the engine
and the line (transforms.tokenize.engines.choose_engine).
"""

from __future__ import annotations

import functools
import json
import os
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

import numpy as np

if TYPE_CHECKING:  # numba's, imported where an engine is built
    from bert_pretraining_data.transforms.handoff.tokenized_documents import TokenizedDocument
    from bert_pretraining_data.transforms.tokenize.compiled_calls import CompactWriter

TOKENIZERS = "tokenizers"
FASTOKENS = "fastokens"
WORDPIECE = "wordpiece"  # this project's kernel, for a BERT WordPiece tokenizer.json
UNIGRAM = "unigram"  # this project's Viterbi kernel, for a Unigram tokenizer.json
ENGINES = ("auto", TOKENIZERS)  # --tokenizer_engine: what a user may ask for
# Lines of the run's own input both engines encode before the run uses the
# fast one: a difference on 1 line in 1,000 is missed with probability
# 0.999^5000 < 0.7%.
CHECK_LINES = 5_000
# fastokens' thread pools: one thread, as `tokenizers` runs (a runner keeps
# a worker process busy per core).
_THREADS = ("FASTOKENS_BPE_THREADS", "RAYON_NUM_THREADS")


class Unencodable(ValueError):
    """A line a faster engine cannot encode (a character no piece covers, for
    a model without an unknown id): the library, which says so in its own
    words, takes it."""


@functools.lru_cache(maxsize=4)
def fast_engine_json(data: bytes) -> str | None:
    """The tokenizer.json fastokens encodes exactly as the file says (its
    post-processor left out), or None for a file it does not reproduce."""
    try:
        spec = json.loads(data)
    except ValueError:
        return None
    model = spec.get("model") or {}
    decoder = spec.get("decoder") or {"type": "ByteLevel"}
    byte_level = (decoder.get("type") == "ByteLevel"
                  and _fast_pre_tokenizer(spec.get("pre_tokenizer") or {})
                  and _fast_normalizer(spec.get("normalizer")))
    if model.get("type") != "BPE" or not (byte_level or _sentencepiece_bpe(spec)):
        return None
    # The pipeline encodes special tokens' text as text (encode_special_tokens):
    # the copy has no special added tokens to match in it. Others (GPT-NeoX's
    # runs of spaces, OLMo's |||EMAIL_ADDRESS|||) the library splits out of
    # any text, and so does fastokens given them. Lines are encoded whole, as
    # the library is set to (tokenizer_json._as_pipeline_encodes): fastokens
    # applies a file's truncation and padding, which the copy has none of.
    return json.dumps({**spec, "post_processor": None, "truncation": None, "padding": None,
                       "added_tokens": plain_added_tokens(spec)})


def plain_added_tokens(spec: dict) -> list[dict]:
    """A tokenizer.json's added tokens that are not special: the library
    splits them out of any text before its model, so an engine reproduces
    the file only if it matches them too."""
    return [token for token in spec.get("added_tokens") or [] if not token.get("special")]


def _fast_pre_tokenizer(pre: dict) -> bool:
    """A ByteLevel pre-tokenizer, or Split ones then a ByteLevel without its
    own regex (Llama-3's), the structures fastokens reproduces."""
    if pre.get("type") == "ByteLevel":
        return True
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else []
    return (len(steps) > 1 and all(step.get("type") == "Split" for step in steps[:-1])
            and steps[-1].get("type") == "ByteLevel" and not steps[-1].get("use_regex", True))


def _sentencepiece_bpe(spec: dict) -> bool:
    """A SentencePiece BPE as `transformers` converts one (Gemma's, which is
    mmBERT's tokenizer; Llama-2's and Mistral's): spaces made U+2581 by
    Replace and Prepend normalizers of plain strings, no pre-tokenizer or
    Gemma's Split on a space (which the normalizer has left none of), byte
    fallback or not."""
    pre = spec.get("pre_tokenizer")
    steps = normalizer_parts(spec.get("normalizer"))
    return (bool(steps) and all(step.get("type") == "Prepend"
                                or (step.get("type") == "Replace"
                                    and "String" in (step.get("pattern") or {}))
                                for step in steps)
            and (pre is None or (pre.get("type") == "Split"
                                 and pre.get("pattern") == {"String": " "}
                                 and pre.get("behavior") == "MergedWithPrevious"
                                 and not pre.get("invert"))))


def normalizer_parts(normalizer: dict | None) -> list[dict]:
    """A tokenizer.json's normalizer as the steps it applies in turn, a
    Sequence's (and a Sequence's within it) flattened."""
    if normalizer is None:
        return []
    if normalizer.get("type") == "Sequence":
        return [step for inner in normalizer.get("normalizers") or []
                for step in normalizer_parts(inner)]
    return [normalizer]


def _fast_normalizer(normalizer: dict | None) -> bool:
    """No normalizer, NFC, Lowercase, or a Sequence of them."""
    return all(step.get("type") in ("NFC", "Lowercase") for step in normalizer_parts(normalizer))


@functools.lru_cache(maxsize=4)
def load_fast_engine(engine_json: str) -> Any | None:
    """fastokens' tokenizer of `engine_json` on one thread, or None where
    fastokens is not installed or cannot read it. One a process: the run's
    check and its tokenize steps share it (a file of many merges takes a
    fifth of a second to load), as a worker's threads do (eight threads
    encoding through one tokenizer get the ids one thread gets)."""
    for name in _THREADS:
        os.environ.setdefault(name, "1")
    try:
        import fastokens
    except ImportError:
        return None
    try:
        return fastokens.Tokenizer.from_json_str(engine_json)
    except Exception:  # noqa: BLE001 - any file it cannot read takes `tokenizers`
        return None


def fast_flat(engine: Any, lines: Sequence[str]) -> tuple[bytes, bytes]:
    """Each line's ids, encoded alone without special tokens, end to end:
    (the ids as uint32, each line's bounds in them as uint64, in the
    machine's byte order): fastokens makes no Python int for them."""
    return engine.encode_batch_flat(list(lines), add_special_tokens=False)


def fast_ids(engine: Any, lines: Sequence[str]) -> list[list[int]]:
    """Each line's ids, encoded alone, without special tokens."""
    ids, bounds = fast_flat(engine, lines)
    flat, ends = np.frombuffer(ids, np.uint32).tolist(), np.frombuffer(bounds, np.uint64).tolist()
    return [flat[start:end] for start, end in zip(ends, ends[1:])]


def fast_compact(engine: Any, writer: "CompactWriter", unk: int,
                 lines: Sequence[str]) -> "TokenizedDocument":
    """A document's lines as Tokenize hands them on, from fastokens' flat
    ids, through `writer` (a CompactWriter of write_counted_buffers)."""
    ids, bounds = fast_flat(engine, lines)
    return writer.write(ids, bounds, unk, lines=len(lines), tokens=len(ids) // 4)


class FastEngine(NamedTuple):
    """A faster engine: its name (the manifest's), each line's ids encoded
    alone (what the per-run check compares), and Tokenize's path for a
    document, its compact form written without lists of ids (None for a
    document it leaves to `ids`: one too long for a call, or unencodable)."""

    name: str
    ids: Callable[[Sequence[str]], list[list[int]]]
    compact_lines: Callable[[Sequence[str]], "TokenizedDocument | None"]


@functools.lru_cache(maxsize=4)  # parsed once a process, as fast_engine_json
def wordpiece_case(data: bytes) -> bool | None:
    """Whether this project's WordPiece kernel (BERT's FullTokenizer, compiled)
    lowercases to encode a tokenizer.json built as BERT's is
    (`BertWordPieceTokenizer`, `transformers`' conversion of a vocab.txt:
    BertNormalizer cleaning text, spacing CJK characters, stripping accents
    where it lowercases; BertPreTokenizer; WordPiece with `##` pieces, words of
    up to 100 characters, [UNK]); None for any other file."""
    try:
        spec = json.loads(data)
    except ValueError:
        return None
    normalizer = spec.get("normalizer") or {}
    model = spec.get("model") or {}
    lowercase = normalizer.get("lowercase", True)
    if plain_added_tokens(spec):
        return None  # FullTokenizer does not split them out
    if ((normalizer.get("type"), (spec.get("pre_tokenizer") or {}).get("type"), model.get("type"))
            != ("BertNormalizer", "BertPreTokenizer", "WordPiece")
            or not normalizer.get("clean_text", True)
            or not normalizer.get("handle_chinese_chars", True)
            or normalizer.get("strip_accents") not in (None, lowercase)
            or (model.get("continuing_subword_prefix"), model.get("max_input_chars_per_word"),
                model.get("unk_token")) != ("##", 100, "[UNK]")):
        return None
    return bool(lowercase)


def fast_engine(vocabulary: Any) -> FastEngine | None:
    """The faster engine for a tokenizer.json (a JsonVocabulary): fastokens
    for the byte-level BPE it reproduces, this project's WordPiece kernel for
    a BERT WordPiece file, its Unigram kernel for the Unigram files it
    reproduces; None where none applies (or fastokens is missing). Documents
    count the vocabulary's unknown id as Tokenize does."""
    from bert_pretraining_data.transforms.handoff.tokenized_documents import (
        write_counted_buffers)
    from bert_pretraining_data.transforms.tokenize.compiled_calls import CompactWriter

    engine_json = fast_engine_json(vocabulary.data)
    if engine_json is not None:
        engine = load_fast_engine(engine_json)
        return None if engine is None else FastEngine(
            FASTOKENS, functools.partial(fast_ids, engine),
            functools.partial(fast_compact, engine, CompactWriter(write_counted_buffers),
                              vocabulary.unk_id))
    lowercase = wordpiece_case(vocabulary.data)
    if lowercase is not None and vocabulary.tokens[vocabulary.unk_id] == "[UNK]":
        from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer

        tokenizer = FullTokenizer(vocabulary, do_lower_case=lowercase)
        return FastEngine(WORDPIECE,
                          lambda lines: [tokenizer.tokenize_to_ids(line) for line in lines],
                          tokenizer.compact_lines)
    if vocabulary.model != "Unigram":
        return None
    from bert_pretraining_data.transforms.tokenize.unigram import UnigramKernel

    kernel = UnigramKernel.of(vocabulary.tokenizer().to_str())
    return None if kernel is None else FastEngine(
        UNIGRAM, kernel, functools.partial(kernel.compact_lines, unk=vocabulary.unk_id))


def choose_engine(vocabulary: Any, tokenizers_ids: Callable[[Sequence[str]], list[list[int]]],
                  sample: Callable[[], Sequence[str]], *, requested: str, words: bool
                  ) -> tuple[str, str | None]:
    """(the engine the run uses, a warning or None). A faster engine
    (`fast_engine`) only where asked (`auto`), where the file and the run
    allow it and where its ids equal `tokenizers_ids`'s on every line
    `sample()` gives (the run's sample, read only then)."""
    if requested == TOKENIZERS or words:
        return TOKENIZERS, None
    found = fast_engine(vocabulary)
    lines = sample() if found is not None else []
    if not lines:
        return TOKENIZERS, None
    name, ids, _ = found
    try:
        reference = tokenizers_ids(lines)
    except ValueError:  # a line the library refuses: the run's sample says so (exit 2)
        return TOKENIZERS, None
    for line, fast, slow in zip(lines, ids(lines), reference):
        if fast != slow:
            return TOKENIZERS, (f"{name} encodes a line of this input unlike {TOKENIZERS} "
                               f"({line[:80]!r}): the run uses {TOKENIZERS}; "
                               f"--tokenizer_engine={TOKENIZERS} skips the check")
    return name, None
