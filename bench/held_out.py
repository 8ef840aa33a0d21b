"""What a held-out split's own work costs (transforms/split/): deciding each
document's split and the near-copy guard, per MB of corpus on each shape.

Not a test: it prints figures. On each shape of bench/corpus.py, the
documents as read (bench.corpus.read_documents), in batches of about 1 MB of
characters as the Beam shell makes them:

- assign: the normalised text and its keyed draw of every document;
- index: the held-out documents' HeldOutShingles (the side input), and its
  bytes, what a worker holds;
- guard: every training batch looked up in it (HeldOutShingles.near_copies:
  normalising again, shingles, MinHash bands, verification);

beside reading the corpus. The end-to-end cost, the split's own Tokenize to
WriteShards included, is `bench/pipeline.py --evaluation`.

    python bench/held_out.py --size 20 --fraction 0.01
"""

from __future__ import annotations

import argparse
import pathlib
import pickle
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import MB, SHAPES, corpus_path, read_documents  # noqa: E402
from bench.decontamination import batches  # noqa: E402
from bert_pretraining_data.transforms.dedup.normalise import (normalised_text,  # noqa: E402
                                                              text_digest)
from bert_pretraining_data.transforms.split.held_out import (TRAIN, HeldOutShingles,  # noqa: E402
                                                             SplitFractions)


def shape_costs(path: pathlib.Path, fractions: SplitFractions) -> dict:
    started = time.process_time()
    keyed = list(read_documents(path))
    documents = [lines for _, lines in keyed]
    read = time.process_time() - started
    started = time.process_time()
    sides = []
    for lines in documents:
        text = normalised_text(lines)
        sides.append(fractions.split_of(text_digest(text) if text else None))
    assign = time.process_time() - started
    held = [lines for lines, side in zip(documents, sides) if side != TRAIN]
    started = time.process_time()
    index = HeldOutShingles.merge(
        [HeldOutShingles.of([normalised_text(lines) for lines in batch], ngram=5, threshold=0.8)
         for batch in batches([(key, lines) for (key, lines), side in zip(keyed, sides)
                               if side != TRAIN])], ngram=5, threshold=0.8)
    built = time.process_time() - started
    started = time.process_time()
    dropped = sum(int(index.near_copies([normalised_text(lines) for lines in batch]).sum())
                  for batch in batches([document for document, side in zip(keyed, sides)
                                        if side == TRAIN]))
    guard = time.process_time() - started
    megabytes = path.stat().st_size / MB
    return {"documents": len(documents), "held": len(held), "dropped": dropped,
            "read": read / megabytes, "assign": assign / megabytes, "index": built / megabytes,
            "guard": guard / megabytes, "bytes": len(pickle.dumps(index)),
            "held_bytes": sum(len(" ".join(lines)) for lines in held)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=20, help="corpus MB per shape")
    parser.add_argument("--fraction", type=float, default=0.01, help="validation fraction")
    args = parser.parse_args(argv)
    fractions = SplitFractions(validation=args.fraction)
    print(f"CPU s per MB of corpus, {args.size:g} MB per shape, validation {args.fraction:g}")
    print(f"{'shape':<10}{'documents':>11}{'held out':>10}{'dropped':>9}{'read':>8}"
          f"{'assign':>8}{'index':>8}{'guard':>8}{'side input':>12}{'per held-out byte':>19}")
    for shape in SHAPES:
        costs = shape_costs(corpus_path(args.size, shape=shape), fractions)
        print(f"{shape:<10}{costs['documents']:>11,}{costs['held']:>10,}{costs['dropped']:>9,}"
              f"{costs['read']:>8.3f}{costs['assign']:>8.3f}{costs['index']:>8.3f}"
              f"{costs['guard']:>8.3f}{costs['bytes'] / MB:>10.2f}MB"
              + (f"{costs['bytes'] / costs['held_bytes']:>19.2f}" if costs["held"] else
                 f"{'-':>19}"), flush=True)


if __name__ == "__main__":
    main()
