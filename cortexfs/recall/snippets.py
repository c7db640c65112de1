"""Snippets: the passage a hit was ranked by, as lines of its file (those with words: the
blank ones between are left out), with the query's words marked — what the text output
prints under each hit and `--format json` carries.

The passage comes from `cortexfs.recall.passages` as "the n-th body line that has terms";
the snippet reads the file again (only the k hits shown) and maps that back to file lines.
An atom matched by its summary or tags alone, or by the dense signal alone, shows its
summary.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cortexfs.atoms import ATOM_ID
from cortexfs.errors import AtomParseError
from cortexfs.frontmatter import decode, locate, read_bytes
from cortexfs.recall.fuse import Snippet
from cortexfs.recall.tokenize import STOPWORDS, Analyzer, words

MAX_CHARS = 400  # a snippet longer than this is cut around its first highlight
_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")


def passage(analyzer: Analyzer, path: str, start: int, size: int,
            terms: set[str]) -> Snippet | None:
    """The snippet of the passage of `size` term-bearing body lines from the `start`-th
    one, of the atom file at `path`; None when the file cannot be read any more."""
    try:  # (the frontmatter need not be parsed again: only where the body starts)
        if os.path.islink(path):
            return None
        text = decode(read_bytes(Path(path)), path)
        start_at = locate(text, path).body_start
    except AtomParseError:
        return None
    body_line = text.count("\n", 0, start_at) + 1
    lines = text[start_at:].split("\n")
    kept = [j for j, line in enumerate(lines) if words(line) or ATOM_ID.search(line)]
    if not kept:
        return None
    start = min(start, len(kept) - 1)
    chosen = kept[start:start + size]
    shown = [lines[j].strip() for j in chosen]  # the passage's lines; blank ones between go
    return make(analyzer, "\n".join(shown), body_line + chosen[0], body_line + chosen[-1],
                terms)


def make(analyzer: Analyzer, text: str, first: int, last: int, terms: set[str]) -> Snippet:
    """A snippet of `text` with the spans of the words whose terms are in `terms`."""
    spans = highlights(analyzer, text, terms)
    if len(text) > MAX_CHARS:
        at = spans[0][0] if spans else 0
        begin = max(0, min(at - MAX_CHARS // 4, len(text) - MAX_CHARS))
        cut = text[begin:begin + MAX_CHARS]
        prefix = "…" if begin > 0 else ""
        suffix = "…" if begin + MAX_CHARS < len(text) else ""
        shift = len(prefix) - begin
        spans = [(a + shift, b + shift) for a, b in spans
                 if a >= begin and b <= begin + MAX_CHARS]
        text = prefix + cut + suffix
    return Snippet(first, last, text, spans)


def highlights(analyzer: Analyzer, text: str, terms: set[str]) -> list[tuple[int, int]]:
    """Character spans of the words (and atom ids) of `text` that are query terms."""
    spans: list[tuple[int, int]] = []
    for m in _WORD.finditer(text):
        w = m.group().lower().replace("\u2019", "'")
        if len(w) > 1 and w not in STOPWORDS and analyzer.stems([w])[0] in terms:
            spans.append(m.span())
    for m in ATOM_ID.finditer(text):
        if m.group().lower() in terms:
            spans.append(m.span())
    return sorted(set(spans))
