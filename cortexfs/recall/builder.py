"""Streaming atoms into segments: each changed file read through the loader, tokenized,
and queued; SEGMENT_DOCS of them make a segment, written to disk at once (a first build of
100,000 atoms holds one batch in memory, not the store)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cortexfs import loader
from cortexfs.atoms import Kind
from cortexfs.errors import AtomParseError
from cortexfs.recall import segment
from cortexfs.recall.dense import dense_texts, vector_key
from cortexfs.recall.docs import Doc
from cortexfs.recall.segment import Batch
from cortexfs.recall.tokenize import Numbering, lexical_head
from cortexfs.store import Project

if TYPE_CHECKING:
    from cortexfs.recall.lexical import LexicalIndex, Progress


class Builder:
    """New docs on their way into segments, SEGMENT_DOCS at a time (a first build writes
    each one as soon as it is full: memory holds one batch)."""

    def __init__(self, index: LexicalIndex, total: int, progress: Progress | None) -> None:
        self.index = index
        self.batch = Batch()
        self.count = 0  # docs added, numbering the PENDING ones
        self.landed_rows: list[tuple[int, int]] = []  # pending number → (segment, doc)
        self.total, self.done = total, 0
        self.progress = progress
        self.started = time.monotonic()

    @property
    def landed(self) -> np.ndarray:
        return np.array(self.landed_rows, dtype=np.int32).reshape(len(self.landed_rows), 2)

    def add(self, project: Project, kind: Kind, key: str, path: Path,
            old_sha: bytes | None) -> int | str | None:
        """Read and queue one file: its PENDING number, "same" when its bytes are those of
        `old_sha`, None when it is not an atom (the reason goes to index.skipped)."""
        import hashlib  # (here: a query that indexes nothing never needs OpenSSL's ~3 ms)

        self.done += 1
        if self.progress and self.done % 1000 == 0 and time.monotonic() - self.started > 2:
            self.progress("indexing atoms for recall", self.done, self.total)
        read = loader.read_atom(path, kind)
        if isinstance(read, AtomParseError):
            self.index.skipped[key] = read.reason
            return None
        self.index.skipped.pop(key, None)
        atom, raw = read
        sha = hashlib.sha1(raw).digest()
        if sha == old_sha:
            return "same"
        body = atom.body
        doc = Doc.from_atom(atom, key, project.name,
                            vector_key(*dense_texts(atom.summary, atom.tags, body)))
        an, b = self.index.analyzer, self.batch
        cited = " ".join([atom.id, *atom.cited_experiments(), *atom.links])
        head = an.stream(f"{lexical_head(atom.summary, atom.tags)}\n{cited}")
        stream = an.stream(body)
        b.docs.append(doc)
        b.shas.append(sha)
        b.head.extend(head)
        b.head_n.append(len(head))
        b.body.extend(stream)
        b.body_n.append(len(stream))
        number = self.count
        self.count += 1
        if len(b) >= self.index.segment_docs():
            self.flush()
        return number

    def flush(self) -> None:
        if not self.batch.docs:
            return
        index = self.index
        numbering = index.analyzer.numbering
        b = self.batch
        b.hashes = np.array(numbering.hashes, dtype=np.uint64)
        b.is_id = np.array(numbering.ids, dtype=bool)
        seen = np.zeros(len(numbering), bool)
        seen[np.frombuffer(b.head, np.int64)] = True
        seen[np.frombuffer(b.body, np.int64)] = True
        words = numbering.words
        hashes = numbering.hashes
        b.words = {w: hashes[i] for i in np.flatnonzero(seen).tolist()
                   if (w := words[i]) is not None}
        seg = segment.build(index._new_name(), self.batch)
        saved = None
        with contextlib.suppress(OSError):
            segment.save(seg, index.dir)
            saved = segment.load(index.dir, seg.name)  # mapped: the batch's memory goes
        if saved is None:
            index.unsaved.add(seg.name)
        s = len(index.segments)
        index.segments.append(saved or seg)
        self.landed_rows += [(s, i) for i in range(seg.n)]
        self.batch = Batch()
        if len(index.analyzer.numbering) > 2_000_000:  # between batches: keep memory bounded
            index.analyzer.numbering = Numbering()
