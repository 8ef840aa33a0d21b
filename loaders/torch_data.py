"""PyTorch loading: an IterableDataset over the shards and a collator that pads
each batch to its longest sequence and, for `--masking=none` data, masks it.

Every (rank, worker) reader gets one contiguous slice of the epoch's record
stream (shards in a per-epoch order), so each instance is read exactly once
per epoch across DataLoader workers and ranks. Dynamic masking is
`dynamic_masking.mask_for_epoch`, seeded by (seed, epoch, example index): an
epoch is reproducible whatever the number of workers or ranks.

    loader = make_dataloader("out/", batch_size=32, num_workers=2)
    held_out = make_dataloader("out/", batch_size=32, split="validation", shuffle=False)
"""

from __future__ import annotations

import random
from typing import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from bert_pretraining_data.loaders.dynamic_masking import dynamic_masking, mask_for_epoch
from bert_pretraining_data.loaders.manifest import (DatasetError, Manifest, pad_id,
                                                    read_manifest, read_vocabulary)
from bert_pretraining_data.loaders.records import (Instance, InstanceDecoder, Row, read_shard,
                                                   sequences_of)
from bert_pretraining_data.transforms.instances.masking import MaskingConfig
from bert_pretraining_data.transforms.randomness import hashed_rng
from bert_pretraining_data.transforms.split.held_out import TRAIN

IGNORE_INDEX = -100  # labels at unmasked positions, as HuggingFace losses expect
STYLES = ("hf", "d2l", "blocks", "flat")
# Instance attributes a batch holds per sequence when the records have them
# (IGNORE_INDEX where a packed row has fewer).
_PER_SEQUENCE = ("next_sentence_label", "source")


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
    """Instances of one split of a dataset (directory or manifest path, local
    or gs://), or its rows (`records.Row`) when it is packed
    (`--pack_sequences`). `split`: "train", or a held-out split
    (--validation_fraction, --test_fraction), read with its own manifest view:
    its shards, seed and static masks.

    Call `set_epoch(e)` before each epoch (as with DistributedSampler), or use
    `make_dataloader`, whose loader does it on every pass. The seed defaults to
    the dataset's --random_seed; the rank and world size come from
    torch.distributed when it is initialized.
    """

    def __init__(self, dataset: str, *, split: str = TRAIN, shuffle: bool = True,
                 seed: int | None = None, shuffle_buffer: int = 10_000,
                 rank: int | None = None, world_size: int | None = None) -> None:
        super().__init__()
        self.manifest: Manifest = read_manifest(dataset, split=split)
        self.manifest.check_records()
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
        """Records (instances, or packed rows) this rank yields per epoch (over
        all its workers)."""
        start, stop = slice_bounds(self.manifest.total_records, self.rank, self.world_size)
        return stop - start

    def _shard_order(self) -> list[int]:
        order = list(range(len(self.manifest.shards)))
        if self.shuffle:
            hashed_rng(self.seed, self.epoch, "shard-order").shuffle(order)
        return order

    def __iter__(self) -> Iterator[Instance | Row]:
        worker = get_worker_info()
        worker_id, workers = (0, 1) if worker is None else (worker.id, worker.num_workers)
        reader = self.rank * workers + worker_id
        start, stop = slice_bounds(self.manifest.total_records, reader,
                                   self.world_size * workers)
        shards = self.manifest.shards
        plan = plan_reads([s.records for s in shards], self._shard_order(), start, stop)
        # a held-out split unmasked on disk gets the same masks at every evaluation
        epoch = 0 if self.manifest.held_out else self.epoch
        instances = (self._decode(record, index, epoch)
                     for shard, first, last in plan
                     for index, record in read_shard(shards[shard], first, last))
        if self.shuffle:
            instances = _buffer_shuffle(instances, self.shuffle_buffer,
                                        hashed_rng(self.seed, self.epoch, "buffer", reader))
        return instances


