"""--output_format=megatron end to end, read by megatron-core's own
IndexedDataset (in a venv of its own): one sequence per sentence of the
corpus' documents after dedup, each as the tokenizer encodes its line alone,
document indices at the documents' ends; the same bytes with 1 and 2 workers;
held-out splits each with their own prefixes; the flags it cannot take refused.

The corpus is the English Web Treebank, two sentences a document, plus a
few of its documents twice (dedup keeps each once).
"""

from __future__ import annotations

import collections
import json
import pathlib

import pytest

from conftest import DATA, UNCASED_VOCAB
from helpers.client_venvs import MEGATRON_CORE, client_python, run_client
from helpers.corpora import web_treebank_documents
from bert_pretraining_data.loaders.manifest import DatasetError, read_manifest
from bert_pretraining_data.loaders.records import read_instances
from bert_pretraining_data.pipeline.inspect_data import report
from bert_pretraining_data.pipeline.main import main, run
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec

_READ = """
import json, sys
from megatron.core.datasets.indexed_dataset import IndexedDataset

found = []
for prefix in sys.argv[1:]:
    dataset = IndexedDataset(prefix)
    found.append({"sequences": [dataset[i].tolist() for i in range(len(dataset))],
                  "document_indices": dataset.document_indices.tolist(),
                  "dtype": dataset[0].dtype.name})
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    documents = web_treebank_documents()
    root = tmp_path_factory.mktemp("megatron")
    path = root / "treebank.txt"
    path.write_text("\n\n".join("\n".join(d) for d in documents + documents[:25]) + "\n",
                    encoding="utf-8")
    return root, path, documents


def _run(corpus, name, *flags) -> tuple[str, dict]:
    root, path, _ = corpus
    out = root / name
    return str(out), run([f"--input_file={path}", f"--output_dir={out}",
                          f"--vocab_file={UNCASED_VOCAB}", "--output_format=megatron",
                          "--num_shards=2", *flags])


def _documents_read(found: list[dict]) -> collections.Counter:
    """Every document megatron-core reads: its sentences' ids, by document_indices."""
    read = collections.Counter()
    for dataset in found:
        ends = dataset["document_indices"]
        for start, end in zip(ends, ends[1:]):
            read[tuple(tuple(s) for s in dataset["sequences"][start:end])] += 1
    return read


@pytest.mark.slow
def test_megatron_core_reads_each_sentence_of_each_document_once(corpus):
    out, manifest = _run(corpus, "one-worker")
    prefixes = [shard.path for shard in read_manifest(out).shards]
    found = run_client(client_python("megatron-core", MEGATRON_CORE), _READ, *prefixes)
    spec = TokenizerSpec(str(UNCASED_VOCAB), True)
    tokenizer = spec.tokenizer(spec.load_vocabulary())
    expected = collections.Counter()
    for document in {tuple(d): d for d in corpus[2]}.values():  # dedup: each text once
        expected[tuple(tuple(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)))
                       for line in document)] += 1
    assert _documents_read(found) == expected
    assert sum(len(d["sequences"]) for d in found) == sum(
        len(document) for document in expected.elements())
    assert {d["dtype"] for d in found} == {"uint16"}
    assert [s["records"] for s in manifest["shards"]] == [len(d["sequences"]) for d in found]
    assert manifest["format"] == "bert-pretraining-megatron/1"

    # inspect-pretraining-data describes the tokenized corpus as it is (issue 53: it printed
    # the bert recipe's padding, NSP, the collator's masking and max_seq_length)
    text = report(out)
    assert (f"{manifest['total_instances']:,} sentences in 2 Megatron-LM indexed dataset "
            "shard(s): the tokenized corpus") in text
    for absent in ("recipe", "padding", "next sentence", "collator", "max_seq_length",
                   "instances in"):
        assert absent not in text


