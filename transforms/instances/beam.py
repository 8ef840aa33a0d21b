"""The instances' Beam shell: BatchDocuments, SampleDocuments (the
SampleRandomDocuments step, from BatchDocuments' candidates) and
CreateInstances, each building its heavy objects in `setup` and counting
what it makes; every draw is seeded by its document's key
(transforms.seeds), so retries and re-bundling change nothing.
"""

from __future__ import annotations

from typing import Iterator

import apache_beam as beam
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindows

from bert_pretraining_data.transforms.counters import BundleCounters, CountingDoFn
from bert_pretraining_data.transforms.handoff.compressed import Batch, CompressedList
from bert_pretraining_data.transforms.handoff.shuffle.entries import EntryBatch
from bert_pretraining_data.transforms.handoff.shuffle.instances import stamp_source
from bert_pretraining_data.transforms.handoff.tokenized_documents import (CompactDocument,
                                                                          compact_token_count)
from bert_pretraining_data.transforms.instances.masking import MaskingConfig
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig, Stat
from bert_pretraining_data.transforms.instances.sample import (RankedDocument, SampleCandidates,
                                                               SampleSettings, bound_sample,
                                                               smallest_candidates)
from bert_pretraining_data.transforms.instances.units import (WORK_UNIT_TOKENS, FlatSample,
                                                              InstanceKernels, WorkUnit,
                                                              unit_instances, warm_up)
from bert_pretraining_data.transforms.progress_sink import ProgressSink
from bert_pretraining_data.transforms.read.mixture import source_of
from bert_pretraining_data.transforms.worker_memory import tune_worker_memory


# BatchDocuments' outputs: its batches, and the sample's candidates.
BATCHES, CANDIDATES = "batches", "candidates"


class BatchDocuments(beam.DoFn):
    """(doc_key, compact document) -> lists of them of about WORK_UNIT_TOKENS
    token ids, within a bundle; `by_source` (a mixture): each batch of one
    source's documents, so that its instances are stamped with it. Which
    documents share a batch never changes the output: every draw is seeded
    by its document's key. `compress` (--shuffle=runner): a batch is a
    CompressedList, zstd-compressed where the runner encodes it
    (SpreadDocuments); the DirectRunner's batches stay plain lists, as it
    encodes between stages for nothing billed. With `sample`, each bundle's
    candidates for the random-next sample go to CANDIDATES (SampleDocuments
    merges them): here, where every document passes anyway, they cost no
    step of the runner's per document."""

    def __init__(self, *, by_source: bool = False, compress: bool = False,
                 sample: SampleSettings | None = None) -> None:
        self._by_source = by_source
        self._batch = CompressedList if compress else list
        self._sample = sample

    def start_bundle(self) -> None:
        self._batches: dict[int, list[tuple[str, CompactDocument]]] = {}
        self._tokens: dict[int, int] = {}
        self._candidates = SampleCandidates(self._sample) if self._sample else None

    def process(self, element: tuple[str, CompactDocument]) -> Iterator[Batch]:
        group = source_of(element[0]) if self._by_source else 0
        self._batches.setdefault(group, self._batch()).append(element)
        self._tokens[group] = self._tokens.get(group, 0) + compact_token_count(element[1])
        if self._candidates is not None:
            self._candidates.add(*element)
        if self._tokens[group] >= WORK_UNIT_TOKENS:
            self._tokens[group] = 0
            yield self._batches.pop(group)

    def finish_bundle(self) -> Iterator[object]:
        for group in sorted(self._batches):
            yield GlobalWindows.windowed_value(self._batches[group])
        if self._candidates is not None:
            yield TaggedOutput(CANDIDATES,
                               GlobalWindows.windowed_value(self._candidates.take()))


# CreateInstances' main output, batches of shuffle entries, beside its FIGURES.
ENTRIES = "entries"


class CreateInstances(CountingDoFn):
    """[(doc_key, compact document, (first dupe, end dupe))] + sample -> EntryBatch.

    Instance creation (transforms.instances.pairs) and masking (transforms.instances.masking;
    none when `masking` is None: `--masking=none`) of every copy in one
    compiled step (transforms.instances.units); the batch holds the instances,
    whose records are written with their shard (transforms.write.rows).
    """

    def __init__(self, *, instances: InstanceConfig, masking: MaskingConfig | None, seed: int,
                 progress_dir: str | None = None, stamp_sources: bool = False) -> None:
        self._configs = (instances, masking)
        self._stamp_sources = stamp_sources  # a mixture: each instance names its source
        self._progress_dir = progress_dir
        self._seed = seed
        # Nothing is masked without a masking config, so no masked_tokens counter.
        self._count = BundleCounters(*(stat.counter for stat in Stat
                                       if masking is not None or stat != Stat.MASKED_TOKENS))

    def setup(self) -> None:
        tune_worker_memory()
        self._kernels = InstanceKernels.of(*self._configs)
        warm_up(self._kernels)
        self._sample_source: object = None
        self._progress = ProgressSink(self._progress_dir)

    def finish_bundle(self) -> Iterator[TaggedOutput]:
        self._progress.write()
        yield from super().finish_bundle()

    def process(self, element: WorkUnit, nsp_sample) -> Iterator[EntryBatch]:
        if nsp_sample is not self._sample_source:  # materialized once per worker
            self._sample, self._sample_source = FlatSample.of(nsp_sample), nsp_sample
        batch, stats = unit_instances(element, sample=self._sample, kernels=self._kernels,
                                      seed=self._seed)
        if self._progress.active:
            self._progress.add(instances=stats[Stat.INSTANCES.counter],
                               copies=sum(end - first for _, _, (first, end) in element))
        count = self._count.counts
        for name in count:
            count[name] += stats[name]
        if len(batch):
            # a unit holds one source's documents (BatchDocuments by_source)
            yield stamp_source(batch, source_of(element[0][0])) if self._stamp_sources else batch


class SampleDocuments(beam.PTransform):
    """Bundles' candidates (BatchDocuments' CANDIDATES) -> a singleton list of
    up to K sampled (doc_key, compact document), each cut to its leading
    sentences (transforms.instances.sample); `per_document`: from
    (doc_key, compact document) elements instead, a bundle's candidates
    gathered here."""

    def __init__(self, settings: SampleSettings, *, per_document: bool = False) -> None:
        super().__init__()
        self._settings = settings
        self._per_document = per_document

    def expand(self, candidates):
        settings = self._settings
        if self._per_document:
            candidates = candidates | "Candidates" >> beam.ParDo(_BundleCandidates(settings))
        return (candidates
                | "SmallestRanks" >> beam.CombineGlobally(smallest_candidates, settings.size)
                | "BoundBytes" >> beam.Map(bound_sample, settings.max_bytes))


class _BundleCandidates(beam.DoFn):
    """(doc_key, compact document) -> the bundle's candidates for the sample, one list."""

    def __init__(self, settings: SampleSettings) -> None:
        self._settings = settings

    def start_bundle(self) -> None:
        self._candidates = SampleCandidates(self._settings)

    def process(self, element: tuple[str, CompactDocument]
                ) -> Iterator[list[RankedDocument]]:
        self._candidates.add(*element)
        return iter(())  # the candidates go out when the bundle ends

    def finish_bundle(self) -> Iterator[object]:
        yield GlobalWindows.windowed_value(self._candidates.take())
