"""Sentence splitters on real text with gold boundaries: accuracy, speed, determinism.

Not a test: it prints figures (bench/SENTENCE_SPLITTERS.md has the latest run).
The gold is Universal Dependencies (English EWT dev/test, Chinese GSD test), as
laid out by `shared/data/sentences/make_sentence_files.py`: each line of
`NAME.paragraphs.txt` is the gold sentences of one paragraph joined with a space
(English) or nothing (Chinese). The grouping is rebuilt from `NAME.conllu`
(`# newpar` / `# newdoc`, or blocks of 5 where a treebank has no paragraphs) and
checked against both text files.

Candidates are optional packages, not project dependencies: install them into a
directory of their own and pass it with `--site` (it goes first on sys.path);
one that cannot be imported is skipped with the reason.

    .venv/bin/pip install --target /tmp/splitters-work/site pysbd blingfire syntok nltk
    .venv/bin/python bench/sentence_splitters.py --site /tmp/splitters-work/site

Accuracy: a boundary is the offset, in non-whitespace characters from the
paragraph's start, where a sentence ends inside its paragraph (the paragraph's
own end is not one). Predicted pieces are mapped the same way, so a splitter
may strip or rewrite whitespace; one that changes other characters is flagged.
P/R/F1 are micro-averaged over boundaries; `exact` is the share of paragraphs
whose boundary set is exactly the gold one (single-sentence paragraphs
included: they are exact when nothing is split); `R.!?` is the recall on the
gold boundaries whose sentence ends in . ! ? (closing quotes/brackets allowed),
the ones a punctuation-driven splitter can hope to find.

`--datasets` also takes a path stem (`/tmp/x/en_gum-written`) to another
NAME.conllu run through make_sentence_files.py.

Speed: `time.process_time` in this one process over the paragraphs repeated
to at least `--min-mb` MB (10^6 bytes of UTF-8), one call per paragraph, the
best of `--rounds`. Punkt's training is timed separately.

Determinism: the pieces of every paragraph, twice in this process (the second
time from a fresh instance, re-trained for Punkt), and once in each of two
child processes with different PYTHONHASHSEEDs; all four digests must agree.

Run-time needs: in the first child process, an audit hook records, from the
import through setup and a first call, every file opened that is not Python
source/bytecode, every shared library loaded through ctypes, and every socket
or urllib event (none is installed in the process that times).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "sentences"
DATASETS = ("en_ewt-ud-test", "en_ewt-ud-dev", "zh_gsd-ud-test")
NON_SPACE = re.compile(r"\S")
SPACE = re.compile(r"\s+")

# ---------------------------------------------------------------- gold data


@dataclass
class Dataset:
    name: str
    lang: str                      # "en" or "zh"
    paragraphs: list[str]          # the text to split, one paragraph each
    gold: list[list[str]]          # the gold sentences of each paragraph

    @property
    def megabytes(self) -> float:
        return sum(len(p.encode("utf-8")) for p in self.paragraphs) / 1e6


def _conllu_paragraphs(path: pathlib.Path, group: int) -> list[list[str]]:
    """Gold sentences grouped in paragraphs, as make_sentence_files.py groups them."""
    sents, newdoc, newpar, text = [], False, False, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# newdoc"):
                newdoc = True
            elif line.startswith("# newpar"):
                newpar = True
            elif line.startswith("# text = "):
                text = line[len("# text = "):]
            elif not line.strip() and text is not None:
                sents.append((newdoc, newpar, text))
                newdoc = newpar = False
                text = None
    if text is not None:
        sents.append((newdoc, newpar, text))
    has_par = any(p for _, p, _ in sents)
    paragraphs: list[list[str]] = []
    for i, (newdoc, newpar, text) in enumerate(sents):
        if not paragraphs or newdoc or newpar or (not has_par and i % group == 0):
            paragraphs.append([])
        paragraphs[-1].append(text)
    return paragraphs


def load(data: pathlib.Path, name: str) -> Dataset:
    """NAME in `data`, or a path without suffix to files made by make_sentence_files.py."""
    stem = pathlib.Path(name) if os.sep in name else data / name
    name = stem.name
    lang = "zh" if name.startswith("zh") else "en"
    joiner = "" if lang == "zh" else " "

    def lines(suffix: str) -> list[str]:
        text = stem.with_name(f"{name}.{suffix}.txt").read_text(encoding="utf-8")
        return [line for line in text.split("\n") if line.strip()]

    paragraphs, sentences = lines("paragraphs"), lines("sentences")
    gold = _conllu_paragraphs(stem.with_name(f"{name}.conllu"), group=5)
    # the three files must tell the same story
    assert [joiner.join(g) for g in gold] == paragraphs, f"{name}: paragraphs differ"
    assert [s for g in gold for s in g] == sentences, f"{name}: sentences differ"
    return Dataset(name, lang, paragraphs, gold)


# ---------------------------------------------------------------- scoring


def boundaries(paragraph: str, pieces: list[str]) -> tuple[set[int], bool]:
    """Internal boundaries of `pieces` in non-space characters; and whether the
    pieces, spaces aside, are exactly the paragraph's text."""
    ends, total = set(), 0
    for piece in pieces:
        n = len(NON_SPACE.findall(piece))
        if n:
            total += n
            ends.add(total)
    kept = SPACE.sub("", "".join(pieces)) == SPACE.sub("", paragraph)
    ends.discard(total)
    return ends, kept


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    exact: int = 0
    paragraphs: int = 0
    pieces: int = 0
    gold_sentences: int = 0
    altered: int = 0               # paragraphs whose non-space text changed
    # gold boundaries after . ! ? (closing quotes/brackets allowed) vs all others
    punct_found: int = 0
    punct_total: int = 0
    errors: list = field(default_factory=list)

    def f(self) -> tuple[float, float, float]:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0
        return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


