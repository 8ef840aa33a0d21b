"""MediaWiki XML dumps (`--input_format=wikipedia`): one document per article.

A dump is streamed page by page (each page cleared once read: memory stays
flat); an article's wikitext becomes plain text by mwparserfromhell (chosen by
measurement: bench/WIKITEXT_EXTRACTORS.md) with the rules `plain_text` lists.
A multistream dump with its index beside it is read stream by stream, each bz2
stream a unit of work decompressed alone from its offset, so one file spreads
over all workers; without an index a file is one unit, whose articles are
spread (a Reshuffle) before their wikitext, the costly step, is converted.
"""

from __future__ import annotations

import dataclasses
import io
import re
from typing import BinaryIO, Iterator

from bert_pretraining_data.transforms.read.documents import Document
from bert_pretraining_data.transforms.read.tables import text_document



ARTICLE_NAMESPACE = "0"


@dataclasses.dataclass(frozen=True)
class Page:
    title: str
    namespace: str
    redirect: bool
    text: str | None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def index_path(dump: str) -> str:
    """Where Wikimedia puts a multistream dump's index: `...-multistream.xml.bz2`
    -> `...-multistream-index.txt.bz2`, and for parts `...-multistream3.xml-p1p41242.bz2`
    -> `...-multistream-index3.txt-p1p41242.bz2`."""
    directory, _, name = dump.rpartition("/")
    name = name.replace("-multistream", "-multistream-index", 1).replace(".xml", ".txt", 1)
    return f"{directory}/{name}" if directory else name


def is_index(path: str) -> bool:
    return "-multistream-index" in path.rpartition("/")[2]


def stream_offsets(index: bytes) -> list[int]:
    """The distinct stream offsets of a (decompressed) multistream index, in order."""
    offsets = {int(line.split(b":", 1)[0]) for line in index.splitlines() if line.strip()}
    return sorted(offsets)


def stream_pages(handle: BinaryIO, offset: int) -> Iterator[Page]:
    """The pages of the bz2 stream at `offset` of a multistream dump: a bare
    run of <page> elements, decompressed alone and parsed under a root."""
    import bz2

    handle.seek(offset)
    decompressor = bz2.BZ2Decompressor()
    parts = []
    while not decompressor.eof:
        chunk = handle.read(1 << 20)
        if not chunk:
            raise EOFError(f"the bz2 stream at offset {offset} ends early")
        parts.append(decompressor.decompress(chunk))
    yield from dump_pages(io.BytesIO(b"<pages>" + b"".join(parts) + b"</pages>"))


def dump_pages(handle: BinaryIO) -> Iterator[Page]:
    """Every <page> of a dump, in order, whatever the export schema version."""
    import xml.etree.ElementTree as ElementTree

    root = None
    for event, element in ElementTree.iterparse(handle, events=("start", "end")):
        if root is None:
            root = element  # cleared after each page: memory stays flat over a dump
        if event != "end" or _local(element.tag) != "page":
            continue
        fields = {_local(child.tag): child for child in element}
        revision = fields.get("revision")
        text = None
        if revision is not None:
            text = next((child.text for child in revision if _local(child.tag) == "text"), None)
        yield Page(title=fields["title"].text or "", namespace=fields["ns"].text or "",
                   redirect="redirect" in fields, text=text)
        root.clear()


# What BERT's authors kept of Wikipedia: "only the text passages", no lists,
# tables or headers. Dropped: these elements, and the sections after a
# heading of these titles (with their subsections).
_DROPPED_TAGS = frozenset({
    "ref", "references", "table", "gallery", "math", "chem", "ce", "timeline", "score",
    "syntaxhighlight", "source", "pre", "code", "imagemap", "hiero", "graph", "mapframe",
    "noinclude", "includeonly", "div", "blockquote", "poem"})
_DROPPED_SECTIONS = frozenset({
    "references", "external links", "see also", "further reading", "notes", "bibliography",
    "sources", "footnotes", "citations", "notes and references", "works cited",
    "works", "publications", "discography", "filmography"})
_DROPPED_LINKS = frozenset({"file", "image", "category", "media"})
# List lines are marked before parsing (removing them first would cut tags
# that span lines, such as a <ref> holding a bulleted citation) and dropped
# after; lines of a table the parser could not read (bad attributes) too.
_LIST_START = re.compile(r"^(?=[*#:;])", re.MULTILINE)
_LIST_MARK = "\ue000list\ue000"  # private-use characters: never in the text
_DEBRIS = (_LIST_MARK, "{|", "|", "!")
# References and comments never nest: cut before parsing, so one the parser
# cannot place (after a broken construct) does not stay as text.
_REFS_AND_COMMENTS = re.compile(r"<ref[^>]*/>|<ref[^>]*>.*?</ref\s*>|<!--.*?-->",
                                re.DOTALL | re.IGNORECASE)


# Templates that carry article text, rendered instead of dropped:
# {{convert|1300|mi|km}} -> "1300 mi" (its first unit, as written), {{convert|1|to|2|km}}
# -> "1 to 2 km", {{nowrap|text}} and {{lang|fr|text}} -> the text, {{linktext|a|b}} -> "a b".
_RANGE_WORDS = frozenset({"to", "-", "–", "and", "or", "by", "x", "×", "+"})


