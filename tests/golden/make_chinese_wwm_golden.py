#!/usr/bin/env python
"""Regenerate golden outputs of Chinese whole-word masking (Chinese BERT-wwm).

The original BERT create_pretraining_data.py (google-research/bert) is run
unmodified in a subprocess with ``--do_whole_word_mask=true``, ``tensorflow``
aliased to ``tensorflow.compat.v1`` (as in make_pipeline_golden.py), and a
shim around ``tokenization.FullTokenizer`` that marks, with jieba, the
characters that continue a multi-character Chinese word, the way Hugging
Face's examples/research_projects/mlm_wwm/run_chinese_ref.py does with LTP
(Chinese BERT-wwm, ymcui/Chinese-BERT-wwm). The shim is this file's own code,
written from the description of that script's ``_is_chinese_char``,
``is_chinese``, ``get_chinese_word`` and ``add_sub_symbol``:

  * ``tokenize(text)`` (called once per stripped input line) returns the
    original tokens, except that every token marked as continuing a word is
    replaced by ``ContinuationToken("##" + token)``, a ``str`` subclass. The
    original's whole-word masking (``token.startswith("##")``) then groups it
    with the token before it.
  * ``convert_tokens_to_ids`` maps a ``ContinuationToken`` "##X" to the id of
    the plain character X (never to the vocabulary's own "##X" entry); every
    other token, including a random replacement word that happens to be a
    vocabulary entry "##X", keeps its ordinary vocabulary id.

Marking rules (per line): words = jieba.lcut(line) (accurate mode, HMM on,
jieba 0.42.1's default dictionary); the line's Chinese words are the distinct
words of length > 1 all of whose characters are CJK ideographs; scanning the
line's BERT tokens left to right, at a token that is all CJK ideographs the
longest run of 2..L tokens (L = longest Chinese word of the line, capped by
the tokens left) whose concatenation is one of the line's Chinese words is a
match: its 2nd.. tokens are marked and the scan resumes after the match;
otherwise the scan moves on by one token.

Usage:
  python tests/golden/make_chinese_wwm_golden.py --bert_dir /path/to/bert \
      --jieba_path /path/with/jieba-0.42.1 \
      --out_dir tests/data/golden_chinese_wwm --check_determinism

Outputs (under --out_dir):
  zh_gsd_paragraphs_300.txt    input of zh_wwm_gsd (derived from --gsd_source)
  <case>/out-0.jsonl.gz        decoded records, in record order
  <case>/marks.jsonl.gz        per non-empty input line: line, tokens, continues
  cases.json                   flags, counts, checks of every case
  <stats corpus stem>_stats.json
                               instance_stats() + stats_ngram.span_stats() of
                               whole-word-masking runs (shim as above) on
                               --stats_corpus, one per --stats_seeds seed,
                               with mean and sd
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
# pylint: disable=wrong-import-position
from golden_common import (BERT_DEFAULTS, BERT_FEATURE_KEYS, CHINESE_VOCAB,
                           DEFAULT_DATA_DIR, HASH_SEEDS, check_bert_shapes,
                           flag_case, golden_parser, make_flag_stats,
                           parse_golden_args, read_examples, require_same,
                           run_cases, run_flag_script, run_twice, sha256_file,
                           tests_module, write_json, write_jsonl_gz,
                           write_stats)

DEFAULT_GSD_SOURCE = "/work/shared/data/sentences/zh_gsd-ud-test.paragraphs.txt"
DEFAULT_JIEBA_PATH = "/tmp/zhwwm-work/site"
JIEBA_VERSION = "0.42.1"

GSD_COPY = "zh_gsd_paragraphs_300.txt"
GSD_MAX_LINES = 300
GSD_LINES_PER_DOC = 5

# Defaults of the original script's flags (all passed explicitly below).
ORIGINAL_DEFAULTS: dict[str, Any] = BERT_DEFAULTS

FEATURE_KEYS = BERT_FEATURE_KEYS

# Statistics runs: whole-word masking (with the jieba marks) on one corpus,
# once per --stats_seeds seed.
DEFAULT_STATS_CORPUS = DEFAULT_DATA_DIR / "chinese_small.txt"
STATS_FLAGS: dict[str, Any] = dict(
    ORIGINAL_DEFAULTS, do_whole_word_mask=True, do_lower_case=True,
    max_seq_length=128, max_predictions_per_seq=20, dupe_factor=5,
    masked_lm_prob=0.15, short_seq_prob=0.1)


def _case(name: str, input_file: str, input_in_out_dir: bool,
          **overrides: Any) -> dict[str, Any]:
    case = flag_case(ORIGINAL_DEFAULTS, name, input_file, CHINESE_VOCAB, 1,
                     **{"do_whole_word_mask": True, **overrides})
    case["input_in_out_dir"] = input_in_out_dir
    return case


CASES = [
    _case("zh_wwm_small", "chinese_small.txt", False,
          max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2,
          random_seed=1, do_lower_case=True),
    _case("zh_wwm_gsd", GSD_COPY, True,
          max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2,
          random_seed=7, short_seq_prob=0.2),
]

# The marking shim. It runs inside the runner (after ``import tokenization``
# and ``import jieba``) and is also exec'd by self_test() below.
_SHIM = r'''
def _is_chinese_char(cp):
    """True for a code point in a CJK ideograph block (same ranges as BERT's
    and HF's _is_chinese_char)."""
    return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or
            (0x20000 <= cp <= 0x2A6DF) or (0x2A700 <= cp <= 0x2B73F) or
            (0x2B740 <= cp <= 0x2B81F) or (0x2B820 <= cp <= 0x2CEAF) or
            (0xF900 <= cp <= 0xFAFF) or (0x2F800 <= cp <= 0x2FA1F))


