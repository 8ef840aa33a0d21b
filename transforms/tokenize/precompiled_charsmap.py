"""SentencePiece's Precompiled character map (the `normalizer_spec` of a
`.model`, which `transformers` copies into a converted tokenizer.json: XLM-R's,
mBART's, T5's kind) as the `tokenizers` library applies it, so that such a
file runs on the Unigram kernel instead of the library.

The map is a double-array trie (Darts-clone's layout) from UTF-8 keys to
offsets of NUL-terminated replacements. The library does not apply it as
SentencePiece does (longest match over the raw text): it walks the text's
extended grapheme clusters, and a cluster of under 6 bytes whose bytes begin
with a key becomes that key's replacement whole, the first (shortest) key
found; any other cluster is mapped character by character. A cluster's
combining mark after a key character is thereby dropped, which SentencePiece
would keep: the library's quirk is what the ids follow. Grapheme clusters are
the `regex` module's `\\X`; its Unicode tables may be newer or older than the
library's, which the per-run check (transforms.tokenize.engines) catches.
"""

from __future__ import annotations

import re
import struct
from typing import Callable

import regex

_GRAPHEME = regex.compile(r"\X")
_WHOLE_CLUSTER_BYTES = 6  # the library maps a cluster whole only below this length
_CACHE_LIMIT = 1 << 17  # clusters remembered; emptied whole when full


class PrecompiledCharsMap:
    """One tokenizer.json's `precompiled_charsmap` (the blob's bytes),
    applied to a text by calling it."""

    def __init__(self, blob: bytes) -> None:
        (trie_bytes,) = struct.unpack_from("<I", blob)
        self._units = list(struct.unpack_from(f"<{trie_bytes // 4}I", blob, 4))
        self._replacements = blob[4 + trie_bytes:]
        self._clusters = _Clusters(self._cluster)
        # Between two printable ASCII characters a cluster always ends, so
        # the map is applied only to the segments of other characters (with
        # one printable neighbour on each side, which a combining mark or a
        # Prepend character may join); printable characters that are keys
        # themselves (a case-folding map's) count as other characters.
        plain = "".join(chr(c) for c in range(0x20, 0x7F) if self._replacement(chr(c)) is None)
        self._printable_ascii_unchanged = len(plain) == 0x7F - 0x20
        plain = re.escape(plain)
        self._segments = re.compile(f"[{plain}]?[^{plain}]+(?:[{plain}][^{plain}]+)*[{plain}]?")

    def _replacement(self, chunk: str) -> str | None:
        """The replacement of the shortest key the chunk's bytes begin with
        (Darts-clone's common-prefix search, its first result), or None."""
        units = self._units
        node = _offset(units[0])
        for byte in chunk.encode("utf-8"):
            if byte == 0:  # the search's end of key
                return None
            node ^= byte
            unit = units[node] if node < len(units) else 0
            if unit & 0x800000FF != byte:
                return None
            node ^= _offset(unit)
            if unit >> 8 & 1:
                start = units[node] & 0x7FFFFFFF
                return self._replacements[start:self._replacements.index(0, start)].decode("utf-8")
        return None

    def _cluster(self, cluster: str) -> str:
        """One grapheme cluster as the library maps it."""
        mapped = None
        if len(cluster.encode("utf-8")) < _WHOLE_CLUSTER_BYTES:
            mapped = self._replacement(cluster)
        if mapped is None:
            mapped = "".join(c if (r := self._replacement(c)) is None else r for c in cluster)
        return mapped

    def __call__(self, text: str) -> str:
        """The text with the map applied cluster by cluster."""
        if self._printable_ascii_unchanged and text.isascii() and text.isprintable():
            return text
        return self._segments.sub(self._segment, text)

    def _segment(self, segment: re.Match) -> str:
        return "".join(map(self._clusters.__getitem__, _GRAPHEME.findall(segment.group())))


class _Clusters(dict):
    """Each cluster's mapping, computed on first sight; emptied whole when
    full."""

    def __init__(self, mapping: Callable[[str], str]) -> None:
        super().__init__()
        self._mapping = mapping

    def __missing__(self, cluster: str) -> str:
        if len(self) >= _CACHE_LIMIT:
            self.clear()
        mapped = self[cluster] = self._mapping(cluster)
        return mapped


def _offset(unit: int) -> int:
    """A Darts-clone unit's offset to its children."""
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)