_BLEND = """
import json, sys
from megatron.core.datasets.indexed_dataset import IndexedDataset
from megatron.core.datasets.utils import get_blend_from_list

# docs/megatron.md: the blend inspect-pretraining-data prints, as --data-path takes it
prefixes, weights = get_blend_from_list(sys.argv[1].split())
sequences = []
for prefix in prefixes:
    dataset = IndexedDataset(prefix)
    sequences.append([dataset[i].tolist() for i in range(len(dataset))])
print(json.dumps({"weights": weights, "prefixes": prefixes, "sequences": sequences}))
"""


@pytest.mark.slow
def test_a_by_source_mixture_blends_in_megatron_at_its_weights(corpus, tmp_path):
    """--mixture_layout=by_source: each source's prefixes hold its documents'
    sentences, and the blend inspect prints, parsed by megatron-core, draws
    each source's tokens at w_i T_i / sum_j w_j T_j (T_i: its tokens, counted
    outside the pipeline), the mixed layout's share."""
    root, path, documents = corpus
    weights = {"treebank": 2.0, "sample": 0.5}
    mixture = tmp_path / "mixture.json"
    mixture.write_text(json.dumps({"sources": [
        {"name": "treebank", "input_file": str(path), "weight": weights["treebank"]},
        {"name": "sample", "input_file": str(DATA / "sample_text.txt"),
         "weight": weights["sample"]}]}))
    out = tmp_path / "out"
    run([f"--mixture={mixture}", f"--output_dir={out}", f"--vocab_file={UNCASED_VOCAB}",
         "--output_format=megatron", "--mixture_layout=by_source", "--num_shards=2"])
    blend = report(str(out)).splitlines()[-1].strip()
    assert "e+" not in blend and "e-" not in blend  # weights in full, as --data-path takes them
    found = run_client(client_python("megatron-core", MEGATRON_CORE), _BLEND, blend)
    spec = TokenizerSpec(str(UNCASED_VOCAB), True)
    tokenizer = spec.tokenizer(spec.load_vocabulary())

    def encoded(lines):
        return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)) for line in lines]
    expected = {"treebank": encoded(line for d in {tuple(d): d for d in documents}.values()
                                    for line in d),
                "sample": encoded(line for line in (DATA / "sample_text.txt").read_text(
                    encoding="utf-8").splitlines() if line.strip())}
    read = collections.defaultdict(list)
    mass = collections.Counter()
    for prefix, weight, sequences in zip(found["prefixes"], found["weights"],
                                         found["sequences"]):
        source = pathlib.Path(prefix).parent.name
        read[source] += sequences
        mass[source] += weight
    for source, sentences in expected.items():
        assert sorted(read[source]) == sorted(sentences), source
    tokens = {source: sum(map(len, sentences)) for source, sentences in expected.items()}
    planned = sum(weights[s] * tokens[s] for s in tokens)
    for source in expected:  # a blend draws from each prefix in proportion to its weight
        assert mass[source] / sum(mass.values()) == pytest.approx(
            weights[source] * tokens[source] / planned, rel=1e-4)


