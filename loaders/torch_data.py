"""PyTorch loading: an IterableDataset over the shards and a collator that pads
each batch to its longest sequence and, for `--masking=none` data, masks it.

Sharding: every (rank, worker) reader gets one contiguous slice of the
epoch's record stream (shards in a per-epoch order), so each instance is read
exactly once per epoch across DataLoader workers and distributed ranks, and
the ranks' counts differ by at most one.

Dynamic masking is `dynamic_masking.mask_for_epoch`, the pipeline's own masking
with an RNG derived from (seed, epoch, example index): an epoch is reproducible
whatever the number of workers or ranks, and each epoch masks differently.

    from bert_pretraining_data.loaders.torch_data import make_dataloader
    loader = make_dataloader("out/", batch_size=32, num_workers=2)
    for epoch in range(3):          # each pass is the next epoch
        for batch in loader:        # input_ids, attention_mask, token_type_ids,
            ...                     # labels (-100 unmasked), next_sentence_label
"""

from __future__ import annotations

import random
from typing import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from bert_pretraining_data.loaders.dynamic_masking import dynamic_masking, mask_for_epoch
from bert_pretraining_data.loaders.manifest import (DatasetError, Manifest, read_manifest,
                                                    read_vocabulary_bytes)
from bert_pretraining_data.loaders.records import Instance, InstanceDecoder, read_shard
from bert_pretraining_data.transforms.masking import MaskingConfig
from bert_pretraining_data.transforms.randomness import derive_rng

IGNORE_INDEX = -100  # labels at unmasked positions, as HuggingFace losses expect
STYLES = ("hf", "d2l")


def slice_bounds(total: int, reader: int, readers: int) -> tuple[int, int]:
    """[start, stop) of reader `reader` of `readers` over `total` items: contiguous,
    sizes differing by at most one."""
    return total * reader // readers, total * (reader + 1) // readers


def plan_reads(records: Sequence[int], order: Sequence[int], start: int,
               stop: int) -> list[tuple[int, int, int]]:
    """(shard, first, stop) position ranges covering [start, stop) of the stream
    that concatenates the shards in `order`."""
    plan = []
    offset = 0
    for shard in order:
        lo, hi = max(start, offset), min(stop, offset + records[shard])
        if lo < hi:
            plan.append((shard, lo - offset, hi - offset))
        offset += records[shard]
    return plan


def _buffer_shuffle(items: Iterator, size: int, rng: random.Random) -> Iterator:
    """Shuffles a stream through a buffer of `size` items (memory bound)."""
    buffer: list = []
    for item in items:
        if len(buffer) < size:
            buffer.append(item)
            continue
        slot = rng.randrange(size)
        yield buffer[slot]
        buffer[slot] = item
    rng.shuffle(buffer)
    yield from buffer


