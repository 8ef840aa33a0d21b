"""How often transforms.quality.rules decides as datatrove's filters decide.

For each corpus, every document is decided by the project's `decide` (in this
venv) and by datatrove's C4QualityFilter (min_words_per_line=5,
min_num_sentences=3: TFDS's thresholds, which rules.py uses), GopherRepetition-
Filter + GopherQualityFilter, and FineWebQualityFilter (in a venv of their own,
through a subprocess reading documents as JSON lines), one rule set at a time and
all together (C4 first, its kept text fed to the others). datatrove is given
the text the pipeline holds: the document's stripped non-blank lines joined by
"\\n"; where the original text differs (blank lines between paragraphs, spaces),
a second agreement figure is on the original text. Printed per corpus and rule
set: agreement of keep/drop, the confusion, the most frequent reason pairs of
the disagreements and up to --examples documents per kind of disagreement with
the values (words, meaningful words, C4 sentences by both; the tokens that one
splitter makes and the other does not).

datatrove's venv (datatrove 0.10.1, spacy 3.8.18, regex 2026.12.2 measured;
datatrove imports regex without declaring it):
    python3.11 -m venv ~/.cache/bert-pretraining-data/clients/datatrove
    ~/.cache/bert-pretraining-data/clients/datatrove/bin/pip install datatrove spacy regex
(English words are spaCy's blank("en") tokenizer plus its sentencizer: no model.)

Corpora measured (none in the repository; keep fetched copies under /tmp):
- allenai/dolma tests/data/formats/gz/CC-MAIN-20190717121559-20190717143559-00140
  .jsonl.gz at commit 937ccc06f6fa4cefba496b2f48cc77418b941345: 697 pages of a
  Common Crawl WARC of July 2019, HTML extracted, paragraphs between blank lines;
- allenai/dolma tests/data/multiple_files/cc_en_head-0091.jsonl, -0174.jsonl
  (CCNet head bucket, CC-MAIN-2020-16; 10 + 10) and tests/data/provided/documents/
  000.json.gz (10 Common Crawl pages) at commit 669f534823b08d266a8fff01f8a1c916a5a56576;
- wiki_docs.txt: the English Wikipedia excerpt (../shared/data/wikipedia/
  enwiki-excerpt-pages-articles.xml.bz2) read by transforms.read.wikipedia
  (dump_pages, articles of namespace 0 without redirects, plain_text), its
  non-blank lines three a document, a blank line after each;
- /work/shared/data/sentences/en_ewt-ud-{dev,test}.paragraphs.txt (English Web
  Treebank: blogs, e-mails, reviews, answers; a paragraph a line);
- tests/data/wikitext2_valid.txt (60 articles, a sentence a line) and
  wikitext2_valid.raw.txt (a paragraph or heading a document).

    .venv/bin/python bench/quality_agreement.py /tmp/qa/data/*.jsonl \\
        tests/data/en_ewt-ud-test.paragraphs.txt [--dump /tmp/qa/decisions.jsonl]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Iterator

from bert_pretraining_data.transforms.quality import rules
from bert_pretraining_data.transforms.read.tables import text_document

DATATROVE_PYTHON = Path.home() / ".cache/bert-pretraining-data/clients/datatrove/bin/python"
RULE_SETS = {"c4": "c4", "gopher": "gopher", "fineweb": "fineweb", "all": "c4,gopher,fineweb"}
KINDS = ("only ours drops", "only datatrove drops")

# Runs in datatrove's venv: {"texts": {variant: text}} in, a line of decisions out.
WORKER = r'''
import json, sys, warnings
warnings.filterwarnings("ignore")
from datatrove.data import Document
from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter,
                                        GopherQualityFilter, GopherRepetitionFilter)
from datatrove.utils.text import PUNCTUATION_SET, split_into_sentences, split_into_words
c4 = ("c4", C4QualityFilter(min_words_per_line=5, min_num_sentences=3))
c4_lines = C4QualityFilter(min_words_per_line=5, min_num_sentences=-1)
rep, quality = ("repetition", GopherRepetitionFilter()), ("quality", GopherQualityFilter())
fineweb = ("fineweb", FineWebQualityFilter())
SETS = {"c4": [c4], "gopher": [rep, quality], "fineweb": [fineweb],
        "all": [c4, rep, quality, fineweb]}

def run(filters, text):
    doc = Document(text=text, id="0")
    for name, f in filters:
        try:
            result = f.filter(doc)
        except Exception as e:  # e.g. a division by zero words
            result = (False, "error " + type(e).__name__)
        if result is not True:
            return {"keep": False, "reason": name + ":" + result[1]}
    return {"keep": True, "reason": None, "text": doc.text}

def stats(text):
    words = split_into_words(text) if text else []
    meaningful = [w for w in words if any(c not in PUNCTUATION_SET for c in w)]
    doc = Document(text=text, id="0")
    sentences = (sum(len(split_into_sentences(l)) for l in doc.text.split("\n") if l)
                 if c4_lines.filter(doc) is True else None)
    return {"words": words, "meaningful": len(meaningful), "sentences": sentences}

for line in sys.stdin:
    texts = json.loads(line)["texts"]
    out = {v: {s: run(f, t) for s, f in SETS.items()} for v, t in texts.items()}
    kept = out["joined"]["c4"].get("text") or ""
    out["stats"] = {"joined": stats(texts["joined"]), "c4_kept": stats(kept)}
    print(json.dumps(out), flush=True)
'''


def read_corpus(path: Path) -> Iterator[tuple[str, str, list[str]]]:
    """(id, original text, the stripped non-blank lines the pipeline holds)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="ignore") as f:
        if ".json" in path.name:  # JSON Lines with a text field, read as tables.py does
            for number, row in enumerate(f):
                if row.strip():
                    record = json.loads(row)
                    document = text_document(record.get("text") or "")
                    if document is not None:
                        yield str(record.get("id", number)), record["text"], document[1]
            return
        block: list[str] = []  # text: a blank line ends a document
        for number, line in enumerate([*f, ""]):
            if line.strip():
                block.append(line.rstrip("\n"))
            elif block:
                yield f"{path.name}:{number - len(block)}", "\n".join(block), [
                    line.strip() for line in block]
                block = []


