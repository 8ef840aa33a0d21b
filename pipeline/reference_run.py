"""`--reference_compatible`: the original script's output, record for record.

One process and one `random.Random(random_seed)` consumed in exactly the
original's order, through the pipeline's own compiled definition of the
algorithm (transforms.instances.units_kernel.reference_entries), which is
what proves that definition faithful. Like the original it holds the corpus
and every instance in memory, lets a document run on across input files and
drops every carriage return (TF's GFile).
"""

from __future__ import annotations

import random
from typing import Callable, Sequence

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.publish import OutputPaths, staged_paths
from bert_pretraining_data.pipeline.stages import StageSettings
from bert_pretraining_data.transforms.instances.units_kernel import reference_entries
from bert_pretraining_data.transforms.tokenize.chinese_words import line_ids
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import Tokenizer
from bert_pretraining_data.transforms.write.shard_record import ShardRecord


def original_file_order(input_file: str) -> list[str]:
    """Files in the original's order: per pattern (split as the original splits
    the flag, without stripping), its sorted matches (no de-duplication)."""
    paths: list[str] = []
    for pattern in input_file.split(","):
        matched = FileSystems.match([pattern])[0].metadata_list
        paths.extend(sorted(m.path for m in matched))
    return paths


def read_documents(paths: Sequence[str], line_ids: Callable[[str], list[int]], *,
                   end_at_file_end: bool = False,
                   is_blank: Callable[[str], bool] = lambda line: not line
                   ) -> list[list[list[int]]]:
    """All documents of all files, as the original reads them (ELECTRA's
    script, unlike BERT's, ends a document at the end of each file; ALBERT's
    and the Model Garden's with SentencePiece break a document at a line that
    their `preprocess_text` empties: `is_blank`)."""
    documents: list[list[list[int]]] = [[]]
    for path in paths:
        if end_at_file_end:
            documents.append([])
        with FileSystems.open(path) as handle:
            data = handle.read().replace(b"\r", b"")
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()  # a final newline ends the last line, it is not a line
        for raw in lines:
            line = raw.decode("utf-8", "ignore").strip()
            if is_blank(line):
                documents.append([])
            ids = line_ids(line)
            if ids:
                documents[-1].append(ids)
    return [d for d in documents if d]


def flatten(documents: list[list[list[int]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Documents as the kernels' flat arrays: tokens, sentence bounds, and
    document bounds over the sentences."""
    sentences = [sentence for document in documents for sentence in document]
    bounds = np.zeros(len(sentences) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sentences], out=bounds[1:])
    document_bounds = np.zeros(len(documents) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in documents], out=document_bounds[1:])
    tokens = np.fromiter((t for s in sentences for t in s), dtype=np.int32, count=bounds[-1])
    return tokens, bounds, document_bounds


def run_compat(config: Config, *, stages: StageSettings, tokenizer: Tokenizer,
               output: OutputPaths) -> list[ShardRecord]:
    """Writes the staged shards; returns the shard list for the manifest."""
    rng = random.Random(config.random_seed)
    paths = original_file_order(config.input_file)
    electra = config.next_sentence == "none"
    if electra:
        rng.shuffle(paths)  # ELECTRA's first draws: the order of its input files
    documents = read_documents(paths, line_ids(tokenizer, config.whole_word_segmenter),
                               end_at_file_end=electra, is_blank=config.tokenizer.is_blank)
    kernels = stages.instance_kernels(reference=True)
    batch, order, _ = reference_entries(
        *flatten(documents), config.dupe_factor, rng, config.random_seed, kernels.settings,
        kernels.workspace)
    shards = []
    for shard, (path, name) in enumerate(zip(staged_paths(output), output.shard_names)):
        ours = order[shard::len(output.shard_names)]  # round-robin, as the original
        with FileSystems.create(path, compression_type=CompressionTypes.GZIP
                                if config.compression else CompressionTypes.UNCOMPRESSED) as f:
            for chunk in stages.rows.chunks(batch.entries, batch.bounds, ours,
                                            np.arange(len(ours) + 1, dtype=np.int64)):
                f.write(chunk)
        shards.append(ShardRecord(shard=shard, name=name, records=len(ours)))
    return shards
