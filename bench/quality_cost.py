"""The CPU of --quality_filters' rules and of --languages per MB of input, beside a plain run's.

The rules run once per document, before the dupe_factor copies, so their cost
is compared with a whole run's CPU per MB (the original's flags, dupe 10, 1
worker, measured in the same invocation by bench/pipeline.py's `run_ours`).
Each rule set's CPU is `decide` over every document of the shape's corpus
(bench/corpus.py), language ID's LanguageFilter.identify, in one process,
the minimum of `--repeat` passes (the machine is shared), each from an empty
cache of word chunks, as a worker starts; reading and the Beam step around
it are not in it.

    python bench/quality_cost.py --size 5 --repeat 3
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path[:0] = [str(pathlib.Path(__file__).resolve().parents[1])]  # for bench.*

from bench.corpus import MB, SHAPES, corpus_path, read_documents  # noqa: E402
from bench.pipeline import run_ours  # noqa: E402

from bert_pretraining_data.transforms.quality import english_words  # noqa: E402
from bert_pretraining_data.transforms.quality.language import LanguageFilter  # noqa: E402
from bert_pretraining_data.transforms.quality.rules import QualityConfig, decide  # noqa: E402

RULE_SETS = ("c4", "gopher", "fineweb", "c4,gopher,fineweb")
LANGUAGES = "en"


def _keeps(name: str):
    """Whether a document is kept by a rule-set list or, "languages en", by language ID."""
    if name.startswith("languages "):
        languages = LanguageFilter.parse(name.split()[1])
        return lambda lines: languages.identify(lines)[2]
    config = QualityConfig.parse(name)
    return lambda lines: decide(lines, config).lines is not None


def filter_cpu(docs: list[list[str]], name: str, repeat: int) -> tuple[float, int]:
    """(CPU seconds of deciding every document, the minimum of `repeat` passes; documents kept)."""
    keeps = _keeps(name)
    keeps(docs[0])  # the model loaded outside the timing
    best, kept = float("inf"), 0
    for _ in range(repeat):
        english_words.forget_chunks()  # each pass as a worker's first
        start = time.process_time()
        kept = sum(keeps(lines) for lines in docs)
        best = min(best, time.process_time() - start)
    return best, kept


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=5.0, help="MB per shape")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{'shape':10}{'rules':20}{'docs kept':>12}{'MB/CPU-s':>10}{'of a run':>10}")
    for shape in args.shapes.split(","):
        corpus = corpus_path(args.size, shape=shape)
        megabytes = corpus.stat().st_size / MB
        plain = run_ours(corpus, 1)
        run_cpu = plain.cpu / megabytes
        print(f"{shape:10}{'(plain run, dupe 10)':20}{'':>12}{1 / run_cpu:>10.2f}{'':>10}")
        docs = [lines for _, lines in read_documents(corpus)]
        for rule_sets in (*RULE_SETS, f"languages {LANGUAGES}"):
            cpu, kept = filter_cpu(docs, rule_sets, args.repeat)
            per_mb = cpu / megabytes
            print(f"{shape:10}{rule_sets:20}{f'{kept}/{len(docs)}':>12}{1 / per_mb:>10.2f}"
                  f"{per_mb / run_cpu:>9.1%}", flush=True)


if __name__ == "__main__":
    main()