def ours(lines: list[str]) -> dict:
    decisions = {}
    for name, sets in RULE_SETS.items():
        d = rules.decide(lines, rules.QualityConfig.parse(sets))
        decisions[name] = {"keep": d.lines is not None, "reason": d.rule, "value": d.value,
                           "lines": d.lines}
    return decisions


def our_stats(text: str) -> dict:
    words = rules.words_of(text)
    meaningful = [w for w in words if not all(map(rules._symbolic, w))]
    lines = text.split("\n") if text else []
    config = rules.QualityConfig.parse("c4", {"c4_min_sentences": None})
    kept, page_rule, sentences, _ = rules._c4_lines(lines, config, Counter())
    return {"words": words, "meaningful": len(meaningful),
            "sentences": None if page_rule else sentences}


def datatrove(documents: list[dict], python: Path) -> list[dict]:
    stdin = "".join(json.dumps({"texts": d["texts"]}) + "\n" for d in documents)
    done = subprocess.run([str(python), "-c", WORKER], input=stdin, capture_output=True,
                          text=True, check=False)
    if done.returncode:
        sys.exit(f"datatrove's worker failed:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def kind(our_keep: bool, their_keep: bool) -> str:
    if our_keep == their_keep:
        return "both keep" if our_keep else "both drop"
    return KINDS[0] if their_keep else KINDS[1]


def show(text: str, width: int = 240) -> str:
    text = text.replace("\n", " ⏎ ")
    return text if len(text) <= width else text[:width] + "…"


def values(doc: dict, rule_set: str) -> str:
    """Both sides' counts on the text the rule set saw; the tokens only one makes."""
    seen = "c4_kept" if rule_set == "all" else "joined"
    a, b = doc["our_stats"][seen], doc["dt"]["stats"][seen]
    only_ours = Counter(a["words"]) - Counter(b["words"])
    only_theirs = Counter(b["words"]) - Counter(a["words"])
    return (f"words {len(a['words'])}/{len(b['words'])}, meaningful {a['meaningful']}/"
            f"{b['meaningful']}, C4 sentences {a['sentences']}/{b['sentences']} (ours/datatrove);"
            f" only ours {[w for w, _ in only_ours.most_common(6)]},"
            f" only datatrove {[w for w, _ in only_theirs.most_common(6)]}")


def report(corpus: str, documents: list[dict], examples: int) -> None:
    print(f"\n=== {corpus}: {len(documents)} documents "
          f"({sum('raw' in d['texts'] for d in documents)} whose original text differs)")
    for rule_set in RULE_SETS:
        confusion: Counter = Counter()
        pairs: Counter = Counter()
        shown: dict[str, list[str]] = {k: [] for k in KINDS}
        raw = Counter()
        c4_text_differs = 0
        for d in documents:
            a, b = d["ours"][rule_set], d["dt"]["joined"][rule_set]
            k = kind(a["keep"], b["keep"])
            confusion[k] += 1
            if "raw" in d["texts"]:
                raw[a["keep"] == d["dt"]["raw"][rule_set]["keep"]] += 1
            if k == "both keep" and rule_set in ("c4", "all") and \
                    "\n".join(a["lines"]) != b["text"]:
                c4_text_differs += 1
            if k in KINDS:
                pairs[(a["reason"], b["reason"])] += 1
                if len(shown[k]) < examples:
                    value = "" if a["value"] is None else f"={a['value']:.4g}"
                    shown[k].append(f"    [{d['id']}] ours {a['reason']}{value}, datatrove "
                                    f"{b['reason']}\n      {values(d, rule_set)}\n"
                                    f"      {show(d['texts']['joined'])}")
        n = len(documents)
        agree = confusion["both keep"] + confusion["both drop"]
        line = (f"{rule_set:8} agreement {100 * agree / n:6.2f}% ({agree}/{n}); both keep "
                f"{confusion['both keep']}, both drop {confusion['both drop']}, only ours drops "
                f"{confusion[KINDS[0]]}, only datatrove drops {confusion[KINDS[1]]}")
        if raw:
            line += f"; on the original text {100 * raw[True] / sum(raw.values()):.2f}% of {sum(raw.values())}"
        if c4_text_differs:
            line += f"; kept text differs in {c4_text_differs}"
        print(line)
        for (ours_reason, their_reason), count in pairs.most_common(6):
            print(f"    {count:4} x ours {ours_reason} / datatrove {their_reason}")
        for k in KINDS:
            if shown[k]:
                print(f"  {k}:\n" + "\n".join(shown[k]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpora", nargs="+", type=Path,
                        help="JSON Lines (.jsonl[.gz], a text field) or text (blank lines between documents)")
    parser.add_argument("--datatrove_python", type=Path, default=DATATROVE_PYTHON)
    parser.add_argument("--examples", type=int, default=5)
    parser.add_argument("--dump", type=Path, help="write every document's decisions here (JSON Lines)")
    args = parser.parse_args()
    everything: list[dict] = []
    for path in args.corpora:
        documents = []
        for doc_id, raw, lines in read_corpus(path):
            joined = "\n".join(lines)
            texts = {"joined": joined, **({"raw": raw} if raw != joined else {})}
            documents.append({"id": doc_id, "texts": texts, "ours": ours(lines)})
        for d, dt in zip(documents, datatrove(documents, args.datatrove_python), strict=True):
            d["dt"] = dt
            kept = d["ours"]["c4"]["lines"]
            d["our_stats"] = {"joined": our_stats(d["texts"]["joined"]),
                              "c4_kept": our_stats("\n".join(kept) if kept else "")}
        report(path.name, documents, args.examples)
        everything += [{"corpus": path.name, **d} for d in documents]
    if len(args.corpora) > 1:
        report("all corpora", everything, 0)
    if args.dump:
        with args.dump.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in everything)


if __name__ == "__main__":
    main()
