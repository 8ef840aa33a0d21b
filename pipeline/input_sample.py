"""What the run's own stages make of a sample of its input, on the driver
before any work: the disk estimate's shards (pipeline.disk_space) and the
shuffle frames' codebook (transforms.handoff.shuffle.frames) come from it.

The sample is windows spread over uncompressed text files
(transforms.read.beam.sample_lines), whose bytes scale to the input's; where
windows cannot be cut (compressed files, tables, dumps, WET files), the first
documents of files spread over the input (transforms.read.beam.head_documents),
which serve the codebook, not the disk estimate: how their text's bytes scale
to the files' is not known before they are read. A mixture is not sampled:
each source's copies are decided by the run.
"""

from __future__ import annotations

from collections.abc import Sequence

from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.stages import StageSettings
from bert_pretraining_data.transforms.handoff.shuffle.entries import EntryBatch
from bert_pretraining_data.transforms.handoff.tokenized_documents import CompactDocument
from bert_pretraining_data.transforms.instances.units import (FlatSample, fan_out_batch,
                                                              unit_instances)
from bert_pretraining_data.transforms.read.beam import (head_documents, sample_lines,
                                                       windows_cut_from)
from bert_pretraining_data.transforms.read.documents import split_documents
from bert_pretraining_data.transforms.tokenize.document import DocumentTokenizer
from bert_pretraining_data.transforms.tokenize.tokenizer_json import TextNotEncodable
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary, VocabularyError

SampledDocuments = list[tuple[str, CompactDocument]]


def sample_texts(inputs: Sequence[tuple[str, int]], budget: int
                 ) -> tuple[list[list[str]], int]:
    """The documents' lines in windows of about `budget` bytes spread over
    uncompressed text files, and the bytes read."""
    lines, sampled = sample_lines(inputs, budget)
    return [text for _, text in split_documents(lines)], sampled


def sample_documents(config: Config, stages: StageSettings | None, vocab: Vocabulary | None,
                     inputs: Sequence[tuple[str, int]], budget: int, *, scaled: bool = False
                     ) -> tuple[SampledDocuments, int | None] | None:
    """About `budget` bytes of the input as the Tokenize stage makes its
    documents, and the input bytes read (None for the first documents of
    files read whole, which `scaled` refuses); None where the input is not
    sampled (see the module's docstring) or the recipe has no stages (d2l)."""
    if stages is None or vocab is None or config.mixture:
        return None
    if config.input_format == "text" and windows_cut_from(inputs):
        texts, sampled = sample_texts(inputs, budget)
    elif scaled:
        return None
    else:
        texts, sampled = head_documents(config.input_format, [path for path, _ in inputs],
                                        budget, config.text_field), None
    if not texts:
        return None
    # the workers' tokenizer, on the engine the run chose (a tokenizer.json's
    # library took 0.3 CPU s more on 1 MB of tiny documents than a warm fast
    # engine; xlmr-unigram's 20 MB tiny run, 0.990x the CPU)
    tokenize = DocumentTokenizer.of(stages.tokenizer.tokenizer(vocab),
                                    segmenter=config.whole_word_segmenter,
                                    splitter=config.sentence_splitter)
    documents = []
    for number, text in enumerate(texts):
        try:
            document = tokenize(text).compact
        except TextNotEncodable as err:  # found before the run: the user's to fix (exit 2)
            raise VocabularyError(f"in a sample of the input, {err}") from None
        if document is not None:
            documents.append((f"sample:{number}", document))
    return documents, sampled


def sample_entries(config: Config, stages: StageSettings, documents: SampledDocuments, first: int,
                   stop: int) -> list[EntryBatch]:
    """The shuffle entries of copies first..stop-1 of every sampled document,
    as CreateInstances makes them (the sample's documents its own
    random-next sample)."""
    kernels = stages.instance_kernels()
    sample = FlatSample.of(documents[:config.nsp_sample_size])
    return [unit_instances(unit, sample=sample, kernels=kernels, seed=config.random_seed)[0]
            for unit in fan_out_batch(documents, stop, first)]