def _distributed() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class PretrainingDataset(IterableDataset):
    """Instances of a dataset (directory or manifest path, local or gs://).

    Call `set_epoch(e)` before each epoch (as with DistributedSampler), or use
    `make_dataloader`, whose loader does it on every pass. The seed defaults to
    the dataset's --random_seed; the rank and world size come from
    torch.distributed when it is initialized.
    """

    def __init__(self, dataset: str, *, shuffle: bool = True, seed: int | None = None,
                 shuffle_buffer: int = 10_000, rank: int | None = None,
                 world_size: int | None = None) -> None:
        super().__init__()
        self.manifest: Manifest = read_manifest(dataset)
        default_rank, default_world = _distributed()
        self.rank = default_rank if rank is None else rank
        self.world_size = default_world if world_size is None else world_size
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in [0, world_size={self.world_size})")
        if shuffle_buffer < 1:
            raise ValueError(f"shuffle_buffer must be at least 1, got {shuffle_buffer}")
        self.shuffle = shuffle
        self.seed = self.manifest.flags["random_seed"] if seed is None else seed
        self.shuffle_buffer = shuffle_buffer
        self.epoch = 0
        self._decode = InstanceDecoder.of(self.manifest)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        """Instances this rank yields per epoch (over all its workers)."""
        start, stop = slice_bounds(self.manifest.total_instances, self.rank, self.world_size)
        return stop - start

    def _shard_order(self) -> list[int]:
        order = list(range(len(self.manifest.shards)))
        if self.shuffle:
            derive_rng(self.seed, self.epoch, "shard-order").shuffle(order)
        return order

    def __iter__(self) -> Iterator[Instance]:
        worker = get_worker_info()
        worker_id, workers = (0, 1) if worker is None else (worker.id, worker.num_workers)
        reader = self.rank * workers + worker_id
        start, stop = slice_bounds(self.manifest.total_instances, reader,
                                   self.world_size * workers)
        shards = self.manifest.shards
        plan = plan_reads([s.records for s in shards], self._shard_order(), start, stop)
        instances = (self._decode(record, index, self.epoch)
                     for shard, first, last in plan
                     for index, record in read_shard(shards[shard], first, last))
        if self.shuffle:
            instances = _buffer_shuffle(instances, self.shuffle_buffer,
                                        derive_rng(self.seed, self.epoch, "buffer", reader))
        return instances


