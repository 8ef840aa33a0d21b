#!/usr/bin/env python
"""Regenerate tests/data/sentencepiece_golden.jsonl.gz: the anchors' own
SentencePiece tokenization of real and adversarial lines.

ALBERT's tokenization.py (google-research/albert checkout) and the Model
Garden's official/nlp/tools/tokenization.py (the tf-models-official wheel,
unzipped) run unmodified, each in a subprocess of the project's venv with the
real `sentencepiece` library, on every line, with tests/data/sentencepiece-8k.model,
lower-cased and cased, exactly as their create_pretraining_data.py calls them:

  ALBERT:       text = preprocess_text(line, lower); pieces = FullTokenizer(
                spm_model_file=...).tokenize(text); ids = convert_tokens_to_ids;
                starts = [_is_start_piece_sp(p)] (create_pretraining_data.py)
  Model Garden: text = get_processor_text_fn(True, lower)(line as bytes);
                pieces = FullSentencePieceTokenizer(...).tokenize(text); ids;
                grams = _tokens_to_grams(pieces) (create_pretraining_data.py)

Their scripts' modules are imported, never run (their flags are defined, not
parsed). Two imports they never use for this are empty modules:
`tensorflow_hub` (ALBERT's hub loading) and `tf_keras` (the Model Garden's).

Lines: the texts of tests/data/tokenization_golden.jsonl (real corpora and
the adversarial lines of make_tokenization_golden.py), every sentence of
tests/data/en_ewt-ud-test.sentences.txt (web text, with numbers and commas)
and EXTRA_LINES below (the digit-comma rule, unknown characters, lines that
preprocessing empties).

    python tests/golden/make_sentencepiece_golden.py --albert_dir /path/to/albert \\
        --models_dir /path/to/unzipped/tf_models_official
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# pylint: disable=wrong-import-position
from golden_common import DEFAULT_DATA_DIR, sha256_file, write_jsonl_gz

MODEL = DEFAULT_DATA_DIR / "sentencepiece-8k.model"
OUT = DEFAULT_DATA_DIR / "sentencepiece_golden.jsonl.gz"
EXTRA_LINES = [
    "abc1990, def 12,345,678 and 3,",
    "In 1990, 2001, and 2010, the 4, 5, 6, were counted",
    "^| ~~ `{|}` <<>> ^^^",
    "Ünïcödé café naïve Zürich İstanbul ǅ ﬃ ① ²,",
    "我们的城市,1990,年 東京 ᄀ",
    "¨",
    "\u0301\u0301",
    "a \u0301 b ¨ c",
    "## ##ing [CLS] [MASK] <unk> <pad>",
]

_ALBERT = """
import importlib.util, json, os, sys, types
sys.modules["tensorflow_hub"] = types.ModuleType("tensorflow_hub")
albert_dir, model, lines_path = sys.argv[1:4]
spec = importlib.util.spec_from_file_location(
    "albert", os.path.join(albert_dir, "__init__.py"), submodule_search_locations=[albert_dir])
package = importlib.util.module_from_spec(spec)
sys.modules["albert"] = package
spec.loader.exec_module(package)
from albert import tokenization
import albert.create_pretraining_data as script
tokenizers = {lower: tokenization.FullTokenizer(None, lower, model) for lower in (True, False)}
for line in json.load(open(lines_path, encoding="utf-8")):
    row = {}
    for name, lower in (("lower", True), ("cased", False)):
        text = tokenization.preprocess_text(line, lower=lower)
        pieces = tokenizers[lower].tokenize(text)
        row[name] = {"text": text, "pieces": [tokenization.printable_text(p) for p in pieces],
                     "ids": tokenizers[lower].convert_tokens_to_ids(pieces),
                     "starts": [script._is_start_piece_sp(p) for p in pieces]}
    print(json.dumps(row))
"""

_MODEL_GARDEN = """
import json, sys, types
sys.modules["tf_keras"] = types.ModuleType("tf_keras")
models_dir, model, lines_path = sys.argv[1:4]
sys.path.insert(0, models_dir)
from official.nlp.tools import tokenization
from official.nlp.data import create_pretraining_data as script
tokenizer = tokenization.FullSentencePieceTokenizer(model)
for line in json.load(open(lines_path, encoding="utf-8")):
    row = {}
    for name, lower in (("lower", True), ("cased", False)):
        text = script.get_processor_text_fn(True, lower)(line.encode("utf-8"))
        pieces = tokenizer.tokenize(text)
        row[name] = {"text": text, "pieces": pieces,
                     "ids": tokenizer.convert_tokens_to_ids(pieces),
                     "grams": [[g.begin, g.end] for g in script._tokens_to_grams(pieces)]}
    print(json.dumps(row))
"""


def source_lines(data_dir: Path) -> list[tuple[str, str]]:
    """(source, line) of every line to tokenize."""
    rows = [json.loads(line) for line in
            (data_dir / "tokenization_golden.jsonl").read_text(encoding="utf-8").splitlines()]
    lines = [(row["source"], row["text"]) for row in rows]
    ewt = (data_dir / "en_ewt-ud-test.sentences.txt").read_text(encoding="utf-8").splitlines()
    lines += [("en_ewt_test", line) for line in ewt if line.strip()]
    return lines + [(f"extra:{i}", line) for i, line in enumerate(EXTRA_LINES)]


def run_anchor(runner: str, anchor_dir: Path, lines_path: Path) -> list[dict]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", runner, str(anchor_dir), str(MODEL),
                           str(lines_path)], capture_output=True, text=True, env=env)
    if proc.returncode:
        sys.stderr.write(proc.stderr)
        raise RuntimeError(f"the anchor's tokenization failed ({proc.returncode})")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--albert_dir", type=Path, required=True)
    parser.add_argument("--models_dir", type=Path, required=True)
    args = parser.parse_args()
    lines = source_lines(DEFAULT_DATA_DIR)
    with tempfile.TemporaryDirectory() as tmp:
        lines_path = Path(tmp) / "lines.json"
        lines_path.write_text(json.dumps([line for _, line in lines]), encoding="utf-8")
        albert = run_anchor(_ALBERT, args.albert_dir.resolve(), lines_path)
        garden = run_anchor(_MODEL_GARDEN, args.models_dir.resolve(), lines_path)
    assert len(albert) == len(garden) == len(lines)
    write_jsonl_gz(({"source": source, "line": line, "albert": a, "model_garden": g}
                    for (source, line), a, g in zip(lines, albert, garden)), OUT,
                   ensure_ascii=False)
    print(f"{OUT}: {len(lines):,} lines; model sha256 {sha256_file(MODEL)}")


if __name__ == "__main__":
    main()