def is_chinese(word):
    """True if every character of word is a CJK ideograph."""
    return all(_is_chinese_char(ord(ch)) for ch in word)


def chinese_words(segments):
    """The distinct segments of length > 1 made only of CJK ideographs."""
    return {w for w in segments if len(w) > 1 and is_chinese(w)}


def continuation_flags(tokens, words):
    """0/1 per token: 1 if the token continues a word of ``words``.

    Left to right; at a token that is all CJK ideographs, try lengths
    min(tokens left, longest word) down to 2 and take the first (longest)
    run of tokens whose concatenation is in ``words``; mark its tokens after
    the first and continue after the run. Otherwise advance by one token.
    """
    flags = [0] * len(tokens)
    if not words:
        return flags
    max_len = max(len(w) for w in words)
    start, end = 0, len(tokens)
    while start < end:
        step = 1
        if is_chinese(tokens[start]):
            for n in range(min(end - start, max_len), 1, -1):
                if "".join(tokens[start:start + n]) in words:
                    for j in range(start + 1, start + n):
                        flags[j] = 1
                    step = n
                    break
        start += step
    return flags
'''

# Runs the original script as __main__ with tensorflow -> tf.compat.v1 and the
# jieba marking shim installed on tokenization.FullTokenizer.
# argv: bert_dir, marks output path, jieba temp dir, then the script's flags.
_RUNNER = r'''
import json, logging, runpy, sys
import tensorflow
sys.modules["tensorflow"] = tensorflow.compat.v1
bert_dir, marks_path, jieba_tmp = sys.argv[1:4]
sys.path.insert(0, bert_dir)
import jieba
if jieba.__version__ != "%(jieba_version)s":
    raise SystemExit("jieba %%s, not %(jieba_version)s" %% jieba.__version__)
jieba.setLogLevel(logging.WARNING)
jieba.dt.tmp_dir = jieba_tmp  # fresh dir: the cache is built from dict.txt
jieba.initialize()
import tokenization
%(shim)s

class ContinuationToken(str):
    """'##' + a character the shim marked as continuing a Chinese word."""


_orig_tokenize = tokenization.FullTokenizer.tokenize
_orig_convert = tokenization.FullTokenizer.convert_tokens_to_ids
_marks = open(marks_path, "w", encoding="utf-8")


def _tokenize(self, text):
    tokens = _orig_tokenize(self, text)
    if not text:
        return tokens
    words = chinese_words(jieba.lcut(text, cut_all=False, HMM=True))
    flags = continuation_flags(tokens, words)
    out = []
    for token, flag in zip(tokens, flags):
        if flag:
            if not (len(token) == 1 and is_chinese(token)
                    and token in self.vocab):
                raise AssertionError("marked token %%r" %% token)
            token = ContinuationToken("##" + token)
        out.append(token)
    _marks.write(json.dumps({"line": text, "tokens": tokens,
                             "continues": flags}, ensure_ascii=False) + "\n")
    return out


def _convert_tokens_to_ids(self, tokens):
    plain = [t[2:] if isinstance(t, ContinuationToken) else t for t in tokens]
    return _orig_convert(self, plain)


