"""--output_format=mds end to end, on real Wikipedia articles (the 2016 dump
excerpt): the instances and order of the TFRecord run with the same flags,
every feature, for NSP pairs, full sequences and packed rows, in both
layouts; read back by mosaicml-streaming's own `StreamingDataset` (in a
venv of its own) on the whole dataset and on a held-out split as
ModernBERT's yaml points at it, the int64 layout decoded as ModernBERT's
tokenized reader decodes it; the same bytes with 1 and 2 workers and both
shuffle paths; the flags it cannot take refused in one line.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from conftest import DATA, UNCASED_VOCAB
from helpers.client_venvs import MOSAICML_STREAMING, STREAMING_IMPORTS, client_python, run_client
from bert_pretraining_data.loaders.manifest import DatasetError, read_manifest
from bert_pretraining_data.loaders.records import InstanceDecoder, read_instances, sequences_of
from bert_pretraining_data.loaders.tf_data import tf_dataset
from bert_pretraining_data.loaders.torch_data import make_dataloader
from bert_pretraining_data.pipeline.inspect_data import report
from bert_pretraining_data.pipeline.beam_options import ConfigError
from bert_pretraining_data.pipeline.main import main, run
from bert_pretraining_data.pipeline.options import parse_args
from bert_pretraining_data.pipeline.stages import StageSettings
from bert_pretraining_data.transforms.tokenize.vocabulary import Vocabulary
from bert_pretraining_data.transforms.write.mds_rows import MDSRows
from bert_pretraining_data.transforms.write.rows import InstanceRows
from bert_pretraining_data.transforms.write.tf_example import RecordLayout

ARTICLES = DATA / "enwiki-excerpt-small.xml.bz2"
FLAGS = (f"--input_file={ARTICLES}", "--input_format=wikipedia", f"--vocab_file={UNCASED_VOCAB}",
         "--num_shards=3", "--dupe_factor=2", "--random_seed=11")
OBJECTIVES = {"nsp": (), "full": ("--recipe=roberta",), "packed": ("--pack_sequences",)}
LAYOUTS = {"modernbert": (), "compact-zstd": ("--mds_layout=compact", "--mds_compression=zstd")}
MAX_SEQ_LENGTH = 128

_READ = STREAMING_IMPORTS + """
import json, sys

import numpy as np
from streaming import StreamingDataset
from streaming.base.util import clean_stale_shared_memory

clean_stale_shared_memory()
spec = json.loads(open(sys.argv[1]).read())


def as_json(value):
    if isinstance(value, bytes):
        return {"bytes": np.frombuffer(value, dtype=np.int64).tolist()}
    if isinstance(value, np.ndarray):
        return {"dtype": value.dtype.name, "values": value.tolist()}
    return {"int": value}


def modernbert(sample, max_seq_len, pad_id):
    # ModernBERT's src/text_data.py, _read_binary_tokenized_sample: the ids
    # as int64 bytes, `len` their count, padded or cut to max_seq_len.
    ids = np.frombuffer(sample["input_ids"], dtype=np.int64).copy()
    mask = np.ones_like(ids)
    pad = max_seq_len - sample["len"]
    if pad > 0:
        ids = np.pad(ids, (0, pad), constant_values=pad_id)
        mask = np.pad(mask, (0, pad), constant_values=0)
    return {"input_ids": ids[:max_seq_len].tolist(), "attention_mask": mask[:max_seq_len].tolist()}


result = {}
for name, dataset in spec["datasets"].items():
    read = StreamingDataset(local=dataset["local"], split=dataset.get("split"), shuffle=False,
                            batch_size=1)
    samples = [read[i] for i in range(len(read))]
    result[name] = {
        "samples": [{key: as_json(value) for key, value in sorted(s.items())} for s in samples],
        "modernbert": [modernbert(s, spec["max_seq_len"], spec["pad_id"]) for s in samples
                       if "len" in s]}
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """name -> output dir: each objective as TFRecords and in each MDS layout,
    and one with a validation split (the layout ModernBERT's yaml reads)."""
    root = tmp_path_factory.mktemp("mds")
    made = {}
    for objective, flags in OBJECTIVES.items():
        made[f"{objective}/tfrecord"] = str(root / objective / "tfrecord")
        run([*FLAGS, *flags, f"--output_dir={made[f'{objective}/tfrecord']}"])
        for layout, layout_flags in LAYOUTS.items():
            made[f"{objective}/{layout}"] = str(root / objective / layout)
            run([*FLAGS, *flags, *layout_flags, "--output_format=mds",
                 f"--output_dir={made[f'{objective}/{layout}']}"])
    made["split"] = str(root / "split")
    run([*FLAGS, "--recipe=roberta", "--output_format=mds", "--validation_fraction=0.2",
         f"--output_dir={made['split']}"])
    return made


