"""Bytes the documents put through the runner's shuffle, before and after
their compact encodings, on every bench shape.

Not a test: it prints figures, computed in this process from the pipeline's
own DoFns and coders (no runner), each shape's corpus (bench/corpus.py) read
as ReadDocuments keys it (text keys, `name:offset`) and as JSONL would (a
hash of the text, transforms.read.tables.text_document):

1. exact dedup's grouping (GroupExactRows), per document: before, a pickled
   ExactRows per batch of ~1 MB of text and partition; after, what
   FingerprintDocuments emits, a bundle's rows as one encoded element per
   partition. The whole corpus is one bundle; in a smaller one, fewer
   documents share an element, down to one: its 16 bytes, its key, ~7 bytes
   of header, length and coder, the worst case whatever the bundle. Both
   through the coder the pipeline gives that collection, at 1, 250 (a 16 GB
   job) and 10,000 partitions (640 GB);
2. the batches of documents waiting for the dedup decisions (DropCopies'
   input), and 3. the tokenized batches (SpreadDocuments' input; the
   pipeline's WordPiece, BERT-Base uncased): Beam's coder on the plain list
   beside the CompressedList, and zstd's speed on one core (the pickle's
   bytes per CPU-second of compressing them).

The shapes repeat their sources' text (5 MB made of 1.1-1.35 MB), so
copies flatter zstd's ratios; the last row of each table, `sources`, is the
sources themselves, each document once (WikiText-2 valid and the web
treebank's dev and test sentences).

    python bench/document_shuffle_bytes.py [--size 5] [--shapes wikitext,web,short,tiny]
"""

from __future__ import annotations

import argparse
import pathlib
import pickle
import sys
import time
from typing import Iterator

import apache_beam as beam

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import SHAPES, WEB_SOURCES, corpus_path, read_documents  # noqa: E402
from bert_pretraining_data.transforms.dedup.beam import (BatchByCharacters,  # noqa: E402
                                                         Deduplicate, FingerprintDocuments)
from bert_pretraining_data.transforms.dedup.decisions import (Fingerprints,  # noqa: E402
                                                              fingerprint_batch)
from bert_pretraining_data.transforms.handoff.compressed import (CompressedList,  # noqa: E402
                                                                 compress)
from bert_pretraining_data.transforms.instances.beam import BatchDocuments  # noqa: E402
from bert_pretraining_data.transforms.read.tables import text_document  # noqa: E402
from bert_pretraining_data.transforms.tokenize.beam import TokenizeDocument  # noqa: E402
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec  # noqa: E402

VOCAB = ROOT / "tests" / "data" / "bert-base-uncased-vocab.txt"
PARTITIONS = (1, 250, 10_000)
Document = tuple[str, list[str]]


def exact_rows_coder() -> beam.coders.Coder:
    """The coder the pipeline gives GroupExactRows' input, from its graph."""
    pipeline = beam.Pipeline()
    _ = (pipeline | beam.Create([("a", ["b"])])
         | Deduplicate(fingerprints=Fingerprints(mode="exact")))
    proto, context = pipeline.to_runner_api(return_context=True)
    for transform in proto.components.transforms.values():
        if transform.unique_name.endswith("/GroupExactRows"):
            (collection,) = transform.inputs.values()
            return context.coders.get_by_id(proto.components.pcollections[collection].coder_id)
    raise LookupError("no GroupExactRows in Deduplicate")


def _finished(results: Iterator) -> list:
    """A DoFn's finish_bundle outputs, their windows dropped."""
    return [(result.tag, result.value.value) if isinstance(result, beam.pvalue.TaggedOutput)
            else (None, result.value) for result in results or ()]


def text_batches(documents: list[Document]) -> list[list[Document]]:
    """The documents as BatchByCharacters batches them, all in one bundle."""
    batcher = BatchByCharacters()
    batcher.start_bundle()
    batches = [batch for document in documents for batch in batcher.process(document)]
    return batches + [batch for _, batch in _finished(batcher.finish_bundle())]


