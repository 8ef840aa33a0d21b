"""create-vocab's SentencePiece models beside spm_train's on the same sentences.

Not a test: it prints a table. For each (model type, size, casing), create-vocab
--tokenization=SentencePiece learns a model on Beam (DirectRunner, 1 worker)
from the corpus; Google's trainer then runs directly (the library spm_train
wraps) on a file of the same training sentences in corpus order, with the
same settings (ALBERT's). Both models tokenize the held-out documents (10%,
chosen by create-vocab's stable hash) as the pipeline would: pieces per
whitespace word, unknown pieces per word, character coverage; and the CPU
seconds each took (create-vocab's include reading, sampling and measuring).

    python bench/sentencepiece_vocab.py --corpus tests/data/wikitext2_valid.txt
    python bench/sentencepiece_vocab.py --configs unigram:8000:lower,bpe:8000:lower
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from helpers.vocab_baselines import split_lines, spm_train_directly  # noqa: E402
from bert_pretraining_data.pipeline import create_vocab  # noqa: E402
from bert_pretraining_data.transforms.tokenize.sentencepiece_model import parse_model  # noqa: E402
from bert_pretraining_data.transforms.tokenize.sentencepiece_text import (  # noqa: E402
    SentencePieceTokenizer)
from bert_pretraining_data.transforms.vocab.sentencepiece import (  # noqa: E402
    SentencePieceLearning, line_stats)

DEFAULT_CONFIGS = ("unigram:2000:lower,unigram:4000:lower,unigram:8000:lower,"
                   "unigram:16000:lower,unigram:8000:cased,bpe:8000:lower")


def _config(text: str) -> tuple[str, int, bool]:
    model_type, size, casing = text.split(":")
    return model_type, int(size), casing == "lower"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=pathlib.Path,
                        default=ROOT / "tests" / "data" / "wikitext2_valid.txt")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS,
                        help="model_type:vocab_size:lower|cased, comma-separated")
    args = parser.parse_args(argv)
    training, held_out = split_lines(args.corpus)
    print(f"{args.corpus.name}: {len(training):,} training sentences, {len(held_out):,} "
          "held-out lines")
    print(f"{'model':<9}{'size':>7}{'case':>7}{'pieces':>8}  {'tokens/word ours':>17}"
          f"{'spm_train':>10}{'ratio':>7}  {'unk/word ours':>14}{'spm':>9}"
          f"  {'coverage ours':>14}{'spm':>10}  {'CPU s ours':>11}{'spm':>7}")
    for model_type, size, lower in map(_config, args.configs.split(",")):
        learning = SentencePieceLearning(vocab_size=size, model_type=model_type,
                                         do_lower_case=lower)
        with tempfile.TemporaryDirectory(prefix="spm-bench-") as tmp:
            work = pathlib.Path(tmp)
            start = time.process_time()
            report = create_vocab.run([
                f"--input_file={args.corpus}", f"--output_file={work / 'ours.model'}",
                "--tokenization=SentencePiece", f"--model_type={model_type}",
                f"--vocab_size={size}", f"--do_lower_case={lower}"])
            ours_cpu = time.process_time() - start
            ours = parse_model((work / "ours.model").read_bytes())
            start = time.process_time()
            theirs = parse_model(spm_train_directly(training, work, learning))
            theirs_cpu = time.process_time() - start
        rates = [line_stats(SentencePieceTokenizer(vocab, do_lower_case=lower),
                            held_out).rates() for vocab in (ours, theirs)]
        assert report["held_out"]["tokens_per_word"] == rates[0]["tokens_per_word"]
        print(f"{model_type:<9}{size:>7,}{'lower' if lower else 'cased':>7}{len(ours):>8,}  "
              f"{rates[0]['tokens_per_word']:>17.4f}{rates[1]['tokens_per_word']:>10.4f}"
              f"{rates[0]['tokens_per_word'] / rates[1]['tokens_per_word']:>7.3f}  "
              f"{rates[0]['unk_rate']:>14.4%}{rates[1]['unk_rate']:>9.4%}"
              f"  {rates[0]['character_coverage']:>14.4%}{rates[1]['character_coverage']:>10.4%}"
              f"  {ours_cpu:>11.1f}{theirs_cpu:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