class Collator:
    """Records -> one batch, padded to the batch's longest sequence (or row).

    style "hf": a dict of input_ids, attention_mask, token_type_ids, labels
    (the original id at masked positions, -100 elsewhere) and
    next_sentence_label (1 = random next, or SOP's swapped; left out for
    records without a pair task, ELECTRA's), plus ALBERT's token_boundary when
    the records have it, all int64, and a mixture's source [batch] (each
    instance's source index, the manifest's order).
    style "d2l": d2l's tuple (tokens_X, segments_X, valid_lens_x,
    pred_positions_X, mlm_weights_X, mlm_Y, nsp_y); nsp_y is 1 for "is next",
    as in d2l. `shape=(seq_len, predictions)` pads to fixed sizes instead.
    style "blocks" (packed rows, `--pack_sequences`): the rows as they are,
    with a block-diagonal attention mask [batch, 1, seq_len, seq_len] (bool,
    True where a token may attend: within its own sequence; a padding token
    attends to itself only, so no softmax row is empty) and position_ids
    restarting at 0 for each sequence, which any attention implementation
    takes (`additive_mask` for eager ones); sequence_ids (the row's
    input_mask: 1-based sequence index, 0 padding), labels over the row,
    next_sentence_positions (each sequence's [CLS]) and next_sentence_label
    (-100 where a row has fewer sequences), [batch, sequences], and so a
    mixture's source (a token's: source[r, sequence_ids[r, t] - 1]).
    style "flat": every sequence of the batch (packed or not) side by side in
    one row without padding, as HF's DataCollatorWithFlattening lays them out
    for flash-attention's varlen kernels: input_ids, token_type_ids,
    position_ids and labels [1, total], cu_seq_lens_q/k (int32 sequence
    bounds) and max_length_q/k, next_sentence_positions,
    next_sentence_label and a mixture's source [sequences].
    With `masking`, each sequence is masked here (dynamic masking).
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
    def for_dataset(cls, dataset: "str | PretrainingDataset", *, style: str | None = None,
                    vocab_file: str | None = None, seed: int | None = None,
                    shape: tuple[int, int] | None = None, split: str = TRAIN) -> "Collator":
        """The collator a dataset needs: masking from its manifest when it was
        written unmasked (the vocabulary is the dataset's vocab.txt, else the
        recorded --vocab_file, or `vocab_file`), seed defaulting to its
        --random_seed, d2l's <pad> for a d2l dataset, and style "blocks" by
        default for packed rows ("hf" otherwise). `split` names the split of a
        dataset path (a PretrainingDataset has its own): a held-out split is
        masked on disk, so its collator masks nothing."""
        manifest = (dataset.manifest if isinstance(dataset, PretrainingDataset)
                    else read_manifest(dataset, split=split))
        style = style or ("blocks" if manifest.packed else "hf")
        if manifest.packed and style in ("hf", "d2l"):
            raise DatasetError(f"{manifest.path} holds packed rows (--pack_sequences): use "
                               "style='blocks' (block-diagonal attention) or 'flat'")
        if style == "blocks" and not manifest.packed:
            raise DatasetError(f"style='blocks' lays out packed rows; {manifest.path} holds "
                               "one instance a record: use style='hf' or 'flat'")
        vocabulary = None  # a tokenizer.json's: parsed once, for the pad and masking
        if manifest.tokenizer.tokenizer_file:
            vocabulary = read_vocabulary(manifest, vocab_file)
        return cls(style=style, pad_id=pad_id(manifest, vocabulary),
                   masking=dynamic_masking(manifest, vocab_file, vocabulary=vocabulary),
                   shape=shape, seed=manifest.flags["random_seed"] if seed is None else seed)

    def _masked(self, instance: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(input ids, positions, labels), masked here when the data is unmasked:
        with the generator of (seed, epoch, record index[, place in its row])."""
        if self.masking is None:
            return instance.input_ids, instance.masked_lm_positions, instance.masked_lm_ids
        masked = mask_for_epoch(instance, self.masking, self.seed)
        return (np.asarray(masked.tokens, np.int64), np.asarray(masked.positions, np.int64),
                np.asarray(masked.labels, np.int64))

    def __call__(self, items: Sequence[Instance | Row]):
        if self.style == "flat":
            return self._flat([i for item in items for i in sequences_of(item)])
        if self.style == "blocks":
            return self._blocks(items)
        if isinstance(items[0], Row):
            raise DatasetError("these records are packed rows (--pack_sequences): use "
                               "style='blocks' or 'flat'")
        return self._padded(items)

    def _padded(self, instances: Sequence[Instance]):
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
            if instances[0].source is not None:
                features["source"] = torch.tensor([i.source for i in instances],
                                                  dtype=torch.long)
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

    def _lay_out(self, rows: Sequence[Sequence[Instance]], seq_len: int) -> dict[str, np.ndarray]:
        """Rows of sequences side by side, [len(rows), seq_len] each: ids,
        segments, positions, sequence ids (1-based, 0 padding), labels,
        token_boundary (None without it), and per sequence its [CLS] position,
        label and source (-100 padding; each left out when the records have
        none), [len(rows), most sequences]."""
        depth = max(len(row) for row in rows)
        out = {name: np.full((len(rows), seq_len), fill, np.int64) for name, fill in (
            ("input_ids", self.pad_id), ("token_type_ids", 0), ("position_ids", 0),
            ("sequence_ids", 0), ("labels", IGNORE_INDEX), ("token_boundary", 0))}
        out["next_sentence_positions"] = np.zeros((len(rows), depth), np.int64)
        out.update({name: np.full((len(rows), depth), IGNORE_INDEX, np.int64)
                    for name in _PER_SEQUENCE})
        for r, row in enumerate(rows):
            start = 0
            for s, instance in enumerate(row):
                tokens, positions, label_ids = self._masked(instance)
                end = start + len(tokens)
                if end > seq_len:
                    raise DatasetError(f"a row holds {end} tokens, more than {seq_len}")
                out["input_ids"][r, start:end] = tokens
                out["token_type_ids"][r, start:end] = instance.segment_ids
                out["position_ids"][r, start:end] = np.arange(len(tokens))
                out["sequence_ids"][r, start:end] = s + 1
                out["labels"][r, start + positions] = label_ids
                if instance.token_boundary is not None:
                    out["token_boundary"][r, start:end] = instance.token_boundary
                out["next_sentence_positions"][r, s] = start
                for name in _PER_SEQUENCE:
                    if getattr(instance, name) is not None:
                        out[name][r, s] = getattr(instance, name)
                start = end
        for name in ("token_boundary", *_PER_SEQUENCE):
            if getattr(rows[0][0], name) is None:
                del out[name]
        return out

    def _blocks(self, rows: Sequence[Row]):
        if not all(isinstance(row, Row) for row in rows):
            raise DatasetError("style='blocks' lays out packed rows; these records hold one "
                               "instance each: use style='hf' or 'flat'")
        lengths = [sum(len(i.input_ids) for i in row.sequences) for row in rows]
        out = self._lay_out([row.sequences for row in rows],
                            self.shape[0] if self.shape else max(lengths))
        ids = out["sequence_ids"]
        same = (ids[:, :, None] == ids[:, None, :]) & (ids[:, :, None] > 0)
        same |= np.eye(ids.shape[1], dtype=bool)  # padding attends to itself
        features = {name: torch.from_numpy(value) for name, value in out.items()}
        features["attention_mask"] = torch.from_numpy(same[:, None])
        return features

    def _flat(self, instances: Sequence[Instance]):
        lengths = np.array([len(i.input_ids) for i in instances], dtype=np.int64)
        out = self._lay_out([list(instances)], int(lengths.sum()))
        bounds = torch.from_numpy(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32))
        features = {name: torch.from_numpy(value) for name, value in out.items()
                    if name not in ("sequence_ids", "next_sentence_positions", *_PER_SEQUENCE)}
        features.update({"cu_seq_lens_q": bounds, "cu_seq_lens_k": bounds,
                         "max_length_q": int(lengths.max()), "max_length_k": int(lengths.max()),
                         "next_sentence_positions": bounds[:-1].long()})
        features.update({name: torch.from_numpy(out[name][0]) for name in _PER_SEQUENCE
                         if name in out})
        return features