class Collator:
    """A list of Instances -> one batch, padded to the batch's longest sequence.

    style "hf": a dict of input_ids, attention_mask, token_type_ids, labels
    (the original id at masked positions, -100 elsewhere) and
    next_sentence_label (1 = random next, or SOP's swapped; left out for
    records without a pair task, ELECTRA's), plus ALBERT's token_boundary when
    the records have it, all int64.
    style "d2l": d2l's tuple (tokens_X, segments_X, valid_lens_x,
    pred_positions_X, mlm_weights_X, mlm_Y, nsp_y); nsp_y is 1 for "is next",
    as in d2l. `shape=(seq_len, predictions)` pads to fixed sizes instead.
    With `masking`, each instance is masked here (dynamic masking).
    """

    def __init__(self, *, style: str = "hf", pad_id: int = 0,
                 masking: MaskingConfig | None = None, seed: int = 0,
                 shape: tuple[int, int] | None = None) -> None:
        if style not in STYLES:
            raise ValueError(f"style must be one of {', '.join(STYLES)}, got {style!r}")
        self.style = style
        self.pad_id = pad_id
        self.masking = masking
        self.seed = seed
        self.shape = shape

    @classmethod
    def for_dataset(cls, dataset: "str | PretrainingDataset", *, style: str = "hf",
                    vocab_file: str | None = None, seed: int | None = None,
                    shape: tuple[int, int] | None = None) -> "Collator":
        """The collator a dataset needs: masking from its manifest when it was
        written unmasked (the vocabulary is the dataset's vocab.txt, else the
        recorded --vocab_file, or `vocab_file`), seed defaulting to its
        --random_seed, and d2l's <pad> for a d2l dataset."""
        manifest = (dataset.manifest if isinstance(dataset, PretrainingDataset)
                    else read_manifest(dataset))
        pad_id = 0  # the original pads with 0 whatever the vocabulary
        if manifest.recipe == "d2l":
            pad_id = read_vocabulary_bytes(manifest).decode("utf-8").split("\n").index("<pad>")
        return cls(style=style, pad_id=pad_id, masking=dynamic_masking(manifest, vocab_file),
                   shape=shape, seed=manifest.flags["random_seed"] if seed is None else seed)

    def _masked(self, instance: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(input ids, positions, labels), masked here when the data is unmasked."""
        if self.masking is None:
            return instance.input_ids, instance.masked_lm_positions, instance.masked_lm_ids
        masked = mask_for_epoch(instance, self.masking, self.seed)
        return (np.asarray(masked.tokens, np.int64), np.asarray(masked.positions, np.int64),
                np.asarray(masked.labels, np.int64))

    def __call__(self, instances: Sequence[Instance]):
        rows = [self._masked(instance) for instance in instances]
        lengths = [len(ids) for ids, _, _ in rows]
        counts = [len(positions) for _, positions, _ in rows]
        seq_len, predictions = self.shape or (max(lengths), max(counts))
        if max(lengths) > seq_len or max(counts) > predictions:
            raise DatasetError(f"an instance has {max(lengths)} tokens and "
                               f"{max(counts)} predictions, more than the shape {self.shape}")
        batch = len(rows)
        ids = np.full((batch, seq_len), self.pad_id, np.int64)
        segments = np.zeros((batch, seq_len), np.int64)
        boundary = np.zeros((batch, seq_len), np.int64)
        for row, (instance, (tokens, _, _)) in enumerate(zip(instances, rows)):
            ids[row, :len(tokens)] = tokens
            segments[row, :len(tokens)] = instance.segment_ids
            if instance.token_boundary is not None:
                boundary[row, :len(tokens)] = instance.token_boundary
        has_labels = instances[0].next_sentence_label is not None
        random_next = torch.tensor([i.next_sentence_label if has_labels else 0
                                    for i in instances], dtype=torch.long)
        if self.style == "hf":
            labels = np.full((batch, seq_len), IGNORE_INDEX, np.int64)
            for row, (_, positions, label_ids) in enumerate(rows):
                labels[row, positions] = label_ids
            features = {
                "input_ids": torch.from_numpy(ids),
                "attention_mask": torch.from_numpy(
                    (np.arange(seq_len) < np.asarray(lengths)[:, None]).astype(np.int64)),
                "token_type_ids": torch.from_numpy(segments),
                "labels": torch.from_numpy(labels),
            }
            if has_labels:
                features["next_sentence_label"] = random_next
            if instances[0].token_boundary is not None:
                features["token_boundary"] = torch.from_numpy(boundary)
            return features
        if not has_labels:
            raise DatasetError("style='d2l' batches hold d2l's next-sentence labels; these "
                               "records have no pair task (--next_sentence=none): use "
                               "style='hf'")
        positions = np.zeros((batch, predictions), np.int64)
        weights = np.zeros((batch, predictions), np.float32)
        label_ids = np.zeros((batch, predictions), np.int64)
        for row, (_, row_positions, row_labels) in enumerate(rows):
            positions[row, :len(row_positions)] = row_positions
            weights[row, :len(row_positions)] = 1.0
            label_ids[row, :len(row_labels)] = row_labels
        return (torch.from_numpy(ids), torch.from_numpy(segments),
                torch.tensor(lengths, dtype=torch.float32), torch.from_numpy(positions),
                torch.from_numpy(weights), torch.from_numpy(label_ids), 1 - random_next)


class EpochDataLoader(DataLoader):
    """A DataLoader whose every pass is the next epoch of its PretrainingDataset
    (a new shard order, shuffle and dynamic masks, as a shuffling DataLoader
    reshuffles), reproducibly: pass k is epoch k."""

    def __init__(self, dataset: PretrainingDataset, **kwargs) -> None:
        super().__init__(dataset, **kwargs)
        self._next_epoch = 0

    def __iter__(self):
        self.dataset.set_epoch(self._next_epoch)
        self._next_epoch += 1
        return super().__iter__()


def make_dataloader(dataset: str, batch_size: int, *, style: str = "hf",
                    shuffle: bool = True, seed: int | None = None, num_workers: int = 0,
                    vocab_file: str | None = None, shape: tuple[int, int] | None = None,
                    drop_last: bool = False) -> EpochDataLoader:
    """A DataLoader of padded (and, for unmasked data, dynamically masked) batches."""
    data = PretrainingDataset(dataset, shuffle=shuffle, seed=seed)
    collate = Collator.for_dataset(data, style=style, vocab_file=vocab_file, seed=seed,
                                   shape=shape)
    return EpochDataLoader(data, batch_size=batch_size, collate_fn=collate,
                           num_workers=num_workers, drop_last=drop_last)
