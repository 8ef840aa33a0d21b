"""A pre-training mixture (`--mixture=mixture.json`): several corpora, the
sources, read in one run, each with its own input flags and a weight.

    {"sources": [{"name": "wiki", "input_file": "wiki/*.txt", "weight": 2},
                 {"name": "web", "input_file": ["web/a.jsonl", "web/b.jsonl"],
                  "input_format": "jsonl", "weight": 0.4}]}

A source without `input_format` takes the one its files' names say
(transforms.read.input_formats: `.xml.bz2`, `.jsonl.gz`, `.parquet`), else the
command line's. A source may name its own web-text filters (`quality_filters`,
`languages`, `language_threshold`; null: none), checked by the quality stage's
parsers before the run; the command line's apply otherwise. In place of the weights, `"alpha": 0.3` (and optionally
`"total_tokens"`): temperature sampling as XLM-R's, each source's share of output tokens
q_i = p_i^alpha / sum_j p_j^alpha from the tokens it holds after dedup
(transforms.instances.mixture). YAML reads too (JSON is YAML).

A document of source i is keyed `NNNN-name/key` (NNNN = i, zero-padded): keys of
two sources never collide, a document's seeds depend on its source, and the
dedup stage, which keeps the smallest key of a group of copies, keeps the
copy of the first-listed source.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

import yaml

from bert_pretraining_data.transforms.read.documents import InputError, comma_separated
from bert_pretraining_data.transforms.read.input_formats import format_of_names

# The flags a source may set for itself; the command line's apply otherwise.
INPUT_FLAGS = ("input_format", "text_field", "sentence_splitter")
FILTER_FLAGS = ("quality_filters", "languages", "language_threshold")
SOURCE_KEYS = ("name", "input_file", "weight", *INPUT_FLAGS, *FILTER_FLAGS)
MIXTURE_KEYS = ("sources", "alpha", "total_tokens")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_INDEX_DIGITS = 4
MAX_SOURCES = 10 ** _INDEX_DIGITS


class MixtureError(InputError):
    """A mixture file that cannot be used; one line naming the fix."""


@dataclasses.dataclass(frozen=True)
class Source:
    """One corpus of the mixture: where it is, how it is read, its weight
    (copies per document; None: decided by the mixture's alpha)."""

    name: str
    input_file: str  # comma-separated patterns, as --input_file
    input_format: str
    text_field: str
    sentence_splitter: str
    weight: float | None
    quality_filters: str | None = None
    languages: str | None = None
    language_threshold: float | None = None


def input_sources(flags: Any, mixture: Mixture | None) -> tuple[Source, ...]:
    """What a run reads: a mixture's sources, or, without one, --input_file
    read with the input flags (`flags`, the run's config) as one source."""
    if mixture:
        return mixture.sources
    return (Source(name="input", input_file=flags.input_file, weight=1.0,
                   **{flag: getattr(flags, flag) for flag in (*INPUT_FLAGS, *FILTER_FLAGS)}),)


@dataclasses.dataclass(frozen=True)
class Mixture:
    """The sources in the order listed (the first keeps a copy two share),
    and alpha (temperature sampling) when the weights are derived."""

    sources: tuple[Source, ...]
    alpha: float | None = None
    total_tokens: int | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(source.name for source in self.sources)

    def to_json(self) -> dict[str, Any]:
        """The mixture as the manifest records it."""
        return dataclasses.asdict(self)


def source_key(index: int, name: str, key: str) -> str:
    """A source's document key as the run keys it."""
    return f"{index:0{_INDEX_DIGITS}d}-{name}/{key}"


def source_of(key: str) -> int:
    """The source index of a key made by `source_key`."""
    return int(key[:_INDEX_DIGITS])


def _fail(where: str, message: str) -> MixtureError:
    return MixtureError(f"{where}: {message}")


def _patterns(value: Any, where: str) -> str:
    """`input_file` as a comma-separated string (a list reads too)."""
    if isinstance(value, str) and value.strip():
        return value
    if (isinstance(value, list) and value
            and all(isinstance(item, str) and item.strip() for item in value)):
        return ",".join(value)
    raise _fail(where, "input_file must be a pattern, a comma-separated list of them or a "
                "list of them")


def _number(value: Any, where: str, name: str, *, minimum: float = 0.0,
            strict: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(where, f"{name} must be a number, got {value!r}")
    if value < minimum or (strict and value == minimum):
        bound = f"above {minimum:g}" if strict else f"at least {minimum:g}"
        raise _fail(where, f"{name} must be {bound}, got {value!r}")
    return float(value)


def _filter_value(entry: dict, flag: str, default: Any, where: str) -> Any:
    """A source's filter flag: its own (a comma list or a list of names, a
    threshold; null for none), else the command line's."""
    if flag not in entry:
        return default
    value = entry[flag]
    if value is None:
        return None
    if flag == "language_threshold":
        return _number(value, where, flag)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        value = ",".join(value)
    if not isinstance(value, str):
        raise _fail(where, f"{flag} must be a comma-separated list or a list of names, or null, "
                    f"got {value!r}")
    return value


def parse_mixture(text: str, path: str, defaults: dict[str, Any],
                  choices: dict[str, Sequence[str]], default_splitter: str) -> Mixture:
    """A mixture file's text -> Mixture, or a one-line MixtureError naming
    the fix. `defaults`: the command line's input and filter flags; `choices`: the
    values each input flag takes; `default_splitter`: the sentence splitter
    of a source that names a format other than text and no splitter."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise _fail(path, f"not JSON or YAML ({' '.join(str(err).split())[:120]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("sources"), list) or not data[
            "sources"]:
        raise _fail(path, 'a mixture is {"sources": [{"name": ..., "input_file": ..., '
                    '"weight": ...}, ...]} with one source or more')
    unknown = sorted(set(data) - set(MIXTURE_KEYS))
    if unknown:
        raise _fail(path, f"unknown key {unknown[0]!r}; a mixture has {', '.join(MIXTURE_KEYS)}")
    alpha = data.get("alpha")
    if alpha is not None:
        alpha = _number(alpha, path, "alpha", strict=True)
    total_tokens = data.get("total_tokens")
    if total_tokens is not None:
        if alpha is None:
            raise _fail(path, "total_tokens scales the shares alpha decides; add alpha, or "
                        "give each source a weight")
        total_tokens = int(_number(total_tokens, path, "total_tokens", minimum=1))
    if len(data["sources"]) > MAX_SOURCES:
        raise _fail(path, f"at most {MAX_SOURCES:,} sources, got {len(data['sources']):,}")
    sources, names = [], set()
    for number, entry in enumerate(data["sources"], 1):
        where = f"{path}: source {number}"
        if not isinstance(entry, dict):
            raise _fail(where, "a source is an object with a name and an input_file")
        unknown = sorted(set(entry) - set(SOURCE_KEYS))
        if unknown:
            raise _fail(where, f"unknown key {unknown[0]!r}; a source has "
                        f"{', '.join(SOURCE_KEYS)}")
        name = entry.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise _fail(where, "name must be letters, digits, '_', '.' or '-' (a folder "
                        f"and a key prefix), got {name!r}")
        where = f"{path}: source {name!r}"
        if name in names:
            raise _fail(where, "two sources have this name; give each its own")
        names.add(name)
        if "input_file" not in entry:
            raise _fail(where, "input_file is missing")
        weight = entry.get("weight")
        if weight is not None and alpha is not None:
            raise _fail(where, "a weight and the mixture's alpha both decide its copies; "
                        "give weights or alpha, not both")
        patterns = _patterns(entry["input_file"], where)
        # The source's own flags: its keys, and the format its files' names say
        # where that is not the command line's (whose splitter then applies).
        named = format_of_names(comma_separated(patterns))
        own = {**({"input_format": named} if named not in (None, defaults["input_format"])
                  else {}), **entry}
        flags = {}
        for flag in INPUT_FLAGS:
            value = own.get(flag, defaults[flag])
            if flag == "sentence_splitter" and flag not in own and "input_format" in own:
                value = "none" if flags["input_format"] == "text" else default_splitter
            if value not in choices.get(flag, (value,)):
                raise _fail(where, f"{flag} must be one of {', '.join(choices[flag])}, got "
                            f"{value!r}")
            flags[flag] = value
        sources.append(Source(
            name=name, input_file=patterns,
            weight=(None if alpha is not None else
                    1.0 if weight is None else _number(weight, where, "weight")),
            **flags, **{flag: _filter_value(entry, flag, defaults.get(flag), where)
                        for flag in FILTER_FLAGS}))
    if all(source.weight == 0 for source in sources):
        raise _fail(path, "every weight is 0: the mixture would write nothing")
    return Mixture(tuple(sources), alpha=alpha, total_tokens=total_tokens)
