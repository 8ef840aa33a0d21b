"""create-vocab's byte-level BPE tokenizer.json beside the `tokenizers` library's
own trainer run directly on the same training lines.

Not a test: it prints a table. For each size, create-vocab
--tokenization=ByteLevelBPE learns a tokenizer.json on Beam (DirectRunner, 1
worker) from the corpus; the library's ByteLevelBPETokenizer then trains
directly on the same training lines in corpus order (as a user would run it
on their corpus), same size, minimum frequency and special tokens. Both
encode the held-out documents (10%, create-vocab's stable hash) as the
pipeline does: tokens per whitespace word; and the CPU seconds each took
(create-vocab's include reading, sampling and measuring).

    python bench/byte_level_bpe_vocab.py --corpus tests/data/wikitext2_valid.txt
    python bench/byte_level_bpe_vocab.py --sizes 8000,32000
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from tokenizers import ByteLevelBPETokenizer  # noqa: E402

from helpers.vocab_baselines import split_lines  # noqa: E402
from bert_pretraining_data.pipeline import create_vocab  # noqa: E402
from bert_pretraining_data.transforms.vocab.tokenizer_json import (  # noqa: E402
    MIN_FREQUENCY, SPECIAL_TOKENS)


def _cpu() -> float:
    """This process's CPU seconds, the trainer's threads included."""
    return time.process_time()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=pathlib.Path,
                        default=ROOT / "tests" / "data" / "wikitext2_valid.txt")
    parser.add_argument("--sizes", default="2000,8000,16000,32000",
                        help="vocabulary sizes, comma-separated")
    args = parser.parse_args(argv)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # encoding on one core, as the pipeline's
    training, held_out = split_lines(args.corpus)
    words = sum(len(line.split()) for line in held_out)
    print(f"{args.corpus.name}: {len(training):,} training lines, {len(held_out):,} held-out "
          f"lines, {words:,} held-out words")
    print(f"{'size':>7}{'learned':>9}  {'tokens/word ours':>17}{'library':>9}{'ratio':>7}"
          f"  {'CPU s ours':>11}{'library':>9}")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="bpe-bench-") as tmp:
            out = pathlib.Path(tmp) / "tokenizer.json"
            start = _cpu()
            report = create_vocab.run([f"--input_file={args.corpus}", f"--output_file={out}",
                                       "--tokenization=ByteLevelBPE", f"--vocab_size={size}"])
            ours_cpu = _cpu() - start
        start = _cpu()
        direct = ByteLevelBPETokenizer(add_prefix_space=False)
        direct.train_from_iterator(training, vocab_size=size, min_frequency=MIN_FREQUENCY,
                                   special_tokens=list(SPECIAL_TOKENS["roberta"]),
                                   show_progress=False)
        theirs_cpu = _cpu() - start
        direct._tokenizer.encode_special_tokens = True  # as the pipeline encodes lines
        theirs = sum(len(e.ids) for e in direct.encode_batch(held_out)) / words
        ours = report["held_out"]["tokens_per_word"]
        print(f"{size:>7,}{report['vocab_size']:>9,}  {ours:>17.4f}{theirs:>9.4f}"
              f"{ours / theirs:>7.3f}  {ours_cpu:>11.1f}{theirs_cpu:>9.1f}", flush=True)


if __name__ == "__main__":
    main()
