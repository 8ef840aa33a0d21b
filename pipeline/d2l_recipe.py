"""--recipe=d2l: the WikiText-2 BERT dataset of d2l.ai, built once on Beam.

On this machine, for WikiText-2 as d2l downloads it:

    create-pretraining-data --recipe=d2l --input_file=wikitext-2/wiki.train.tokens \\
        --output_dir=out/d2l --max_seq_length=64

On Dataflow, the same with gs:// paths and --runner=DataflowRunner ...
(and --temp_location for tf.Transform's temporary files).

d2l's rules (`_read_wiki`, `_get_nsp_data_from_paragraph`,
`_get_mlm_data_from_tokens`, `_pad_bert_inputs`, `d2l.Vocab`):

    ReadParagraphs      one paragraph per line; kept when the raw line has a
                        ' . ' (d2l's `len(line.split(' . ')) >= 2`), then
                        stripped, lower-cased, split on ' . ' into sentences
                        and on whitespace into words
    AnalyzeVocabulary   tf.Transform's vocabulary analyzer, a full pass over
                        every word: min frequency 5, most frequent first,
                        <unk> = 0 then <pad> <mask> <cls> <sep>
    EncodeParagraphs    words -> ids (<unk> for the rest)
    SampleParagraphs    a deterministic sample of paragraphs (side input)
    CreatePairs         each pair of adjacent sentences; with p=0.5 the
                        second is a random sentence of a random sampled
                        paragraph; pairs with len(a) + len(b) + 3 > max_len
                        are dropped (and counted)
    MaskTokens          transforms.instances.masking.mask_tokens: 15%, at least 1,
                        never <cls>/<sep>, 80/10/10 (d2l's rule, and BERT's)
    Encode              padded to max_len (<pad>) and round(max_len * 0.15)
                        predictions, with valid_lens and mlm_weights, under
                        d2l's names; nsp_labels is 1 for "is next"
    WriteShards         the pipeline's deterministic shuffle into shards
    WriteVocabulary     vocab.txt (id = line number), published beside them

Why tf.Transform: the vocabulary is a full pass over the corpus (every word
counted before any id exists), which is what its analyzers are for;
`tft_beam.AnalyzeDataset` runs `tft.vocabulary` as Beam combiners on any
runner, with the min-frequency filter and reserved tokens built in. Only the
analyzer is used: mapping words to ids is a dict lookup in the DoFn, so no
TensorFlow graph runs per element.

Where this differs from d2l, and why: the order of equally frequent words is
tf.Transform's (reverse lexicographic) where d2l's depends on its random
shuffle of paragraphs; random next sentences come from a sample of
--nsp_sample_size paragraphs (all of WikiText-2's by default) and never from
the paragraph itself; randomness is per paragraph (seed, paragraph key), so
the output is deterministic.
"""

from __future__ import annotations

import functools
import hashlib
import random
from typing import Callable, Iterator, Sequence

import apache_beam as beam
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from apache_beam.io.filebasedsource import FileBasedSource
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from bert_pretraining_data.pipeline.build import SAMPLE_DOCUMENT_SEQUENCES
from bert_pretraining_data.pipeline.options import Config
from bert_pretraining_data.pipeline.prepare import Prepared, run_to_completion
from bert_pretraining_data.pipeline.publish import (SHARD_LIST_NAME, OutputLayout, publish,
                                                    read_staging_json, write_staging_json)
from bert_pretraining_data.transforms.counters import counter
from bert_pretraining_data.transforms.d2l.example import encode_features
from bert_pretraining_data.transforms.instances.beam import Instance, MaskTokens, encode, fan_out
from bert_pretraining_data.transforms.instances.masking import MaskingConfig
from bert_pretraining_data.transforms.instances.sample import (SampleDocuments,
                                                               random_document_from_sample,
                                                               sample_positions)
from bert_pretraining_data.transforms.randomness import derive_rng
from bert_pretraining_data.transforms.read.documents import document_key, key_root
from bert_pretraining_data.transforms.tokenize.tokenized_documents import compact_document
from bert_pretraining_data.transforms.write.beam import WriteShards

UNK = "<unk>"
RESERVED_TOKENS = (UNK, "<pad>", "<mask>", "<cls>", "<sep>")  # ids 0..4, as d2l's Vocab
UNK_ID, PAD_ID, MASK_ID, CLS_ID, SEP_ID = range(len(RESERVED_TOKENS))
MIN_FREQUENCY = 5
_TFT_VOCAB = "d2l_vocab"  # tf.Transform's asset name

