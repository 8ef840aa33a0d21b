"""ReadDocuments: BERT's document boundaries, exact under any bundle split."""

from __future__ import annotations

import bz2
import gzip
import io
import random

import pytest
from apache_beam.io import source_test_utils
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from bert_pretraining_data.transforms.read import documents
from bert_pretraining_data.transforms.read.beam import DocumentSource, ReadDocuments, match_inputs
from bert_pretraining_data.transforms.read.documents import (DecodeStats, InputError, document_key,
                                                             key_root, split_documents)

BOM = b"\xef\xbb\xbf"


def lines_of(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, line) split on b"\\n" only, like the source's readline()."""
    out, offset, f = [], 0, io.BytesIO(data)
    while line := f.readline():
        out.append((offset, line))
        offset += len(line)
    return out


def docs(data: bytes, stats: DecodeStats | None = None) -> list[tuple[int, list[str]]]:
    return list(split_documents(lines_of(data), stats=stats))


def read_all(pattern: str, **kwargs) -> list[tuple[str, list[str]]]:
    return source_test_utils.read_from_source(DocumentSource(pattern, **kwargs))


# ---------------------------------------------------------------- pure core

def test_crlf_lines_and_separator():
    assert docs(b"a b\r\nc\r\n\r\nd\r\n") == [(0, ["a b", "c"]), (10, ["d"])]


@pytest.mark.parametrize("blank", [
    " ", "\t", "\u00a0", "\u3000", "\r", "\x0b\x0c", "\x1c\x1f", "\x85", "\u2028",
    " \t\u00a0\u3000\r",
])
def test_whitespace_only_lines_separate_documents(blank):
    sep = blank.encode()
    assert docs(b"a\n" + sep + b"\nb\n") == [(0, ["a"]), (3 + len(sep), ["b"])]


def test_non_whitespace_format_characters_are_text_not_separators():
    # U+200B and U+FEFF are not whitespace for str.strip(): such a line is a
    # (token-less) sentence in the original, so it does not end a document.
    assert docs("a\n\u200b\nb\n".encode()) == [(0, ["a", "\u200b", "b"])]


def test_a_run_of_blank_lines_is_one_boundary():
    data = b"\n \n\ta\n\n\n \xc2\xa0\n\nb\nc"
    assert docs(data) == [(3, ["a"]), (13, ["b", "c"])]


def test_no_trailing_newline_keeps_last_line():
    assert docs(b"a\nb") == [(0, ["a", "b"])]
    assert docs(b"a\n\nb") == [(0, ["a"]), (3, ["b"])]


def test_lines_without_newline_are_accepted():
    assert list(split_documents([(0, b"a"), (2, b""), (3, b"b")])) == [(0, ["a"]), (3, ["b"])]


@pytest.mark.parametrize("data", [b"", b"\n", b"\n \n\t\r\n\xe3\x80\x80", b"\xff\n\n"])
def test_empty_or_blank_only_file_has_no_documents(data):
    assert docs(data) == []


def test_invalid_utf8_is_dropped_and_counted():
    stats = DecodeStats()
    # \xff and \xfe are never valid; \xe4\xb8 is a cut 3-byte sequence.
    data = b"ca\xfft \xfe\n\nx\xe4\xb8 y\n\xe4\xb8\xad\xc3\xa9\n"
    assert docs(data, stats) == [(0, ["cat"]), (8, ["x y", "中é"])]
    assert stats.undecodable_bytes == 4
    assert stats.bom_removed == 0


def test_undecodable_bytes_on_blank_lines_are_not_counted():
    stats = DecodeStats()
    assert docs(b"a\n\xff \xfe\nb\n", stats) == [(0, ["a"]), (6, ["b"])]
    assert stats.undecodable_bytes == 0


def test_bom_at_file_start_is_removed_and_counted():
    stats = DecodeStats()
    assert docs(BOM + b"hello\n\n" + BOM + b"x\n", stats) == [
        (0, ["hello"]), (10, ["\ufeffx"])]  # only the file's first bytes are a BOM
    assert stats.bom_removed == 1


def test_bom_only_first_line_is_blank():
    stats = DecodeStats()
    assert docs(BOM + b" \nb\n", stats) == [(5, ["b"])]
    assert stats.bom_removed == 1


def test_continuing_lines_are_skipped_and_claims_can_stop_reading():
    lines = lines_of(b"tail\n\na\n\nb\n\nc\n")
    assert list(split_documents(lines, after_blank=False)) == [
        (6, ["a"]), (9, ["b"]), (12, ["c"])]
    claimed = []

    def claim(offset):
        claimed.append(offset)
        return offset < 10

    assert list(split_documents(lines, claim=claim)) == [(0, ["tail"]), (6, ["a"]), (9, ["b"])]
    assert claimed == [0, 6, 9, 12]