def exact_bytes(batches: list[list[Document]], partitions: int,
                coder: beam.coders.Coder) -> tuple[int, int, int]:
    """(documents with rows, bytes before, bytes after) through GroupExactRows."""
    fingerprints = Fingerprints(mode="exact", partitions=partitions)
    documents = before = 0
    for batch in batches:
        _, exact, _ = fingerprint_batch(batch, fingerprints)
        documents += sum(len(rows.keys) for rows in exact.values())
        before += sum(len(coder.encode(element)) for element in exact.items())
    fingerprint = FingerprintDocuments(fingerprints=fingerprints)
    fingerprint.start_bundle()
    emitted = [(output.tag, output.value) for batch in batches
               for output in fingerprint.process(batch)
               if isinstance(output, beam.pvalue.TaggedOutput)]
    emitted += _finished(fingerprint.finish_bundle())
    after = sum(len(coder.encode(element)) for tag, element in emitted if tag == "exact")
    return documents, before, after


def compressed_bytes(batches: list[CompressedList]) -> tuple[int, int, float]:
    """(Beam's coder's bytes of the plain lists, of the CompressedLists, zstd MB/s)."""
    coder = beam.coders.registry.get_coder(object)
    before = sum(len(coder.encode(list(batch))) for batch in batches)
    after = sum(len(coder.encode(batch)) for batch in batches)
    pickles = [pickle.dumps(list(batch), protocol=pickle.HIGHEST_PROTOCOL) for batch in batches]
    started = time.process_time()
    for data in pickles:
        compress(data)
    seconds = time.process_time() - started
    return before, after, sum(map(len, pickles)) / 1e6 / max(seconds, 1e-9)


def tokenized_batches(documents: list[Document], tokenizer: TokenizerSpec | None = None
                      ) -> list[CompressedList]:
    """The documents tokenized (by `tokenizer`, BERT-Base uncased's WordPiece
    when None) and batched as the pipeline does, in one bundle."""
    tokenize = TokenizeDocument(vocab_file=str(VOCAB), tokenizer=tokenizer)
    tokenize.setup()
    tokenize.start_bundle()
    batcher = BatchDocuments(compress=True)
    batcher.start_bundle()
    batches = [batch for document in documents for tokenized in tokenize.process(document)
               for batch in batcher.process(tokenized)]
    return batches + [batch for _, batch in _finished(batcher.finish_bundle())]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=5, help="corpus MB per shape")
    parser.add_argument("--shapes", type=lambda text: text.split(","), default=list(SHAPES))
    args = parser.parse_args(argv)
    coder = exact_rows_coder()
    corpora = {shape: read_documents(corpus_path(args.size, shape=shape, seed=0))
               for shape in args.shapes}
    corpora["sources"] = [document for path in WEB_SOURCES for document in read_documents(path)]
    print(f"1. exact dedup's grouping, bytes per document, {args.size:g} MB as one bundle "
          f"({coder})")
    print(f"{'shape':<10}{'keys':<6}{'partitions':>11}{'documents':>11}{'before':>9}"
          f"{'after':>8}{'ratio':>8}")
    for shape, documents in corpora.items():
        hashed = [document for document in (text_document("\n".join(lines))
                                            for _, lines in documents) if document]
        for keys, keyed in (("text", documents), ("hash", hashed)):
            batches = text_batches(keyed)
            for partitions in PARTITIONS:
                count, before, after = exact_bytes(batches, partitions, coder)
                print(f"{shape:<10}{keys:<6}{partitions:>11,}{count:>11,}{before / count:>9.1f}"
                      f"{after / count:>8.1f}{after / before:>8.3f}", flush=True)
    print()
    print("2. text batches (DropCopies' input) and 3. tokenized batches (SpreadDocuments'),"
          " Beam's coder")
    print(f"{'shape':<10}{'batches':<10}{'count':>6}{'MB before':>11}{'after':>8}{'ratio':>8}"
          f"{'zstd MB/s':>11}")
    for shape, documents in corpora.items():
        fingerprints = Fingerprints(mode="exact")
        text = [CompressedList(fingerprint_batch(batch, fingerprints)[0])
                for batch in text_batches(documents)]
        for kind, batches in (("text", text), ("tokenized", tokenized_batches(documents))):
            before, after, speed = compressed_bytes(batches)
            print(f"{shape:<10}{kind:<10}{len(batches):>6}{before / 1e6:>11.2f}{after / 1e6:>8.2f}"
                  f"{after / before:>8.3f}{speed:>11.0f}", flush=True)


if __name__ == "__main__":
    main()
