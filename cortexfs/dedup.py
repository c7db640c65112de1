"""The write gate: does a new atom nearly duplicate one the project already has?

The Cortex paper's gate (§3.2, §4.1.1) lets only memories that carry new information
through. Here it is a check before `cortex new` (and the MCP `add_atom`) writes: the new
atom's summary and tags are compared with every atom of the same kind in the project.

- Lexical similarity: Jaccard overlap of the two atoms' index terms (summary + tags, stop
  words out, stemmed — the terms recall's BM25 uses). Identical wording scores 1.0; a
  rephrasing of the same finding typically 0.6–0.9; two atoms that merely share a topic
  word or two, under 0.4.
- Semantic similarity, when the `embed` extra is installed: cosine of the all-MiniLM-L6-v2
  vectors of the two summaries (only for atoms recall has already embedded, so the gate
  never makes `cortex new` wait for a re-index).

An atom is a near-duplicate when either reaches its threshold below.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cortexfs.atoms import Atom, Kind
from cortexfs.errors import InvalidInputError
from cortexfs.store import Project

if TYPE_CHECKING:
    from cortexfs.loader import ProjectScan
    from cortexfs.recall import Analyzer

JACCARD_THRESHOLD = 0.6
COSINE_THRESHOLD = 0.92
MAX_REPORTED = 3


class DuplicateAtomError(InvalidInputError):
    """`--strict` refused a near-duplicate atom."""


@dataclass
class Duplicate:
    """An existing atom the new one nearly duplicates."""

    id: str
    path: Path
    summary: str
    similarity: float
    method: str  # "terms" (Jaccard) or "vectors" (cosine)

    def describe(self) -> str:
        return (f"{self.id} ({self.method} similarity {self.similarity:.2f}): "
                f"\"{self.summary}\"")


@functools.cache
def _analyzer() -> Analyzer:
    from cortexfs.recall import Analyzer

    return Analyzer()


def gate_terms(summary: str, tags: list[str]) -> set[str]:
    """The terms the gate compares: recall's analyzer over the summary and the tags."""
    tag_text = " ".join(t.replace("-", " ").replace("_", " ") for t in tags)
    return set(_analyzer().terms(f"{summary}\n{tag_text}"))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def find_duplicates(project: Project, kind: Kind, summary: str, tags: list[str],
                    cosine_threshold: float = COSINE_THRESHOLD,
                    scan: ProjectScan | None = None) -> list[Duplicate]:
    """Existing atoms of `kind` in `project` that the new atom nearly duplicates, most
    similar first (at most MAX_REPORTED).

    The lexical side reads the summaries and tags from the loader's cache (a stat per
    file): `cortex new` must not wait for recall's index to be rebuilt (at 10,000 atoms a
    rebuild after each new atom took 10 s). `scan`: the project's scan, if the caller has
    just taken it (else it is taken here)."""
    gated = _gate_rows(project, kind, scan)
    if not gated:
        return []
    new_terms = gate_terms(summary, tags)
    found: dict[str, Duplicate] = {}
    for make, terms in gated:
        sim = jaccard(new_terms, terms)
        if sim >= JACCARD_THRESHOLD:
            atom = make()
            key = f"{project.name}/{kind.folder}/{atom.path.name}"
            found[key] = Duplicate(atom.id, atom.path, atom.summary, sim, "terms")
    # Vectors only if recall has built some: loading the model costs more than the gate
    # (and importing the ranking half of recall, numpy, costs `cortex new` ~60 ms).
    if not any((project.store.cache_dir / "recall").glob("vectors-*.npz")):
        return sorted(found.values(), key=lambda d: -d.similarity)[:MAX_REPORTED]
    from cortexfs.recall import dense_available, dense_texts, open_retriever

    if not dense_available():
        return sorted(found.values(), key=lambda d: -d.similarity)[:MAX_REPORTED]
    import numpy as np

    index = open_retriever(project.store, dense=True)
    index.refresh(dense=False)
    docs = index.lexical.docs_in(f"{project.name}/{kind.folder}")
    vectors = index.vectors
    if vectors is not None:
        vectors.load_cached()
        heads = [(doc, rows[0]) for doc in docs if (rows := vectors.rows.get(doc.vsha)) is not None
                 and len(rows)]
        if heads:
            head, _ = dense_texts(summary.strip(), tags, "")
            query = vectors.embedder.embed([head])[0]
            matrix = np.stack([np.asarray(r, dtype=np.float32) for _, r in heads])
            for (doc, _), sim in zip(heads, (matrix @ query).tolist(), strict=True):
                if sim >= cosine_threshold and (doc.key not in found
                                                or found[doc.key].similarity < sim):
                    found[doc.key] = Duplicate(doc.id, project.store.projects_dir / doc.key,
                                               doc.summary, float(sim), "vectors")
    return sorted(found.values(), key=lambda d: -d.similarity)[:MAX_REPORTED]


def _gate_rows(project: Project, kind: Kind, sc: ProjectScan | None
               ) -> list[tuple[Callable[[], Atom], set[str]]]:
    """Each atom of `kind` in `project` (made when asked for) with its gate terms.

    The terms are kept in a cache beside the loader's, under each file's stamp as the
    loader's scan gives it (mtime, size, inode and CRC-32 of the content, the racy rule
    applied): on 10,000 atoms the gate took ~30 ms, ~8 of them the terms of ~900 summaries
    and ~6 making Atom objects it then mostly dropped. A file whose stamp differs, or a
    deleted cache, has its terms worked out again."""
    from cortexfs import cache
    from cortexfs.loader import CRC, ERROR, INO, MTIME, SIZE, child_maker, scan

    if sc is None:
        sc = scan(project)
    path = project.store.cache_dir / "dedup" / f"{project.name}.{kind.folder}.bin"
    what = ("gate-terms", _analyzer().name)
    saved = cache.load(path, what)
    known: dict[str, tuple[tuple[int, int, int, int], list[str]]] = \
        saved if isinstance(saved, dict) else {}
    kept: dict[str, tuple[tuple[int, int, int, int], list[str]]] = {}
    rows: list[tuple[Callable[[], Atom], set[str]]] = []
    child = child_maker(project.folder(kind))
    for name, stamp in sc.folders.get(kind.folder, []):
        if stamp[ERROR] is not None:
            continue
        key = (stamp[MTIME], stamp[SIZE], stamp[INO], stamp[CRC])
        hit = known.get(name)
        if hit is not None and hit[0] == key:
            terms = hit[1]
        else:
            info = sc.info(kind, name)
            if info is None:
                continue
            atom = Atom(child(name), kind, info[0])  # (read only: no copy)
            terms = sorted(gate_terms(atom.summary, atom.tags))
        kept[name] = (key, terms)

        def make(name: str = name) -> Atom:
            info = sc.info(kind, name)
            return Atom(child(name), kind, dict(info[0]) if info is not None else {})
        rows.append((make, set(terms)))
    if kept != known:
        cache.save(path, what, kept)
    return rows


def check_new_atom(project: Project, kind: Kind, summary: str, tags: list[str],
                   strict: bool = False, scan: ProjectScan | None = None) -> list[Duplicate]:
    """The gate as `cortex new` runs it: the near-duplicates to warn about, or (strict)
    a DuplicateAtomError naming the closest one, before anything is written."""
    dups = find_duplicates(project, kind, summary, tags, scan=scan)
    if dups and strict:
        raise DuplicateAtomError(
            f"not written: the new atom nearly duplicates {dups[0].describe()}; update that "
            "atom instead, or drop --strict to write it anyway")
    return dups
