"""Compiles the pipeline's kernels into numba's cache, so no process compiles them again.

Every worker process loads the compiled kernels from the cache beside the
modules (numba's `cache=True`) and compiles them only when it is missing or
stale, at a cost to each process's start (docs/design-notes.md,
pipeline.warm_up). The
Flex Template image runs `python -m bert_pretraining_data.pipeline.warm_up`
while it is built (deploy/Dockerfile), so its workers start warm; a worker
that installs the package from `--setup_file` compiles on first use.
"""

from __future__ import annotations

import numpy as np

from bert_pretraining_data.transforms.handoff import tokenized_documents
from bert_pretraining_data.transforms.handoff.shuffle import entries as shuffle_entries
from bert_pretraining_data.transforms.handoff.shuffle.entries import scan_entries, split_by_shard
from bert_pretraining_data.transforms.instances import units_kernel
from bert_pretraining_data.transforms.instances.masking import MaskingConfig
from bert_pretraining_data.transforms.instances.pairs import InstanceConfig
from bert_pretraining_data.transforms.instances.units import InstanceKernels
from bert_pretraining_data.transforms.instances.units import warm_up as warm_up_instances
from bert_pretraining_data.transforms.pack import histogram, plan
from bert_pretraining_data.transforms.quality import ngram_kernel
from bert_pretraining_data.transforms.quality.rules import QualityConfig, decide
from bert_pretraining_data.transforms.tokenize import unigram_kernel, wordpiece_kernel
from bert_pretraining_data.transforms.tokenize.compiled_calls import CompactWriter
from bert_pretraining_data.transforms.tokenize.unigram import UnigramKernel
from bert_pretraining_data.transforms.tokenize.vocabulary import parse_vocabulary
from bert_pretraining_data.transforms.tokenize.wordpiece import FullTokenizer
from bert_pretraining_data.transforms.write import columns, mds_rows, parquet_rows, rows
from bert_pretraining_data.transforms.write.rows import RawRecords
from bert_pretraining_data.transforms.write.tf_example import RecordLayout

# The kernels the pipeline calls from Python (each compiles what it calls).
KERNELS = (units_kernel.unit_entries, tokenized_documents.read_compact, shuffle_entries._entries_of,
           shuffle_entries.gather, shuffle_entries._scan_entries, rows._frame_payloads,
           rows._lengths, rows._write_rows, histogram._solve, plan._fill_rows,
           wordpiece_kernel.line_ids, wordpiece_kernel.lines_compact, wordpiece_kernel.build_slots,
           wordpiece_kernel.wordpiece, unigram_kernel.lines_ids, tokenized_documents.write_counted,
           tokenized_documents.write_counted_buffers, ngram_kernel.ngram_characters,
           columns._sizes, columns._flatten, mds_rows._row_counts, mds_rows._sample_sizes,
           mds_rows._write_samples)

# Kernel types do not depend on flag values: one small configuration compiles
# every specialization the pipeline uses (Parquet's, one per token id type).
_INSTANCES = InstanceConfig(max_seq_length=16, short_seq_prob=0.1, cls_id=2, sep_id=3)
_MASKING = MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=2, vocab_size=8,
                         mask_id=4, cls_id=2, sep_id=3, continuation=None)
# The row writers of one instance a record, of packed rows, of Parquet and of MDS.
_ROWS = (rows.InstanceRows(RecordLayout(), 16, 2),
         rows.PackedRows(RecordLayout(packed=True), 16, 4, 3),
         *(parquet_rows.ParquetRows(rows.InstanceRows(RecordLayout(padded=False), 16, 2), size)
           for size in (8, columns.UINT16_LIMIT + 1)),
         *(mds_rows.MDSRows(rows.InstanceRows(RecordLayout(padded=False, masked_lm=False), 16,
                                              2), size)
           for size in (8, columns.UINT16_LIMIT + 1)))


def warm_up() -> dict[str, tuple[int, int]]:
    """Runs every compiled kernel once (compiling it into the cache if needed);
    returns, per kernel, (signatures compiled, signatures loaded from the cache)."""
    for masking in (_MASKING, None):
        batch = warm_up_instances(InstanceKernels.of(_INSTANCES, masking))
    for writer in _ROWS:
        list(writer.rows(*scan_entries(batch.entries)).chunks)
    entries = shuffle_entries.EntryBatch.of([(3, b"b"), (2, b"a")])
    split_by_shard(entries, 2)
    list(RawRecords().rows(*scan_entries(entries.entries)).chunks)
    vocab = parse_vocabulary(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n##a\n")
    # U+1B44 keeps a combining class: its line takes the word-by-word path.
    FullTokenizer(vocab, do_lower_case=True).tokenize_to_ids("a aa \u1b44a")
    decide(["a b a b a b a b a b a b."], QualityConfig.parse("gopher"))
    UnigramKernel([], {"replacement": "\u2581"}, ["\u2581", "a", "\u2581a"], [-1.0, -2.0, -1.5],
                  0).compact_lines(["a aa b"], unk=0)
    # fastokens' flat buffers (transforms.tokenize.engines.fast_compact)
    CompactWriter(tokenized_documents.write_counted_buffers).write(
        np.zeros(1, np.uint32).tobytes(), np.arange(2, dtype=np.uint64).tobytes(), 0, lines=1,
        tokens=1)
    return {f"{kernel.__module__.rsplit('.', 1)[-1]}.{kernel.__name__}": (sum(kernel.stats.cache_misses.values()),
                              sum(kernel.stats.cache_hits.values())) for kernel in KERNELS}


if __name__ == "__main__":
    compiled = sum(misses for misses, _ in warm_up().values())
    print(f"record and tokenizer kernels cached: {compiled} signature(s) compiled now")
