"""Wikitext-to-plain-text libraries, measured on real Wikipedia articles.

Picks the library behind `--input_format=wikipedia` by measured output
quality and speed. Reads the real dump excerpt in `shared/data/wikipedia/`
(206 pages of the May 2016 English Wikipedia `pages-articles` dump) with
`xml.etree.ElementTree.iterparse` over `bz2.open`, keeps namespace 0
without redirects, and runs every candidate over every article:

- `mwph-strip`: `mwparserfromhell.parse(text).strip_code()`, nothing else;
- `mwph-few-rules`: mwparserfromhell plus the few rules of the TensorFlow
  Datasets Beam builder for Wikipedia (remove File/Image/Media links,
  `<ref>` and table tags, reflist/notelist templates; strip_code per
  section);
- `mwph-careful`: mwparserfromhell with a node walker that applies explicit
  rules (the ones WIKITEXT_EXTRACTORS.md recommends; see `MwphCareful`);
- `project`: the pipeline's own `transforms.read.wikipedia.plain_text`, when this
  checkout has it;
- `wikiextractor`: `wikiextractor.extract.Extractor.clean_text` used as a
  library (its `clean` + `compact`), no template expansion, no HTML escaping;
- `wikitextparser`: `wikitextparser.parse(text).plain_text()`;
- `pandoc`: pandoc's MediaWiki reader and plain writer, through
  `pypandoc-binary` (one pandoc process per article);
- `mediawiki-dump`: the regex `mediawiki_dump.tokenizer.clean`.

It prints: the XML streaming figures (and a multistream round trip built from
the excerpt), the libraries' maintenance facts, leftover markup per MB of
output, output sizes, checks against a manual reading of three articles, and
speed (MB of wikitext per CPU-second on one core, best of N).

    .venv/bin/pip install --target /tmp/wiki-work/site mwparserfromhell \\
        wikiextractor wikitextparser pypandoc-binary
    .venv/bin/pip install --no-deps --target /tmp/wiki-work/site mediawiki-dump
    .venv/bin/python bench/wikitext_extractors.py --site /tmp/wiki-work/site
    .venv/bin/python bench/wikitext_extractors.py --site DIR --show "Arithmetic mean"
    .venv/bin/python bench/wikitext_extractors.py --site DIR --write-outputs /tmp/out

Candidates whose library cannot be imported are skipped, and the script says
so. Nothing here is imported by the pipeline or its tests.
"""

from __future__ import annotations

import argparse
import bz2
import collections
import dataclasses
import html
import importlib
import importlib.metadata
import io
import os
import pathlib
import re
import statistics
import sys
import time
import xml.etree.ElementTree as ET
from typing import Callable, Iterable, Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_DUMP = (ROOT.parent / "shared" / "data" / "wikipedia"
                / "enwiki-excerpt-pages-articles.xml.bz2")
MB = 1_000_000


# --------------------------------------------------------------------------
# XML streaming


@dataclasses.dataclass(frozen=True)
class Page:
    page_id: int
    title: str
    ns: int
    redirect: bool
    text: str


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _child(elem: ET.Element, name: str) -> ET.Element | None:
    for child in elem:
        if _local(child.tag) == name:
            return child
    return None


def iter_pages(fileobj, *, namespaces: Iterable[int] | None = (0,),
               skip_redirects: bool = True) -> Iterator[Page]:
    """Pages of a MediaWiki export stream, in file order.

    Tags are matched by local name, so the same code reads a whole dump
    (`<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">`) and the
    un-namespaced fragment of one multistream bz2 stream wrapped in a root.
    The root is cleared after every page, so memory stays flat.
    """
    wanted = None if namespaces is None else set(namespaces)
    root = None
    for event, elem in ET.iterparse(fileobj, events=("start", "end")):
        if event == "start":
            if root is None:
                root = elem
            continue
        if _local(elem.tag) != "page":
            continue
        ns = int(_child(elem, "ns").text)
        redirect = _child(elem, "redirect") is not None
        if (wanted is None or ns in wanted) and not (skip_redirects and redirect):
            revision = _child(elem, "revision")
            text = _child(revision, "text") if revision is not None else None
            yield Page(int(_child(elem, "id").text), _child(elem, "title").text or "",
                       ns, redirect, (text.text if text is not None else None) or "")
        root.clear()


def count_bz2_streams(data: bytes) -> list[tuple[int, int]]:
    """(compressed offset, decompressed size) of each concatenated bz2 stream."""
    streams, offset = [], 0
    while offset < len(data):
        decompressor = bz2.BZ2Decompressor()
        out = decompressor.decompress(data[offset:])
        if not decompressor.eof:
            raise ValueError(f"truncated bz2 stream at offset {offset}")
        streams.append((offset, len(out)))
        offset = len(data) - len(decompressor.unused_data)
    return streams


def build_multistream(xml: bytes, pages_per_stream: int = 100) -> tuple[bytes, str]:
    """A multistream dump and its index, built the way Wikimedia builds them.

    Stream 0 holds the head (`<mediawiki ...>` and `<siteinfo>`), then one
    stream per `pages_per_stream` pages, then a last stream with
    `</mediawiki>`. The index has one `offset:page_id:title` line per page,
    the offset being that of the stream holding the page.
    """
    starts = [m.start() for m in re.finditer(rb"  <page>", xml)]
    end = xml.rindex(b"</page>") + len(b"</page>\n")
    bounds = starts + [end]
    chunks = [xml[:starts[0]]]
    first_pages = []
    for i in range(0, len(starts), pages_per_stream):
        chunks.append(xml[bounds[i]:bounds[min(i + pages_per_stream, len(starts))]])
        first_pages.append(i)
    chunks.append(xml[end:])
    out, offsets = io.BytesIO(), []
    for chunk in chunks:
        offsets.append(out.tell())
        out.write(bz2.compress(chunk, 9))
    index = []
    for stream_no, chunk in enumerate(chunks[1:-1], start=1):
        for m in re.finditer(rb"<page>\s*<title>(.*?)</title>\s*<ns>\d+</ns>\s*<id>(\d+)</id>",
                             chunk, re.S):
            title = html.unescape(m.group(1).decode())
            index.append(f"{offsets[stream_no]}:{int(m.group(2))}:{title}")
    return out.getvalue(), "\n".join(index) + "\n"


