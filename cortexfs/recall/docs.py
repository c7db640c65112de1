"""What the lexical index keeps of each atom file, and the table of them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Doc:
    """What the index keeps of one atom file."""

    key: str  # path under context/projects/, e.g. "flywheel/experiments/EXP-001.md"
    project: str
    id: str
    summary: str
    tags: list[str]
    date: str | None
    status: str
    priority: str | None
    src: str | None
    links: int
    mtime_ns: int
    size: int
    ino: int
    racy: bool  # written so shortly before it was read that a later write could keep its mtime
    sha: str  # of the file's bytes
    vsha: str  # of the texts its vectors come from: a refs/last-ref update keeps them

    def to_row(self) -> list[Any]:
        return [self.key, self.project, self.id, self.summary, self.tags, self.date,
                self.status, self.priority, self.src, self.links, self.mtime_ns, self.size,
                self.ino, self.racy, self.sha, self.vsha]

    @classmethod
    def from_row(cls, row: list[Any]) -> Doc:
        return cls(*row)


class DocTable:
    """The index's docs: the columns every refresh needs (key, project, stamp, vector key)
    as plain lists, each doc's full row parsed only when asked for — a CLI run that loads a
    10,000-atom cache reads a few hundred rows, not all of them."""

    def __init__(self, docs: list[Doc] | None = None) -> None:
        docs = docs or []
        self._rows: list[Doc | None] = list(docs)
        self._blob = b""  # the saved rows, JSON, one after another (see from_arrays)
        self._off: list[int] = []
        self._saved = 0  # rows below this index, unless modified, are still in _blob
        self._modified: set[int] = set()
        self.keys = [d.key for d in docs]
        self.projects = [d.project for d in docs]
        self.vshas = [d.vsha for d in docs]
        self.stamps: list[Any] = [(d.mtime_ns, d.size, d.ino) for d in docs]
        self.racy = [d.racy for d in docs]

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> DocTable:
        table = cls()
        table.keys = arrays["keys"].tolist()
        table.projects = arrays["projects"].tolist()
        table.vshas = arrays["vshas"].tolist()
        table.stamps = arrays["stamps"].tolist()  # [mtime_ns, size, ino] lists
        table.racy = arrays["racy"].tolist()
        blob, off = arrays["rows"].tobytes(), arrays["row_off"].tolist()
        n = len(table.keys)
        if not (len(table.projects) == len(table.vshas) == len(table.stamps) == len(table.racy)
                == n and len(off) == n + 1 and off[-1] == len(blob)):
            raise ValueError("inconsistent doc table")
        table._blob, table._off, table._saved = blob, off, n
        table._rows = [None] * n
        return table

    def to_arrays(self) -> dict[str, np.ndarray]:
        raws = [raw if (raw := self._raw_row(i)) is not None
                else json.dumps(self[i].to_row()).encode("utf-8") for i in range(len(self))]
        return {
            "keys": np.array(self.keys, dtype=np.str_),
            "projects": np.array(self.projects, dtype=np.str_),
            "vshas": np.array(self.vshas, dtype=np.str_),
            "stamps": np.array(self.stamps, dtype=np.int64).reshape(len(self), 3),
            "racy": np.array(self.racy, dtype=bool),
            "rows": np.frombuffer(b"".join(raws), dtype=np.uint8),
            "row_off": np.concatenate([[0], np.cumsum([len(r) for r in raws])]).astype(
                np.int64),
        }

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> Doc:
        doc = self._rows[i]
        if doc is None:
            raw = self._raw_row(i)
            assert raw is not None
            doc = self._rows[i] = Doc.from_row(json.loads(raw))
        return doc

    def _raw_row(self, i: int) -> bytes | None:
        """The saved JSON row of doc i, while it is unchanged since loading."""
        if i >= self._saved or i in self._modified:
            return None
        return self._blob[self._off[i]:self._off[i + 1]]

    def __setitem__(self, i: int, doc: Doc) -> None:
        self._rows[i] = doc
        self._modified.add(i)
        self.keys[i], self.projects[i], self.vshas[i] = doc.key, doc.project, doc.vsha
        self.stamps[i], self.racy[i] = (doc.mtime_ns, doc.size, doc.ino), doc.racy

    def __iter__(self) -> Iterator[Doc]:
        return (self[i] for i in range(len(self)))

