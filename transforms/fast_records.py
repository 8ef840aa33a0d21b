"""A document copy to (shuffle key, record) pairs through the compiled kernels.

The same result as `CreateInstances -> MaskTokens -> encode` of
transforms.stages, byte for byte, key for key: the seeds come from the same
keys (transforms.randomness) and transforms.jit_records makes the same draws.
Python is left with what the kernels cannot do cheaply: the sha256 and
blake2b of the per-instance keys.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from transforms.instances import InstanceConfig
from transforms.jit_random import digest_seed_words, sample_set_size, seed_words
from transforms.jit_records import create_instances, feature_names, mask_and_encode
from transforms.masking import MaskingConfig, num_to_predict
from transforms.packing import PackedDocument, pack_document, packed_arrays
from transforms.randomness import Keyed
from transforms.sampling import SampledDocument


@dataclasses.dataclass(frozen=True)
class Engine:
    """Everything the kernels need besides the document, as arrays and scalars:
    built once per worker (`DoFn.setup`), from the same configs as the Python
    path. Without a masking config (`--masking=none`) records carry no
    predictions, as the Python path writes them."""

    instances: InstanceConfig
    masking: MaskingConfig | None
    max_predictions_per_seq: int
    padded: bool
    budgets: np.ndarray  # num_to_predict per instance length
    set_sizes: np.ndarray  # random.sample's threshold per number of picks
    continuation: np.ndarray  # per id: a `##` piece (whole-word masking only)
    names: np.ndarray
    name_bounds: np.ndarray

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
        return cls(instances=instances, masking=masking,
                   max_predictions_per_seq=max_predictions_per_seq, padded=padded,
                   budgets=budgets, set_sizes=set_sizes, continuation=continuation,
                   names=names, name_bounds=name_bounds)


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
    document_records("warm-up", 0, pack_document([[0, 0], [0]]), sample=FlatSample.of([]),
                     engine=engine, seed=0)


@dataclasses.dataclass
class RecordStats:
    """What one document copy gave, for CreateRecords' counters (the manifest's)."""

    instances: int = 0
    random_next_instances: int = 0
    truncated_tokens: int = 0
    random_next_unavailable: int = 0
    masked_tokens: int = 0


def document_records(doc_key: str, dupe_index: int, packed: PackedDocument, *,
                     sample: FlatSample, engine: Engine, seed: int
                     ) -> tuple[list[tuple[int, bytes]], RecordStats]:
    """(shuffle key, record) of every instance of one document copy, in order."""
    tokens, bounds = packed_arrays(packed)
    key, key_length = seed_words(int.from_bytes(
        Keyed().seed_digest(seed, "instances", doc_key, dupe_index), "big"))
    config = engine.instances
    (instance_tokens, instance_bounds, a_lengths, random_next, truncated,
     unavailable) = create_instances(
        tokens, bounds, key, key_length, sample.tokens, sample.bounds, sample.documents,
        sample.index.get(doc_key, -1), config.max_seq_length, config.short_seq_prob,
        config.cls_id, config.sep_id)
    count = len(a_lengths)
    stats = RecordStats(instances=count, random_next_instances=int(random_next.sum()),
                        truncated_tokens=truncated, random_next_unavailable=unavailable)
    if not count:
        return [], stats
    masking = engine.masking
    keys, key_lengths = digest_seed_words(
        Keyed(seed, "mask", doc_key, dupe_index).seed_digests(count) if masking else b"")
    records, record_bounds, stats.masked_tokens = mask_and_encode(
        instance_tokens, instance_bounds, a_lengths, random_next, masking is not None,
        keys, key_lengths, engine.budgets, engine.set_sizes, config.cls_id, config.sep_id,
        masking.mask_id if masking else 0, masking.vocab_size if masking else 0,
        engine.continuation, bool(masking and masking.continuation is not None),
        engine.names, engine.name_bounds, engine.padded, config.max_seq_length,
        engine.max_predictions_per_seq)
    data = records.tobytes()
    ends = record_bounds.tolist()
    return list(zip(Keyed("shuffle", seed, doc_key, dupe_index).hashes(count),
                    map(data.__getitem__, map(slice, ends, ends[1:])))), stats
