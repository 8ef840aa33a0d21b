"""How much of a training batch is padding, per corpus shape and length.

For each corpus shape (bench/corpus.py's, and the articles of a Wikipedia
dump excerpt) at each max_seq_length, the pipeline makes the data twice, as
users run it (the original's flags, one shard): once as the original's
records and once with --pack_sequences. The share of token slots that are
padding is then printed under:

- fixed: every record padded to max_seq_length (the original's layout);
- dynamic B: batches of B consecutive records padded to their longest (the
  loaders' collator, seed 003);
- binned B: NVIDIA LDDL's binning: records in bins of 64 tokens of length,
  each batch of B from one bin, padded to its longest;
- packed: the pipeline's packed rows (--pack_sequences, depth 3 unless
  --depth), from the run's manifest.

Where packing at depth 3 leaves more than 2% of the slots empty, the depths
that would reach 98% are tried on the same lengths.

    .venv/bin/python bench/packing.py --size 5
    .venv/bin/python bench/packing.py --paper-histogram path/to/graphcore-examples/tutorials/blogs_code/packedBERT/histograms.py

`--paper-histogram` also packs the Wikipedia length histogram that Krell et
al. published with their paper (Graphcore's examples repository, fetched
beside the project) and prints this packer's efficiency beside the paper's
Table 1 figures.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.corpus

from bench.corpus import SHAPES, corpus_path  # noqa: E402
from bert_pretraining_data.loaders.manifest import read_manifest  # noqa: E402
from bert_pretraining_data.loaders.records import read_instances  # noqa: E402
from bert_pretraining_data.pipeline.main import run  # noqa: E402
from bert_pretraining_data.transforms.pack.histogram import pack_histogram  # noqa: E402

VOCAB = ROOT / "tests" / "data" / "bert-base-uncased-vocab.txt"
WIKIPEDIA = ROOT.parent / "shared" / "data" / "wikipedia" / "enwiki-excerpt-pages-articles.xml.bz2"
BIN_TOKENS = 64  # LDDL's bin size in its BERT examples
BATCHES = (32, 256)
TARGET = 0.98
# Krell et al., Table 1: efficiency (share of token slots filled) on their
# Wikipedia histogram at 512, by algorithm and depth.
PAPER = {("SPFHP", 3): 0.894, ("SPFHP", 8): 0.989, ("SPFHP", 512): 0.996,
         ("NNLSHP", 3): 0.997}


def padding_fixed(lengths: np.ndarray, max_length: int) -> float:
    return 1 - lengths.sum() / (len(lengths) * max_length)


def padding_dynamic(lengths: np.ndarray, batch: int) -> float:
    """Consecutive batches, each padded to its longest."""
    slots = sum(int(part.max()) * len(part) for part in np.array_split(
        lengths, range(batch, len(lengths), batch)))
    return 1 - lengths.sum() / slots


def padding_binned(lengths: np.ndarray, batch: int) -> float:
    """LDDL: each batch from one bin of BIN_TOKENS lengths, padded to its longest."""
    bins = (lengths - 1) // BIN_TOKENS
    slots = 0
    for b in np.unique(bins):
        members = lengths[bins == b]
        slots += sum(int(part.max()) * len(part) for part in np.array_split(
            members, range(batch, len(members), batch)))
    return 1 - lengths.sum() / slots


def filled(lengths: np.ndarray, max_length: int, depth: int) -> float:
    histogram = np.bincount(lengths, minlength=max_length + 1)
    _, counts = pack_histogram(histogram, max_length, depth)
    return lengths.sum() / (counts.sum() * max_length)


def make(corpus: pathlib.Path, input_format: str, max_length: int, out: pathlib.Path,
         *extra: str) -> dict:
    return run([f"--input_file={corpus}", f"--input_format={input_format}",
                f"--vocab_file={VOCAB}", f"--output_dir={out}", f"--max_seq_length={max_length}",
                f"--max_predictions_per_seq={round(max_length * 0.15)}", "--num_shards=1",
                "--progress=none", "--overwrite", *extra])


def measure(shape: str, corpus: pathlib.Path, input_format: str, max_length: int,
            work: pathlib.Path) -> tuple[list[str], str]:
    """(table cells, a note) for one shape and length."""
    make(corpus, input_format, max_length, work / "plain")
    lengths = np.array([len(i.input_ids) for i in read_instances(read_manifest(
        str(work / "plain")))], dtype=np.int64)
    packing = make(corpus, input_format, max_length, work / "packed",
                   "--pack_sequences")["packing"]
    cells = [shape, str(max_length), f"{len(lengths):,}",
             f"{padding_fixed(lengths, max_length):.1%}",
             *(f"{padding_dynamic(lengths, b):.1%}" for b in BATCHES),
             *(f"{padding_binned(lengths, b):.1%}" for b in BATCHES),
             f"{1 - packing['filled']:.1%}",
             " / ".join(str(n) for n in packing["rows_by_depth"].values())]
    note = ""
    if packing["filled"] < TARGET:
        reached = [(depth, filled(lengths, max_length, depth)) for depth in (4, 6, 8, 12, 16)]
        note = (f"{shape} at {max_length}: depth 3 fills {packing['filled']:.1%}; "
                + ", ".join(f"depth {d} {f:.1%}" for d, f in reached))
    return cells, note


def paper_comparison(path: pathlib.Path) -> str:
    """This packer on the paper's Wikipedia histogram (lengths 1..512), beside Table 1."""
    text = path.read_text()
    numbers = [int(n) for n in re.findall(
        r"\d+", text.split("wikipedia_histogram", 1)[1].split("]", 1)[0])]
    histogram = np.array([0, *numbers[-512:]], dtype=np.int64)
    lengths_total = (np.arange(513) * histogram).sum()
    lines = ["| depth | this packer | paper, SPFHP | paper, NNLSHP |", "|---|---|---|---|"]
    for depth in (2, 3, 8, 512):
        _, counts = pack_histogram(histogram, 512, depth)
        ours = lengths_total / (counts.sum() * 512)
        paper = [f"{PAPER[(name, depth)]:.1%}" if (name, depth) in PAPER else "-"
                 for name in ("SPFHP", "NNLSHP")]
        lines.append(f"| {'max' if depth == 512 else depth} | {ours:.1%} | "
                     + " | ".join(paper) + " |")
    bound = lengths_total / (max(lengths_total / 512, histogram[257:].sum()) * 512)
    return "\n".join(lines) + f"\n(upper bound for any packer: {bound:.2%})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=5, help="MB of each generated shape")
    parser.add_argument("--shapes", default=",".join([*SHAPES, "wikipedia"]))
    parser.add_argument("--lengths", default="128,512")
    parser.add_argument("--wikipedia", type=pathlib.Path, default=WIKIPEDIA,
                        help="a MediaWiki dump (excerpt) for the wikipedia shape")
    parser.add_argument("--paper-histogram", type=pathlib.Path,
                        help="Graphcore's histograms.py (Krell et al.'s Wikipedia histogram)")
    args = parser.parse_args(argv)
    if args.paper_histogram:
        print(paper_comparison(args.paper_histogram), "\n")
    header = ["corpus", "max_seq_length", "instances", "fixed",
              *(f"dynamic, batch {b}" for b in BATCHES), *(f"binned, batch {b}" for b in BATCHES),
              "packed", "rows of 1 / 2 / 3"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header), flush=True)
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            corpus, input_format = ((args.wikipedia, "wikipedia") if shape == "wikipedia"
                                    else (corpus_path(args.size, shape=shape), "text"))
            for max_length in map(int, args.lengths.split(",")):
                cells, note = measure(shape, corpus, input_format, max_length,
                                      pathlib.Path(tmp))
                print("| " + " | ".join(cells) + " |", flush=True)
                notes += [note] if note else []
    print("\n".join(notes))


if __name__ == "__main__":
    main()