def stream_offsets(index_text: str) -> list[int]:
    """Start offsets of the page streams named by a multistream index."""
    offsets = {int(line.split(":", 1)[0]) for line in index_text.splitlines() if line}
    return sorted(offsets)


def read_stream(fileobj, offset: int, chunk_size: int = 1 << 16) -> bytes:
    """Decompress the one bz2 stream that starts at `offset` (reads no further)."""
    fileobj.seek(offset)
    decompressor, parts = bz2.BZ2Decompressor(), []
    while not decompressor.eof:
        block = fileobj.read(chunk_size)
        if not block:
            raise ValueError(f"bz2 stream at {offset} is truncated")
        parts.append(decompressor.decompress(block))
    return b"".join(parts)


def iter_stream_pages(fileobj, offset: int, **kwargs) -> Iterator[Page]:
    """Pages of one multistream stream: a root-less run of `<page>` elements."""
    fragment = read_stream(fileobj, offset)
    yield from iter_pages(io.BytesIO(b"<pages>" + fragment + b"</pages>"), **kwargs)


def cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (pandoc)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def streaming_report(dump: pathlib.Path, repeat: int) -> list[str]:
    compressed = dump.read_bytes()
    lines = ["## XML streaming (iterparse over bz2.open)", ""]
    best_bz2 = best_parse = float("inf")
    for _ in range(repeat):
        start = cpu_seconds()
        with bz2.open(dump) as f:
            xml_size = 0
            while block := f.read(1 << 20):
                xml_size += len(block)
        best_bz2 = min(best_bz2, cpu_seconds() - start)
        start = cpu_seconds()
        with bz2.open(dump) as f:
            pages = list(iter_pages(f, namespaces=None, skip_redirects=False))
        best_parse = min(best_parse, cpu_seconds() - start)
    kept = [p for p in pages if p.ns == 0 and not p.redirect]
    by_ns = collections.Counter(p.ns for p in pages)
    wikitext = sum(len(p.text.encode()) for p in kept)
    lines += [
        f"file: {dump.name}: {len(compressed):,} bytes bz2, {xml_size:,} bytes XML",
        f"pages: {len(pages)} (namespaces {dict(sorted(by_ns.items()))}), "
        f"redirects: {sum(p.redirect for p in pages)}, "
        f"kept (ns 0, no redirect): {len(kept)} articles, {wikitext:,} bytes of wikitext",
        "",
        "| step (best of %d, CPU s) | CPU s | MB XML / CPU s | MB bz2 / CPU s |" % repeat,
        "|---|---:|---:|---:|",
        f"| bz2 decompression only | {best_bz2:.3f} | {xml_size / MB / best_bz2:.1f} "
        f"| {len(compressed) / MB / best_bz2:.2f} |",
        f"| decompression + iterparse + page fields | {best_parse:.3f} "
        f"| {xml_size / MB / best_parse:.1f} | {len(compressed) / MB / best_parse:.2f} |",
        "",
    ]
    streams = count_bz2_streams(compressed)
    lines.append(f"bz2 streams in the excerpt: {len(streams)} "
                 + ("(multistream)" if len(streams) > 1 else
                    "(a plain single-stream dump, not multistream)"))
    # Build a multistream file from it, as a test would, and read it back by index.
    xml = bz2.decompress(compressed)
    multi, index = build_multistream(xml, pages_per_stream=100)
    assert bz2.decompress(multi) == xml  # concatenated streams = the same XML
    offsets = stream_offsets(index)
    buf = io.BytesIO(multi)
    via_index = [p for off in offsets for p in iter_stream_pages(buf, off, namespaces=(0,))]
    sequential = list(iter_pages(io.BytesIO(xml), namespaces=(0,)))
    assert via_index == sequential, "pages read stream by stream differ"
    # Streams are independent: read them in reverse order, each on its own.
    reverse = [p for off in reversed(offsets) for p in iter_stream_pages(buf, off)]
    assert sorted(p.page_id for p in reverse) == sorted(p.page_id for p in sequential)
    lines += [
        f"built multistream (100 pages/stream): {len(count_bz2_streams(multi))} streams "
        f"(head, {len(offsets)} page streams, tail), {len(multi):,} bytes, "
        f"index {len(index.splitlines())} lines, e.g. `{index.splitlines()[0]}`",
        f"read back stream by stream via the index: {len(via_index)} articles, "
        "identical to the sequential read (also in reverse stream order)",
        "",
    ]
    return lines


# --------------------------------------------------------------------------
# Candidates


