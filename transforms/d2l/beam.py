"""The d2l recipe's Beam steps: lines, paragraphs, tf.Transform's vocabulary
analyzer, encoding, pairs and masking (the rules: pipeline.d2l_recipe)."""

from __future__ import annotations

import random
from typing import Iterator

import apache_beam as beam
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from apache_beam.io.filebasedsource import FileBasedSource
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from bert_pretraining_data.transforms.counters import counter
from bert_pretraining_data.transforms.d2l.pairs import (MIN_FREQUENCY, RESERVED_TOKENS, UNK_ID,
                                                        InstanceBatch, Paragraph, encode_paragraph,
                                                        nsp_pairs, split_paragraph,
                                                        vocabulary_from_asset)
from bert_pretraining_data.transforms.handoff.tokenized_documents import compact_document
from bert_pretraining_data.transforms.instances.masking import MaskingConfig, mask_tokens
from bert_pretraining_data.transforms.instances.sample import (random_document_from_sample,
                                                               sample_positions)
from bert_pretraining_data.transforms.randomness import hashed_rng
from bert_pretraining_data.transforms.read.documents import document_key
from bert_pretraining_data.transforms.seeds import MASK_STREAM, document_seed, position_rng


class MaskTokens(beam.DoFn):
    """Masks each instance with an RNG of its own key (doc_key, dupe, index).

    The config is given here, or as the side input `config` when it depends
    on the data (the d2l recipe's vocabulary size is known only at run time).
    """

    def __init__(self, *, config: MaskingConfig | None, seed: int) -> None:
        self._config = config
        self._seed = seed
        self._masked = counter("masked_tokens")

    def process(self, batch: InstanceBatch, config: MaskingConfig | None = None
                ) -> Iterator[InstanceBatch]:
        (doc_key, dupe_index), instances = batch
        config = config or self._config
        seed = document_seed(self._seed, doc_key)
        masked = [instance.with_mask(mask_tokens(
                      instance.tokens, config, position_rng(seed, MASK_STREAM, dupe_index, index)))
                  for index, instance in enumerate(instances)]
        self._masked.inc(sum(len(m.masked_lm_positions) for m in masked))
        yield (doc_key, dupe_index), masked


_TFT_VOCAB = "d2l_vocab"  # tf.Transform's asset name


class LineSource(FileBasedSource):
    """Splittable source of (path:offset, line without its newline) for
    one-paragraph-per-line text (local, gs://, .gz/.bz2).

    The key is documents.py's (stable across runs, runners and corpus moves),
    and a line belongs to the bundle whose range holds its offset.
    """

    def __init__(self, pattern: str, root: str) -> None:
        super().__init__(pattern, compression_type=CompressionTypes.AUTO,
                         splittable=True, validate=False)
        self._root = root
        self._undecodable = counter("undecodable_bytes")

    def read_records(self, file_name: str, range_tracker) -> Iterator[tuple[str, str]]:
        start = range_tracker.start_position()
        with self.open_file(file_name) as f:
            offset = 0
            if start > 0:  # the first line that starts at or after `start`
                f.seek(start - 1)
                offset = start - 1 + len(f.readline())
            while range_tracker.try_claim(offset):
                raw = f.readline()
                if not raw:
                    return
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:  # dropped, as documents.py does, and counted
                    text = raw.decode("utf-8", "ignore")
                    self._undecodable.inc(len(raw) - len(text.encode("utf-8")))
                yield document_key(file_name, offset, self._root), text.rstrip("\n")
                offset += len(raw)


class SplitParagraphs(beam.DoFn):
    """(key, line) -> (key, [[word]]) for the lines d2l keeps."""

    def __init__(self, *, lower: bool) -> None:
        self._lower = lower
        self._count = {name: counter(name) for name in ("lines", "paragraphs", "sentences")}

    def process(self, element: tuple[str, str]) -> Iterator[tuple[str, Paragraph]]:
        key, line = element
        self._count["lines"].inc()
        paragraph = split_paragraph(line, lower=self._lower)
        if paragraph is not None:
            self._count["paragraphs"].inc()
            self._count["sentences"].inc(len(paragraph))
            yield key, paragraph


def _vocabulary_fn(inputs: dict) -> dict:
    tft.vocabulary(inputs["words"], frequency_threshold=MIN_FREQUENCY,
                   reserved_tokens=list(RESERVED_TOKENS), vocab_filename=_TFT_VOCAB)
    return {"words": inputs["words"]}  # AnalyzeDataset needs some output


def _read_vocabulary_asset(transform_fn_dir: str) -> list[str]:
    path = FileSystems.join(transform_fn_dir, "assets", _TFT_VOCAB)
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return vocabulary_from_asset(handle.read())


class AnalyzeVocabulary(beam.PTransform):
    """(key, paragraph) -> a singleton [token], id = position (tf.Transform)."""

    def __init__(self, *, temp_dir: str) -> None:
        super().__init__()
        self._temp_dir = temp_dir

    def expand(self, paragraphs):
        metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(
            {"words": tf.io.VarLenFeature(tf.string)}))
        words = paragraphs | "Words" >> beam.Map(
            lambda kv: {"words": [word for sentence in kv[1] for word in sentence]})
        with tft_beam.Context(temp_dir=self._temp_dir):
            transform_fn_dir, _ = ((words, metadata)
                                   | "AnalyzeDataset" >> tft_beam.AnalyzeDataset(_vocabulary_fn))
        return transform_fn_dir | "ReadAsset" >> beam.Map(_read_vocabulary_asset)


class EncodeParagraphs(beam.DoFn):
    """(key, [[word]]) + vocabulary -> (key, [[id]])."""

    def __init__(self) -> None:
        self._ids: dict[str, int] | None = None
        self._unk = counter("unk_tokens")
        self._tokens = counter("tokens")

    def process(self, element, vocabulary: list[str]):
        if self._ids is None:  # the side input is the same for the whole run
            self._ids = {token: index for index, token in enumerate(vocabulary)}
        key, paragraph = element
        encoded = encode_paragraph(paragraph, self._ids)
        self._tokens.inc(sum(map(len, encoded)))
        self._unk.inc(sum(sentence.count(UNK_ID) for sentence in encoded))
        yield key, compact_document(encoded)


class CreatePairs(beam.DoFn):
    """((key, dupe), paragraph) + sample -> ((key, dupe), [unmasked SentencePair])."""

    def __init__(self, *, max_len: int, seed: int) -> None:
        self._max_len = max_len
        self._seed = seed
        self._count = {name: counter(name) for name in (
            "instances", "random_next_instances", "long_pairs_dropped")}
        self._sample_source: object = None

    def process(self, element, sample):
        (key, dupe), paragraph = element
        if sample is not self._sample_source:  # the side input, indexed once per worker
            self._positions, self._sample_source = sample_positions(sample), sample
        own = self._positions.get(key, -1)

        def random_sentence(rng: random.Random):
            other = random_document_from_sample(sample, own, rng)
            return None if other is None else other[rng.randint(0, len(other) - 1)]

        instances, dropped = nsp_pairs(paragraph, max_len=self._max_len,
                                       random_sentence=random_sentence,
                                       rng=hashed_rng(self._seed, "d2l-pairs", key, dupe))
        self._count["instances"].inc(len(instances))
        self._count["random_next_instances"].inc(sum(i.is_random_next for i in instances))
        self._count["long_pairs_dropped"].inc(dropped)
        if instances:
            yield (key, dupe), instances
