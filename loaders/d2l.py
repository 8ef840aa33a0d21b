"""d2l's `load_data_wiki`, over a dataset written with `--recipe=d2l`.

d2l builds the WikiText-2 BERT dataset in memory on every start; here the
pipeline has written it once, and this gives back what d2l's function
returns: batches of exactly d2l's shapes and dtypes and a vocabulary that
indexes like d2l's `Vocab`:

    train_iter, vocab = load_data_wiki("out/", batch_size=512)
"""

from __future__ import annotations

from typing import Sequence

from bert_pretraining_data.loaders.manifest import (DatasetError, Manifest, read_manifest,
                                                    read_vocabulary_bytes)
from bert_pretraining_data.loaders.torch_data import Collator, EpochDataLoader, PretrainingDataset


class Vocab:
    """d2l's Vocab interface over vocab.txt (id = line number, `<unk>` = 0)."""

    def __init__(self, tokens: Sequence[str]) -> None:
        self.idx_to_token = list(tokens)
        self.token_to_idx = {token: index for index, token in enumerate(self.idx_to_token)}

    def __len__(self) -> int:
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        if not isinstance(tokens, (list, tuple)):
            return self.token_to_idx.get(tokens, self.unk)
        return [self.__getitem__(token) for token in tokens]

    def to_tokens(self, indices):
        if not isinstance(indices, (list, tuple)):
            return self.idx_to_token[int(indices)]
        return [self.idx_to_token[int(index)] for index in indices]

    @property
    def unk(self) -> int:
        return 0


def read_vocab(manifest: Manifest) -> Vocab:
    """The vocabulary a d2l dataset was written with (its vocab.txt)."""
    text = read_vocabulary_bytes(manifest).decode("utf-8")
    return Vocab(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"))


def load_data_wiki(dataset: str, batch_size: int, *, num_workers: int = 0,
                   shuffle: bool = True, seed: int | None = None) -> tuple[EpochDataLoader, Vocab]:
    """(batches, vocab) as d2l's `load_data_wiki(batch_size, max_len)` returns them;
    max_len is the dataset's --max_seq_length. Each pass over the batches is a
    new epoch (new order), as with d2l's shuffling DataLoader."""
    manifest = read_manifest(dataset)
    if manifest.recipe != "d2l":
        raise DatasetError(f"{manifest.path}: written with --recipe={manifest.recipe}, "
                           "not --recipe=d2l; use loaders.make_dataloader(..., style='d2l')")
    data = PretrainingDataset(dataset, shuffle=shuffle, seed=seed)
    collate = Collator.for_dataset(
        data, style="d2l", shape=(manifest.max_seq_length, manifest.max_predictions_per_seq))
    return EpochDataLoader(data, batch_size=batch_size, collate_fn=collate,
                           num_workers=num_workers), read_vocab(manifest)
