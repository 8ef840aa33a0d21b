"""`--reference_compatible`: the original script's output, record for record.

One process and one `random.Random(random_seed)` consumed in exactly the
original's order: document shuffle, per-document draws with masking
interleaved, the final shuffle of all instances, round-robin over the output
files. It reuses the pipeline's pure functions, which is what proves them
faithful. Like the original it holds the corpus and every instance in memory,
and like the original's reader (TF's GFile) it lets a document run on across
input files and drops every carriage return.
"""

from __future__ import annotations

import random
from typing import Sequence

from apache_beam.io.filesystems import FileSystems

from pipeline.options import Config
from pipeline.publish import OutputLayout, staged_paths
from transforms.instances import Document, Instance, create_instances
from transforms.masking import mask_tokens
from transforms.stages import encode_instance
from transforms.tfrecord import write_record
from transforms.tokenization import FullTokenizer


def original_file_order(input_file: str) -> list[str]:
    """Files in the original's order: per pattern (split as the original splits
    the flag, without stripping), its sorted matches (no de-duplication)."""
    paths: list[str] = []
    for pattern in input_file.split(","):
        matched = FileSystems.match([pattern])[0].metadata_list
        paths.extend(sorted(m.path for m in matched))
    return paths


def read_documents(paths: Sequence[str], tokenizer: FullTokenizer) -> list[list[list[int]]]:
    """All documents of all files, as the original reads them."""
    documents: list[list[list[int]]] = [[]]
    for path in paths:
        with FileSystems.open(path) as handle:
            data = handle.read().replace(b"\r", b"")
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()  # a final newline ends the last line, it is not a line
        for raw in lines:
            line = raw.decode("utf-8", "ignore").strip()
            if not line:
                documents.append([])
            ids = tokenizer.tokenize_to_ids(line)
            if ids:
                documents[-1].append(ids)
    return [d for d in documents if d]


def _original_random_document(documents: list, index: int):
    """The original's choice: up to 10 tries to avoid the current document."""

    def choose(rng: random.Random) -> Document:
        for _ in range(10):
            other = rng.randint(0, len(documents) - 1)
            if other != index:
                break
        return documents[other]

    return choose


def create_all_instances(documents: list, *, config: Config, stages,
                         rng: random.Random) -> list[Instance]:
    rng.shuffle(documents)
    instances: list[Instance] = []
    for _ in range(config.dupe_factor):
        for index, document in enumerate(documents):
            made, _ = create_instances(
                document, config=stages.instances,
                random_document=_original_random_document(documents, index), rng=rng,
                mask=lambda tokens: mask_tokens(tokens, stages.masking, rng,
                                                original_draws=True))
            instances.extend(made)
    rng.shuffle(instances)
    return instances


def run_compat(config: Config, *, stages, tokenizer: FullTokenizer,
               layout: OutputLayout) -> list[dict]:
    """Writes the staged shards; returns the shard list for the manifest."""
    rng = random.Random(config.random_seed)
    documents = read_documents(original_file_order(config.input_file), tokenizer)
    instances = create_all_instances(documents, config=config, stages=stages, rng=rng)
    paths = staged_paths(layout)
    handles = [FileSystems.create(p) for p in paths]
    counts = [0] * len(paths)
    for index, instance in enumerate(instances):
        shard = index % len(handles)
        write_record(handles[shard], encode_instance(
            instance, max_seq_length=config.max_seq_length,
            max_predictions_per_seq=config.max_predictions_per_seq))
        counts[shard] += 1
    for handle in handles:
        handle.close()
    return [{"shard": i, "name": name, "records": n}
            for i, (name, n) in enumerate(zip(layout.shard_names, counts))]