Paragraph = list[list[str]]


# --- Functional core ------------------------------------------------------------


def split_paragraph(line: str, *, lower: bool = True) -> Paragraph | None:
    """d2l's `_read_wiki` for one line: its sentences as word lists, or None.

    The test is on the raw line, as d2l's: a line whose only period ends it
    (" ... end . ") passes, and its single sentence counts for the
    vocabulary even though it makes no pair.
    """
    if " . " not in line:
        return None
    text = line.strip()
    if lower:
        text = text.lower()
    return [sentence.split() for sentence in text.split(" . ")]


def encode_paragraph(paragraph: Paragraph, ids: dict[str, int]) -> list[list[int]]:
    return [[ids.get(word, UNK_ID) for word in sentence] for sentence in paragraph]


def nsp_pairs(paragraph: Sequence[Sequence[int]], *, max_len: int,
              random_sentence: Callable[[random.Random], Sequence[int] | None],
              rng: random.Random) -> tuple[list[Instance], int]:
    """d2l's `_get_nsp_data_from_paragraph`: (instances, pairs dropped as too long).

    When no other paragraph exists, the actual next sentence is kept.
    """
    instances = []
    dropped = 0
    for a, b in zip(paragraph, paragraph[1:]):
        is_next = True
        if rng.random() >= 0.5:
            other = random_sentence(rng)
            if other is not None:
                b, is_next = other, False
        if len(a) + len(b) + 3 > max_len:
            dropped += 1
            continue
        instances.append(Instance(tokens=[CLS_ID, *a, SEP_ID, *b, SEP_ID],
                                  segment_ids=[0] * (len(a) + 2) + [1] * (len(b) + 1),
                                  is_random_next=not is_next))
    return instances, dropped


def d2l_masking_config(vocab_size: int, *, masked_lm_prob: float,
                       max_predictions: int) -> MaskingConfig:
    """d2l's MLM is BERT's masking on word ids: max(1, round(len * 0.15))
    predictions (capped by the padded width), never <cls>/<sep>, 80/10/10."""
    return MaskingConfig(masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions,
                         vocab_size=vocab_size, mask_id=MASK_ID, cls_id=CLS_ID, sep_id=SEP_ID)


def d2l_example(instance: Instance, *, max_len: int, max_predictions: int) -> bytes:
    """d2l's `_pad_bert_inputs` for one masked instance, as tf.train.Example bytes."""
    tokens, predictions = len(instance.tokens), len(instance.masked_lm_positions)
    return encode_features(
        int64={
            "tokens": [*instance.tokens, *[PAD_ID] * (max_len - tokens)],
            "segments": [*instance.segment_ids, *[0] * (max_len - tokens)],
            "valid_lens": [tokens],
            "pred_positions": [*instance.masked_lm_positions,
                               *[0] * (max_predictions - predictions)],
            "mlm_labels": [*instance.masked_lm_labels, *[0] * (max_predictions - predictions)],
            "nsp_labels": [int(not instance.is_random_next)],
        },
        float32={"mlm_weights": [1.0] * predictions + [0.0] * (max_predictions - predictions)})


def vocabulary_from_asset(data: bytes) -> list[str]:
    """tf.Transform's text vocabulary file: one token per line, reserved first."""
    return data.decode("utf-8").rstrip("\n").split("\n")


# --- Beam shell -----------------------------------------------------------------


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
    """((key, dupe), paragraph) + sample -> ((key, dupe), [unmasked Instance])."""

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
                                       rng=derive_rng(self._seed, "d2l-pairs", key, dupe))
        self._count["instances"].inc(len(instances))
        self._count["random_next_instances"].inc(sum(i.is_random_next for i in instances))
        self._count["long_pairs_dropped"].inc(dropped)
        if instances:
            yield (key, dupe), instances


def _write_vocabulary(tokens: list[str], path: str) -> int:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        handle.write("".join(f"{token}\n" for token in tokens).encode("utf-8"))
    return len(tokens)


def _record_shards(shards: list[dict], layout: OutputLayout) -> int:
    write_staging_json(layout, SHARD_LIST_NAME, shards)
    return len(shards)


