"""MosaicML Streaming's MDS shard sets as the library itself reads them.

Real samples (the lines of sample_text.txt tokenized by the project's
WordPiece, [CLS] ... [SEP], and all of them as one long sample) are written by
MDSShardWriter in two subfolders under a merged top-level index, in both
layouts (`modernbert`: int64 bytes and `len`; `compact`: uint16 ids, and uint32
ones past 65,536), with and without zstd, and in shards small enough that each
subfolder holds several. mosaicml-streaming 0.13, in a venv of its own, must
give back every sample, in order, through `StreamingDataset(local=...)`, and
ModernBERT's decoding (`np.frombuffer(sample["input_ids"], dtype=np.int64)`)
must give the ids. The library's own MDSWriter, given the same samples, must
write the same shard and index bytes (before compression), and its
`merge_index` the same top-level index. The fast tests pin the bytes: a shard
built by hand from the format's description, determinism, the size limit,
and the errors.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import struct

import numpy as np
import pytest
import zstandard

from conftest import DATA, UNCASED_VOCAB
from helpers.client_venvs import MOSAICML_STREAMING, STREAMING_IMPORTS, client_python, run_client
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec
from bert_pretraining_data.transforms.write.mds import INDEX_NAME, encode_index, merge_indexes
from helpers.mds_shard_writer import MDSShardWriter

SUBFOLDERS = ("part-00000", "part-00001")
SIZE_LIMIT = 1024  # bytes: several shards a subfolder in every dataset
WIDE_VOCABULARY = 262_144  # a Gemma-sized vocabulary: uint32 ids
WIDE_OFFSET = 70_000  # moves the ids past uint16
DATASETS = {  # name: layout, vocabulary size, compression
    "modernbert": ("modernbert", 30_522, None),
    "modernbert-zstd": ("modernbert", 30_522, "zstd"),
    "compact-uint16-zstd": ("compact", 30_522, "zstd:7"),
    "compact-uint32": ("compact", WIDE_VOCABULARY, None),
}

_READ = STREAMING_IMPORTS + """
import hashlib, json, os, pathlib, sys

import numpy as np
import zstd
from streaming import MDSWriter, StreamingDataset
from streaming.base.util import clean_stale_shared_memory, merge_index

clean_stale_shared_memory()
spec = json.loads(pathlib.Path(sys.argv[1]).read_text())


def as_json(value):
    if isinstance(value, bytes):
        return {"int64": np.frombuffer(value, dtype=np.int64).tolist()}
    if isinstance(value, np.ndarray):
        return {"dtype": value.dtype.name, "shape": list(value.shape), "values": value.tolist()}
    return {"type": type(value).__name__, "value": value}


def library_sample(layout, dtype, ids):
    if layout == "modernbert":
        return {"input_ids": np.asarray(ids, np.int64).tobytes(),
                "attention_mask": np.ones(len(ids), np.int64).tobytes(), "len": len(ids)}
    return {"input_ids": np.asarray(ids, dtype)}


def raw_files(folder):
    # Each shard's uncompressed bytes, whether written raw or zstd.
    files = {}
    for path in sorted(pathlib.Path(folder).rglob("shard.*")):
        data = path.read_bytes()
        if path.suffix == ".zstd":
            data = zstd.decompress(data)
        name = str(path.relative_to(folder)).removesuffix(".zstd")
        files[name] = hashlib.sha256(data).hexdigest()
    return files


