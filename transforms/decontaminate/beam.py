"""Decontaminate: the Beam shell of the decontamination stage (`--decontaminate`).

    benchmark paths -> ReadBenchmark (one element per file) -> ToList -> one BenchmarkIndex
    documents -> BatchDocuments -> DropContaminated (index as a side input)
              -> documents kept, audit records -> ToList; that list + index -> summary

The benchmark files are read inside the pipeline and their index travels as a
side input, so a large benchmark set never enters the job graph (Dataflow
limits its size).
"""

from __future__ import annotations

from typing import Iterator, Literal, Sequence

import apache_beam as beam
from apache_beam.pvalue import TaggedOutput
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.transforms.counters import (FIGURES, BundleCounters, CountingDoFn,
                                                       FiguresOutput)
from bert_pretraining_data.transforms.decontaminate.benchmarks import (DEFAULT_FIELD,
                                                                       DEFAULT_NGRAM, MATCHES,
                                                                       BenchmarkIndex,
                                                                       DecontaminationError,
                                                                       audit_records,
                                                                       read_benchmark_items,
                                                                       summary)
from bert_pretraining_data.transforms.dedup.beam import BatchByCharacters
from bert_pretraining_data.transforms.dedup.decisions import SUMMARY
from bert_pretraining_data.transforms.read.documents import DOCUMENTS, Document, comma_separated


def match_benchmarks(patterns: str) -> list[str]:
    """The files of the comma-separated --decontaminate patterns, sorted,
    each once; a one-line DecontaminationError before any work starts for a
    pattern that matches none."""
    paths: set[str] = set()
    for pattern in comma_separated(patterns):
        # One pattern per call: FileSystems.match picks the filesystem of
        # its first pattern for the whole list.
        metadata_list = FileSystems.match([pattern])[0].metadata_list
        if not metadata_list:
            raise DecontaminationError(
                f"--decontaminate pattern {pattern!r} matches no file; check the path "
                "(local paths and gs:// globs are supported)")
        paths.update(metadata.path for metadata in metadata_list)
    if not paths:
        raise DecontaminationError("--decontaminate is empty; give one or more benchmark "
                                   "files or globs, separated by commas")
    return sorted(paths)


def read_benchmark(path: str, field: str) -> tuple[str, list[tuple[int, str]]]:
    """A benchmark file -> (path, its items), decompressed by its name; a
    one-line DecontaminationError for a file that holds no items or cannot
    be read as its name says (the launch reads each once to say so before
    any work)."""
    with FileSystems.open(path) as handle:
        return path, read_benchmark_items(path, handle.read(), field)


def _build_index(files: list[tuple[str, list[tuple[int, str]]]], ngram: int) -> BenchmarkIndex:
    files = sorted(files)
    return BenchmarkIndex.build([path for path, _ in files],
                                ((index, line, text) for index, (_, items) in enumerate(files)
                                 for line, text in items), ngram)


class BenchmarkIndexOf(beam.PTransform):
    """A pipeline's root -> one BenchmarkIndex of the benchmark files (for
    beam.pvalue.AsSingleton)."""

    def __init__(self, *, paths: Sequence[str], field: str = DEFAULT_FIELD,
                 ngram: int = DEFAULT_NGRAM) -> None:
        super().__init__()
        self._paths, self._field, self._ngram = tuple(paths), field, ngram

    def expand(self, pbegin):
        return (pbegin
                | "BenchmarkFiles" >> beam.Create(self._paths)
                | "ReadBenchmark" >> beam.Map(read_benchmark, self._field)
                # Without defaults: the index is never built from no files.
                | "AllBenchmarks" >> beam.combiners.ToList().without_defaults()
                | "IndexBenchmarks" >> beam.Map(_build_index, self._ngram))


class _DropContaminated(CountingDoFn):
    """A batch -> its documents holding no benchmark n-gram (main output),
    and an audit record per (document dropped, item it holds) (`matches`)."""

    def __init__(self) -> None:
        self._count = BundleCounters("decontaminated_documents")

    def process(self, batch: list[Document], index: BenchmarkIndex
                ) -> Iterator[Document | TaggedOutput[Literal["matches"], dict]
                              | FiguresOutput]:
        dropped = 0
        found_in = index.batch_matches([document[1] for document in batch])
        for (key, lines), found in zip(batch, found_in):
            if not found:
                yield key, lines
                continue
            dropped += 1
            for record in audit_records(index, key, lines, found):
                yield TaggedOutput(MATCHES, record)
        self._count.counts["decontaminated_documents"] += dropped


class Decontaminate(beam.PTransform):
    """(key, lines) documents -> {DOCUMENTS: those holding no n-gram of the
    benchmark files, MATCHES: one list of the audit records of those dropped,
    SUMMARY: one dict for the manifest, FIGURES: its counts}. The output does not depend on bundles or
    workers: each document is looked up on its own n-grams."""

    def __init__(self, *, paths: Sequence[str], field: str = DEFAULT_FIELD,
                 ngram: int = DEFAULT_NGRAM) -> None:
        super().__init__()
        if not paths:
            raise DecontaminationError("Decontaminate needs at least one benchmark file")
        self._paths, self._field, self._ngram = tuple(paths), field, ngram

    def expand(self, documents):
        index = documents.pipeline | "BenchmarkIndex" >> BenchmarkIndexOf(
            paths=self._paths, field=self._field, ngram=self._ngram)
        looked_up = (documents
                     | "BatchDocuments" >> beam.ParDo(BatchByCharacters())
                     | "DropContaminated" >> beam.ParDo(
                         _DropContaminated(), index=beam.pvalue.AsSingleton(index)
                     ).with_outputs(MATCHES, FIGURES, main=DOCUMENTS))
        # the audit records, collected once: the summary counts them, the run lists them
        matches = looked_up[MATCHES] | "CollectMatches" >> beam.combiners.ToList()
        summarised = index | "Summarise" >> beam.Map(summary, beam.pvalue.AsSingleton(matches))
        return {DOCUMENTS: looked_up[DOCUMENTS], MATCHES: matches, SUMMARY: summarised,
                FIGURES: looked_up[FIGURES]}
