"""The duplicate rate of each real corpus: documents `--dedup=exact` and
`--dedup=near` would remove, by the stage's own functions, in one process.

Corpora are read as the pipeline reads them: text files one sentence (or
paragraph) per line with blank lines between documents; the Wikipedia dump
as `--input_format=wikipedia` converts its articles.

    python bench/dedup_rates.py                        # tests/data
    python bench/dedup_rates.py ../shared/data         # and the shared data
"""

from __future__ import annotations

import bz2
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from bench.corpus import read_documents  # noqa: E402
from bench.dedup_eval import deduplicate  # noqa: E402
from bert_pretraining_data.transforms.read.tables import text_document  # noqa: E402
from bert_pretraining_data.transforms.read.wikipedia import (  # noqa: E402
    ARTICLE_NAMESPACE, dump_pages, plain_text)

TEXT_SUFFIXES = (".txt",)
DUMP_SUFFIX = ".xml.bz2"


def dump_documents(path: pathlib.Path) -> list[tuple[str, list[str]]]:
    """A dump's articles as (key, paragraphs), as ReadDump makes them."""
    documents = []
    with bz2.open(path) as handle:
        for page in dump_pages(handle):
            if page.namespace == ARTICLE_NAMESPACE and not page.redirect and (page.text or "").strip():
                document = text_document(plain_text(page.text))
                if document is not None:
                    documents.append(document)
    return documents


def corpora(directory: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in directory.rglob("*")
                  if p.name.endswith(TEXT_SUFFIXES + (DUMP_SUFFIX,)) and "vocab" not in p.name
                  and "golden" not in str(p))


def main(argv: list[str]) -> None:
    directories = [pathlib.Path(a) for a in argv] or [ROOT / "tests" / "data"]
    print(f"{'corpus':<52}{'documents':>10}{'exact':>8}{'rate':>8}{'near':>8}{'rate':>8}")
    for directory in directories:
        for path in corpora(directory):
            documents = (dump_documents(path) if path.name.endswith(DUMP_SUFFIX)
                         else read_documents(path))
            # kept: one key per kept document (identical texts keyed by hash share one).
            exact = len(documents) - len(deduplicate(documents, mode="exact").kept)
            near = len(documents) - len(deduplicate(documents, mode="near").kept)
            name = str(path.relative_to(directory.parent))
            print(f"{name:<52}{len(documents):>10,}{exact:>8,}{exact / len(documents):>8.2%}"
                  f"{near:>8,}{near / len(documents):>8.2%}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