def test_document_key_is_zero_padded_and_sorts_in_file_order():
    assert document_key("gs://b/wiki.txt", 42) == "gs://b/wiki.txt:000000000042"
    keys = [document_key("/a.txt", o) for o in (9, 10, 100, 2)]
    assert sorted(keys) == [document_key("/a.txt", o) for o in (2, 9, 10, 100)]


@pytest.mark.parametrize("patterns, root", [
    (["/data/wiki/a.txt"], "/data/wiki/"),
    (["gs://b/wiki/*.txt"], "gs://b/wiki/"),
    (["/data/wiki/a*.txt", "/data/wiki/ab/*.txt"], "/data/wiki/"),
    (["/data/wi*/a.txt", "/data/wiki/b.txt"], "/data/"),
    (["/data/w[io]ki/a.txt"], "/data/"),
    (["gs://b/x/a.txt", "/local/a.txt"], ""),
    (["a.txt"], ""),
])
def test_key_root_is_the_shared_directory_before_any_wildcard(patterns, root):
    assert key_root(patterns) == root


def test_document_key_names_the_file_relative_to_the_root():
    assert document_key("gs://b/wiki/sub/a.txt", 7, "gs://b/wiki/") == "sub/a.txt:000000000007"
    assert document_key("/data/wiki/sub/a.txt", 7, "/data/wiki/") == "sub/a.txt:000000000007"
    # a path outside the root (never produced by a match) keeps its full name
    assert document_key("/elsewhere/a.txt", 7, "/data/") == "/elsewhere/a.txt:000000000007"


def test_moving_a_corpus_keeps_every_key(tmp_path):
    for place in ("one", "two/deeper"):
        (tmp_path / place / "sub").mkdir(parents=True)
        (tmp_path / place / "sub" / "a.txt").write_bytes(b"a1\n\na2\n")
        (tmp_path / place / "b.txt").write_bytes(b"b1\n")
    reads = [sorted(read_all(str(tmp_path / place / "**.txt"))) for place in ("one", "two/deeper")]
    assert reads[0] == reads[1] == [("b.txt:000000000000", ["b1"]),
                                    ("sub/a.txt:000000000000", ["a1"]),
                                    ("sub/a.txt:000000000004", ["a2"])]


# ------------------------------------------------------- corpora with truth

WORDS = ["the", "cat", "naïve", "中文", "日本語", "😀", "Ω", "l'été", "x" * 30, "\u200b"]
PADS = ["", " ", "\t", "\u00a0", "\u3000"]
BLANKS = [s.encode() for s in ("", " ", "\t", "\u00a0", "\u3000", "\r", " \t\u00a0\u3000 ",
                                "\x0b", "\u2028", "\x85")] + [b"\xff", b" \xe4\xb8 "]


def build_corpus(seed: int, n_docs: int = 40, *, long_lines: bool = False,
                 bom: bool = False) -> tuple[bytes, list[tuple[int, list[str]]], int]:
    """(file bytes, expected (offset, lines), expected undecodable bytes),
    with the truth recorded while writing rather than recomputed."""
    rng = random.Random(seed)
    out = bytearray(BOM if bom else b"")
    expected: list[tuple[int, list[str]]] = []
    undecodable = 0

    def emit(raw: bytes) -> None:
        out.extend(raw + rng.choice([b"\n", b"\r\n"]))

    def separator() -> None:
        for _ in range(rng.randint(1, 3)):
            emit(rng.choice(BLANKS))
        if long_lines and rng.random() < 0.2:  # longer than a backward chunk
            emit((" " * 9000 + "\u3000" * 3000 + "\u00a0").encode())

    for d in range(n_docs):
        if d > 0 or rng.random() < 0.5:
            separator()
        start, lines = len(out), []
        for _ in range(rng.randint(1, 5)):
            text = " ".join(rng.choices(WORDS, k=rng.randint(1, 8)))
            if long_lines and rng.random() < 0.15:
                text = rng.choice(["abc " * 5000, "中文字" * 4000, "😀" * 3000])
            raw = text.encode()
            if rng.random() < 0.2:  # undecodable bytes right after the first word
                cut = len(text.split(" ")[0].encode())
                bad = rng.choice([b"\xff", b"\xe4\xb8"])
                raw = raw[:cut] + bad + raw[cut:]
                undecodable += len(bad)
            emit(rng.choice(PADS).encode() + raw + rng.choice(PADS).encode())
            lines.append(text.strip())
        expected.append((start, lines))
    if rng.random() < 0.5:
        separator()
    elif out.endswith(b"\n"):
        del out[-1]  # no trailing newline
    return bytes(out), expected, undecodable