result = {}
for name, dataset in spec["datasets"].items():
    read, modernbert = [], []
    for sample in StreamingDataset(local=dataset["local"], shuffle=False, batch_size=1):
        read.append({key: as_json(value) for key, value in sorted(sample.items())})
        if dataset["layout"] == "modernbert":  # as ModernBERT's text_data.py decodes it
            modernbert.append(np.frombuffer(sample["input_ids"], dtype=np.int64).tolist())
    library = os.path.join(spec["library"], name)
    indexes = []
    for subfolder, samples in dataset["subfolders"].items():
        out = os.path.join(library, subfolder)
        with MDSWriter(columns=dataset["columns"], out=out, compression=dataset["compression"],
                       size_limit=spec["size_limit"]) as writer:
            for ids in samples:
                writer.write(library_sample(dataset["layout"], dataset["dtype"], ids))
        indexes.append(os.path.join(out, "index.json"))
    merge_index(indexes, library)
    result[name] = {
        "read": read, "modernbert": modernbert, "raw_files": raw_files(library),
        "indexes": {str(path.relative_to(library)): json.loads(path.read_text())
                    for path in sorted(pathlib.Path(library).rglob("index.json"))},
        "index_bytes": {str(path.relative_to(library)): path.read_text()
                        for path in sorted(pathlib.Path(library).glob("*/index.json"))},
    }
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def sequences() -> list[list[int]]:
    """[CLS] line [SEP] for each line of sample_text.txt, then all of them as
    one sample of over 255 ids (a uint16 shape in the compact layout)."""
    spec = TokenizerSpec(str(UNCASED_VOCAB), True)
    tokenizer = spec.tokenizer(spec.load_vocabulary())
    cls, sep = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    lines = [line for line in (DATA / "sample_text.txt").read_text().splitlines() if line.strip()]
    sequences = [[cls, *tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)), sep]
                 for line in lines]
    return [*sequences, [cls, *(i for s in sequences for i in s[1:-1]), sep]]


def layout_columns(layout: str, vocab_size: int) -> dict[str, str]:
    """The columns of a sequence of ids: as ModernBERT's reader takes them
    (int64 bytes, an attention mask and `len`), or compact (uint16 or uint32)."""
    if layout == "modernbert":
        return {"input_ids": "bytes", "attention_mask": "bytes", "len": "int"}
    return {"input_ids": "ndarray:uint16" if vocab_size <= 1 << 16 else "ndarray:uint32"}


def layout_sample(layout: str, vocab_size: int, input_ids: list[int]) -> dict:
    ids = np.asarray(input_ids, np.int64)
    if layout == "modernbert":
        return {"input_ids": ids.tobytes(), "attention_mask": np.ones(len(ids), np.int64).tobytes(),
                "len": len(ids)}
    return {"input_ids": ids.astype(layout_columns(layout, vocab_size)["input_ids"][8:])}


def _local(path: str):
    return open(path, "wb")


def _write_dataset(root: pathlib.Path, layout: str, vocab_size: int, compression: str | None,
                   parts: list[list[list[int]]], size_limit: int = SIZE_LIMIT) -> dict:
    """Each part a shard set in its subfolder; the merged index at `root`."""
    indexes = []
    for subfolder, part in zip(SUBFOLDERS, parts):
        (root / subfolder).mkdir(parents=True)
        writer = MDSShardWriter(str(root / subfolder), layout_columns(layout, vocab_size),
                                create=_local, join=os.path.join, compression=compression,
                                size_limit=size_limit)
        for ids in part:
            writer.add(layout_sample(layout, vocab_size, ids))
        indexes.append((subfolder, writer.finish()))
    merged = merge_indexes(indexes)
    (root / INDEX_NAME).write_bytes(encode_index(merged))
    return merged


def _dataset_ids(name: str, sequences: list[list[int]]) -> list[list[int]]:
    offset = WIDE_OFFSET if DATASETS[name][1] == WIDE_VOCABULARY else 0
    return [[i + offset for i in ids] for ids in sequences]


