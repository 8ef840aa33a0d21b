"""Which characters each Python's Unicode database tokenizes differently, and how
often a corpus holds them.

Not a test: it prints figures. The tokenizer follows Python's own Unicode
database, as the original does (categories for punctuation, whitespace and
control characters, NFD for accent stripping, str.lower), and each Python minor
version ships another Unicode version. Every code point is tokenized, between
two letters, by the package installed in each given interpreter (any install
with the base dependencies: `pip install dist/bert_pretraining_data-*.whl`); the
code points whose words or pieces differ between two interpreters are listed,
then counted in the given corpora (text, or .bz2 such as a Wikipedia dump).

    python bench/unicode_versions.py --python venv-3.10/bin/python \\
        --python venv-3.11/bin/python --python venv-3.13/bin/python corpus.txt dump.xml.bz2
"""

from __future__ import annotations

import argparse
import bz2
import collections
import pathlib
import subprocess
import sys
import tempfile

# Run in each interpreter: one line per code point (surrogates left out), what
# the tokenizer makes of "a<char>b": its words, then each word's pieces lower-
# cased and cased. JSON with ASCII escapes, not repr(), whose escaping of a
# character itself follows the Unicode database.
_PROBE = r"""
import json, sys, unicodedata
from bert_pretraining_data.transforms.handoff.words import split_words
from bert_pretraining_data.transforms.tokenize.wordpiece import basic_pieces
with open(sys.argv[1], "w", encoding="ascii") as out:
    out.write(unicodedata.unidata_version + "\n")
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        words = split_words(f"a{chr(cp)}b")
        out.write(json.dumps([words, [basic_pieces(w, do_lower_case=True) for w in words],
                              [basic_pieces(w, do_lower_case=False) for w in words]]) + "\n")
"""
_CODE_POINTS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def _signatures(python: str, work: pathlib.Path) -> tuple[str, str, list[str]]:
    """(Python version, Unicode version, one signature per code point)."""
    path = work / f"{len(list(work.iterdir()))}.txt"
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([python, "-c", _PROBE, str(path)], check=True)
    unicode, *lines = path.read_text(encoding="ascii").splitlines()
    return version, unicode, lines


def _read(path: str) -> str:
    opener = bz2.open if path.endswith(".bz2") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        return handle.read()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", required=True,
                        help="an interpreter with this package installed (repeat)")
    parser.add_argument("corpora", nargs="*", help="text or .bz2 files to count them in")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        runs = [_signatures(python, pathlib.Path(work)) for python in args.python]
    differing: set[str] = set()
    for (a, ua, sa), (b, ub, sb) in zip(runs, runs[1:]):
        changed = [cp for cp, x, y in zip(_CODE_POINTS, sa, sb) if x != y]
        differing.update(map(chr, changed))
        shown = " ".join(f"U+{cp:04X}" for cp in changed[:8])
        print(f"Python {a} (Unicode {ua}) vs {b} (Unicode {ub}): {len(changed)} code points "
              f"tokenize differently{': ' + shown if changed else ''}"
              f"{' ...' if len(changed) > 8 else ''}")
    print(f"in all: {len(differing)} code points")
    for corpus in args.corpora:
        text = _read(corpus)
        found = collections.Counter(char for char in text if char in differing)
        print(f"{corpus}: {len(text):,} characters, {sum(found.values())} of them among those"
              + (f" ({', '.join(f'U+{ord(c):04X} x{n}' for c, n in found.most_common(5))})"
                 if found else ""))


if __name__ == "__main__":
    sys.exit(main())
