"""Tokenizer throughput: the compiled tokenizer beside its candidates, side by side.

Not a test: it prints figures. Every tokenizer runs in this process on one
core over the same lines: its construction (CPU seconds: vocabulary tables,
compiled code loaded), a first pass (the compiled tokenizer fills its
character table, a caching one its word cache: what a fresh worker pays on
text it has not seen) and the best of `--passes` later passes. The
candidates: Hugging Face `tokenizers` (Rust) set up as BERT's tokenizer
(BertNormalizer, BertPreTokenizer, WordPiece with the original's 200-character
limit), without any fix for the original's edge cases, so an upper bound on
its speed; the character-level oracle of the tests; with `--baseline DIR` the
tokenizer of another checkout of this project (e.g. the per-word cache before
the compiled one); with `--reference DIR` (a checkout of google-research/bert,
never committed here) the original `tokenization.FullTokenizer`; with
`--spm_model M` the SentencePiece tokenizer (ALBERT's text handling around
Google's library); with `--tokenizer_json A.json,B.json` each tokenizer.json
as `--tokenizer_file` runs it (transforms.tokenize.tokenizer_json: the
library's batch encoding, one call per 64 lines, about a document's worth;
the `words` rows as a run that groups words, continuations marked). Each
line's WordPiece ids are compared with the compiled tokenizer's
(SentencePiece's and a tokenizer.json's are compared only when they are the
same vocabulary's, e.g. a BERT vocab.txt's tokenizer.json).

    python bench/tokenizer.py --corpus tests/data/wikitext2_valid.txt --baseline ../main
    python bench/tokenizer.py --spm_model tests/data/sentencepiece-8k.model
    python bench/tokenizer.py --tokenizer_json /tmp/bpe.json,/tmp/bert.json
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import sys
import time
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.oracle_tokenization import OracleTokenizer  # noqa: E402
from bert_pretraining_data.transforms.tokenize.chinese_words import ID_BITS  # noqa: E402
from bert_pretraining_data.transforms.tokenize.engines import (TOKENIZERS,  # noqa: E402
                                                               fast_engine)
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec  # noqa: E402
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer  # noqa: E402
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary, parse_vocabulary  # noqa: E402

Ids = Callable[[str], list]
LABEL_WIDTH = 44  # the tokenizer column, header and rows


def _cpu() -> float:
    return time.process_time()


def _hugging_face(vocab: Vocabulary, lower: bool) -> Ids:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one core, as the others
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordPiece(vocab=dict(vocab.ids), unk_token="[UNK]",
                                           max_input_chars_per_word=200))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=lower, lowercase=lower)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return lambda line: tokenizer.encode(line, add_special_tokens=False).ids


def _baseline(checkout: pathlib.Path, vocab: Vocabulary, lower: bool) -> Ids:
    """The tokenizer module of another checkout, loaded from its file (its
    imports resolve to this checkout's modules, which it shares)."""
    spec = importlib.util.spec_from_file_location(
        "baseline_tokenization", checkout / "transforms" / "tokenization.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FullTokenizer(vocab, do_lower_case=lower).tokenize_to_ids


def _original(reference: str, vocab_path: str, lower: bool) -> Ids:
    import tensorflow

    sys.modules["tensorflow"] = tensorflow.compat.v1
    sys.path.insert(0, reference)
    import tokenization  # the original, from the reference checkout

    original = tokenization.FullTokenizer(vocab_path, do_lower_case=lower)
    return lambda line: original.convert_tokens_to_ids(original.tokenize(line))


def _tokenizer_json(path: str, words: bool, engine: str = TOKENIZERS
                    ) -> Callable[[list[str]], list]:
    """A tokenizer.json's lines -> ids as the pipeline runs it, ids unmarked;
    `words`: as a run that groups words (whole-word masking, token_boundary);
    `engine`: the library, or a faster engine (transforms.tokenize.engines)."""
    spec = TokenizerSpec(None, tokenizer_file=path, words=words, engine=engine)
    tokenizer = spec.tokenizer()
    return lambda lines: [[i & ID_BITS for i in ids] for ids in tokenizer.lines_to_ids(lines)]


def measure(label: str, build: Callable[[], Ids], lines: list[str], megabytes: float,
            passes: int, expected: list[list[int]] | None, batch: int = 0
            ) -> list[list[int]]:
    """Prints one tokenizer's row; `batch` > 0: `build` gives a function of
    that many lines at a time."""
    start = _cpu()
    ids = build()
    construction = _cpu() - start

    def run() -> list[list[int]]:
        if batch:
            return [i for at in range(0, len(lines), batch) for i in ids(lines[at:at + batch])]
        return [ids(line) for line in lines]
    start = _cpu()
    first = run()
    cold = max(_cpu() - start, 1e-9)
    warm = cold
    for _ in range(passes - 1):
        start = _cpu()
        run()
        warm = min(warm, max(_cpu() - start, 1e-9))
    same = ("" if expected is None else
            f"{sum(a == b for a, b in zip(first, expected)) / len(lines):>9.2%}")
    print(f"{label:<{LABEL_WIDTH}}{construction:>8.2f}{megabytes / cold:>9.2f}{megabytes / warm:>9.2f}"
          f"{len(lines) / warm:>12,.0f}{same}", flush=True)
    return first


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(ROOT / "tests/data/wiki_small.txt"))
    parser.add_argument("--vocab", default=str(ROOT / "tests/data/bert-base-uncased-vocab.txt"))
    parser.add_argument("--repeat", type=int, default=1,
                        help="concatenate the corpus this many times")
    parser.add_argument("--passes", type=int, default=3, help="passes over the lines")
    parser.add_argument("--cased", action="store_true", help="do_lower_case=False")
    parser.add_argument("--baseline", type=pathlib.Path,
                        help="another checkout of this project: its tokenizer too")
    parser.add_argument("--reference", help="checkout of google-research/bert")
    parser.add_argument("--oracle", action="store_true", help="the slow oracle too")
    parser.add_argument("--spm_model", help="a SentencePiece model: time it too")
    parser.add_argument("--tokenizer_json", type=lambda text: [p for p in text.split(",") if p],
                        default=[], help="comma-separated tokenizer.json files: time each too")
    args = parser.parse_args(argv)

    text = pathlib.Path(args.corpus).read_text(encoding="utf-8")
    lines = text.splitlines() * args.repeat
    megabytes = len(text.encode("utf-8")) * args.repeat / 1e6
    vocab = parse_vocabulary(pathlib.Path(args.vocab).read_bytes(), source=args.vocab)
    lower = not args.cased
    print(f"corpus {args.corpus} x{args.repeat}: {len(lines):,} lines, "
          f"{megabytes:.2f} MB, do_lower_case={lower}; CPU seconds, one core")
    print(f"{'tokenizer':<{LABEL_WIDTH}}{'build s':>8}{'MB/s 1st':>9}{'MB/s':>9}{'lines/s':>12}"
          f"{'same ids':>9}")
    ours = measure("compiled (this checkout)",
                   lambda: FullTokenizer(vocab, do_lower_case=lower).tokenize_to_ids,
                   lines, megabytes, args.passes, None)
    if args.baseline:
        measure(f"baseline ({args.baseline.name})",
                lambda: _baseline(args.baseline.resolve(), vocab, lower),
                lines, megabytes, args.passes, ours)
    measure("HF tokenizers, as BERT's, no fixes", lambda: _hugging_face(vocab, lower),
            lines, megabytes, args.passes, ours)
    if args.oracle:
        oracle = OracleTokenizer(list(vocab.tokens), lower)
        measure("python oracle (tests)",
                lambda: lambda line: [vocab.ids[t] for t in oracle.tokenize(line)],
                lines, megabytes, 1, ours)
    if args.spm_model:
        measure("SentencePiece (ALBERT's text handling)",
                lambda: TokenizerSpec(None, lower, args.spm_model, "albert").tokenizer()
                .tokenize_to_ids, lines, megabytes, args.passes, None)
    for path in args.tokenizer_json:
        spec = TokenizerSpec(None, tokenizer_file=path)
        same = spec.load_vocabulary().tokens == vocab.tokens
        reference = measure(f"tokenizer.json ({pathlib.Path(path).stem}), batches",
                            lambda: _tokenizer_json(path, False), lines, megabytes,
                            args.passes, ours if same else None, batch=64)
        found = fast_engine(spec.load_vocabulary())
        if found is not None:
            measure(f"tokenizer.json ({pathlib.Path(path).stem}), batches, {found[0]}",
                    lambda: _tokenizer_json(path, False, found[0]), lines, megabytes,
                    args.passes, reference, batch=64)
        measure(f"tokenizer.json ({pathlib.Path(path).stem}), batches, words",
                lambda: _tokenizer_json(path, True), lines, megabytes, args.passes,
                ours if same else None, batch=64)
    if args.reference:
        measure("original FullTokenizer", lambda: _original(args.reference, args.vocab, lower),
                lines, megabytes, 1, ours)


if __name__ == "__main__":
    main()