PUNCT_END = re.compile(r"[.!?][\"'”’)\]]*$")


def score(ds: Dataset, outputs: list[list[str]], keep_errors: int = 0) -> Score:
    s = Score()
    for paragraph, gold, pieces in zip(ds.paragraphs, ds.gold, outputs, strict=True):
        want, _ = boundaries(paragraph, gold)
        got, kept = boundaries(paragraph, pieces)
        s.tp += len(want & got)
        s.fp += len(got - want)
        s.fn += len(want - got)
        s.exact += want == got
        s.paragraphs += 1
        s.pieces += len([p for p in pieces if p.strip()])
        s.gold_sentences += len(gold)
        s.altered += not kept
        total = 0
        for sentence in gold[:-1]:
            total += len(NON_SPACE.findall(sentence))
            if PUNCT_END.search(sentence.rstrip()):
                s.punct_total += 1
                s.punct_found += total in got
        if want != got and len(s.errors) < keep_errors:
            s.errors.append((gold, pieces))
    return s


# ---------------------------------------------------------------- candidates

Split = Callable[[str], list[str]]

# after 。 ｡ ！ ？ ﹗ ﹖ (one or more), with any closing quotes/brackets kept
CJK_END = re.compile(r"[。｡！？﹗﹖]+[」』”’）)\]】〕〉》〗〙〛\"']*")
REGEX_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def cjk_split(text: str) -> list[str]:
    pieces, start = [], 0
    for m in CJK_END.finditer(text):
        pieces.append(text[start:m.end()])
        start = m.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _none(ds):
    return lambda text: [text]


def _cjk_then(make):
    """The CJK rule first, then an English splitter on each piece: the composition a
    mixed corpus needs."""
    def make_both(ds):
        english = make(ds)
        return lambda text: [s for piece in cjk_split(text) for s in english(piece)]
    return make_both


def _regex(ds):
    return REGEX_BOUNDARY.split


def _cjk(ds):
    return cjk_split


def _pysbd(lang):
    def make(ds):
        import pysbd
        seg = pysbd.Segmenter(language=lang, clean=False)
        return seg.segment
    return make


def _blingfire(ds):
    import blingfire

    def split(text: str) -> list[str]:
        return blingfire.text_to_sentences(text).split("\n")
    return split