def keyed(path: str, expected: list[tuple[int, list[str]]],
          root: str | None = None) -> list[tuple[str, list[str]]]:
    root = key_root([path]) if root is None else root
    return [(document_key(path, offset, root), lines) for offset, lines in expected]


@pytest.fixture(params=[0, 1, 2])
def small_corpus(request, tmp_path):
    data, expected, _ = build_corpus(request.param, bom=request.param == 1)
    path = tmp_path / "small.txt"
    path.write_bytes(data)
    return str(path), expected


@pytest.fixture(scope="module")
def long_corpus(tmp_path_factory):
    data, expected, _ = build_corpus(7, n_docs=30, long_lines=True, bom=True)
    path = tmp_path_factory.mktemp("long") / "long.txt"
    path.write_bytes(data)
    return str(path), expected


def test_corpus_builder_covers_the_hard_cases(long_corpus):
    data = open(long_corpus[0], "rb").read()
    assert b"\r\n" in data and "\u3000".encode() in data and b"\xff" in data
    assert data.startswith(BOM) and max(len(line) for line in data.split(b"\n")) > 20000


def test_unsplit_read_matches_the_truth(small_corpus, long_corpus):
    for path, expected in (small_corpus, long_corpus):
        assert read_all(path) == keyed(path, expected)


def test_end_of_file_ends_a_document(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"a1\na2")
    (tmp_path / "b.txt").write_bytes(b"b1\n\nb2\n")
    assert sorted(read_all(str(tmp_path / "*.txt"))) == [
        (document_key("a.txt", 0), ["a1", "a2"]),
        (document_key("b.txt", 0), ["b1"]),
        (document_key("b.txt", 4), ["b2"]),
    ]


# ---------------------------------------------------------------- splitting

def bundles(path: str, split_bytes: int) -> list[tuple]:
    source = DocumentSource(path, split_bytes=split_bytes)
    return [(b.source, b.start_position, b.stop_position)
            for b in source.split(desired_bundle_size=1 << 30)]


@pytest.mark.parametrize("backward_chunk", [3, 8192])
@pytest.mark.parametrize("split_bytes", [1, 7, 64])
def test_many_small_splits_equal_the_reference_source(
        small_corpus, split_bytes, backward_chunk, monkeypatch):
    monkeypatch.setattr(documents, "_BACKWARD_CHUNK", backward_chunk)
    path, expected = small_corpus
    sources = bundles(path, split_bytes)
    size = len(open(path, "rb").read())
    assert len(sources) >= size // split_bytes
    source_test_utils.assert_sources_equal_reference_source(
        (DocumentSource(path), None, None), sources)
    records = [r for s in sources for r in source_test_utils.read_from_source(*s)]
    assert records == keyed(path, expected)  # also in file order, no duplicates


@pytest.mark.parametrize("split_bytes", [61, 997, 5000])
def test_splits_through_long_lines_equal_the_truth(long_corpus, split_bytes):
    path, expected = long_corpus
    sources = bundles(path, split_bytes)
    records = [r for s in sources for r in source_test_utils.read_from_source(*s)]
    assert records == keyed(path, expected)


@pytest.mark.parametrize("backward_chunk", [2, 8192])
def test_reader_after_a_bom_only_first_line_sees_it_as_blank(tmp_path, backward_chunk,
                                                             monkeypatch):
    monkeypatch.setattr(documents, "_BACKWARD_CHUNK", backward_chunk)
    path = tmp_path / "bom.txt"
    path.write_bytes(BOM + b" \ndoc\n\n" + BOM + b"\nnext\n")
    records = [r for s in bundles(str(path), 1) for r in source_test_utils.read_from_source(*s)]
    assert records == [(document_key("bom.txt", 5), ["doc"]),
                       (document_key("bom.txt", 10), ["\ufeff", "next"])]


class CountingReader(io.BytesIO):
    bytes_read = 0

    def read(self, size=-1):
        data = super().read(size)
        self.bytes_read += len(data)
        return data


@pytest.mark.parametrize("line, blank", [
    ("x" * 100_000, False),
    ("中" * 50_000, False),
    (" " * 100_000, True),
    ("\u3000" * 50_000, True),  # characters cut by chunk edges
])
def test_backward_scan_stops_at_the_first_chunk_with_text(line, blank):
    data = b"a\n" + line.encode() + b"\nnext\n"
    f = CountingReader(data)
    assert documents._line_before_is_blank(f, len(data) - 5) is blank
    if not blank:
        assert f.bytes_read <= documents._BACKWARD_CHUNK


