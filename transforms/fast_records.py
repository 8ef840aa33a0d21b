"""Documents' copies to shuffle entries through the compiled kernels.

The same records as `create_instances -> MaskTokens -> encode` of the Python
core would give for each copy, byte for byte, key for key: the seeds derive
from the same document seed (transforms.seeds) and transforms.jit_records
makes the same draws. Python is left with one sha256 per document and one
kernel call for a unit of work (many documents, all their copies), so a
short document costs little more than its tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from transforms.instances import InstanceConfig
from transforms.jit_random import sample_set_size
from transforms.jit_records import (Settings, Workspace, feature_names, unit_entries,
                                     workspace)
from transforms.masking import MaskingConfig, num_to_predict
from transforms.packing import PackedDocument, pack_document, packed_arrays
from transforms.sampling import SampledDocument
from transforms.seeds import document_seed
from transforms.sharding import RecordBatch


@dataclasses.dataclass(frozen=True)
class Engine:
    """Everything the kernels need besides the document and the sample: the
    settings record and a workspace, built once per worker (`DoFn.setup`)
    from the same configs as the Python path. Without a masking config
    (`--masking=none`) records carry no predictions, as the Python path
    writes them."""

    instances: InstanceConfig
    masking: MaskingConfig | None
    settings: Settings
    workspace: Workspace

    @classmethod
    def of(cls, instances: InstanceConfig, masking: MaskingConfig | None, *,
           max_predictions_per_seq: int, padded: bool) -> "Engine":
        lengths = range(instances.max_seq_length + 1)
        budgets = np.zeros(len(lengths), dtype=np.int64)
        set_sizes = np.zeros(1, dtype=np.int64)
        continuation = np.zeros(1, dtype=np.bool_)
        if masking is not None:
            budgets = np.array([num_to_predict(n, masking) for n in lengths], dtype=np.int64)
            set_sizes = np.array([sample_set_size(k) for k in range(
                masking.max_predictions_per_seq + 1)], dtype=np.int64)
            if masking.continuation is not None:
                continuation = np.array(masking.continuation, dtype=np.bool_)
        names, name_bounds = feature_names(padded)
        settings = Settings(
            max_seq_length=int(instances.max_seq_length),
            short_seq_prob=float(instances.short_seq_prob),
            cls_id=int(instances.cls_id), sep_id=int(instances.sep_id),
            mask=masking is not None, budgets=budgets, set_sizes=set_sizes,
            mask_id=int(masking.mask_id) if masking else 0,
            vocab_size=int(masking.vocab_size) if masking else 0,
            continuation=continuation,
            whole_word=bool(masking and masking.continuation is not None),
            names=names, name_bounds=name_bounds, padded=bool(padded),
            max_predictions=int(max_predictions_per_seq))
        return cls(instances=instances, masking=masking, settings=settings,
                   workspace=workspace(instances.max_seq_length, max_predictions_per_seq))


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
        for _, packed in sample:
            document_tokens, document_bounds = packed_arrays(packed)
            tokens.append(document_tokens)
            bounds.append(document_bounds[1:] + offset)
            offset += len(document_tokens)
            documents.append(documents[-1] + len(document_bounds) - 1)
        return cls(tokens=np.concatenate(tokens or [np.zeros(0, dtype=np.int32)]),
                   bounds=np.concatenate(bounds),
                   documents=np.array(documents, dtype=np.int64),
                   index={key: i for i, (key, _) in enumerate(sample)})


def warm_up(engine: Engine) -> None:
    """Loads the kernels now (compiling them once per machine, ~12 s, cached
    beside the module), so that no element pays for it."""
    document = pack_document([[0, 0], [0]])
    unit_records([("warm-up", document, (0, 1))],
                 sample=FlatSample.of([("sampled", document)]), engine=engine, seed=0)


@dataclasses.dataclass
class RecordStats:
    """What a document's copies gave, for CreateRecords' counters (the manifest's)."""

    instances: int = 0
    random_next_instances: int = 0
    truncated_tokens: int = 0
    random_next_unavailable: int = 0
    masked_tokens: int = 0


# A unit of work: documents with the dupe indices to make of each, as
# (first, end): plain ints cross stages with Beam's fast coder (a `range`
# would be pickled, once per document).
WorkUnit = list[tuple[str, PackedDocument, tuple[int, int]]]


def unit_records(unit: WorkUnit, *, sample: FlatSample, engine: Engine, seed: int
                 ) -> tuple[RecordBatch, RecordStats]:
    """The shuffle entries of every copy of every document of a unit, document
    by document, copy by copy, instance by instance: one kernel call."""
    packed = b"".join(document for _, document, _ in unit)
    packed_bounds = np.zeros(len(unit) + 1, dtype=np.int64)
    np.cumsum([len(document) for _, document, _ in unit], out=packed_bounds[1:])
    seeds = np.array([document_seed(seed, key) for key, _, _ in unit], dtype=np.uint64)
    entries, bounds, keys, stats = unit_entries(
        np.frombuffer(packed, dtype=np.uint8), packed_bounds, seeds.reshape(-1, 2),
        np.array([first for _, _, (first, _) in unit], dtype=np.int64),
        np.array([end for _, _, (_, end) in unit], dtype=np.int64),
        np.array([sample.index.get(key, -1) for key, _, _ in unit], dtype=np.int64),
        sample.tokens, sample.bounds, sample.documents, engine.settings, engine.workspace)
    return RecordBatch(keys=keys, entries=entries, bounds=bounds), RecordStats(*stats.tolist())