tokenization.FullTokenizer.tokenize = _tokenize
tokenization.FullTokenizer.convert_tokens_to_ids = _convert_tokens_to_ids
script = bert_dir + "/create_pretraining_data.py"
sys.argv = [script] + sys.argv[4:]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as exc:  # absl's app.run exits after main
    if exc.code not in (None, 0):
        raise
finally:
    _marks.close()
''' % {"shim": _SHIM, "jieba_version": JIEBA_VERSION}


def self_test() -> None:
    """Check the shim's marking on hand-made examples."""
    ns: dict[str, Any] = {}
    exec(_SHIM, ns)  # pylint: disable=exec-used
    flags = ns["continuation_flags"]
    words = ns["chinese_words"]
    cases = [
        # longest match wins over a shorter word at the same start
        (["中", "国", "人", "民"], {"中国", "中国人", "人民"}, [0, 1, 1, 0]),
        # after a match the scan resumes behind it ("人民" is not tried)
        (["中", "国", "人", "民", "好"], {"中国人", "人民"}, [0, 1, 1, 0, 0]),
        # a word of the line matches wherever it occurs
        (["我", "爱", "北", "京", "北", "京"], {"北京"}, [0, 0, 0, 1, 0, 1]),
        # non-Chinese / [UNK] tokens never match or start a match
        (["a", "##b", "北", "[UNK]", "京"], {"北京"}, [0, 0, 0, 0, 0]),
        (["北", "京"], set(), [0, 0]),
    ]
    for tokens, word_set, expected in cases:
        got = flags(tokens, word_set)
        if got != expected:
            raise AssertionError(f"{tokens} {word_set}: {got} != {expected}")
    if words(["北京", "a1", "我", "北京", "2008年", "天安门"]) != {"北京", "天安门"}:
        raise AssertionError("chinese_words")


def run_original(bert_dir: Path, flags: dict[str, Any], output_files: list[str],
                 marks_path: Path, jieba_tmp: Path, cwd: Path, python: str,
                 jieba_path: Path, hash_seed: str = "0") -> None:
    """Run the original once with the shim; raise with its log if it fails."""
    run_flag_script(_RUNNER, bert_dir, flags, output_files, cwd, python,
                    hash_seed, what="original script",
                    runner_args=[str(marks_path), str(jieba_tmp)],
                    extra_env={"PYTHONPATH": str(jieba_path)})


def read_records(path: str) -> Iterator[dict[str, list]]:
    """Decode a TFRecord file of tf.train.Example into plain dicts."""
    return read_examples(path, FEATURE_KEYS)


def make_gsd_copy(source: Path, dest: Path) -> dict[str, Any]:
    """Copy the first GSD_MAX_LINES lines of source to dest; if source has no
    blank line, put a blank line after every GSD_LINES_PER_DOC lines (between
    documents, none at the end). Keeps an existing dest if source is absent."""
    info: dict[str, Any] = {"source": str(source)}
    if source.is_file():
        lines = source.read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        info["source_lines"] = len(lines)
        info["source_sha256"] = sha256_file(source)
        lines = lines[:GSD_MAX_LINES]
        info["lines_taken"] = len(lines)
        info["source_has_blank_lines"] = any(not l.strip() for l in lines)
        if info["source_has_blank_lines"]:
            out = lines
        else:
            out = []
            for k, line in enumerate(lines):
                if k and k % GSD_LINES_PER_DOC == 0:
                    out.append("")
                out.append(line)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("\n".join(out) + "\n", encoding="utf-8")
    elif not dest.is_file():
        raise FileNotFoundError(f"neither {source} nor {dest} exists")
    else:
        info["note"] = "source absent; existing copy kept"
    text = dest.read_text(encoding="utf-8")
    docs = [d for d in text.split("\n\n") if d.strip()]
    info.update(copy=dest.name, copy_sha256=sha256_file(dest),
                copy_bytes=dest.stat().st_size, documents=len(docs),
                text_lines=sum(1 for l in text.split("\n") if l.strip()))
    return info


def _read_marks(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def run_and_decode(case: dict[str, Any], flags: dict[str, Any],
                   bert_dir: Path, data_dir: Path, tmp: Path, python: str,
                   jieba_path: Path, hash_seed: str
                   ) -> tuple[list[dict[str, list]], list[dict[str, Any]], str]:
    """Run one case; return decoded records, marks and the TFRecord sha256."""
    out = str(tmp / "out-0.tfrecord")
    marks_path = tmp / "marks.jsonl"
    jieba_tmp = tmp / "jieba"
    jieba_tmp.mkdir()
    run_original(bert_dir, flags, [out], marks_path, jieba_tmp, data_dir,
                 python, jieba_path, hash_seed)
    records = list(read_records(out))
    for rec in records:
        check_bert_shapes(rec, flags)
    return records, _read_marks(marks_path), sha256_file(out)


def _load_vocab(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").strip() for line in f]


def check_ids(records: list[dict[str, list]], vocab: list[str],
              is_chinese_char) -> dict[str, int]:
    """No '##<CJK char>' vocab id may stand for text: none in the labels and
    none at an unmasked position. At a masked position one may appear only
    as the original's random replacement word (counted)."""
    sub_ids = {i for i, tok in enumerate(vocab)
               if tok.startswith("##") and len(tok) == 3
               and is_chinese_char(ord(tok[2]))}
    label_hits = unmasked_hits = random_hits = 0
    for rec in records:
        masked = {p for p, w in zip(rec["masked_lm_positions"],
                                    rec["masked_lm_weights"]) if w > 0}
        label_hits += sum(1 for i, w in zip(rec["masked_lm_ids"],
                                            rec["masked_lm_weights"])
                          if w > 0 and i in sub_ids)
        for pos, i in enumerate(rec["input_ids"]):
            if i in sub_ids:
                if pos in masked:
                    random_hits += 1
                else:
                    unmasked_hits += 1
    if label_hits or unmasked_hits:
        raise RuntimeError(f"'##<CJK>' ids for text: {label_hits} labels, "
                           f"{unmasked_hits} unmasked positions")
    return {"vocab_sub_cjk_ids": len(sub_ids),
            "sub_cjk_ids_in_labels": label_hits,
            "sub_cjk_ids_at_unmasked_positions": unmasked_hits,
            "sub_cjk_ids_as_random_replacement": random_hits}


def mark_stats(marks: list[dict[str, Any]], is_chinese_char) -> dict[str, Any]:
    tokens = cjk = cont = 0
    for m in marks:
        tokens += len(m["tokens"])
        for tok, flag in zip(m["tokens"], m["continues"]):
            if len(tok) == 1 and is_chinese_char(ord(tok)):
                cjk += 1
                cont += flag
            elif flag:
                raise RuntimeError(f"non-CJK token {tok!r} marked")
    return {"lines": len(marks), "tokens": tokens, "cjk_char_tokens": cjk,
            "continuing": cont,
            "continuing_share_of_cjk": round(cont / cjk, 4) if cjk else None}


def make_case(case: dict[str, Any], bert_dir: Path, data_dir: Path,
              out_dir: Path, python: str, jieba_path: Path,
              check_determinism: bool) -> dict[str, Any]:
    name = case["name"]
    flags = dict(case["flags"])
    if case["input_in_out_dir"]:
        flags["input_file"] = str(out_dir / flags["input_file"])
    (records, marks, sha), second = run_twice(
        lambda tmp, hash_seed: run_and_decode(case, flags, bert_dir, data_dir,
                                              tmp, python, jieba_path,
                                              hash_seed),
        f"golden_{name}", check_determinism)
    determinism = None
    if second is not None:
        again, marks2, sha2 = second
        require_same(name, records, again)
        require_same(name, marks, marks2, "produced other marks")
        determinism = {"hash_seeds": list(HASH_SEEDS),
                       "identical_records": True, "identical_marks": True,
                       "identical_tfrecord_bytes": sha == sha2}
        print(f"  {name}: second run gave identical records and marks "
              f"(raw TFRecord bytes identical: {sha == sha2})")

    ns: dict[str, Any] = {}
    exec(_SHIM, ns)  # pylint: disable=exec-used
    vocab = _load_vocab(data_dir / flags["vocab_file"])
    id_check = check_ids(records, vocab, ns["_is_chinese_char"])
    stats = mark_stats(marks, ns["_is_chinese_char"])

    write_jsonl_gz(records, out_dir / name / "out-0.jsonl.gz")
    write_jsonl_gz(marks, out_dir / name / "marks.jsonl.gz",
                   ensure_ascii=False)
    labels = [r["next_sentence_labels"][0] for r in records]
    print(f"  {name}: {len(records)} records, marks {json.dumps(stats)}, "
          f"ids {json.dumps(id_check)}")
    recorded_flags = dict(case["flags"])
    recorded_flags["input_file"] = os.path.relpath(
        Path(flags["input_file"]).resolve() if case["input_in_out_dir"]
        else data_dir / flags["input_file"], data_dir)
    return {
        "name": name,
        "flags": recorded_flags,
        "num_output_files": 1,
        "record_counts": [len(records)],
        "total_records": len(records),
        "next_sentence_label_counts": {"0": labels.count(0),
                                       "1": labels.count(1)},
        "outputs": [{"path": f"{name}/out-0.jsonl.gz",
                     "records": len(records)}],
        "marks": {"path": f"{name}/marks.jsonl.gz", **stats},
        "id_check": id_check,
        "determinism_check": determinism,
    }


def write_all_cases(args: argparse.Namespace, jieba_path: Path,
                    dict_txt: Path) -> None:
    """Make the GSD copy and the chosen cases; write cases.json."""
    gsd = make_gsd_copy(args.gsd_source, args.out_dir / GSD_COPY)
    print(f"GSD input: {json.dumps(gsd)}")

    cases_path = args.out_dir / "cases.json"
    results = run_cases(
        CASES, args.cases, cases_path,
        lambda case: make_case(case, args.bert_dir, args.data_dir,
                               args.out_dir, args.python, jieba_path,
                               args.check_determinism),
        listed=lambda meta: meta["cases"])
    meta = {
        "jieba": {"version": JIEBA_VERSION,
                  "dict_txt_sha256": sha256_file(dict_txt),
                  "call": "jieba.lcut(line, cut_all=False, HMM=True)"},
        "gsd_input": gsd,
        "cases": results,
    }
    write_json(cases_path, meta, ensure_ascii=False)


def make_stats(args: argparse.Namespace, seeds: list[int],
               jieba_path: Path) -> dict[str, Any]:
    """Run the shimmed original (whole-word masking, jieba marks) on
    --stats_corpus once per seed; record instance_stats() and
    stats_ngram.span_stats() of each run, their mean and their seed-to-seed
    (sample) sd. Every record is checked as in the cases (shapes, no
    '##<CJK>' id for text)."""
    flags = {"input_file": str(args.stats_corpus.resolve()),
             "vocab_file": CHINESE_VOCAB, **STATS_FLAGS}
    ns: dict[str, Any] = {}
    exec(_SHIM, ns)  # pylint: disable=exec-used
    vocab = _load_vocab(args.data_dir / CHINESE_VOCAB)

    def run(bert_dir: Path, run_flags: dict[str, Any],
            output_files: list[str], cwd: Path, python: str) -> None:
        tmp = Path(output_files[0]).parent
        jieba_tmp = tmp / "jieba"
        jieba_tmp.mkdir()
        run_original(bert_dir, run_flags, output_files, tmp / "marks.jsonl",
                     jieba_tmp, cwd, python, jieba_path)

    def read(path: str) -> list[dict[str, list]]:
        records = list(read_records(path))
        for rec in records:
            check_bert_shapes(rec, flags)
        check_ids(records, vocab, ns["_is_chinese_char"])
        return records

    return make_flag_stats(
        args, seeds, run, read, flags, "golden_zh_wwm_stats_", "_stats",
        tests_module("stats_ngram").span_stats, seeds=seeds,
        jieba={"version": JIEBA_VERSION,
               "dict_txt_sha256": sha256_file(jieba_path / "jieba" /
                                              "dict.txt"),
               "call": "jieba.lcut(line, cut_all=False, HMM=True)"})


def main() -> None:
    parser = golden_parser(
        __doc__, "--bert_dir", "checkout of google-research/bert",
        check_help="run each case twice and compare the results",
        stats_corpus=DEFAULT_STATS_CORPUS,
        data_help="directory with the input corpora and vocab",
        after_out_dir=[
            ("--jieba_path", {
                "type": Path, "default": Path(DEFAULT_JIEBA_PATH),
                "help": f"directory holding jieba {JIEBA_VERSION}; put on "
                        "the subprocess PYTHONPATH only"}),
            ("--gsd_source", {
                "type": Path, "default": Path(DEFAULT_GSD_SOURCE),
                "help": "UD Chinese-GSD test paragraphs file"})])
    args = parse_golden_args(parser, "bert_dir", "create_pretraining_data.py")
    self_test()
    jieba_path = args.jieba_path.resolve()
    dict_txt = jieba_path / "jieba" / "dict.txt"
    if not dict_txt.is_file():
        parser.error(f"no jieba/dict.txt under {jieba_path}")

    if not args.skip_cases:
        write_all_cases(args, jieba_path, dict_txt)
    write_stats(args, lambda a, seeds: make_stats(a, seeds, jieba_path))


if __name__ == "__main__":
    main()