def _syntok(ds):
    from syntok import segmenter

    def split(text: str) -> list[str]:
        # the original text of each sentence, from its first to its last token
        return [text[s[0].offset:s[-1].offset + len(s[-1].value)]
                for paragraph in segmenter.analyze(text) for s in paragraph]
    return split


TRAINING: dict[str, float] = {}


def _punkt_trained(ds):
    """Punkt trained, unsupervised, on the paragraphs it will split (no gold used)."""
    from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTrainer
    text = "\n".join(ds.paragraphs)
    start = time.process_time()
    trainer = PunktTrainer()
    trainer.train(text, finalize=True)
    tokenizer = PunktSentenceTokenizer(trainer.get_params())
    TRAINING[ds.name] = time.process_time() - start
    return tokenizer.tokenize


def _punkt_untrained(ds):
    """Punkt with empty parameters: its rules alone, no training and no model."""
    from nltk.tokenize.punkt import PunktSentenceTokenizer
    return PunktSentenceTokenizer().tokenize


def _punkt_english(ds):
    """nltk's pretrained English model, only if it is on disk: never downloaded."""
    import nltk.data
    from nltk.tokenize.punkt import PunktTokenizer
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        raise ImportError("nltk's pretrained 'punkt_tab/english' is not on disk "
                          f"(searched {len(nltk.data.path)} nltk_data paths; no pip package "
                          "ships it, and this benchmark downloads nothing)") from None
    return PunktTokenizer("english").tokenize


@dataclass
class Candidate:
    name: str
    make: Callable[[Dataset], Split]
    module: str | None               # the import that must work
    langs: tuple[str, ...] = ("en", "zh")


CANDIDATES = [
    Candidate("none", _none, None),
    Candidate("regex", _regex, None),
    Candidate("pysbd", _pysbd("en"), "pysbd"),
    Candidate("pysbd-zh", _pysbd("zh"), "pysbd", ("zh",)),
    Candidate("blingfire", _blingfire, "blingfire"),
    Candidate("syntok", _syntok, "syntok"),
    Candidate("punkt-trained", _punkt_trained, "nltk"),
    Candidate("punkt-untrained", _punkt_untrained, "nltk"),
    Candidate("punkt-english", _punkt_english, "nltk"),
    Candidate("cjk-rule", _cjk, None),
    Candidate("cjk+blingfire", _cjk_then(_blingfire), "blingfire"),
    Candidate("cjk+syntok", _cjk_then(_syntok), "syntok"),
]
PACKAGES = {"pysbd": "pysbd", "blingfire": "blingfire", "syntok": "syntok", "nltk": "nltk"}


# ---------------------------------------------------------------- run-time needs

_AUDIT: list | None = None
_IGNORED = (".py", ".pyc", ".pth")


def _audit(event: str, args: tuple) -> None:
    if _AUDIT is None:
        return
    if event == "open":
        path = args[0]
        if isinstance(path, (str, bytes, os.PathLike)):
            path = os.fsdecode(path)
            if not path.endswith(_IGNORED) and not os.path.isdir(path) \
                    and "__pycache__" not in path and not path.startswith("/proc/"):
                _AUDIT.append(("file", path))
    elif event == "ctypes.dlopen":
        _AUDIT.append(("dlopen", str(args[0])))
    elif event.startswith(("socket.", "urllib.", "http.")):
        _AUDIT.append(("network", event))


IMPORT_EVENTS: dict[str, list] = {}


def _audited(fn, *a):
    """fn(*a), and the audit events it raised."""
    global _AUDIT
    _AUDIT = []
    try:
        result = fn(*a)
    finally:
        seen, _AUDIT = _AUDIT, None
    return result, seen