def test_tiny_splits_read_the_same_documents_as_no_split(small_corpus):
    path, _ = small_corpus
    unsplit = read_all(path)
    split = [r for s in bundles(path, 1) for r in source_test_utils.read_from_source(*s)]
    assert len(split) == len(unsplit) > 30
    assert sorted(split) == sorted(unsplit)


def test_dynamic_splitting_at_every_fraction(tmp_path):
    path = tmp_path / "few.txt"
    path.write_bytes("a\r\nb b\n\u3000\n\nc\n \t\nd\nd2\n\u00a0\ne\n".encode())
    [(source, start, stop)] = bundles(str(path), 1 << 20)
    assert len(source_test_utils.read_from_source(source, start, stop)) == 4
    source_test_utils.assert_split_at_fraction_exhaustive(source, start, stop)


# -------------------------------------------------------------- compressed

@pytest.mark.parametrize("suffix, compress", [(".gz", gzip.compress), (".bz2", bz2.compress)])
def test_compressed_input_gives_the_same_documents(tmp_path, small_corpus, suffix, compress):
    path, expected = small_corpus
    packed = tmp_path / ("small.txt" + suffix)
    packed.write_bytes(compress(open(path, "rb").read()))
    sources = bundles(str(packed), 7)
    assert len(sources) == 1  # not splittable
    records = source_test_utils.read_from_source(*sources[0])
    assert records == keyed(str(packed), expected)  # decompressed-stream offsets


# ----------------------------------------------------------------- pipeline

def test_read_documents_over_two_patterns_with_exact_counters(tmp_path):
    (tmp_path / "x").mkdir()
    a_data, a_expected, a_bad = build_corpus(3, n_docs=12, bom=True)
    b_data, b_expected, b_bad = build_corpus(4, n_docs=9)
    (tmp_path / "x" / "a.txt").write_bytes(a_data)
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(b_data))
    (tmp_path / "x" / "empty.txt").write_bytes(b"")
    a, b = str(tmp_path / "x" / "a.txt"), str(tmp_path / "b.txt.gz")
    assert a_bad and b_bad

    p = test_pipeline.TestPipeline()
    docs_by_key = (p | ReadDocuments(patterns=[str(tmp_path / "x" / "*.txt"), b],
                                     split_bytes=16)).documents
    root = f"{tmp_path}/"  # the directory the two patterns share
    assert_that(docs_by_key, equal_to(keyed(a, a_expected, root) + keyed(b, b_expected, root)))
    result = p.run()
    result.wait_until_finish()

    counters: dict[str, int] = {}  # summed over the two read steps
    for c in result.metrics().query(MetricsFilter().with_namespace("bert_data"))["counters"]:
        counters[c.key.metric.name] = counters.get(c.key.metric.name, 0) + c.committed
    everything = a_expected + b_expected
    assert counters == {
        "documents": len(everything),
        "lines": sum(len(lines) for _, lines in everything),
        "undecodable_bytes": a_bad + b_bad,
        "bom_removed": 1,
    }


def test_read_documents_rejects_unmatched_pattern_and_a_bare_string(tmp_path):
    missing = str(tmp_path / "nope-*.txt")
    with pytest.raises(InputError, match="matches no files"):
        test_pipeline.TestPipeline() | ReadDocuments(patterns=[missing])
    with pytest.raises(TypeError):
        ReadDocuments(patterns=missing)


# ------------------------------------------------------------- match_inputs

def test_match_inputs_missing_pattern_is_one_clear_line(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"a\n")
    missing = str(tmp_path / "missing" / "*.txt")
    with pytest.raises(InputError) as err:
        match_inputs(f"{tmp_path / 'a.txt'},{missing}")
    message = str(err.value)
    assert message.startswith(f"--input_file pattern {missing!r} matches no files; check the path")
    assert message.endswith("(local paths and gs:// globs are supported)")
    assert "\n" not in message
    assert isinstance(err.value, ValueError)


def test_match_inputs_comma_list_with_spaces_sorted_and_deduplicated(tmp_path):
    for name, data in [("b.txt", b"bb\n"), ("a.txt", b"a\n"), ("c.gz", b"ccc")]:
        (tmp_path / name).write_bytes(data)
    a, b, c = (str(tmp_path / n) for n in ("a.txt", "b.txt", "c.gz"))
    got = match_inputs(f" {b} , ,{tmp_path}/*.txt,  {a},{c} ,")
    assert got == [(a, 2), (b, 3), (c, 3)]


def test_match_inputs_rejects_an_empty_list():
    with pytest.raises(InputError):
        match_inputs(" , ")