def _instances(out: str, split: str = "train") -> list[tuple]:
    return [_key(i) for i in read_instances(read_manifest(out, split=split))]


def _key(instance) -> tuple:
    return (instance.input_ids.tolist(), instance.segment_ids.tolist(),
            instance.masked_lm_positions.tolist(), instance.masked_lm_ids.tolist(),
            instance.next_sentence_label, instance.sequence)


def _tree(out: str) -> dict[str, bytes]:
    root = pathlib.Path(out)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_tfrecord_runs_instances_in_its_order(runs, objective, layout):
    tfrecord = _instances(runs[f"{objective}/tfrecord"])
    assert len(tfrecord) > 300
    assert _instances(runs[f"{objective}/{layout}"]) == tfrecord


def test_the_layouts_columns_and_their_types(runs):
    manifest = json.loads((pathlib.Path(runs["nsp/modernbert"]) / "manifest.json").read_text())
    assert manifest["flags"]["output_format"] == "mds"
    assert manifest["flags"]["mds_layout"] == "modernbert"
    columns = manifest["schema"]
    assert columns == {"input_ids": "bytes", "len": "int", "masked_lm_ids": "bytes",
                       "masked_lm_positions": "ndarray:uint16", "next_sentence_labels": "int",
                       "segment_ids": "ndarray:uint8"}
    packed = json.loads((pathlib.Path(runs["packed/compact-zstd"]) / "manifest.json").read_text())
    assert packed["flags"]["mds_compression"] == "zstd"
    assert packed["schema"] == {
        "input_ids": "ndarray:uint16", "input_mask": "ndarray:uint8",
        "masked_lm_ids": "ndarray:uint16", "masked_lm_positions": "ndarray:uint16",
        "next_sentence_labels": "ndarray:uint8", "next_sentence_positions": "ndarray:uint16",
        "positions": "ndarray:uint16", "segment_ids": "ndarray:uint8"}
    files = sorted(packed["shards"][0]["files"])
    assert files == ["index.json", "shard.00000.mds.zstd"]


def test_compact_ids_take_uint32_past_65536_ids():
    layout = RecordLayout(padded=False)
    assert MDSRows(InstanceRows(layout, 8, 2), 65_536, "compact").columns()["input_ids"] == (
        "ndarray:uint16")
    assert MDSRows(InstanceRows(layout, 8, 2), 65_537, "compact").columns()["input_ids"] == (
        "ndarray:uint32")


def test_the_bytes_do_not_depend_on_workers_or_shuffle_path(runs, tmp_path):
    expected = _tree(runs["packed/compact-zstd"])
    for name, flags in [("runner", ["--shuffle=runner"]),
                        ("two", ["--direct_num_workers=2",
                                 "--direct_running_mode=multi_processing", "--shuffle=files"])]:
        out = tmp_path / name
        run([*FLAGS, *OBJECTIVES["packed"], *LAYOUTS["compact-zstd"], "--output_format=mds",
             f"--output_dir={out}", *flags])
        found = _tree(str(out))
        assert {k: v for k, v in found.items() if k != "manifest.json"} == {
            k: v for k, v in expected.items() if k != "manifest.json"}


def test_the_top_level_index_lists_every_shard_set_in_order(runs):
    root = pathlib.Path(runs["nsp/modernbert"])
    index = json.loads((root / "index.json").read_text())
    names = [shard["raw_data"]["basename"] for shard in index["shards"]]
    assert names == [f"part-{i:05d}-of-00003/shard.00000.mds" for i in range(3)]
    manifest = read_manifest(str(root))
    assert [s["samples"] for s in index["shards"]] == [s.records for s in manifest.shards]


def test_inspect_and_the_pytorch_loader_read_it(runs):
    text = report(runs["nsp/compact-zstd"], num_instances=1)
    assert "mds shard(s)" in text and "*** Example 0 ***" in text
    loader = make_dataloader(runs["nsp/modernbert"], batch_size=8, shuffle=False)
    reference = make_dataloader(runs["nsp/tfrecord"], batch_size=8, shuffle=False)
    for got, want in zip(loader, reference):
        assert {k: v.tolist() for k, v in got.items()} == {k: v.tolist() for k, v in want.items()}


