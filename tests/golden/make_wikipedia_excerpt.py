#!/usr/bin/env python
"""Cut tests/data/enwiki-excerpt-small.xml.bz2 from ../shared's real dump excerpt.

Keeps the dump's head (<mediawiki>, <siteinfo>), the first pages up to and
including the 12th article (namespace 0, not a redirect), the redirects
among them, the namespace-4 page wherever it is, and the closing tag:
byte-identical <page> elements of the real `pages-articles` dump, bzip2'ed.

    python tests/golden/make_wikipedia_excerpt.py \\
        --source ../shared/data/wikipedia/enwiki-excerpt-pages-articles.xml.bz2
"""

from __future__ import annotations

import argparse
import bz2
import pathlib
import re

OUT = pathlib.Path(__file__).resolve().parents[1] / "data" / "enwiki-excerpt-small.xml.bz2"
ARTICLES = 12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, type=pathlib.Path)
    args = parser.parse_args()
    xml = bz2.decompress(args.source.read_bytes()).decode("utf-8")
    head, rest = xml.split("  <page>", 1)
    pages = ["  <page>" + page for page in rest.split("  <page>")]
    pages[-1], tail = pages[-1].split("</mediawiki>")
    kept, articles = [], 0
    for page in pages:
        namespace = re.search(r"<ns>(\d+)</ns>", page).group(1)
        article = namespace == "0" and "<redirect" not in page
        if namespace != "0" or articles < ARTICLES:
            kept.append(page)
            articles += article
    OUT.write_bytes(bz2.compress((head + "".join(kept) + "</mediawiki>" + tail).encode(), 9))
    print(f"{OUT}: {len(kept)} pages, {articles} articles, {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
