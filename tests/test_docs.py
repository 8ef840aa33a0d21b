"""The documentation's relative links resolve, and README stays short.

Every Markdown link `[text](target)` in README.md, docs/*.md, bench/README.md and
bench/HISTORY.md whose target is not a URL (http, https, mailto) must name a file or folder
that exists relative to the linking file; a `#anchor` must match a heading of
the target (GitHub's slugs). Links inside code (fenced blocks, indented blocks,
`inline code`) are not links and are skipped.
"""

from __future__ import annotations

import os
import pathlib
import re
import unicodedata

ROOT = pathlib.Path(__file__).resolve().parents[1]
README_MAX_LINES = 300

# [text](target) or [text](target "title"); the text may hold `code` or nested [..].
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = ("http://", "https://", "mailto:")


def documents() -> list[pathlib.Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            ROOT / "bench" / "README.md", ROOT / "bench" / "HISTORY.md"]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced and indented code blocks, inline code blanked
    (one entry per line of `text`, so that line numbers stay)."""
    lines: list[str] = []
    fence, indented, previous_blank = "", False, True
    for line in text.splitlines():
        stripped = line.lstrip()
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if fence:
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
                fence = ""
            lines.append("")
            continue
        if marker:
            fence = marker.group(1)
            lines.append("")
            continue
        if stripped and line.startswith("    ") and (indented or previous_blank):
            indented = True  # an indented code block: blank lines do not end it
            lines.append("")
            continue
        if stripped:
            indented = False
        previous_blank = not stripped
        lines.append(INLINE_CODE.sub("", line))
    return lines


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: links and code reduced to their text,
    lower-cased, punctuation dropped (letters, digits, spaces, - and _ kept),
    spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").strip().lower()
    kept = "".join(c for c in text
                   if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    """Every heading anchor of a Markdown file, duplicates numbered as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines_keeping_code_in_headings(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def prose_lines_keeping_code_in_headings(text: str) -> list[str]:
    """prose_lines, but with inline code kept (a heading's `code` is part of its slug)."""
    blanked = prose_lines(text)
    return [original if kept.strip() else kept
            for original, kept in zip(text.splitlines(), blanked)]


def links(path: pathlib.Path) -> list[tuple[int, str]]:
    return [(number, match.group(1))
            for number, line in enumerate(prose_lines(path.read_text(encoding="utf-8")), 1)
            for match in LINK.finditer(line)]


def broken_links(path: pathlib.Path, root: pathlib.Path = ROOT) -> list[str]:
    problems = []
    for number, target in links(path):
        if target.startswith(EXTERNAL):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        where = f"{os.path.relpath(path, root)}:{number}: {target}"
        if not resolved.exists():
            problems.append(f"{where}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{where}: no heading #{anchor} in {os.path.relpath(resolved, root)}")
    return problems


def test_the_documents_exist_and_link_to_each_other():
    for path in documents():
        assert path.is_file(), path
    local = [target for path in documents() for _, target in links(path)
             if not target.startswith(EXTERNAL)]
    assert len(local) >= 10, local  # the check below checks something
    assert any("#" in target for target in local)


def test_every_relative_link_resolves():
    problems = [problem for path in documents() for problem in broken_links(path)]
    assert not problems, "\n".join(problems)


def test_the_link_check_finds_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# The `Other` page: A, b\n\ntext\n", encoding="utf-8")
    page.write_text("# Page\n\n[ok](other.md#the-other-page-a-b) [ok](#page)\n"
                    "[gone](missing.md) [bad anchor](other.md#nope) `[code](missing.md)`\n"
                    "```\n[fenced](missing.md)\n```\n", encoding="utf-8")
    problems = broken_links(page, root=tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "missing.md: no such file", "other.md#nope: no heading #nope in other.md"]


def test_github_slugs():
    assert github_slug("Run on Dataflow") == "run-on-dataflow"
    assert github_slug("Shuffle, storage and worker start-up") == "shuffle-storage-and-worker-start-up"
    assert github_slug("`--dedup=near`: MinHash & LSH") == "--dedupnear-minhash--lsh"
    assert github_slug("The BERT family: SOP, n-grams") == "the-bert-family-sop-n-grams"


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    assert lines[0].startswith("# ")
    assert "make run" in "\n".join(lines[:8]) and "make test" in "\n".join(lines[:8])