def test_tf_data_refuses_mds_in_one_line(runs):
    with pytest.raises(DatasetError, match="MDS shards") as caught:
        tf_dataset(runs["nsp/modernbert"], batch_size=2)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("flags, message", [
    (["--padding=fixed"], "writes unpadded rows"),
    (["--compression=gzip"], "--mds_compression"),
    (["--reference_compatible"], "drop --output_format=mds"),
    (["--recipe=d2l"], "drop --output_format=mds"),
])
def test_flags_mds_cannot_take_are_one_line(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        main([*FLAGS, f"--output_dir={tmp_path / 'out'}", "--output_format=mds", *flags])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip()
    assert message in error and "\n" not in error, error
    assert not (tmp_path / "out").exists()


def test_mds_flags_without_mds_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([*FLAGS, f"--output_dir={tmp_path / 'out'}", "--mds_layout=compact"])
    error = capsys.readouterr().err.strip()
    assert "--mds_layout applies to --output_format=mds" in error and "\n" not in error


@pytest.mark.slow
def test_streaming_dataset_reads_the_tfrecord_runs_instances(runs, tmp_path):
    """StreamingDataset, the library's own reader: every sample of every
    dataset, each feature as the TFRecord run's instances hold it."""
    datasets = {name: {"local": out} for name, out in runs.items() if "tfrecord" not in name}
    datasets["split"]["split"] = "train"  # ModernBERT's yaml: data_local with split: train
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"datasets": datasets, "max_seq_len": MAX_SEQ_LENGTH,
                                "pad_id": 0}))
    result = run_client(client_python("mosaicml-streaming", MOSAICML_STREAMING), _READ, str(spec))

    for name, out in runs.items():
        if "tfrecord" in name:
            continue
        split = "train" if name == "split" else None
        manifest = read_manifest(out)
        decode = InstanceDecoder.of(manifest)
        samples = result[name]["samples"]
        assert set(samples[0]) == set(manifest.features) | ({"len"} if "modernbert" in name
                                                            or name == "split" else set())
        read, rows = [], []
        for index, sample in enumerate(samples):
            features = {key: np.asarray(value.get("bytes", value.get("values", value.get("int"))),
                                        np.int64).reshape(-1) for key, value in sample.items()}
            row = sequences_of(decode(features, index))
            read.extend(_key(i) for i in row)
            rows.append([token for i in row for token in i.input_ids.tolist()])
        reference = (runs[name.replace("compact-zstd", "tfrecord").replace("modernbert",
                                                                          "tfrecord")]
                     if split is None else out)
        assert read == _instances(reference, split or "train"), name
        if "compact" in name:  # the smallest types, as the manifest says
            for column, value in samples[0].items():
                if "dtype" in value:
                    assert f"ndarray:{value['dtype']}" == manifest.content.schema[column]
            continue
        # ModernBERT's decoding gives each row's ids, padded to its max_seq_len
        assert len(result[name]["modernbert"]) == len(rows)
        for decoded, ids in zip(result[name]["modernbert"], rows):
            padding = MAX_SEQ_LENGTH - len(ids)
            assert decoded == {"input_ids": ids + [0] * padding,
                               "attention_mask": [1] * len(ids) + [0] * padding}


def test_overwrite_replaces_every_shard_set_of_the_old_dataset(runs, tmp_path):
    out = tmp_path / "out"
    run([*FLAGS, "--output_format=mds", f"--output_dir={out}", "--num_shards=4"])
    run([*FLAGS, "--recipe=roberta", "--output_format=mds", f"--output_dir={out}", "--overwrite"])
    assert sorted(p.name for p in out.iterdir()) == [
        "index.json", "manifest.json", *(f"part-{i:05d}-of-00003" for i in range(3)), "vocab.txt"]
    assert _instances(str(out)) == _instances(runs["full/modernbert"])


def test_each_split_has_its_own_index(runs):
    root = pathlib.Path(runs["split"])
    assert not (root / "index.json").exists()
    for split in ("train", "validation"):
        index = json.loads((root / split / "index.json").read_text())
        assert sum(s["samples"] for s in index["shards"]) == len(_instances(str(root), split)) > 0
    # ModernBERT's eval_loader masks at load time: the validation split holds no masks
    # (issue 53: 12-24% of its tokens were [MASK] before the collator masked them again)
    mask_id = UNCASED_VOCAB.read_text(encoding="utf-8").splitlines().index("[MASK]")
    validation = read_instances(read_manifest(str(root), split="validation"))
    assert not any(mask_id in instance.input_ids.tolist() or len(instance.masked_lm_positions)
                   for instance in validation)
    assert read_manifest(str(root), split="validation").masking == "none"