@pytest.mark.slow
def test_a_mixture_with_held_out_splits_reads_in_megatron(corpus, tmp_path):
    """issue 53: --mixture with --output_format=megatron and --validation_fraction
    had no way through (by_source was required, and refused with a split).
    Training's sources are prefixes under train/<source>/, the validation split
    its own prefixes: megatron-core reads every document of both once, none of
    validation's in training, and inspect prints each split's flag
    (--train-data-path's blend, --valid-data-path's prefixes)."""
    _, path, documents = corpus
    mixture = tmp_path / "mixture.json"
    mixture.write_text(json.dumps({"sources": [
        {"name": "treebank", "input_file": str(path), "weight": 2.0},
        {"name": "sample", "input_file": str(DATA / "sample_text.txt")}]}))
    out = tmp_path / "out"
    manifest = run([f"--mixture={mixture}", f"--output_dir={out}",
                    f"--vocab_file={UNCASED_VOCAB}", "--output_format=megatron",
                    "--mixture_layout=by_source", "--validation_fraction=0.2"])
    train = [shard.path for shard in read_manifest(str(out)).shards]
    validation = [shard.path for shard in read_manifest(str(out), split="validation").shards]
    assert {pathlib.Path(p).parent.relative_to(out).as_posix() for p in train} == {
        "train/treebank", "train/sample"}
    assert {pathlib.Path(p).parent.relative_to(out).as_posix() for p in validation} == {
        "validation"}
    found = run_client(client_python("megatron-core", MEGATRON_CORE), _READ,
                       *train, *validation)
    read_train = _documents_read(found[:len(train)])
    read_validation = _documents_read(found[len(train):])
    assert sum(read_validation.values()) == manifest["splits"]["validation"]["documents"] > 0
    assert not set(read_train) & set(read_validation)
    spec = TokenizerSpec(str(UNCASED_VOCAB), True)
    tokenizer = spec.tokenizer(spec.load_vocabulary())
    sample = [line for line in (DATA / "sample_text.txt").read_text(
        encoding="utf-8").split("\n\n") if line.strip()]
    expected = {tuple(tuple(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)))
                      for line in document if line.strip())
                for document in [*documents, *(d.splitlines() for d in sample)]}
    assert set(read_train) | set(read_validation) == expected  # every document, once
    assert max((read_train + read_validation).values()) == 1

    text = report(str(out))
    blend = text.splitlines()[text.splitlines().index(
        "Megatron-LM blend of the sources at their weights (--train-data-path):") + 1].split()
    assert blend[1::2] == train
    assert report(str(out), split="validation").splitlines()[-2:] == [
        "Megatron-LM's --valid-data-path (the split's prefixes):", "  " + " ".join(validation)]


def test_the_bytes_do_not_depend_on_the_workers(corpus):
    one = _run(corpus, "in-memory", "--direct_running_mode=in_memory")[1]
    two = _run(corpus, "two-workers", "--direct_running_mode=multi_processing",
               "--direct_num_workers=2")[1]
    assert [s["files"] for s in one["shards"]] == [s["files"] for s in two["shards"]]


def test_held_out_splits_have_prefixes_of_their_own(corpus):
    out, manifest = _run(corpus, "split", "--validation_fraction=0.1")
    validation = read_manifest(out, split="validation")
    assert all("/validation/" in shard.path for shard in validation.shards)
    assert manifest["splits"]["validation"]["masking"] == "none"
    assert sum(s["records"] for s in manifest["splits"]["validation"]["shards"]) > 0


def test_the_loaders_refuse_a_megatron_dataset_in_one_line(corpus):
    out, _ = _run(corpus, "refused")
    with pytest.raises(DatasetError, match="Megatron-LM indexed datasets") as caught:
        list(read_instances(read_manifest(out)))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("flags, message", [
    (["--dupe_factor=2"], "drop --dupe_factor and --masking"),
    (["--masking=static"], "drop --dupe_factor and --masking"),
    (["--pack_sequences"], "--pack_sequences makes instances"),
    (["--compression=gzip"], "uncompressed .bin"),
])
def test_flags_megatron_cannot_take_are_one_line(corpus, tmp_path, capsys, flags, message):
    _, path, _ = corpus
    with pytest.raises(SystemExit) as exit_:
        main([f"--input_file={path}", f"--output_dir={tmp_path / 'out'}",
              f"--vocab_file={UNCASED_VOCAB}", "--output_format=megatron", *flags])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip()
    assert message in error and "\n" not in error, error
    assert not (tmp_path / "out").exists()


def test_a_mixed_mixture_is_refused_in_one_line(corpus, tmp_path, capsys):
    _, path, _ = corpus
    mixture = tmp_path / "mixture.json"
    mixture.write_text(json.dumps({"sources": [{"name": "treebank", "input_file": str(path),
                                                "weight": 2}]}))
    with pytest.raises(SystemExit):
        main([f"--mixture={mixture}", f"--output_dir={tmp_path / 'out'}",
              f"--vocab_file={UNCASED_VOCAB}", "--output_format=megatron"])
    error = capsys.readouterr().err.strip()
    assert "add --mixture_layout=by_source" in error and "\n" not in error, error
    assert not (tmp_path / "out").exists()
