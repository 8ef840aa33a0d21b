"""Loading the pipeline's datasets for training: tf.data, PyTorch and d2l.

    loaders.tf_dataset(dataset, batch_size=...)      tf.data, run_pretraining.py's features
    loaders.PretrainingDataset(dataset)              a torch IterableDataset of instances
    loaders.Collator.for_dataset(dataset)            dynamic padding (and dynamic masking)
    loaders.make_dataloader(dataset, batch_size)     both, in a torch DataLoader
    loaders.load_data_wiki(dataset, batch_size)      d2l's (batches, vocab)
    loaders.read_manifest(dataset)                   shards, counts and flags

All but load_data_wiki (a d2l dataset has training only) take `split=`:
"train" by default, "validation" or "test" of a dataset written with
held-out splits (docs/splits.md).

Each name is imported from its module on first use, so importing this needs
neither Beam, TensorFlow nor torch, and a PyTorch job never loads TensorFlow.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "tf_dataset": "bert_pretraining_data.loaders.tf_data",
    "PretrainingDataset": "bert_pretraining_data.loaders.torch_data",
    "Collator": "bert_pretraining_data.loaders.torch_data",
    "make_dataloader": "bert_pretraining_data.loaders.torch_data",
    "load_data_wiki": "bert_pretraining_data.loaders.d2l",
    "Vocab": "bert_pretraining_data.loaders.d2l",
    "read_manifest": "bert_pretraining_data.loaders.manifest",
    "DatasetError": "bert_pretraining_data.loaders.manifest",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