def _clean_lines(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def make_mwph_strip():
    import mwparserfromhell

    def extract(text: str, title: str = "") -> str:
        return _clean_lines(mwparserfromhell.parse(text).strip_code())
    return extract


def make_mwph_few_rules():
    """The TensorFlow Datasets Wikipedia builder's rules, re-implemented."""
    import mwparserfromhell

    media = re.compile(r"^\s*:?\s*(?:file|image|media)\s*:", re.I)
    drop_templates = {"reflist", "notelist", "notelist-ua", "notelist-lr",
                      "notelist-ur", "notelist-lg"}

    def extract(text: str, title: str = "") -> str:
        code = mwparserfromhell.parse(text)
        parts = []
        for section in code.get_sections(flat=True, include_lead=True, include_headings=True):
            doomed = [n for n in section.ifilter_wikilinks(recursive=True)
                      if media.match(str(n.title))]
            doomed += [n for n in section.ifilter_templates(recursive=True)
                       if str(n.name).strip().lower() in drop_templates]
            doomed += [n for n in section.ifilter_tags(recursive=True)
                       if str(n.tag).strip().lower() in ("ref", "table")]
            for node in doomed:
                try:
                    section.remove(node)
                except ValueError:  # already gone with an enclosing node
                    pass
            parts.append(section.strip_code().strip())
        return _clean_lines("\n\n".join(parts))
    return extract


class MwphCareful:
    """mwparserfromhell with explicit rules, one per node type.

    The walker renders the parse tree to text with two in-band marks:
    `HEADING` starts a heading's line, `ITEM` a list item's (`*`, `#`, `;`) and
    `INDENT` an indented line's (`:`, used for quotes and formulas). Blocks are
    then made the way MediaWiki renders them: consecutive text lines form one
    paragraph (joined with a space); a blank line, a heading, a list item or an
    indented line ends it. WIKITEXT_EXTRACTORS.md lists the rules in prose.
    """

    HEADING, ITEM, INDENT = "\x01", "\x02", "\x03"
    DROP_SECTIONS = {
        "references", "notes", "footnotes", "citations", "sources", "bibliography",
        "notes and references", "references and notes", "works cited",
        "further reading", "external links", "see also", "gallery",
        "references and further reading", "primary sources", "secondary sources",
    }
    DROP_TAGS = {
        "ref", "references", "table", "gallery", "imagemap", "timeline", "graph",
        "score", "templatedata", "categorytree", "inputbox", "chem", "ce",
        "hiero", "syntaxhighlight", "source", "pre", "noinclude", "includeonly",
        "section", "mapframe", "maplink", "indicator", "templatestyles",
    }
    BLOCK_TAGS = {"p", "div", "blockquote", "center", "poem", "ul", "ol", "dl", "hr"}
    DROP_LINK_NAMESPACES = {"file", "image", "media", "category"}
    INTERLANGUAGE = re.compile(r"^[a-z]{2,3}(?:-[a-z]+)*$")
    RANGE_WORDS = {"to", "-", "–", "and", "or", "by", "x", "×", "+/-", "to(-)", "and(-)"}

    # References and comments never nest: cutting them with a regex before
    # parsing is safe, spares the parser most of its work (citation templates)
    # and removes the commonest runaway (a `<ref>` with a broken inside).
    _REFS_AND_COMMENTS = re.compile(
        r"<ref(?:\s[^<>]*)?/>|<ref(?:\s[^<>]*)?>.*?</ref\s*>|<!--.*?-->", re.I | re.S)

    _HEADING_LINE = re.compile(r"^(={1,6})[ \t]*[^=\n].*?[ \t]*\1[ \t]*$", re.M)

    def __init__(self, *, keep_headings: bool = False, lists: str = "prose",
                 drop_sections: bool = True, precut: bool = True):
        import mwparserfromhell
        from mwparserfromhell import nodes
        self.parse = mwparserfromhell.parse
        self.nodes = nodes
        self.keep_headings = keep_headings
        self.lists = lists  # "keep", "drop" or "prose"
        self.drop_sections = drop_sections
        self.precut = precut

    # -- rendering ---------------------------------------------------------

    def __call__(self, text: str, title: str = "") -> str:
        out: list[str] = []
        skip_level = 0  # inside a dropped section of this level
        if self.precut:
            text = self._REFS_AND_COMMENTS.sub("", text)
        # Parse section by section (cut at heading lines): 1.5x faster than one
        # parse of the article, and a runaway construct cannot cross a heading.
        starts = [0] + [m.start() for m in self._HEADING_LINE.finditer(text)] + [len(text)]
        pending = collections.deque(
            node for a, b in zip(starts, starts[1:]) if b > a
            for node in self.parse(text[a:b]).nodes)
        while pending:
            node = pending.popleft()
            if (isinstance(node, self.nodes.Tag)
                    and str(node.tag).strip().lower() in self.DROP_TAGS):
                rest = self.after_runaway(node)
                if rest:
                    pending.extendleft(reversed(self.parse(rest).nodes))
                continue
            if (isinstance(node, self.nodes.Tag) and node.contents is not None
                    and any(isinstance(inner, self.nodes.Heading)
                            for inner in node.contents.nodes)):
                # A kept tag holding headings is a runaway too (an unclosed ''
                # that the parser closed sections later): unwrap it.
                pending.extendleft(reversed(node.contents.nodes))
                continue
            if isinstance(node, self.nodes.Heading):
                if skip_level and node.level > skip_level:
                    continue
                skip_level = 0
                heading = self.render(node.title.nodes).strip()
                if self.drop_sections and heading.lower().rstrip(":") in self.DROP_SECTIONS:
                    skip_level = node.level
                    continue
                out.append(f"\n{self.HEADING}{heading}\n")
            elif not skip_level:
                self.walk([node], out)
        return "\n".join(self.blocks("".join(out)))

    def after_runaway(self, node) -> str:
        """The text a dropped tag swallowed past its real end, if any.

        A malformed inside (an unclosed `''`, a broken table attribute) can make
        the parser end a tag far past its real end: a table in Alaska ran 44 KB
        over three sections, a `<ref>` in Angola 16 KB over two. A table ends at
        the first `|}` line that balances its `{|` lines, any other tag at its
        first closing tag; what follows is parsed again.
        """
        source = str(node)
        name = str(node.tag).strip().lower()
        if node.wiki_markup == "{|" or source.startswith("{|"):
            return self.after_table(source)
        if node.self_closing:
            return ""
        close = re.search(rf"</\s*{re.escape(name)}\s*>", source, re.I)
        if close and source[close.end():].strip():
            return source[close.end():]
        return ""

    @staticmethod
    def after_table(source: str) -> str:
        """What follows the end of the table that `source` starts with."""
        depth, offset = 0, 0
        for line in source.splitlines(keepends=True):
            offset += len(line)
            stripped = line.lstrip()
            if stripped.startswith("{|"):
                depth += 1
            elif stripped.startswith("|}"):
                depth -= 1
                if depth == 0:
                    return source[offset:] if source[offset:].strip() else ""
        return ""

    def render(self, nodes) -> str:
        out: list[str] = []
        self.walk(nodes, out)
        return "".join(out)

    def walk(self, nodes, out: list[str]) -> None:
        n = self.nodes
        for node in nodes:
            if isinstance(node, n.Text):
                out.append(node.value)
            elif isinstance(node, n.Wikilink):
                self.wikilink(node, out)
            elif isinstance(node, n.Tag):
                self.tag(node, out)
            elif isinstance(node, n.Template):
                out.append(self.template(node))
            elif isinstance(node, n.ExternalLink):
                if node.brackets and node.title is not None:
                    self.walk(node.title.nodes, out)  # bare URLs are dropped
            elif isinstance(node, n.HTMLEntity):
                out.append(node.normalize())
            elif isinstance(node, n.Heading):  # a heading inside a tag: a boundary
                out.append(f"\n{self.HEADING}{self.render(node.title.nodes).strip()}\n")
            # Comment, Argument ({{{1}}}): dropped

    def wikilink(self, node, out: list[str]) -> None:
        target = str(node.title).strip()
        if target.startswith(":"):  # [[:Category:X]] is a visible link
            target = target[1:]
        elif ":" in target:
            prefix = target.split(":", 1)[0].strip().lower()
            if prefix in self.DROP_LINK_NAMESPACES:
                return  # images with their captions, categories
            if node.text is None and self.INTERLANGUAGE.match(prefix):
                return  # [[de:Anarchismus]]
        if node.text is not None:
            self.walk(node.text.nodes, out)
        else:  # the target as shown: entities resolved, no leading colon
            out.append(self.render(node.title.nodes).strip().lstrip(":").strip())

    def tag(self, node, out: list[str]) -> None:
        name = str(node.tag).strip().lower()
        markup = node.wiki_markup
        if markup in ("*", "#", ";", ":"):
            last = next((piece for piece in reversed(out) if piece), "\n")
            if last.endswith((self.ITEM, self.INDENT)):
                return  # a nested marker: `**`, `#:`, `::`
            if last.endswith("\n"):
                out.append(self.INDENT if markup == ":" else self.ITEM)
            else:
                out.append(" ")  # the `:` of `; term : definition`
            return
        if name in self.DROP_TAGS:
            rest = self.after_runaway(node)
            if rest:
                self.walk(self.parse(rest).nodes, out)
            return
        if name == "br":
            out.append("\n")
            return
        if name == "math":  # keep plain inline math (`n`, `x_i`, `2.5`), drop TeX
            tex = str(node.contents or "").strip()
            if self._PLAIN_MATH.match(tex):
                out.append(tex)
            return
        if name == "li":
            out.append("\n" + self.ITEM)
        block = name in self.BLOCK_TAGS
        if block:
            out.append("\n\n")
        if node.contents is not None:
            self.walk(node.contents.nodes, out)
        if block:
            out.append("\n\n")

    # Markup the parser left as text: it gives up on a construct whose inside is
    # malformed (an unclosed [[ or '' inside an image caption, a table with a
    # broken attribute) and keeps it as literal text. Clean that text with
    # regexes, innermost first.
    _NEEDS_SALVAGE = re.compile(r"\{\{|\[\[|<[a-zA-Z/!]|''|__[A-Z]+__")
    _SALVAGE = [
        (re.compile(r"<!--.*?(?:-->|$)", re.S), ""),
        (re.compile(r"<ref[^>]*/>", re.I), ""),
        (re.compile(r"<ref[^>]*>.*?(?:</ref\s*>|$)", re.I | re.S), ""),
        (re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*(?:\s[^<>]*)?/?>"), " "),
        (re.compile(r"'{2,}"), ""),
    ]
    _TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
    _PLAIN_LINK = re.compile(r"\[\[(?!\s*(?:file|image|media|category)\s*:)"
                             r"([^\[\]|]*)(?:\|([^\[\]]*))?\]\]", re.I)
    _DROP_LINK = re.compile(r"\[\[\s*(?:file|image|media|category)\s*:[^\[\]]*\]\]", re.I)

    def salvage(self, text: str) -> str:
        for pattern, replacement in self._SALVAGE:
            text = pattern.sub(replacement, text)
        while True:
            text, n_templates = self._TEMPLATE.subn("", text)
            text, n_dropped = self._DROP_LINK.subn("", text)
            text, n_links = self._PLAIN_LINK.subn(
                lambda m: m.group(2) if m.group(2) is not None else m.group(1), text)
            if not (n_templates or n_links or n_dropped):
                return self._MAGIC.sub("", text)

    SIMPLE_TEMPLATES = {"'s": "'s", "'": "'", "nbsp": " ", "ndash": "–", "mdash": "—",
                        "snd": " – ", "spaced ndash": " – ", "mdashb": " — ",
                        "spaced mdash": " — ", "·": " · ", "dot": " · ", "bull": " • ",
                        "sp": " ", "-": "-"}
    TEXT_TEMPLATES = {
        "convert", "cvt", "lang", "transl", "transliteration", "nihongo", "nihongo2",
        "nowrap", "nobr", "smaller", "small", "larger", "big", "sc", "smallcaps", "angbr",
        "mvar", "vr", "ill", "interlanguage link", "em", "strong", "var", "abbr", "sic",
        "not a typo", "proper name", "visible anchor", "vanchor", "quote", "cquote",
        "quotation", "blockquote", "as of", "frac", "chem", "val", "circa"}

    _PLAIN_MATH = re.compile(r"^[\w .,;:+\-*/=<>()'|]{1,40}$")

    # Templates that put article text on the page; every other one is dropped.
    def template(self, node) -> str:
        name = str(node.name).strip().lower().replace("_", " ")
        if name.startswith("template:"):
            name = name[9:].strip()
        if name in self.SIMPLE_TEMPLATES:
            return self.SIMPLE_TEMPLATES[name]
        if not (name in self.TEXT_TEMPLATES or name.startswith("lang-")):
            return ""  # infoboxes, citations, navigation: not rendered at all
        pos = [self.render(p.value.nodes).strip() for p in node.params if not p.showkey]

        def named(key: str) -> str:
            return self.render(node.get(key).value.nodes).strip() if node.has(key) else ""

        if name in ("convert", "cvt") and pos:
            words, i = [pos[0]], 1
            while i + 1 < len(pos) and pos[i] in self.RANGE_WORDS:
                words += pos[i:i + 2]
                i += 2
            if i < len(pos):
                words.append(pos[i])
            return " ".join(words)
        if name == "lang" and len(pos) >= 2:
            return pos[1]
        if name.startswith("lang-") and pos:
            return pos[0]
        if name in ("transl", "transliteration") and pos:
            return pos[-1]
        if name in ("nihongo", "nihongo2") and pos:
            return pos[0]
        if name in ("nowrap", "nobr", "smaller", "small", "larger", "big", "sc",
                    "smallcaps", "angbr", "mvar", "vr", "ill", "interlanguage link",
                    "em", "strong", "var", "abbr", "sic", "not a typo", "proper name",
                    "visible anchor", "vanchor", "lang-en") and pos:
            return pos[0]
        if name in ("quote", "cquote", "quotation", "blockquote"):
            body = named("text") or named("quote") or (pos[0] if pos else "")
            return f"\n\n{body}\n\n" if body else ""
        if name == "as of" and pos:
            return "As of " + " ".join(pos[:1])
        if name == "frac" and pos:
            return pos[0] if len(pos) == 1 else (
                f"{pos[0]}/{pos[1]}" if len(pos) == 2 else f"{pos[0]} {pos[1]}/{pos[2]}")
        if name == "chem" and pos:
            return "".join(pos)
        if name in ("val", "circa") and pos:
            return ("c. " if name == "circa" else "") + pos[0]
        return ""

    # -- blocks --------------------------------------------------------------

    _SPACES = re.compile(r"[ \t\u00a0\u2009\u202f]+")
    _EMPTY_PARENS = re.compile(r"\(\s*(?:[,;:\u2013\u2014-]\s*)*\)|\[\s*\]")
    _SPACE_BEFORE_PUNCT = re.compile(r" +([,.;:!?%)\]])")
    _SPACE_AFTER_OPEN = re.compile(r"([(\[]) +")
    _PUNCT_AFTER_OPEN = re.compile(r"\((?:\s*[,;:])+\s*")
    _MAGIC = re.compile(r"__[A-Z]+__")
    _REPEATED_PUNCT = re.compile(r"([,;])(?:\s*[,;])+")

    def tidy(self, text: str) -> str:
        if self._NEEDS_SALVAGE.search(text):
            text = self.salvage(text)
        text = self._SPACES.sub(" ", text)
        text = self._EMPTY_PARENS.sub("", text)
        text = self._SPACES.sub(" ", text)
        text = self._SPACE_BEFORE_PUNCT.sub(r"\1", text)
        text = self._SPACE_AFTER_OPEN.sub(r"\1", text)
        text = self._PUNCT_AFTER_OPEN.sub("(", text)
        text = self._REPEATED_PUNCT.sub(r"\1", text)
        return text.strip().lstrip(",;:. ")

    def is_prose(self, item: str) -> bool:
        return len(item.split()) >= 8 and item.rstrip("\"'”’)").endswith((".", "!", "?"))

    def blocks(self, rendered: str) -> Iterator[str]:
        paragraph: list[str] = []

        def flush():
            text = self.tidy(" ".join(paragraph))
            paragraph.clear()
            return text

        table_depth = 0  # inside a table the parser left as text
        for line in rendered.split("\n"):
            stripped = line.strip()
            if stripped.startswith("{|"):
                table_depth += 1
            if table_depth:
                if stripped.startswith("|}") or stripped.endswith("|}"):
                    table_depth -= 1
                stripped = ""
            kind = "text"
            if stripped.startswith(self.HEADING):
                kind = "heading"
            elif stripped.startswith(self.ITEM):
                kind = "item"
            elif stripped.startswith(self.INDENT):
                kind = "indent"
            if kind == "text" and stripped:
                paragraph.append(stripped)
                continue
            if paragraph and (text := flush()) and re.search(r"\w", text):
                yield text
            if kind == "heading" and self.keep_headings:
                heading = self.tidy(stripped.lstrip(self.HEADING))
                if heading:
                    yield heading
            elif kind == "item" and self.lists != "drop":
                item = self.tidy(stripped.lstrip(self.ITEM + " "))
                if item and re.search(r"\w", item) and (
                        self.lists == "keep" or self.is_prose(item)):
                    yield item
            elif kind == "indent":
                text = self.tidy(stripped.lstrip(self.INDENT))
                if re.search(r"\w", text):
                    yield text
        if paragraph and (text := flush()) and re.search(r"\w", text):
            yield text


def make_mwph_careful():
    return MwphCareful()


def make_project():
    """What the pipeline itself runs today, if this checkout has it."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bert_pretraining_data.transforms.read.wikipedia import plain_text

    def extract(text: str, title: str = "") -> str:
        return _clean_lines(plain_text(text))
    return extract


def make_wikiextractor():
    from wikiextractor.extract import Extractor

    def extract(text: str, title: str = "") -> str:
        extractor = Extractor(0, 0, "", title, [])
        paragraphs = extractor.clean_text(text, mark_headers=False, expand_templates=False,
                                          html_safe=False)
        return _clean_lines("\n".join(paragraphs))
    return extract


def make_wikitextparser():
    import wikitextparser

    def extract(text: str, title: str = "") -> str:
        return _clean_lines(wikitextparser.parse(text).plain_text())
    return extract


def make_pandoc():
    import pypandoc
    pypandoc.get_pandoc_path()  # raises when no pandoc binary is there

    def extract(text: str, title: str = "") -> str:
        return _clean_lines(pypandoc.convert_text(text, "plain", format="mediawiki",
                                                  extra_args=["--wrap=none", "--quiet"]))
    return extract


def make_mediawiki_dump():
    from mediawiki_dump.tokenizer import clean

    def extract(text: str, title: str = "") -> str:
        return _clean_lines(clean(text))
    return extract


@dataclasses.dataclass(frozen=True)
class Candidate:
    name: str
    distribution: str
    make: Callable[[], Callable[[str, str], str]]
    how: str


CANDIDATES = [
    Candidate("mwph-strip", "mwparserfromhell", make_mwph_strip, "parse(text).strip_code()"),
    Candidate("mwph-few-rules", "mwparserfromhell", make_mwph_few_rules,
              "TFDS builder's rules + strip_code per section"),
    Candidate("mwph-careful", "mwparserfromhell", make_mwph_careful,
              "node walker with the recommended rules"),
    Candidate("project", "mwparserfromhell", make_project,
              "transforms.read.wikipedia.plain_text of this checkout (mwparserfromhell)"),
    Candidate("wikiextractor", "wikiextractor", make_wikiextractor,
              "Extractor.clean_text (clean + compact), no expansion"),
    Candidate("wikitextparser", "wikitextparser", make_wikitextparser, "parse(text).plain_text()"),
    Candidate("pandoc", "pypandoc_binary", make_pandoc,
              "pandoc -f mediawiki -t plain --wrap=none, one process per article"),
    Candidate("mediawiki-dump", "mediawiki_dump", make_mediawiki_dump,
              "mediawiki_dump.tokenizer.clean (regexes)"),
]

# Facts looked up on 2026-11-30 (PyPI release month, wheel size for CPython 3.11
# on x86-64 Linux, last commit of the public repository snapshot); the version,
# license and pure-Python columns of the table are read from the installed copy.
MAINTENANCE = {
    "mwparserfromhell": ("0.7.2: 2025-07-01; repo active (last commit 2026-05)", 251_741,
                         "none"),
    "wikiextractor": ("3.1.0: 2026-08-10; before it 3.0.6 (2021-10), repo tag v3.0.7 "
                      "(2023-01)", 91_256, "none"),
    "wikitextparser": ("3.0.0: 2026-10; repo active (1.0.0-1.0.3 in 2026-06/07)", 64_729,
                       "regex, wcwidth"),
    "pypandoc_binary": ("1.17: 2026-03-14 (bundles pandoc 3.9)", 34_460_960, "none"),
    "mediawiki_dump": ("1.4.1: 2026-09-16", 19_924,
                       "libarchive-c, requests, mwclient (unused by tokenizer.clean)"),
}


def maintenance_report(available: dict[str, Candidate]) -> list[str]:
    lines = ["## Maintenance", "",
             "| distribution | version | license | pure Python | wheel | runtime deps | release |",
             "|---|---|---|---|---:|---|---|"]
    for dist in dict.fromkeys(c.distribution for c in available.values()):
        meta = importlib.metadata.metadata(dist)
        license_ = meta.get("License-Expression") or meta.get("License") or "?"
        classifiers = [c.rsplit(" :: ", 1)[1] for c in meta.get_all("Classifier") or []
                       if c.startswith("License ::")]
        if classifiers:
            license_ = classifiers[0]
        files = importlib.metadata.files(dist) or []
        native = [f for f in files if str(f).endswith((".so", ".pyd"))
                  or "/files/pandoc" in str(f)]
        pure = "yes" if not native else f"no ({pathlib.PurePath(str(native[0])).name})"
        release, wheel, deps = MAINTENANCE.get(dist, ("?", 0, "?"))
        lines.append(f"| {dist} | {meta['Version']} | {license_} | {pure} "
                     f"| {wheel / 1000:,.0f} KB | {deps} | {release} |")
    return lines + [""]


# --------------------------------------------------------------------------
# Quality

# Leftover markup, counted in the output of every article.
LEFTOVERS = {
    "{{": re.compile(r"\{\{"), "}}": re.compile(r"\}\}"),
    "[[": re.compile(r"\[\["), "]]": re.compile(r"\]\]"),
    "<ref": re.compile(r"<ref", re.I), "|": re.compile(r"\|"),
    "==": re.compile(r"=="), "'''/''": re.compile(r"''"),
    "&nbsp;": re.compile(r"&nbsp;|&amp;|&lt;|&gt;|&quot;|&#\d+;"),
    "{|": re.compile(r"\{\|"),
    "<tag>": re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*(?:\s[^<>]*)?/?>"),
    "thumb": re.compile(r"\bthumb(?:nail)?\b|\d+px\b"),
    "Category:": re.compile(r"\bCategory:"), "File:": re.compile(r"\b(?:File|Image):"),
    "http": re.compile(r"https?://"),
    "()": re.compile(r"\(\s*[,;]?\s*\)"),
}


def leftovers(text: str) -> collections.Counter:
    return collections.Counter({k: len(p.findall(text)) for k, p in LEFTOVERS.items()})


# A manual reading of three articles: phrases of the body text that a correct
# extraction keeps (with the markup resolved), and phrases that are no body
# text (reference text, captions, categories, infobox fields, link lists).
CHECKS = {
    "Animalia (book)": {
        "keep": [
            "Animalia is an illustrated children's book by Graeme Base.",
            "Over three million copies have been sold.",
            "Animalia is an alliterative alphabet book",
            "(A is for alligator, B is for butterfly, etc.)",
            "H. N. Abrams also published a wall calendar colouring book",
            "It also airs on Minimax for the Czech Republic and Slovakia.",
            "And recently in Greece on the channel ET1.",
            "Kid's Own Australian Literature Awards named Animalia the 1988 Picture Book Winner.",
        ],
        "drop": ["Puffin Books", "Animalia 25th Anniversary Edition", "Children's picture books",
                 "Graeme Base's official website", "Harcourt Brace Jovanovich",
                 "Print (hardcover)"],
    },
    "Arithmetic mean": {
        "keep": [
            "In mathematics and statistics, the arithmetic mean",
            "or simply the mean or average when the context is clear",
            "it is not a robust statistic",
            "(values that are very much larger or smaller than most of the values)",
            "let us consider the monthly salary of 10 employees of a firm: 2500, 2700",
            "(See summation for an explanation of the summation operator).",
            "The mean is the only single number for which the residuals",
            "Naïvely taking the arithmetic mean of 1° and 359° yields a result of 180°.",
            "(or 2π, if measuring in radians)",
            "the arithmetic average is 6.2 and the median is 4.",
        ],
        "drop": ["Mathematics: A Human Endeavor", "Comparison of mean, median and mode",
                 "Fréchet mean", "How to Lie with Statistics",
                 "Calculations and comparisons between arithmetic and geometric mean",
                 "The Rich, the Right, and the Facts"],
    },
    "Alain Connes": {
        "keep": [
            "born 1 April 1947) is a French mathematician, currently Professor at the "
            "Collège de France",
            "He was an Invited Professor at the Conservatoire national des arts et métiers",
            "the almost complete classification of injective factors.",
            "which culminated in the Baum–Connes conjecture. He also introduced cyclic "
            "cohomology in the early 1980s",
            "He was a member of Bourbaki.",
            "including number theory, differential geometry and particle physics.",
            "He was an invited speaker at the ICM in 1974 at Vancouver",
            "Danish Academy of Sciences, Norwegian Academy of Sciences",
        ],
        "drop": ["Géométrie non-commutative", "Alain Connes in 2004", "Draguignan",
                 "Bourbaki: a secret society of mathematicians",
                 "The Geometer of Particle Physics", "Criticism of non-standard analysis"],
    },
}


def _norm(text: str) -> str:
    """Spaces collapsed; a line break stays a boundary no phrase can span."""
    lines = (re.sub(r"\s+", " ", line.replace("\u00a0", " ")).strip()
             for line in text.splitlines())
    return "\n".join(line for line in lines if line)


# A line that ends mid-sentence (a letter, digit or comma) followed by one that
# starts in lower case: a paragraph cut where the source only had a line break.
BROKEN_LINE = re.compile(r"[\w,;]\n[a-z]")


def quality_report(outputs: dict[str, dict[str, str]], articles: list[Page]) -> list[str]:
    lines = ["## Quality over all articles", "",
             "Leftover markup per MB of output (counts of each pattern / output MB); "
             "`failed`: articles on which the library raised (their output counts as empty); "
             "`empty`: articles with no output word; words per article: median and total.", "",
             "`cut`: line breaks inside a sentence (a line ending in a letter, digit or comma "
             "followed by one starting in lower case), per MB.", "",
             "| candidate | output MB | failed | empty | words/article (median) | words (total) "
             "| cut | "
             + " | ".join(f"`{k}`" for k in LEFTOVERS) + " | all per MB |",
             "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * (len(LEFTOVERS) + 1)]
    for name, docs in outputs.items():
        total = collections.Counter()
        words = []
        size = cut = 0
        for page in articles:
            text = docs[page.title]
            total.update(leftovers(text))
            cut += len(BROKEN_LINE.findall(text))
            words.append(len(text.split()))
            size += len(text.encode())
        per_mb = {k: total[k] / (size / MB) if size else 0 for k in LEFTOVERS}
        lines.append(
            f"| {name} | {size / MB:.2f} | {len(FAILURES[name])} | {sum(w == 0 for w in words)} "
            f"| {statistics.median(words):,.0f} | {sum(words):,} | {cut / (size / MB):,.0f} | "
            + " | ".join(f"{per_mb[k]:,.0f}" for k in LEFTOVERS)
            + f" | {sum(per_mb.values()):,.0f} |")
    lines.append("")
    for name, failures in FAILURES.items():
        for title, error in failures:
            lines.append(f"{name} failed on {title!r}: {error.splitlines()[0][:160]}")
    lines += ["", "## Checks against a manual reading", "",
              "`kept`: body-text phrases found (markup resolved) / phrases checked; "
              "`leaked`: non-body phrases found (references, captions, categories, "
              "infobox fields, link lists).", "",
              "| candidate | "
              + " | ".join(f"{t}: kept | leaked" for t in CHECKS if CHECKS[t]["drop"])
              + " |", "|---|" + "---:|---:|" * sum(1 for t in CHECKS if CHECKS[t]["drop"])]
    for name, docs in outputs.items():
        cells = []
        for title, check in CHECKS.items():
            if not check["drop"]:
                continue
            text = _norm(docs.get(title, ""))
            kept = sum(_norm(p) in text for p in check["keep"])
            leaked = sum(_norm(p) in text for p in check["drop"])
            cells.append(f"{kept}/{len(check['keep'])} | {leaked}/{len(check['drop'])}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""]


# Diverse articles for the per-article table (and the qualitative review in
# WIKITEXT_EXTRACTORS.md): long prose, math, tables, infoboxes, lists, broken markup.
REVIEWED = ["Anarchism", "Albedo", "Animalia (book)", "Arithmetic mean", "Alain Connes",
            "Apollo 11", "Alkali metal", "Alaska", "ASCII", "Allan Dwan", "Ambiguity",
            "Aa River"]


def article_report(outputs: dict[str, dict[str, str]], articles: list[Page]) -> list[str]:
    by_title = {p.title: p for p in articles}
    titles = [t for t in REVIEWED if t in by_title]
    names = list(outputs)
    lines = ["## Per article", "",
             "Cell: output words / leftover-markup hits (all patterns above) / cut lines.", "",
             "| article | KB wikitext | " + " | ".join(names) + " |",
             "|---|---:|" + "---:|" * len(names)]
    for title in titles:
        cells = []
        for name in names:
            text = outputs[name][title]
            if not text and any(t == title for t, _ in FAILURES[name]):
                cells.append("failed")
                continue
            hits = sum(leftovers(text).values())
            cells.append(f"{len(text.split()):,} / {hits} / {len(BROKEN_LINE.findall(text))}")
        size = len(by_title[title].text.encode()) / 1000
        lines.append(f"| {title} | {size:,.0f} | " + " | ".join(cells) + " |")
    return lines + [""]


FAILURES: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)


def _safe(extract: Callable[[str, str], str]) -> Callable[[str, str], str]:
    def run(text: str, title: str) -> str:
        try:
            return extract(text, title)
        except Exception:
            return ""
    return run


def speed_report(candidates: dict[str, Callable], articles: list[Page],
                 repeat: int) -> list[str]:
    size = sum(len(p.text.encode()) for p in articles)
    lines = ["## Speed (one core)", "",
             f"{len(articles)} articles, {size / MB:.2f} MB of wikitext; CPU time of the "
             f"process and its children, best of {repeat}; {os.cpu_count()} CPUs, load "
             f"average {os.getloadavg()[0]:.1f} at the start (above the CPU count, other work "
             "shared the CPUs and wall seconds are inflated).", "",
             "| candidate | CPU s | MB wikitext / CPU s | wall s |", "|---|---:|---:|---:|"]
    for name, extract in candidates.items():
        best_cpu = best_wall = float("inf")
        extract = _safe(extract)
        for _ in range(repeat):
            cpu, wall = cpu_seconds(), time.perf_counter()
            for page in articles:
                extract(page.text, page.title)
            best_cpu = min(best_cpu, cpu_seconds() - cpu)
            best_wall = min(best_wall, time.perf_counter() - wall)
        lines.append(f"| {name} | {best_cpu:.2f} | {size / MB / best_cpu:.2f} | {best_wall:.2f} |")
    if any(name.startswith("mwph") for name in candidates):
        import mwparserfromhell
        best = float("inf")
        for _ in range(repeat):
            cpu = cpu_seconds()
            for page in articles:
                mwparserfromhell.parse(page.text)
            best = min(best, cpu_seconds() - cpu)
        lines.append(f"| (mwparserfromhell.parse alone) | {best:.2f} | {size / MB / best:.2f} | |")
    return lines + [""]


# --------------------------------------------------------------------------


def load_candidates(only: list[str] | None) -> tuple[dict[str, Candidate], dict[str, Callable]]:
    available, extractors = {}, {}
    for candidate in CANDIDATES:
        if only and candidate.name not in only:
            continue
        try:
            extractors[candidate.name] = candidate.make()
        except Exception as error:  # ImportError, or no pandoc binary
            print(f"skipped {candidate.name}: {candidate.distribution} unavailable "
                  f"({type(error).__name__}: {error})")
            continue
        available[candidate.name] = candidate
    return available, extractors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", type=pathlib.Path, default=DEFAULT_DUMP)
    parser.add_argument("--site", action="append", default=[],
                        help="a directory holding the candidates (pip --target); repeatable")
    parser.add_argument("--only", nargs="*", help="candidate names to run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--show", metavar="TITLE", help="print every candidate's output "
                        "for this article, and nothing else")
    parser.add_argument("--chars", type=int, default=1500, help="characters shown by --show")
    parser.add_argument("--write-outputs", type=pathlib.Path, metavar="DIR",
                        help="write DIR/<candidate>/<page id>.txt for inspection")
    parser.add_argument("--no-speed", action="store_true")
    args = parser.parse_args(argv)
    for site in reversed(args.site):
        sys.path.insert(0, str(pathlib.Path(site).resolve()))
    importlib.invalidate_caches()

    if not args.dump.exists():
        print(f"no dump at {args.dump}")
        return 1
    with bz2.open(args.dump) as f:
        articles = list(iter_pages(f))
    available, extractors = load_candidates(args.only)
    for name, candidate in available.items():
        print(f"candidate {name}: {candidate.how}")
    print()

    if args.show:
        page = next(p for p in articles if p.title == args.show)
        for name, extract in extractors.items():
            print(f"--- {name}\n{extract(page.text, page.title)[:args.chars]}\n")
        return 0

    outputs: dict[str, dict[str, str]] = {}
    for name, extract in extractors.items():
        outputs[name] = {}
        for page in articles:
            try:
                outputs[name][page.title] = extract(page.text, page.title)
            except Exception as error:  # a library that gives up on an article
                FAILURES[name].append((page.title, f"{type(error).__name__}: {error}"))
                outputs[name][page.title] = ""
    if args.write_outputs:
        for name, docs in outputs.items():
            folder = args.write_outputs / name
            folder.mkdir(parents=True, exist_ok=True)
            for page in articles:
                (folder / f"{page.page_id}.txt").write_text(docs[page.title] + "\n")

    report = streaming_report(args.dump, args.repeat)
    report += maintenance_report(available)
    report += quality_report(outputs, articles)
    report += article_report(outputs, articles)
    if not args.no_speed:
        report += speed_report(extractors, articles, args.repeat)
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
