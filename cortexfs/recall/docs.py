"""What the lexical index keeps of each atom: `Doc`, and how it is stored by name.

A segment stores its docs' fields in two forms: the few every query needs for all atoms at
once (project, kind, status, date: filters and the status ranking) as numeric columns, and
the rest as one JSON object per doc, keyed by field name and parsed only for the atoms a
query shows. The cache names the fields it was written with (`FIELDS`): a cache written
with other fields is rebuilt, never misread (adding a field to Doc needs no version bump).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from cortexfs.atoms import (
    INVALIDATED_STATUSES,
    KINDS,
    STATUSES,
    SUPERSEDED_STATUSES,
    Atom,
    as_date,
)


@dataclass
class Doc:
    """One atom as recall knows it."""

    key: str  # path under context/projects/, e.g. "flywheel/experiments/EXP-001.md"
    project: str
    kind: str  # its folder: experiments, knowledge or patterns
    id: str
    summary: str
    tags: list[str]
    date: str | None
    status: str
    priority: str | None = None
    src: str | None = None
    links: int = 0  # how many atoms it links to (the strength's 3+-related modifier)
    evidence: list[str] = field(default_factory=list)  # the experiments it rests on
    last_ref: str | None = None  # frontmatter last-ref: the last read regen folded in
    vsha: str = ""  # of the texts its vectors come from: a refs/last-ref update keeps them

    def row(self) -> dict[str, Any]:
        """The fields kept in the JSON row (the columns hold the others)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in COLUMNS}

    @classmethod
    def from_atom(cls, atom: Atom, key: str, project: str, vsha: str) -> Doc:
        priority, src = atom.meta.get("priority"), atom.meta.get("src")
        return cls(key=key, project=project, kind=atom.kind.folder, id=atom.id,
                   summary=atom.summary, tags=atom.tags,
                   date=atom.date.isoformat() if atom.date else None, status=atom.status,
                   priority=str(priority) if priority is not None else None,
                   src=str(src) if src is not None else None, links=len(atom.links),
                   evidence=atom.cited_experiments() if atom.kind.folder != "experiments"
                   else [], last_ref=atom.last_ref, vsha=vsha)


FIELDS = tuple(f.name for f in fields(Doc))
COLUMNS = frozenset({"key", "project", "kind", "vsha"})  # columns only (status, date: both)

# Status codes of the `status` column: the known statuses, then "unknown" (validation's
# business; recall ranks it as active).
STATUS_CODES = (*STATUSES, "unknown")
STATUS_CODE = {s: i for i, s in enumerate(STATUS_CODES)}
KIND_CODES = tuple(k.folder for k in KINDS)
KIND_CODE = {k: i for i, k in enumerate(KIND_CODES)}
# The retired statuses: ranked below active atoms by default (`fuse.RETIRED_FACTOR`).
RETIRED = frozenset(SUPERSEDED_STATUSES | INVALIDATED_STATUSES)
RETIRED_CODES = frozenset(STATUS_CODE[s] for s in RETIRED)


def status_code(status: str) -> int:
    return STATUS_CODE.get(status, STATUS_CODE["unknown"])


def date_ordinal(date: str | None) -> int:
    """The column form of a date: its ordinal, 0 for none."""
    d = as_date(date)
    return d.toordinal() if d else 0


def encode_rows(docs: list[Doc]) -> list[bytes]:
    return [json.dumps(d.row(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            for d in docs]


def decode_row(raw: bytes, key: str, project: str, kind: str, vsha: str) -> Doc:
    """A Doc from its JSON row and columns. Raises ValueError for a row that does not hold
    exactly the fields this Doc has (a cache from another version: rebuild it)."""
    data = json.loads(raw)
    if not isinstance(data, dict) or set(data) != set(FIELDS) - COLUMNS:
        raise ValueError("a cached doc row does not have this version's fields")
    return Doc(key=key, project=project, kind=kind, vsha=vsha, **data)
