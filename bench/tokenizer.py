"""Tokenizer throughput, fast engine vs the character-level oracle, side by side.

Not a test: it prints figures. Both tokenizers run in this process on one core
over the same lines, cold (a fresh word cache) and warm (a second pass), so
the ratio is measured under the same machine load. With `--reference DIR` (a
checkout of google-research/bert, never committed here) the original
`tokenization.FullTokenizer` is timed as well; with `--spm_model M`, the
SentencePiece tokenizer (ALBERT's text handling around Google's library) on
the same lines.

    python bench/tokenizer.py --corpus tests/data/wiki_small.txt --repeat 3
    python bench/tokenizer.py --spm_model tests/data/sentencepiece-8k.model
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from oracle_tokenization import OracleTokenizer  # noqa: E402
from bert_pretraining_data.transforms.subword.tokenizers import TokenizerSpec  # noqa: E402
from bert_pretraining_data.transforms.tokenization import FullTokenizer  # noqa: E402
from bert_pretraining_data.transforms.vocabulary import parse_vocabulary  # noqa: E402


def _time(label: str, tokenize: Callable[[str], list], lines: list[str],
          megabytes: float) -> float:
    start = time.process_time()
    tokens = sum(len(tokenize(line)) for line in lines)
    seconds = max(time.process_time() - start, 1e-9)
    print(f"{label:<28} {len(lines) / seconds:>12,.0f} lines/s "
          f"{megabytes / seconds:>8.2f} MB/s {tokens:>10,} tokens")
    return megabytes / seconds


def _original(reference: str, vocab_path: str, lower: bool):
    import tensorflow

    sys.modules["tensorflow"] = tensorflow.compat.v1
    sys.path.insert(0, reference)
    import tokenization  # the original, from the reference checkout

    return tokenization.FullTokenizer(vocab_path, do_lower_case=lower)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(ROOT / "tests/data/wiki_small.txt"))
    parser.add_argument("--vocab", default=str(ROOT / "tests/data/bert-base-uncased-vocab.txt"))
    parser.add_argument("--repeat", type=int, default=1,
                        help="concatenate the corpus this many times")
    parser.add_argument("--cased", action="store_true", help="do_lower_case=False")
    parser.add_argument("--reference", help="checkout of google-research/bert")
    parser.add_argument("--spm_model", help="a SentencePiece model: time it too")
    args = parser.parse_args(argv)

    text = pathlib.Path(args.corpus).read_text(encoding="utf-8")
    lines = text.splitlines() * args.repeat
    megabytes = len(text.encode("utf-8")) * args.repeat / 1e6
    vocab_bytes = pathlib.Path(args.vocab).read_bytes()
    vocab = parse_vocabulary(vocab_bytes, source=args.vocab)
    lower = not args.cased
    print(f"corpus {args.corpus} x{args.repeat}: {len(lines):,} lines, "
          f"{megabytes:.2f} MB, do_lower_case={lower}")

    fast = FullTokenizer(vocab, do_lower_case=lower)
    cold = _time("fast ids (cold cache)", fast.tokenize_to_ids, lines, megabytes)
    warm = _time("fast ids (warm cache)", fast.tokenize_to_ids, lines, megabytes)
    _time("fast strings (warm cache)", fast.tokenize, lines, megabytes)
    oracle = _time("python oracle", OracleTokenizer(list(vocab.tokens), lower).tokenize,
                   lines, megabytes)
    print(f"speed-up over the oracle: {cold / oracle:.1f}x cold, {warm / oracle:.1f}x warm")
    if args.spm_model:
        pieces = TokenizerSpec(None, lower, args.spm_model, "albert").tokenizer()
        spm = _time("sentencepiece ids", pieces.tokenize_to_ids, lines, megabytes)
        print(f"sentencepiece / fast WordPiece: {spm / cold:.2f}x cold, {spm / warm:.2f}x warm")
    if args.reference:
        original = _time("original FullTokenizer",
                         _original(args.reference, args.vocab, lower).tokenize,
                         lines, megabytes)
        print(f"speed-up over the original: {cold / original:.1f}x cold, "
              f"{warm / original:.1f}x warm")


if __name__ == "__main__":
    main()
