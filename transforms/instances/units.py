"""Documents' copies to shuffle entries through the compiled kernels.

Python is left with one sha256 per document (transforms.seeds) and one
kernel call (transforms.instances.units_kernel.unit_entries) for a unit of work (many
documents, all their copies), so a short document costs little more than
its tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator, Sequence

import numpy as np

from bert_pretraining_data.transforms.handoff.shuffle.entries import EntryBatch
from bert_pretraining_data.transforms.handoff.tokenized_documents import (CompactDocument,
                                                                          compact_arrays,
                                                                          compact_document,
                                                                          compact_token_count)
from bert_pretraining_data.transforms.instances.masking import MaskingConfig
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig, Stat
from bert_pretraining_data.transforms.instances.sample import SampledDocument
from bert_pretraining_data.transforms.instances.units_kernel import (Settings, Workspace, settings,
                                                                     unit_entries, workspace)
from bert_pretraining_data.transforms.seeds import document_seed


@dataclasses.dataclass(frozen=True)
class InstanceKernels:
    """What the instance kernels run with: their settings and a workspace, built once per worker
    (`DoFn.setup`) from the flags' configs. Without a masking config
    (`--masking=none`) instances carry no predictions."""

    instances: InstanceConfig
    masking: MaskingConfig | None
    settings: Settings
    workspace: Workspace

    @classmethod
    def of(cls, instances: InstanceConfig, masking: MaskingConfig | None, *,
           reference: bool = False) -> "InstanceKernels":
        return cls(instances=instances, masking=masking,
                   settings=settings(instances, masking, reference=reference),
                   workspace=workspace(instances.max_seq_length,
                                       masking.max_ngram_size if masking else 1))


@dataclasses.dataclass(frozen=True)
class FlatSample:
    """The random-document sample as flat arrays, materialized once per worker."""

    tokens: np.ndarray
    bounds: np.ndarray  # token bounds of every sentence of every document
    documents: np.ndarray  # sentence bounds of every document
    index: dict[str, int]  # doc_key -> position in the sample

    @classmethod
    def of(cls, sample: Sequence[SampledDocument]) -> "FlatSample":
        tokens, bounds, documents = [], [np.zeros(1, dtype=np.int64)], [0]
        offset = 0
        for _, document in sample:
            document_tokens, document_bounds = compact_arrays(document)
            tokens.append(document_tokens)
            bounds.append(document_bounds[1:] + offset)
            offset += len(document_tokens)
            documents.append(documents[-1] + len(document_bounds) - 1)
        return cls(tokens=np.concatenate(tokens or [np.zeros(0, dtype=np.int32)]),
                   bounds=np.concatenate(bounds),
                   documents=np.array(documents, dtype=np.int64),
                   index={key: i for i, (key, _) in enumerate(sample)})


def warm_up(kernels: InstanceKernels) -> EntryBatch:
    """Loads the kernels now (compiling them once per machine, cached beside
    the module: docs/design-notes.md, transforms.instances.units), so that no
    element pays for it; returns the shuffle entries it made."""
    document = compact_document([[0, 0], [0]])
    return unit_instances([("warm-up", document, (0, 1))],
                          sample=FlatSample.of([("sampled", document)]), kernels=kernels,
                          seed=0)[0]


# What a unit's copies gave: counter name (Stat.counter) -> count, for
# CreateInstances' counters (the manifest's).
InstanceStats = dict[str, int]


# A unit of work: documents with the dupe indices to make of each, as
# (first, end): plain ints cross stages with Beam's fast coder (a `range`
# would be pickled, once per document).
WorkUnit = list[tuple[str, CompactDocument, tuple[int, int]]]


def unit_instances(unit: WorkUnit, *, sample: FlatSample, kernels: InstanceKernels, seed: int
                   ) -> tuple[EntryBatch, InstanceStats]:
    """The shuffle entries of every copy of every document of a unit, document
    by document, copy by copy, instance by instance: one kernel call."""
    documents = b"".join(document for _, document, _ in unit)
    document_bounds = np.zeros(len(unit) + 1, dtype=np.int64)
    np.cumsum([len(document) for _, document, _ in unit], out=document_bounds[1:])
    seeds = np.array([document_seed(seed, key) for key, _, _ in unit], dtype=np.uint64)
    entries, stats = unit_entries(
        np.frombuffer(documents, dtype=np.uint8), document_bounds, seeds.reshape(-1, 2),
        np.array([first for _, _, (first, _) in unit], dtype=np.int64),
        np.array([end for _, _, (_, end) in unit], dtype=np.int64),
        np.array([sample.index.get(key, -1) for key, _, _ in unit], dtype=np.int64),
        sample.tokens, sample.bounds, sample.documents, kernels.settings, kernels.workspace)
    return EntryBatch.filled(entries), {stat.counter: int(stats[stat]) for stat in Stat}


# A batch of documents, and a unit of work, hold about this many token ids:
# many short documents (so that the runner handles one element and the kernel
# is called once for all of them), or the copies of one long document (so
# that a huge document's copies spread over workers and no element's output
# grows without bound).
WORK_UNIT_TOKENS = 1 << 18


def fan_out_batch(batch: list[tuple[str, CompactDocument]], dupe_factor: int,
                  first_copy: int = 0) -> Iterator[WorkUnit]:
    """A batch's `dupe_factor` copies of each document (each copy with its
    own seeds, hence its own instances; from `first_copy` on, for a disk
    estimate that has made the first) as units of work (`fan_out`)."""
    return fan_out(((doc_key, document, dupe_factor) for doc_key, document in batch),
                   first_copy)


def fan_out(documents: Iterable[tuple[str, CompactDocument, int]],
            first_copy: int = 0) -> Iterator[WorkUnit]:
    """(doc_key, document, copies) -> units of work: the documents' copies
    together, except that a document whose copies hold over WORK_UNIT_TOKENS
    tokens is cut into units of fewer copies (a document of no copies makes
    none)."""
    unit: WorkUnit = []
    for doc_key, document, copies in documents:
        if copies <= first_copy:
            continue
        per_unit = max(1, WORK_UNIT_TOKENS // max(1, compact_token_count(document)))
        if per_unit >= copies - first_copy:
            unit.append((doc_key, document, (first_copy, copies)))
            continue
        for start in range(first_copy, copies, per_unit):
            yield [(doc_key, document, (start, min(copies, start + per_unit)))]
    if unit:
        yield unit
