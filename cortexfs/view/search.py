"""The site's search index, built here and queried in the browser by assets/search.js.

A document is an atom; its terms are the lowercased words (`\\w+`, 2 to 40 characters, a
few English stopwords left out) of its summary, tags and body, plus its id, each with the
fields it occurs in (a bit mask). The browser must not load or index every body of a large
store (10,000 atoms: ~20 MB), so the index is sharded twice:

- by document: documents keep a number for life, and numbers fall into segments of
  SEGMENT; a changed atom re-indexes its segment only;
- by term: within a segment, the postings of the terms that start with the same two
  characters form one file, `data/search/s<segment>/<bucket>.js`; a query loads the bucket
  of each of its words, in each segment.

`data/search/docs-<segment>.js` holds what a hit shows (project, page, id, summary,
status), `data/search/index.js` the segments' bucket lists, the document count and the
stopwords, so that the browser tokenizes a query as this module tokenizes an atom.
Each segment's per-document terms are kept in the site's state folder, so that a rebuild
re-tokenizes only the atoms whose files changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortexfs import cache
from cortexfs.escape import data_script

SEGMENT = 1024
MIN_TERM, MAX_TERM = 2, 40
BODY, TAGS, SUMMARY, ID = 1, 2, 4, 8
STOPWORDS = frozenset((
    "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is", "it",
    "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "will", "with"))
STATE_KIND = "view-search"
SEGMENT_KIND = "view-search-segment"
_WORD = re.compile(r"\w+")

Terms = dict[str, int]  # term → fields bit mask


def terms(atom_id: str, summary: str, tags: Iterable[str], body: str) -> Terms:
    """The index terms of one atom."""
    out: Terms = {}
    for text, field in ((body, BODY), (" ".join(tags), TAGS), (summary, SUMMARY)):
        for word in set(_WORD.findall(text.lower())):
            if MIN_TERM <= len(word) <= MAX_TERM and word not in STOPWORDS:
                out[word] = out.get(word, 0) | field
    key = atom_id.lower()
    out[key] = out.get(key, 0) | ID
    return out


def bucket(term: str) -> str:
    """The file a term's postings go in: its first two characters, spelled for any file
    system (`la` for latency, `k_2d` for k-012; assets/search.js spells them the same)."""
    return "".join(c if ("a" <= c <= "z" or "0" <= c <= "9") else f"_{ord(c):x}"
                   for c in term[:2])


@dataclass
class Doc:
    """An atom as the index knows it: `key` is project/file, `stamp` its file's stat data
    (what its terms were read from), `row` what a hit shows."""

    key: str
    stamp: Any
    row: list[Any]


class SearchIndex:
    """The index state of one site (in its state folder) and the files it makes."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        saved = cache.load(state_dir / "search.bin", STATE_KIND)
        ok = isinstance(saved, dict) and isinstance(saved.get("docs"), dict) \
            and isinstance(saved.get("buckets"), dict)
        # key → [number, stamp, row]; segment → its bucket names
        self.known: dict[str, list[Any]] = saved["docs"] if ok else {}
        self.buckets: dict[int, list[str]] = saved["buckets"] if ok else {}
        self.numbers: dict[str, int] = {}
        self.dirty: set[int] = set()
        self._segments: dict[int, dict[int, Terms]] = {}
        self._docs: list[Doc] = []

    def previous(self, project: str) -> list[Doc]:
        """The documents of `project` as the last build indexed them (for a project whose
        files did not change since)."""
        prefix = project + "/"
        return [Doc(key, v[1], v[2]) for key, v in self.known.items()
                if key.startswith(prefix) and len(v) == 3]

    def plan(self, docs: list[Doc], intact: Any) -> set[str]:
        """Number `docs` and find what must be re-indexed; returns the keys of the documents
        whose terms are needed (`add_terms`). `intact(rel)` tells whether a file of the
        site is as the last build left it."""
        self._docs = docs
        used = {v[0] for v in self.known.values()}
        current = {d.key for d in docs}
        for key, (number, *_) in self.known.items():
            if key not in current:
                self.dirty.add(number // SEGMENT)
                used.discard(number)
        free = (n for n in range(len(docs) + len(used) + 1) if n not in used)
        need: set[str] = set()
        for doc in docs:
            old = self.known.get(doc.key)
            if old is None:
                number = next(free)
                used.add(number)
            else:
                number = old[0]
            self.numbers[doc.key] = number
            if old is None or old[1] != doc.stamp:
                self.dirty.add(number // SEGMENT)
                need.add(doc.key)
        segments = {n // SEGMENT for n in self.numbers.values()}
        for seg in segments - self.dirty:
            names = self.buckets.get(seg)
            if names is None or not all(intact(self._bucket_rel(seg, b)) for b in names):
                self.dirty.add(seg)
        for seg in self.dirty:
            saved = cache.load(self.state_dir / f"search-{seg}.bin", SEGMENT_KIND)
            ok = isinstance(saved, dict)
            self._segments[seg] = saved if ok else {}
            for doc in docs:
                number = self.numbers[doc.key]
                if number // SEGMENT == seg and (not ok or number not in saved):
                    need.add(doc.key)
        return need

    def add_terms(self, key: str, doc_terms: Terms) -> None:
        number = self.numbers[key]
        self._segments[number // SEGMENT][number] = doc_terms

    def segment(self, key: str) -> int:
        """The segment of a document (after `plan`)."""
        return self.numbers[key] // SEGMENT

    def segment_files(self, segments: Iterable[int]) -> dict[str, str]:
        """rel path → content of the bucket files of `segments` (changed ones, with their
        terms added), whose terms are saved with the site's state. Segments are
        independent: two processes may each make their own."""
        out: dict[str, str] = {}
        members: dict[int, set[int]] = {}
        for doc in self._docs:
            number = self.numbers[doc.key]
            members.setdefault(number // SEGMENT, set()).add(number)
        for seg in sorted(segments):
            seg_terms = {n: t for n, t in self._segments.get(seg, {}).items()
                         if n in members.get(seg, ())}
            self._segments[seg] = seg_terms
            by_term: dict[str, list[int]] = {}
            for number in sorted(seg_terms):
                for term, fields in seg_terms[number].items():
                    found = by_term.get(term)
                    if found is None:
                        by_term[term] = [number, fields]
                    else:
                        found += (number, fields)
            postings: dict[str, dict[str, list[int]]] = {}
            for term in sorted(by_term):
                postings.setdefault(bucket(term), {})[term] = by_term[term]
            for b, table in postings.items():
                out[self._bucket_rel(seg, b)] = data_script(f"search/s{seg}/{b}", table)
            self.buckets[seg] = sorted(postings)
            cache.save(self.state_dir / f"search-{seg}.bin", SEGMENT_KIND, seg_terms)
        return out

    def table_files(self) -> dict[str, str]:
        """rel path → content of every docs table and of the index file (the site skips
        the unchanged ones by their content)."""
        out: dict[str, str] = {}
        by_segment: dict[int, list[Doc]] = {}
        for doc in self._docs:
            by_segment.setdefault(self.numbers[doc.key] // SEGMENT, []).append(doc)
        for seg in [s for s in self.buckets if s not in by_segment]:
            del self.buckets[seg]
        for seg, seg_docs in by_segment.items():
            rows: list[Any] = [None] * (max(self.numbers[d.key] for d in seg_docs) % SEGMENT + 1)
            for d in seg_docs:
                rows[self.numbers[d.key] % SEGMENT] = d.row
            out[f"data/search/docs-{seg}.js"] = data_script(f"search/docs-{seg}", rows)
        out["data/search/index.js"] = data_script("search/index", {
            "docs": len(self._docs), "segment": SEGMENT, "min": MIN_TERM, "max": MAX_TERM,
            "stopwords": sorted(STOPWORDS), "fields": {"body": BODY, "tags": TAGS,
                                                       "summary": SUMMARY, "id": ID},
            "segments": {str(seg): names for seg, names in sorted(self.buckets.items())}})
        return out

    def kept(self) -> list[str]:
        """The bucket files of the segments that did not change (to keep as they are)."""
        return [self._bucket_rel(seg, b) for seg, names in self.buckets.items()
                if seg not in self.dirty for b in names]

    def save(self) -> None:
        docs = {d.key: [self.numbers[d.key], d.stamp, d.row] for d in self._docs}
        cache.save(self.state_dir / "search.bin", STATE_KIND,
                   {"docs": docs, "buckets": self.buckets})

    @staticmethod
    def _bucket_rel(seg: int, name: str) -> str:
        return f"data/search/s{seg}/{name}.js"