def _halves(samples: list) -> list[list]:
    return [samples[:len(samples) // 2], samples[len(samples) // 2:]]


def _tree(root: pathlib.Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()}


# --- the bytes, from the format's description --------------------------------------------------

def _parse_shard(data: bytes) -> tuple[dict, list[bytes]]:
    """A shard's settings and its samples' bytes, read as the format says."""
    count, = struct.unpack_from("<I", data)
    offsets = struct.unpack_from(f"<{count + 1}I", data, 4)
    config = json.loads(data[4 * (count + 2):offsets[0]])
    assert offsets[-1] == len(data)
    return config, [data[begin:end] for begin, end in zip(offsets, offsets[1:])]


def test_a_shard_built_by_hand(tmp_path):
    columns = {"len": "int", "input_ids": "bytes", "ids": "ndarray:uint16"}
    writer = MDSShardWriter(str(tmp_path), columns, create=_local, join=os.path.join)
    writer.add({"input_ids": b"\x01\x02\x03", "len": 3, "ids": np.array([7, 300], np.uint16)})
    writer.add({"input_ids": b"", "len": -1, "ids": np.arange(6, dtype=np.uint16).reshape(2, 3)})
    index = writer.finish()

    config = json.dumps({
        "column_encodings": ["ndarray:uint16", "bytes", "int"],
        "column_names": ["ids", "input_ids", "len"], "column_sizes": [None, None, 8],
        "compression": None, "format": "mds", "hashes": [], "size_limit": 1 << 26,
        "version": 2}, sort_keys=True).encode()
    samples = [
        # the sizes of ids and input_ids; ids: 1 axis, uint8 shape 2; input_ids; len
        struct.pack("<II", 6, 3) + bytes([1 << 2 | 0, 2]) + struct.pack("<HH", 7, 300)
        + b"\x01\x02\x03" + struct.pack("<q", 3),
        struct.pack("<II", 15, 0) + bytes([2 << 2 | 0, 2, 3]) + struct.pack("<6H", *range(6))
        + struct.pack("<q", -1),
    ]
    start = 4 + 3 * 4 + len(config)
    shard = (struct.pack("<III", 2, start, start + len(samples[0]))
             + struct.pack("<I", start + len(samples[0]) + len(samples[1])) + config
             + b"".join(samples))
    assert (tmp_path / "shard.00000.mds").read_bytes() == shard
    entry = {**json.loads(config), "samples": 2, "zip_data": None,
             "raw_data": {"basename": "shard.00000.mds", "bytes": len(shard), "hashes": {}}}
    assert index == {"version": 2, "shards": [entry]}
    assert (tmp_path / INDEX_NAME).read_bytes() == json.dumps(index, sort_keys=True).encode()
    assert sorted(path.name for path in tmp_path.iterdir()) == [INDEX_NAME, "shard.00000.mds"]


def test_shape_headers_take_the_smallest_unsigned_type(tmp_path):
    writer = MDSShardWriter(str(tmp_path), {"a": "ndarray:uint32"}, create=_local,
                            join=os.path.join)
    for length in (255, 256, 65_536):
        writer.add({"a": np.zeros(length, np.uint32)})
    writer.finish()
    _, samples = _parse_shard((tmp_path / "shard.00000.mds").read_bytes())
    assert [sample[4:5] for sample in samples] == [bytes([4 | 0]), bytes([4 | 1]), bytes([4 | 2])]
    assert [sample[5:5 + 4] for sample in samples] == [
        b"\xff" + bytes(3), struct.pack("<H", 256) + bytes(2), struct.pack("<I", 65_536)]


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_shards_keep_within_the_size_limit_in_order(tmp_path, sequences, compression):
    merged = _write_dataset(tmp_path, "modernbert", 30_522, compression, _halves(sequences))
    shards = merged["shards"]
    assert [shard["samples"] for shard in shards] and min(s["samples"] for s in shards) >= 1
    assert sum(shard["samples"] for shard in shards) == len(sequences)
    read = []
    for shard in shards:
        if compression:
            packed = (tmp_path / shard["zip_data"]["basename"]).read_bytes()
            assert shard["zip_data"]["bytes"] == len(packed)
            assert shard["zip_data"]["basename"] == shard["raw_data"]["basename"] + ".zstd"
            data = zstandard.ZstdDecompressor().decompress(packed)
        else:
            data = (tmp_path / shard["raw_data"]["basename"]).read_bytes()
            assert shard["zip_data"] is None
        assert shard["raw_data"]["bytes"] == len(data)
        # Over the limit only as a shard of one sample (the long one).
        assert len(data) <= SIZE_LIMIT or shard["samples"] == 1
        config, samples = _parse_shard(data)
        assert config["compression"] == compression and config["size_limit"] == SIZE_LIMIT
        assert len(samples) == shard["samples"]
        for sample in samples:
            ids_size, mask_size = struct.unpack_from("<II", sample)
            ids = np.frombuffer(sample, "<i8", ids_size // 8, 8 + mask_size)
            assert sample[8:8 + mask_size] == np.ones(mask_size // 8, "<i8").tobytes()
            assert struct.unpack_from("<q", sample, 8 + mask_size + ids_size) == (len(ids),)
            read.append(ids.tolist())
    assert read == sequences
    assert len(sequences[-1]) * 8 > SIZE_LIMIT
    basenames = [shard["raw_data"]["basename"] for shard in shards]
    assert basenames[0] == "part-00000/shard.00000.mds"
    assert basenames[-1].startswith("part-00001/shard.")


def test_a_shard_fills_to_exactly_the_size_limit(tmp_path):
    def shards(size_limit: int) -> list[tuple[int, int]]:
        folder = tmp_path / str(size_limit)
        folder.mkdir()
        writer = MDSShardWriter(str(folder), {"a": "bytes"}, create=_local, join=os.path.join,
                                size_limit=size_limit)
        for _ in range(7):
            writer.add({"a": bytes(100)})
        return [(shard["samples"], shard["raw_data"]["bytes"])
                for shard in writer.finish()["shards"]]

    # A sample costs its size (4), its bytes and its offset (4); the shard,
    # the count, its last offset and the settings (as long at any 3-digit limit).
    samples, size = shards(900)[0]
    full = size - 108 * samples + 3 * 108
    assert shards(full) == [(3, full), (3, full), (1, full - 2 * 108)]
    assert shards(full - 1) == [(2, full - 108)] * 3 + [(1, full - 2 * 108)]


def test_the_same_samples_give_the_same_bytes(tmp_path, sequences):
    for name, (layout, vocab_size, compression) in DATASETS.items():
        parts = _halves(_dataset_ids(name, sequences))
        for run in ("a", "b"):
            _write_dataset(tmp_path / run / name, layout, vocab_size, compression, parts)
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_merged_index_prefixes_each_subfolder_in_order():
    def index(*names: str, zipped: bool = False) -> dict:
        return {"version": 2, "shards": [
            {"samples": 1, "raw_data": {"basename": name, "bytes": 1, "hashes": {}},
             "zip_data": {"basename": name + ".zstd", "bytes": 1, "hashes": {}} if zipped
             else None} for name in names]}

    merged = merge_indexes([("b", index("shard.00000.mds", "shard.00001.mds")),
                            ("a/c", index("shard.00000.mds", zipped=True))])
    assert [(s["raw_data"]["basename"], s["zip_data"] and s["zip_data"]["basename"])
            for s in merged["shards"]] == [
        ("b/shard.00000.mds", None), ("b/shard.00001.mds", None),
        ("a/c/shard.00000.mds", "a/c/shard.00000.mds.zstd")]
    assert merged["version"] == 2
    with pytest.raises(ValueError, match="version"):
        merge_indexes([("a", {"version": 1, "shards": []})])


def test_errors_name_what_is_wrong(tmp_path):
    def writer(columns, **settings):
        return MDSShardWriter(str(tmp_path), columns, create=_local, join=os.path.join,
                              **settings)

    with pytest.raises(ValueError, match="unsupported MDS encoding 'str'"):
        writer({"a": "str"})
    with pytest.raises(ValueError, match="ndarray:<dtype>"):
        writer({"a": "ndarray"})
    with pytest.raises(ValueError, match="compression 'gz'"):
        writer({"a": "int"}, compression="gz")
    with pytest.raises(ValueError, match="zstd:1..22"):
        writer({"a": "int"}, compression="zstd:23")
    with pytest.raises(ValueError, match="size_limit"):
        writer({"a": "int"}, size_limit=1 << 32)
    arrays = writer({"a": "ndarray:uint16"})
    with pytest.raises(TypeError, match="numpy array of uint16, not int64"):
        arrays.add({"a": np.array([1, 2])})
    with pytest.raises(ValueError, match="some values"):
        arrays.add({"a": np.array([], np.uint16)})
    with pytest.raises(KeyError, match="columns"):
        arrays.add({"a": np.array([1], np.uint16), "b": 1})
    ints = writer({"a": "int"})
    with pytest.raises(TypeError, match="integer, not bool"):
        ints.add({"a": True})
    with pytest.raises(OverflowError):
        ints.add({"a": 1 << 63})


# --- as mosaicml-streaming reads them ----------------------------------------------------------

@pytest.mark.slow
def test_streaming_dataset_reads_every_sample_in_order(tmp_path, sequences):
    python = client_python("mosaicml-streaming", MOSAICML_STREAMING)
    spec = {"library": str(tmp_path / "library"), "size_limit": SIZE_LIMIT, "datasets": {}}
    ours = {}
    for name, (layout, vocab_size, compression) in DATASETS.items():
        ids = _dataset_ids(name, sequences)
        parts = _halves(ids)
        merged = _write_dataset(tmp_path / "ours" / name, layout, vocab_size, compression, parts)
        assert len(merged["shards"]) >= 2 * len(SUBFOLDERS)
        columns = layout_columns(layout, vocab_size)
        # StreamingDataset decompresses zstd shards into the dataset's
        # folder: the bytes as written are taken first.
        ours[name] = {"tree": _tree(tmp_path / "ours" / name), "ids": ids}
        spec["datasets"][name] = {
            "local": str(tmp_path / "ours" / name), "layout": layout, "columns": columns,
            "dtype": columns["input_ids"].partition(":")[2] or None,
            "compression": compression, "subfolders": dict(zip(SUBFOLDERS, parts))}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    result = run_client(python, _READ, str(tmp_path / "spec.json"))

    for name, (layout, vocab_size, compression) in DATASETS.items():
        read, ids, tree = result[name]["read"], ours[name]["ids"], ours[name]["tree"]
        if layout == "modernbert":
            assert read == [{"attention_mask": {"int64": [1] * len(sample)},
                             "input_ids": {"int64": sample},
                             "len": {"type": "int", "value": len(sample)}} for sample in ids]
            assert result[name]["modernbert"] == ids
        else:
            dtype = "uint16" if vocab_size < 1 << 16 else "uint32"
            assert read == [{"input_ids": {"dtype": dtype, "shape": [len(sample)],
                                           "values": sample}} for sample in ids]
            assert (max(map(max, ids)) >= 1 << 16) == (dtype == "uint32")
        # The library's MDSWriter: the same shards before compression, the
        # same index (less the compressed sizes), the same merged index.
        raw = {}
        for path, data in tree.items():
            if path.endswith(".zstd"):
                path, data = path[:-len(".zstd")], zstandard.ZstdDecompressor().decompress(data)
            if "/shard." in path:
                raw[path] = hashlib.sha256(data).hexdigest()
        assert raw == result[name]["raw_files"]
        indexes = result[name]["indexes"]
        ours_indexes = {path: json.loads(data) for path, data in tree.items()
                        if path.endswith(INDEX_NAME)}
        if compression is None:
            assert {path: data.decode() for path, data in tree.items()
                    if path.endswith("/" + INDEX_NAME)} == result[name]["index_bytes"]
            assert ours_indexes == indexes
        else:
            assert _without_zip_sizes(ours_indexes) == _without_zip_sizes(indexes)


def _without_zip_sizes(indexes: dict) -> dict:
    """The indexes with each compressed file's size left out: zstd's bytes
    differ between the two compression libraries."""
    return {path: {**index, "shards": [{**shard, "zip_data": {**shard["zip_data"], "bytes": None}}
                                       for shard in index["shards"]]}
            for path, index in indexes.items()}