def additive_mask(attention_mask: torch.Tensor, dtype: torch.dtype = torch.float32
                  ) -> torch.Tensor:
    """A boolean attention mask (True: may attend) as the additive float mask
    eager attention implementations take (0 or the dtype's lowest value)."""
    return torch.zeros(attention_mask.shape, dtype=dtype).masked_fill(
        ~attention_mask, torch.finfo(dtype).min)


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


def make_dataloader(dataset: str, batch_size: int, *, split: str = TRAIN,
                    style: str | None = None, shuffle: bool = True, seed: int | None = None,
                    num_workers: int = 0, vocab_file: str | None = None,
                    shape: tuple[int, int] | None = None,
                    drop_last: bool = False) -> EpochDataLoader:
    """A DataLoader of padded (and, for unmasked data, dynamically masked)
    batches of one split ("train", "validation", "test"); `style` (see
    Collator) defaults to "blocks" for packed rows, "hf" otherwise.
    `batch_size` counts records: a packed row holds several instances."""
    data = PretrainingDataset(dataset, split=split, shuffle=shuffle, seed=seed)
    collate = Collator.for_dataset(data, style=style, vocab_file=vocab_file, seed=seed,
                                   shape=shape)
    return EpochDataLoader(data, batch_size=batch_size, collate_fn=collate,
                           num_workers=num_workers, drop_last=drop_last)