def template_text(template) -> str | None:
    """The text a template shows in the article, for those that carry text; None
    for the others (infoboxes, citations, navigation), which are dropped. A
    parameter's own markup is rendered as the article's is (a {{linktext}}
    inside a {{lang}} shows its text)."""
    name = str(template.name).strip().lower()
    params = [_shown(param.value).strip() for param in template.params if not param.showkey]
    if name in ("convert", "cvt") and len(params) >= 2:
        if len(params) >= 4 and params[1] in _RANGE_WORDS:
            return f"{params[0]} {params[1]} {params[2]} {params[3]}"
        return f"{params[0]} {params[1]}"
    if name in ("nowrap", "nobr") and params:
        return params[0]
    if name == "lang" and len(params) >= 2:
        return params[1]
    if name == "linktext" and params:
        return " ".join(params)
    return None


def _shown(code) -> str:
    """Wikicode as the article shows it: text-carrying templates rendered, the
    dropped constructs left out, the rest's markup stripped."""
    from mwparserfromhell.nodes import Template, Text
    from mwparserfromhell.wikicode import Wikicode

    nodes = []
    for node in code.nodes:
        shown = template_text(node) if isinstance(node, Template) else None
        if shown is not None:
            nodes.append(Text(shown))
        elif not _dropped(node):
            nodes.append(node)
    return Wikicode(nodes).strip_code(normalize=True, collapse=True)


def _dropped(node) -> bool:
    import mwparserfromhell.nodes as nodes

    if isinstance(node, (nodes.Heading, nodes.Template, nodes.Comment, nodes.Argument)):
        return True
    if isinstance(node, nodes.Tag):
        return str(node.tag).strip().lower() in _DROPPED_TAGS or node.wiki_markup == "{|"
    if isinstance(node, nodes.Wikilink):
        title = str(node.title).strip()
        prefix = title.split(":", 1)[0].strip().lower() if ":" in title else ""
        # File/category links, and interlanguage links (a 2-3 letter prefix).
        return prefix in _DROPPED_LINKS or (0 < len(prefix) <= 3 and prefix.isalpha())
    return False


# What dropped templates leave in parentheses, "Albedo () or" and
# "Achilles (; , Akhilleus, )": separators at a parenthesis' edges go, then
# empty parentheses with the space before them.
_PAREN_EDGES = (re.compile(r"\((?:\s*[;,])+\s*"), "("), (re.compile(r"(?:\s*[;,])+\s*\)"), ")")
_EMPTY_PARENS = re.compile(r"\s*\(\s*\)")
_HEADING = re.compile(r"^(={1,6})[ \t]*(.+?)[ \t]*\1[ \t]*$", re.MULTILINE)


def sections(wikitext: str) -> Iterator[tuple[int, str, str]]:
    """(level, title, body) of each section, the lead first (level 0): cut at
    heading lines, so each is parsed alone (mwparserfromhell gives up on a
    whole long article past some construct it cannot read, and the rest of
    the article would stay markup)."""
    level, title, start = 0, "", 0
    for heading in _HEADING.finditer(wikitext):
        yield level, title, wikitext[start:heading.start()]
        level, title, start = len(heading.group(1)), heading.group(2), heading.end()
    yield level, title, wikitext[start:]


def _section_text(body: str) -> list[str]:
    import mwparserfromhell

    text = _shown(mwparserfromhell.parse(
        _LIST_START.sub(_LIST_MARK, _REFS_AND_COMMENTS.sub("", body))))
    for pattern, replacement in _PAREN_EDGES:
        text = pattern.sub(replacement, text)
    text = _EMPTY_PARENS.sub("", text)
    # MediaWiki's paragraphs: runs of lines up to a blank line, a line break
    # inside one being a space. A list item is kept as its own paragraph when
    # it reads as prose; other list lines and table debris are dropped.
    kept, lines = [], []
    for line in text.split("\n") + [""]:
        line = line.strip()
        if line.startswith(_LIST_MARK):
            item = line[len(_LIST_MARK):].lstrip("*#:; ")
            if len(item.split()) >= 8 and item.endswith((".", "!", "?")):
                kept.append(item)
            continue
        if line and not line.startswith(_DEBRIS):
            lines.append(line)
        elif not line and lines:
            kept.append(" ".join(lines))
            lines = []
    return kept


def plain_text(wikitext: str) -> str:
    """An article's wikitext as plain text, a paragraph per line: templates
    (infoboxes, citations, navigation boxes), references, tables, files,
    categories, math, comments, list lines and headings dropped, with the
    sections listed in _DROPPED_SECTIONS (and their subsections); links
    become their text, bold and italics plain; entities decoded."""
    kept: list[str] = []
    skip_below = 0  # inside a dropped section: the level of its heading
    for level, title, body in sections(wikitext):
        if skip_below and level > skip_below:
            continue
        skip_below = level if title.strip().lower() in _DROPPED_SECTIONS else 0
        if not skip_below:
            kept += _section_text(body)
    return "\n".join(kept)


ARTICLE_COUNTERS = ("articles", "articles_without_plain_text", "articles_failed")


def article_document(wikitext: str, *, counts: dict[str, int]) -> Document | None:
    """An article's plain text as a document, or None with the reason counted
    in `counts` (ARTICLE_COUNTERS): one article's markup never stops a worker."""
    counts["articles"] += 1
    try:
        text = plain_text(wikitext)
    except Exception:  # noqa: BLE001 - one article's markup must not stop a worker
        counts["articles_failed"] += 1
        return None
    document = text_document(text)
    if document is None:
        counts["articles_without_plain_text"] += 1
    return document