def build_d2l_pipeline(p: beam.Pipeline, *, config: Config, patterns: list[str],
                       layout: OutputLayout) -> dict[str, beam.PCollection]:
    """Adds the recipe to `p` (runs nothing); returns PCollections for tests."""
    seed, max_len = config.random_seed, config.max_seq_length
    root = key_root(patterns)
    lines = tuple(p | f"ReadLines{i}" >> beam.io.Read(LineSource(pattern, root))
                  for i, pattern in enumerate(patterns)) | "ReadParagraphs" >> beam.Flatten()
    paragraphs = lines | "SplitParagraphs" >> beam.ParDo(
        SplitParagraphs(lower=config.do_lower_case))
    vocabulary = paragraphs | "AnalyzeVocabulary" >> AnalyzeVocabulary(
        temp_dir=FileSystems.join(layout.staging_dir, "tft"))
    encoded = paragraphs | "EncodeParagraphs" >> beam.ParDo(
        EncodeParagraphs(), vocabulary=beam.pvalue.AsSingleton(vocabulary))
    sample = encoded | "SampleParagraphs" >> SampleDocuments(
        seed=seed, size=config.nsp_sample_size, max_bytes=config.nsp_sample_max_bytes,
        max_tokens_per_document=SAMPLE_DOCUMENT_SEQUENCES * max_len)
    dupes = (encoded
             | "FanOutDupes" >> beam.FlatMap(fan_out, config.dupe_factor)
             # The fan-out multiplies work by dupe_factor: spread it over workers.
             | "SpreadDupes" >> beam.Reshuffle())
    instances = dupes | "CreatePairs" >> beam.ParDo(
        CreatePairs(max_len=max_len, seed=seed), sample=beam.pvalue.AsSingleton(sample))
    # Masking draws random replacements from the vocabulary, known only now.
    masking = vocabulary | "MaskingConfig" >> beam.Map(
        lambda tokens: d2l_masking_config(len(tokens), masked_lm_prob=config.masked_lm_prob,
                                          max_predictions=config.max_predictions_per_seq))
    masked = instances | "MaskTokens" >> beam.ParDo(
        MaskTokens(config=None, seed=seed), config=beam.pvalue.AsSingleton(masking))
    records = masked | "Encode" >> beam.Map(encode, seed=seed, to_record=functools.partial(
        d2l_example, max_len=max_len, max_predictions=config.max_predictions_per_seq))
    shards = records | "WriteShards" >> WriteShards(
        staging_dir=layout.staging_dir, shard_names=layout.shard_names,
        compression=config.compression, shuffle=config.shuffle)
    shard_list = (shards
                  | "CollectShards" >> beam.combiners.ToList()
                  | "ListShards" >> beam.Map(_record_shards, layout))
    vocab_file = vocabulary | "WriteVocabulary" >> beam.Map(
        _write_vocabulary, layout.staged_vocab_path)
    return {"paragraphs": paragraphs, "vocabulary": vocabulary, "encoded": encoded,
            "instances": masked, "shards": shards, "shard_list": shard_list,
            "vocab_file": vocab_file}


def _staged_vocabulary_sha256(layout: OutputLayout) -> str:
    """The computed vocabulary's sha256; `publish` copies it beside the shards."""
    with FileSystems.open(layout.staged_vocab_path,
                          compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def warnings(counters: dict[str, int]) -> list[str]:
    """Signs of an input that is not d2l's, in plain words."""
    if not counters.get("paragraphs"):
        return ["no line holds ' . ', so there is no paragraph: --recipe=d2l reads "
                "WikiText's raw text, one paragraph per line"]
    if not counters.get("instances"):
        return ["no sentence pair fits --max_seq_length; raise it"]
    return []


def run_d2l(run: Prepared) -> dict:
    """`main.run` for --recipe=d2l: no vocabulary to load, one to publish."""
    config, layout, replaces, inputs = run.config, run.layout, run.replaces, run.inputs
    pipeline = run.new_pipeline()
    build_d2l_pipeline(pipeline, config=config, layout=layout, patterns=run.patterns)
    counters = run_to_completion(pipeline)
    shards = read_staging_json(layout, SHARD_LIST_NAME)
    manifest = publish(layout, config=config, vocab_sha256=_staged_vocabulary_sha256(layout),
                       inputs=inputs, shards=shards, counters=counters,
                       warnings=warnings(counters), replaces=replaces)
    return dict(manifest, manifest_path=layout.manifest_path)