class _Huge(Vocabulary):
    """The uncased vocabulary, counted as `size` ids (no such file is at hand)."""

    size: int = 0

    def __len__(self) -> int:
        return self.size


@pytest.mark.parametrize("flags, size, message", [
    (["--output_format=mds", "--mds_layout=compact"], (1 << 32) + 1,
     "does not fit uint32, the widest id type MDS output holds; use a smaller vocabulary"),
    (["--output_format=megatron", "--dupe_factor=1", "--masking=none"], (1 << 31) + 1,
     "does not fit int32, the widest id type Megatron's preprocess_data.py writes"),
])
def test_a_vocabulary_too_large_for_the_formats_ids_is_one_line(uncased_vocab, tmp_path, flags,
                                                                size, message):
    config, _ = parse_args([*FLAGS, f"--output_dir={tmp_path / 'out'}", *flags])
    huge = _Huge(uncased_vocab.tokens, uncased_vocab.sha256)
    object.__setattr__(huge, "size", size)
    with pytest.raises(ConfigError, match=message) as caught:
        StageSettings.of(config, huge)
    assert "\n" not in str(caught.value)
    assert StageSettings.of(config, uncased_vocab)  # the real size is fine


_COLLATE = _READ.replace("print(json.dumps(result))", """
import torch
from transformers import BertTokenizerFast, DataCollatorForLanguageModeling

# ModernBERT's yaml: the train_loader at mlm_probability 0.3, the eval_loader at
# 0.15, each row decoded by _read_binary_tokenized_sample (modernbert above),
# masked by transformers' collator, seeded.
tokenizer = BertTokenizerFast(spec["vocab"], do_lower_case=True)
rates = {}
for name, probability in spec["mlm_probability"].items():
    torch.manual_seed(0)
    collate = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability)
    rows = result[name]["modernbert"]
    on_disk = sum(ids.count(tokenizer.mask_token_id) for ids in (r["input_ids"] for r in rows))
    maskable = labelled = 0
    for start in range(0, len(rows), 32):
        chunk = rows[start:start + 32]
        batch = collate([{"input_ids": r["input_ids"], "attention_mask": r["attention_mask"]}
                         for r in chunk])
        special = torch.tensor([tokenizer.get_special_tokens_mask(r["input_ids"],
                                                                  already_has_special_tokens=True)
                                for r in chunk], dtype=torch.bool)
        labels = batch["labels"]
        maskable += int((~special & (batch["attention_mask"] == 1)).sum())
        labelled += int((labels != -100).sum())
    rates[name] = {"on_disk": on_disk, "maskable": maskable, "labelled": labelled}
print(json.dumps(rates))
""")


@pytest.mark.slow
def test_modernbert_style_loaders_mask_validation_once(runs, tmp_path):
    """docs/mds.md's quick start as ModernBERT's trainer reads it: StreamingDataset
    reads train and validation, each row decoded as _read_binary_tokenized_sample
    decodes it and masked by a seeded DataCollatorForLanguageModeling at the
    yaml's mlm_probability. Validation's masked share is the eval_loader's
    0.15 (issue 53: it held [MASK] ids already, 24% of tokens, and was masked
    again), training's the train_loader's 0.3."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "datasets": {"train": {"local": runs["split"], "split": "train"},
                     "validation": {"local": runs["split"], "split": "validation"}},
        "max_seq_len": MAX_SEQ_LENGTH, "pad_id": 0, "vocab": str(UNCASED_VOCAB),
        "mlm_probability": {"train": 0.3, "validation": 0.15}}))
    rates = run_client(client_python("mosaicml-streaming", MOSAICML_STREAMING), _COLLATE,
                       str(spec))
    for name, probability in (("train", 0.3), ("validation", 0.15)):
        assert rates[name]["on_disk"] == 0, name  # no [MASK] id before the collator's
        assert rates[name]["maskable"] > 5000, name
        share = rates[name]["labelled"] / rates[name]["maskable"]
        assert abs(share - probability) <= 0.02, (name, share)
