"""--decontaminate end to end: benchmark items planted in a corpus (re-cased,
re-spaced, inside longer documents) are gone from every split, clean
documents are left alone, and the audit list says what the manifest counts.

The corpus is the English Web Treebank's sentences, two a document; the
benchmark items are WikiText-2 paragraphs, half of them planted, each in
another document. Whether an item survived is checked on the output's own
tokens: no run of 16 of an item's WordPiece ids is in any split.
"""

from __future__ import annotations

import collections
import json
import random

import pytest

from conftest import DATA, UNCASED_VOCAB
from helpers.corpora import web_treebank_documents
from bert_pretraining_data.loaders.manifest import read_manifest
from bert_pretraining_data.loaders.records import read_instances
from bert_pretraining_data.pipeline.main import main, run
from bert_pretraining_data.transforms.decontaminate.benchmarks import DecontaminationError
from bert_pretraining_data.transforms.tokenize.tokenizer_spec import TokenizerSpec

RUN = 16  # WordPiece ids of an item that must not survive in a row


def _items() -> list[str]:
    """WikiText-2 paragraphs of 25 to 80 words."""
    lines = (DATA / "wikitext2_valid.raw.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines
            if 25 <= len(line.split()) <= 80 and not line.strip().startswith("=")][:60]


def _disguised(item: str, rng: random.Random) -> str:
    """The item as a copy in the wild has it: re-cased, re-spaced, its
    punctuation changed."""
    words = item.split()
    words = [w.upper() if rng.random() < 0.3 else w.title() if rng.random() < 0.3 else w
             for w in words]
    return "  ".join(words).replace(" , ", " ; ").replace(" .", "!")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    rng = random.Random(11)
    documents = web_treebank_documents()
    items = _items()
    chosen = rng.sample(range(len(documents)), 30)
    for item, index in zip(items[:30], chosen):  # the first 30 are planted, inside documents
        lines = documents[index]
        documents[index] = [lines[0], f"Before it: {_disguised(item, rng)} and after.", lines[1]]
    root = tmp_path_factory.mktemp("decontaminate")
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    benchmarks = root / "bench"
    benchmarks.mkdir()
    (benchmarks / "squad_like.jsonl").write_text(
        "".join(json.dumps({"context": item, "id": n}) + "\n" for n, item in enumerate(items)),
        encoding="utf-8")
    (benchmarks / "glue_like.txt").write_text(
        "a gorgeous film\nthe movie is a masterpiece of its kind\n", encoding="utf-8")
    out = root / "out"
    manifest = run([f"--input_file={corpus}", f"--output_dir={out}",
                    f"--vocab_file={UNCASED_VOCAB}", "--max_seq_length=128", "--dupe_factor=1",
                    f"--decontaminate={benchmarks}/squad_like.jsonl,{benchmarks}/*.txt",
                    "--decontaminate_field=context", "--validation_fraction=0.1"])
    return {"out": out, "manifest": manifest, "items": items, "documents": documents,
            "planted": 30}


def _runs(ids: list[int]) -> set[tuple[int, ...]]:
    return {tuple(ids[i:i + RUN]) for i in range(len(ids) - RUN + 1)}


def test_every_planted_item_is_gone_from_every_split(planted):
    spec = TokenizerSpec(str(UNCASED_VOCAB), True)
    tokenizer = spec.tokenizer(spec.load_vocabulary())
    item_runs = set().union(*(_runs(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(item)))
                              for item in planted["items"]))
    for split in ("train", "validation"):
        for instance in read_instances(read_manifest(str(planted["out"]), split=split)):
            ids = instance.input_ids.copy()
            ids[instance.masked_lm_positions] = instance.masked_lm_ids
            assert not _runs([int(i) for i in ids]) & item_runs, (split, instance.index)


def test_clean_documents_are_left_alone_and_the_audit_matches_the_counts(planted):
    section = planted["manifest"]["decontamination"]
    clean = len(planted["documents"]) - planted["planted"]
    assert planted["planted"] <= section["documents_removed"]
    assert section["documents_removed"] - planted["planted"] <= 0.005 * clean
    audit = json.loads((planted["out"] / section["audit"]).read_text())
    assert len({record["document"] for record in audit}) == section["documents_removed"]
    per_file = collections.defaultdict(set)
    items = collections.defaultdict(set)
    for record in audit:
        per_file[record["file"]].add(record["document"])
        items[record["file"]].add(record["line"])
    for path, figures in section["files"].items():
        assert figures["documents_removed"] == len(per_file[path]), path
        assert figures["items_matched"] == len(items[path]), path
    squad = next(figures for path, figures in section["files"].items()
                 if path.endswith("squad_like.jsonl"))
    assert squad["items"] == len(planted["items"]) and squad["items_matched"] >= 30
    glue = next(figures for path, figures in section["files"].items()
                if path.endswith("glue_like.txt"))
    assert glue == {"items": 2, "items_too_short": 2, "items_matched": 0,
                    "documents_removed": 0}
    assert planted["manifest"]["counters"]["decontaminated_documents"] == section[
        "documents_removed"]


@pytest.mark.parametrize("make, message", [
    (lambda d: f"{d}/missing-*.jsonl", "matches no file"),
    (lambda d: (d / "empty.txt").write_text("") and None or f"{d}/empty.txt", "empty.txt"),
    (lambda d: (d / "latin1.txt").write_bytes("caf\xe9 ".encode("latin-1") * 20) and None
     or f"{d}/latin1.txt", "UTF-8"),
    (lambda d: (d / "bad.jsonl").write_text('{"text": "fine"}\nnot json\n') and None
     or f"{d}/bad.jsonl", "bad.jsonl"),
])
def test_a_bad_benchmark_file_is_one_line_and_publishes_nothing(tmp_path, capsys, make,
                                                                 message):
    pattern = make(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main([f"--input_file={DATA / 'sample_text.txt'}", f"--output_dir={tmp_path / 'out'}",
              f"--vocab_file={UNCASED_VOCAB}", f"--decontaminate={pattern}"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and message in error, error
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_the_error_type_is_the_one_the_command_line_reports(tmp_path):
    with pytest.raises(DecontaminationError):
        run([f"--input_file={DATA / 'sample_text.txt'}", f"--output_dir={tmp_path / 'out'}",
             f"--vocab_file={UNCASED_VOCAB}", f"--decontaminate={tmp_path}/none-*.txt"])
