"""Dense vectors (the `embed` extra): per-atom MiniLM vectors, cached by the texts they
come from."""

from __future__ import annotations

import contextlib
import io
import time
import zipfile
from typing import TYPE_CHECKING, Any

import numpy as np

from cortexfs.errors import AtomParseError
from cortexfs.fsutil import atomic_write, cache_lock
from cortexfs.layout import EMBED_LOCK

if TYPE_CHECKING:
    from cortexfs.recall.docs import Doc
    from cortexfs.recall.lexical import LexicalIndex, Progress

PASSAGE_TOKENS = 128  # word pieces per embedded passage: one topic each, not a diluted mix
DENSE_BUDGET = 2048  # word pieces embedded per atom at most (atoms are meant to be short)


def dense_texts(summary: str, tags: list[str], body: str) -> tuple[str, str]:
    """The two texts an atom's vectors come from: its summary, and its body (in passages).

    Tags stay out: a list of keywords is a poor sentence for a sentence encoder (BM25
    weighs them instead)."""
    del tags
    return summary, body.strip()


# --- dense vectors ---------------------------------------------------------------------------


class VectorStore:
    """Per-doc vectors keyed by the hash of the embedded texts (Doc.vsha), cached in
    .cache/recall/vectors-<model>.npz."""

    def __init__(self, index: LexicalIndex, embedder: Any) -> None:
        self.embedder = embedder
        self.path = index.dir.parent / f"vectors-{embedder.model_id}.npz"
        self.rows: dict[str, np.ndarray] = {}  # doc vsha → (m, dim) float16
        self._matrix: np.ndarray | None = None
        self._starts: np.ndarray | None = None
        self._generation = -1  # the index generation the matrix was assembled for
        self._queries: dict[str, np.ndarray] = {}
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        try:
            with np.load(self.path, allow_pickle=False) as npz:
                shas = [str(s) for s in npz["shas"]]
                counts, matrix = npz["counts"], npz["matrix"]
            if len(shas) != len(counts) or int(counts.sum()) != len(matrix):
                raise ValueError("inconsistent vectors")
            bounds = np.concatenate([[0], np.cumsum(counts)])
            self.rows = {s: matrix[bounds[j]:bounds[j + 1]] for j, s in enumerate(shas)}
        except (OSError, ValueError, KeyError, IndexError, EOFError, zipfile.BadZipFile):
            self.rows = {}

    def load_cached(self) -> None:
        """Read the vectors cached on disk (without embedding anything)."""
        if not self._loaded:
            self._load()

    def _save(self) -> None:
        shas = list(self.rows)
        matrix = (np.concatenate([self.rows[s] for s in shas]) if shas
                  else np.zeros((0, self.embedder.dim), np.float16))
        buf = io.BytesIO()
        np.savez(buf, shas=np.array(shas, dtype=np.str_),
                 counts=np.array([len(self.rows[s]) for s in shas], dtype=np.int64),
                 matrix=matrix)
        with contextlib.suppress(OSError):
            atomic_write(self.path, buf.getvalue())

    def sync(self, index: LexicalIndex, progress: Progress | None) -> None:
        """Embed the live docs whose texts have no vectors yet; forget vanished ones."""
        if self._generation == index.generation:
            return
        if not self._loaded:
            self._load()
        shas = index.vshas()
        live = index.columns().live
        if any(s not in self.rows for s, ok in zip(shas, live.tolist(), strict=True) if ok):
            # One process embeds at a time; a waiting one then finds the work done on disk.
            # A read-only store: embed for this process alone (_save gives up quietly). It
            # costs time on every run, never an answer.
            with cache_lock(self.path.parent / EMBED_LOCK, 3600, "the recall vector cache"):
                self._load()
                todo = {s: i for i, (s, ok) in enumerate(zip(shas, live.tolist(), strict=True))
                        if ok and s not in self.rows}
                if todo:
                    self._embed(index, [index.doc(i) for i in todo.values()], progress)
                wanted = {s for s, ok in zip(shas, live.tolist(), strict=True) if ok}
                for s in [s for s in self.rows if s not in wanted]:
                    del self.rows[s]
                self._save()
        self._assemble(shas)
        self._generation = index.generation

    def _embed(self, index: LexicalIndex, docs: list[Doc], progress: Progress | None) -> None:
        seqs: list[list[int]] = []
        spans: list[tuple[str, int, int]] = []
        for doc in docs:
            head, full = _doc_dense_texts(index, doc)
            windows = [self.embedder.windows(head, max_windows=1)[0]]
            if full:
                windows += self.embedder.passages(full, PASSAGE_TOKENS, DENSE_BUDGET)
            spans.append((vector_key(head, full), len(seqs), len(seqs) + len(windows)))
            seqs.extend(windows)
        # Short windows batch with short ones: sort once, embed in slices, put back.
        order = sorted(range(len(seqs)), key=lambda j: len(seqs[j]))
        vectors = np.zeros((len(seqs), self.embedder.dim), dtype=np.float16)
        step = 512
        started = time.monotonic()
        for start in range(0, len(order), step):
            part = order[start:start + step]
            vectors[part] = self.embedder.encode_ids([seqs[j] for j in part])
            if progress and time.monotonic() - started > 2:
                progress("embedding atoms for recall (passages)", min(start + step, len(seqs)),
                         len(seqs))
        for sha, begin, end in spans:
            self.rows[sha] = vectors[begin:end]

    def _assemble(self, shas: list[str]) -> None:
        # A file that changed while it was being embedded has no rows under its old key:
        # a zero vector stands in until the next refresh re-reads it.
        empty = np.zeros((1, self.embedder.dim), np.float16)
        blocks = [self.rows.get(s, empty) for s in shas]
        if blocks:
            self._matrix = np.concatenate(blocks).astype(np.float32)
            self._starts = np.concatenate([[0], np.cumsum([len(b) for b in blocks])[:-1]]) \
                .astype(np.int64)
        else:
            self._matrix = np.zeros((0, self.embedder.dim), np.float32)
            self._starts = np.zeros(0, np.int64)

    def ready(self, index: LexicalIndex) -> bool:
        return self._matrix is not None and self._generation == index.generation

    def similarities(self, query: str) -> np.ndarray:
        """Best cosine similarity of the query with each doc's vectors."""
        assert self._matrix is not None and self._starts is not None
        q = self._queries.get(query)
        if q is None:
            q = self.embedder.embed([query])[0]
            if len(self._queries) >= 4096:  # repeated queries (a server, a benchmark) are free
                self._queries.clear()
            self._queries[query] = q
        sims = self._matrix @ q
        return np.asarray(np.maximum.reduceat(sims, self._starts), dtype=np.float32)


def _doc_dense_texts(index: LexicalIndex, doc: Doc) -> tuple[str, str]:
    from cortexfs.atoms import KINDS
    from cortexfs.loader import read_atom

    kind = next(k for k in KINDS if k.folder == doc.kind)
    read = read_atom(index.store.projects_dir / doc.key, kind)
    body = "" if isinstance(read, AtomParseError) else read[0].body
    return dense_texts(doc.summary, doc.tags, body)


def vector_key(head: str, full: str) -> str:
    """What an atom's vectors depend on: its texts and how they are cut into passages."""
    import hashlib  # (here: a query without vectors never needs OpenSSL, ~3 ms to import)

    return hashlib.sha1(f"{PASSAGE_TOKENS}/{DENSE_BUDGET}\0{head}\0{full}".encode()) \
        .hexdigest()
