"""Which atoms a query searches: `--project --kind --status --tag --since`, in the CLI and the
MCP tool alike, turned into a mask over the lexical index's docs before anything is
ranked (a filtered query's pool holds only atoms that pass).

By default every status is searched and the retired ones rank below the active ones
(`fuse.RETIRED_FACTOR`); `--status any` searches all with no status judgement;
`--status active`, `retired`, `superseded`, `invalidated` or any status name (several
with commas) keeps those only.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np

from cortexfs.atoms import (
    ACTIVE_STATUSES,
    INVALIDATED_STATUSES,
    KINDS,
    STATUSES,
    SUPERSEDED_STATUSES,
    parse_since,
)
from cortexfs.errors import InvalidInputError
from cortexfs.recall.docs import KIND_CODE, RETIRED, STATUS_CODE
from cortexfs.recall.lexical import Columns, LexicalIndex

KIND_NAMES = {word: k.folder for k in KINDS for word in (k.short, k.name, k.folder)}
STATUS_GROUPS = {"active": ACTIVE_STATUSES | {"unknown"}, "retired": RETIRED,
                 "superseded": SUPERSEDED_STATUSES, "invalidated": INVALIDATED_STATUSES}


@dataclass(frozen=True)
class Filters:
    """What a query is restricted to (None / empty: no restriction)."""

    project: str | None = None
    kinds: frozenset[str] | None = None  # atom folders
    statuses: frozenset[str] | None = None  # None: all, the retired ranked down
    any_status: bool = False  # `--status any`: all, no status judgement
    tags: tuple[str, ...] = ()  # every one of them (lower-cased)
    since: dt.date | None = None  # atoms dated on or after

    @property
    def judged(self) -> bool:
        """Whether retired atoms (and knowledge on retired evidence) are ranked down."""
        return not self.any_status


def parse(project: str | None = None, kind: str | list[str] | None = None,
          status: str | list[str] | None = None, tag: str | list[str] | None = None,
          since: str | None = None, today: dt.date | None = None) -> Filters:
    """Filters from the words a user or an agent gives (several values: a list or commas);
    InvalidInputError naming the option for a value it cannot use."""
    kinds = None
    if kind:
        for v in _split(kind):
            if v not in KIND_NAMES:
                raise InvalidInputError(f"--kind {v!r} is not known: use exp, k or pat")
        kinds = frozenset(KIND_NAMES[v] for v in _split(kind))
    statuses, any_status = None, False
    if status:
        values = _split(status)
        if values == ["any"]:
            any_status = True
        else:
            found: set[str] = set()
            for v in values:
                if v in STATUS_GROUPS:
                    found |= STATUS_GROUPS[v]
                elif v in STATUSES:
                    found.add(v)
                else:
                    raise InvalidInputError(
                        f"--status {v!r} is not a status: use any, active, retired, "
                        f"superseded, invalidated or one of {', '.join(STATUSES)}")
            statuses = frozenset(found)
    tags = tuple(dict.fromkeys(t.lower() for t in _split(tag))) if tag else ()
    return Filters(project, kinds, statuses, any_status, tags,
                   parse_since(since, today) if since else None)


def _split(value: str | list[str]) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [p.strip().lower() for item in items for p in str(item).split(",") if p.strip()]


def mask(index: LexicalIndex, cols: Columns, f: Filters) -> np.ndarray:
    """The live docs that pass the filters."""
    keep = cols.live.copy()
    if f.project is not None:
        code = cols.projects.index(f.project) if f.project in cols.projects else -1
        keep &= cols.project == code
    if f.kinds is not None:
        keep &= np.isin(cols.kind, [KIND_CODE[k] for k in f.kinds])
    if f.statuses is not None:
        keep &= np.isin(cols.status, [STATUS_CODE[s] for s in f.statuses if s in STATUS_CODE])
    if f.since is not None:
        keep &= cols.date >= f.since.toordinal()
    for tag in f.tags:
        tagged = np.zeros(len(keep), bool)
        for s, seg in enumerate(index.segments):
            tagged[seg.with_tag(tag) + cols.offsets[s]] = True
        keep &= tagged
    return keep