def runtime_needs(cand: Candidate, ds: Dataset, site: str | None) -> str:
    """What the first import, the setup and a first call touched."""
    def setup_and_call():
        cand.make(ds)(ds.paragraphs[0])
    _, seen = _audited(setup_and_call)
    seen = IMPORT_EVENTS.get(cand.module, []) + seen
    short = []
    for kind, p in seen:
        if kind in ("file", "dlopen") and p != "None":  # dlopen(None): the process itself
            if site and p.startswith(site):
                p = p[len(site):].lstrip("/")
            if p not in short:
                short.append(p)
    net = sorted({p for kind, p in seen if kind == "network"})
    return ("NETWORK: " + ",".join(net) + "; " if net else "") + (
        "reads " + ", ".join(short) if short else "nothing")


# ---------------------------------------------------------------- measuring


def run_all(split: Split, paragraphs: list[str]) -> list[list[str]]:
    return [list(split(p)) for p in paragraphs]


def digest(outputs: list[list[str]]) -> str:
    return hashlib.sha256(json.dumps(outputs, ensure_ascii=False).encode()).hexdigest()[:16]


def speed(split: Split, paragraphs: list[str], min_mb: float, rounds: int) -> tuple[float, float]:
    size = sum(len(p.encode("utf-8")) for p in paragraphs)
    times = max(1, -(-int(min_mb * 1e6) // size))
    work = paragraphs * times
    mb = size * times / 1e6
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for p in work:
            split(p)
        best = min(best, time.process_time() - start)
    return mb / best, mb


def importable(cand: Candidate) -> str | None:
    """None, or why the candidate's module cannot be imported (import audited once)."""
    if cand.module is None:
        return None
    try:
        if cand.module not in IMPORT_EVENTS:
            _, IMPORT_EVENTS[cand.module] = _audited(__import__, cand.module)
        else:
            __import__(cand.module)
    except Exception as e:  # noqa: BLE001 - any failure means "skip it"
        return f"{type(e).__name__}: {e}"
    return None


def child_digests(args, seed: str) -> dict:
    cmd = [sys.executable, __file__, "--digests-only", "--data", str(args.data),
           "--datasets", ",".join(args.datasets), "--candidates", ",".join(args.candidates)]
    if args.site:
        cmd += ["--site", args.site]
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def versions(site: str | None) -> list[str]:
    from importlib import metadata
    rows = []
    for module, dist in PACKAGES.items():
        try:
            v = metadata.version(dist)
            mod = sys.modules.get(module) or __import__(module)
            where = os.path.dirname(os.path.dirname(mod.__file__))
            rows.append(f"{dist} {v} ({where})")
        except Exception as e:  # noqa: BLE001
            rows.append(f"{dist}: not importable ({type(e).__name__})")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", help="directory the candidates were pip-installed into "
                        "(--target); put first on sys.path")
    parser.add_argument("--data", type=pathlib.Path, default=DEFAULT_DATA,
                        help="folder with NAME.conllu/.sentences.txt/.paragraphs.txt")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--candidates", default=",".join(c.name for c in CANDIDATES))
    parser.add_argument("--min-mb", type=float, default=5.0,
                        help="repeat the paragraphs to at least this many MB for speed")
    parser.add_argument("--rounds", type=int, default=3, help="speed: best of this many")
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--no-children", action="store_true",
                        help="skip the two child processes of the determinism check")
    parser.add_argument("--errors", type=int, default=0,
                        help="print this many wrongly split paragraphs per candidate")
    parser.add_argument("--digests-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.datasets = [d for d in args.datasets.split(",") if d]
    args.candidates = [c for c in args.candidates.split(",") if c]
    if args.site:
        args.site = os.path.abspath(args.site)
        sys.path.insert(0, args.site)
    chosen = [c for c in CANDIDATES if c.name in args.candidates]
    unknown = set(args.candidates) - {c.name for c in CANDIDATES}
    if unknown:
        parser.error(f"unknown candidates: {', '.join(sorted(unknown))}")
    datasets = [load(args.data, name) for name in args.datasets]

    if args.digests_only:
        # a fresh process: the audit hook sees imports too, and costs the timings nothing
        sys.addaudithook(_audit)
        result = {}
        for cand in chosen:
            if importable(cand):
                continue
            for ds in datasets:
                if ds.lang in cand.langs:
                    try:
                        needs = runtime_needs(cand, ds, args.site)
                    except ImportError:
                        continue
                    result[f"{cand.name}/{ds.name}"] = {
                        "digest": digest(run_all(cand.make(ds), ds.paragraphs)),
                        "needs": needs}
        print(json.dumps(result))
        return

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f} at start")
    for ds in datasets:
        boundaries_total = sum(len(g) - 1 for g in ds.gold)
        multi = sum(len(g) > 1 for g in ds.gold)
        punct = sum(bool(PUNCT_END.search(x.rstrip())) for g in ds.gold for x in g[:-1])
        print(f"{ds.name}: {len(ds.paragraphs)} paragraphs ({multi} with 2+ sentences), "
              f"{sum(len(g) for g in ds.gold)} sentences, {boundaries_total} boundaries "
              f"({punct} after . ! ?), "
              f"{ds.megabytes * 1e3:.1f} kB")
    skipped = {}
    for cand in chosen:
        reason = importable(cand)
        if reason:
            skipped[cand.name] = reason
            print(f"skip {cand.name}: not importable ({reason})")
    print("packages: " + "; ".join(versions(args.site)))

    children = {}
    if not args.no_children:
        children = {seed: child_digests(args, seed) for seed in ("1", "2")}

    header = (f"{'dataset':<15} {'splitter':<16} {'P':>6} {'R':>6} {'F1':>6} {'exact':>6} "
              f"{'R.!?':>6} {'pieces/gold':>12} {'MB/s':>7} {'det':>4}  run-time needs")
    rows, extra = [], []
    for ds in datasets:
        for cand in chosen:
            if cand.name in skipped or ds.lang not in cand.langs:
                continue
            try:
                split = cand.make(ds)
            except ImportError as e:
                if cand.name not in skipped:
                    skipped[cand.name] = str(e)
                    print(f"skip {cand.name}: {e}")
                continue
            first = run_all(split, ds.paragraphs)
            again = run_all(cand.make(ds), ds.paragraphs)
            digests = {digest(first), digest(again)}
            key = f"{cand.name}/{ds.name}"
            for child in children.values():
                digests.add(child.get(key, {}).get("digest", "missing"))
            needs = children["1"][key]["needs"] if children else "-"
            det = "yes" if len(digests) == 1 else "NO"
            s = score(ds, first, args.errors)
            p, r, f1 = s.f()
            mbs = ""
            if not args.no_speed:
                rate, mb = speed(split, ds.paragraphs, args.min_mb, args.rounds)
                mbs = f"{rate:.3f}" if rate < 10 else f"{rate:.1f}"
            punct = f"{s.punct_found / s.punct_total:.3f}" if s.punct_total else "-"
            prec = f"{p:.3f}" if p == p else "-"  # nothing predicted: no precision
            row = (f"{ds.name:<15} {cand.name:<16} {prec:>6} {r:>6.3f} {f1:>6.3f} "
                   f"{s.exact / s.paragraphs:>6.1%} {punct:>6} "
                   f"{s.pieces:>5}/{s.gold_sentences:<6} {mbs:>7} {det:>4}  {needs}")
            if s.altered:
                row += f"  [text changed in {s.altered} paragraphs]"
            print(row, flush=True)
            rows.append(row)
            if cand.name == "punkt-trained":
                extra.append(f"punkt-trained on {ds.name}: training {TRAINING[ds.name]:.2f} CPU s "
                             f"for {ds.megabytes:.3f} MB")
            for gold, pieces in s.errors:
                print("    gold: " + " | ".join(gold))
                print("    got:  " + " | ".join(p.strip() for p in pieces))
    print()
    print(header)
    for row in rows:
        print(row)
    for line in extra:
        print(line)
    if not args.no_speed:
        print(f"speed: one core (process_time), paragraphs repeated to >= {args.min_mb:g} MB, "
              f"best of {args.rounds}; load {os.getloadavg()[0]:.2f} at end")
    for name, reason in skipped.items():
        print(f"skipped {name}: {reason}")


if __name__ == "__main__":
    main()
