"""The three atom types and the typed view of one atom file."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from cortexfs import layout
from cortexfs.errors import InvalidInputError


@dataclass(frozen=True)
class Kind:
    """One atom type: experiment, knowledge or pattern."""

    name: str  # experiment | knowledge | pattern
    short: str  # what `cortex new` takes: exp | k | pat
    prefix: str  # EXP | K | PAT
    folder: str = field(init=False)  # experiments | knowledge | patterns
    title: str  # Experiments | Knowledge | Patterns
    id_re: re.Pattern[str] = field(init=False)  # exactly this kind's ids
    required: tuple[str, ...]
    optional: tuple[str, ...]

    def __post_init__(self) -> None:
        # derived from the prefix, as plain attributes (read for every atom on hot paths)
        object.__setattr__(self, "folder", layout.KIND_FOLDERS[self.prefix])
        object.__setattr__(self, "id_re", re.compile(rf"^{layout.id_pattern(self.prefix)}\Z"))

    def format_id(self, number: int) -> str:
        return f"{self.prefix}-{number:03d}"

    @cached_property
    def file_re(self) -> re.Pattern[str]:
        """Exactly the file names of this kind's atoms (`EXP-042b.md`, `K-7.md` …)."""
        return re.compile(rf"^{layout.id_pattern(self.prefix)}{re.escape(layout.ATOM_EXT)}\Z")


_COMMON = ("id", "date", "project", "summary", "tags")
# (after `status` and a kind's own optional keys)
_OPTIONAL = ("links", "refs", "last-ref", "invalidated-date", "invalidated-reason", "priority",
             "src")

EXPERIMENT = Kind("experiment", "exp", "EXP", "Experiments", _COMMON,
                  ("status", "executor", *_OPTIONAL))
KNOWLEDGE = Kind("knowledge", "k", "K", "Knowledge", (*_COMMON, "evidence"),
                 ("status", *_OPTIONAL))
PATTERN = Kind("pattern", "pat", "PAT", "Patterns", (*_COMMON, "source-experiments"),
               ("status", "evidence", *_OPTIONAL))
KINDS: tuple[Kind, ...] = (EXPERIMENT, KNOWLEDGE, PATTERN)
KIND_BY_SHORT = {k.short: k for k in KINDS}
KIND_BY_PREFIX = {k.prefix: k for k in KINDS}

# Any atom id, as it appears in evidence, links, status suffixes and body text.
ATOM_ID = re.compile(rf"\b(?:{layout.ATOM_ID_PATTERN})\b")
_FILENAME = re.compile(rf"^({layout.ATOM_ID_PATTERN})\.md\Z")

# A summary is one line of an index table: `cortex new` refuses longer ones and
# `cortex validate` warns about them (the seed's longest example is 140 characters).
MAX_SUMMARY = 200

# SPEC §2: a knowledge summary starting ANTI-PATTERN: carries the tag anti-pattern, and the
# other way round (`cortex new` adds the tag; validate warns about either half alone).
ANTI_PATTERN_PREFIX = "ANTI-PATTERN:"
ANTI_PATTERN_TAG = "anti-pattern"

STATUSES = (
    "active", "valid", "partial", "challenged", "corrected",
    "superseded", "refined", "invalidated", "stale", "deprecated",
)
ACTIVE_STATUSES = frozenset({"active", "valid", "partial", "challenged", "corrected"})
SUPERSEDED_STATUSES = frozenset({"superseded", "refined", "stale", "deprecated"})
INVALIDATED_STATUSES = frozenset({"invalidated"})


def kind_of_filename(name: str) -> Kind | None:
    """The kind of an atom file name such as `EXP-042b.md`; None for any other file."""
    m = _FILENAME.match(name)
    return kind_of_id(m.group(1)) if m else None


def atom_of(rel: str) -> tuple[str, Kind, str] | None:
    """(project, kind, id) of the atom file `rel` (context/projects/P/<kind folder>/ID.md),
    else None."""
    parts = rel.split("/")
    if len(parts) != 5 or parts[:2] != [layout.CONTEXT, layout.PROJECTS]:
        return None
    kind = kind_of_filename(parts[4])
    if kind is None or kind.folder != parts[3]:
        return None
    return parts[2], kind, parts[4][:-3]


def kind_of_id(atom_id: str) -> Kind | None:
    prefix = atom_id.split("-", 1)[0]
    kind = KIND_BY_PREFIX.get(prefix)
    return kind if kind and kind.id_re.match(atom_id) else None


def id_number(atom_id: str) -> int | None:
    """42 for EXP-042 and EXP-042b; None when `atom_id` is not an atom id."""
    kind = kind_of_id(atom_id)
    if kind is None:
        return None
    m = kind.id_re.match(atom_id)
    return int(m.group(1)) if m else None


def split_status(raw: object) -> tuple[str, str | None]:
    """`superseded:EXP-050` → ("superseded", "EXP-050"); missing → ("active", None)."""
    if raw is None or raw == "":
        return "active", None
    text = str(raw).strip()
    name, sep, ref = text.partition(":")
    return name.strip().lower(), (ref.strip() or None) if sep else None


def status_group(status: str) -> str:
    """Which index table an atom with this status belongs to."""
    if status in INVALIDATED_STATUSES:
        return "invalidated"
    if status in SUPERSEDED_STATUSES:
        return "superseded"
    return "active"


def as_list(value: object) -> list[str]:
    """A frontmatter list field, leniently: a list, a comma-separated string, or nothing."""
    if value is None:
        return []
    if isinstance(value, list):  # (each value stripped once: this runs for every atom)
        return [s for v in value if v is not None and (s := str(v).strip())]
    return [s for p in str(value).split(",") if (s := p.strip())]


def as_date(value: object) -> dt.date | None:
    """The date of a frontmatter value (ISO date or timestamp string); None if not a date."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None


_AGE = re.compile(r"(\d{1,9})([dwmy])")
_AGE_DAYS = {"d": 1, "w": 7, "m": 30, "y": 365}


def parse_since(value: str, today: dt.date | None = None) -> dt.date:
    """A `--since` value: `2026-03-01`, or an age before today — `7d`, `2w`, `3m` (30-day
    months), `1y` (365 days)."""
    text = value.strip().lower()
    m = _AGE.fullmatch(text)
    try:
        if m:
            return (today or dt.date.today()) - dt.timedelta(days=int(m[1]) * _AGE_DAYS[m[2]])
        return dt.date.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"--since {value[:40]!r} is not a date: give YYYY-MM-DD or an "
                                "age such as 7d, 2w, 3m, 1y") from None
    except OverflowError:
        raise InvalidInputError(f"--since {value[:40]!r} reaches back before the year 1: give "
                                "a shorter age or a date") from None


@dataclass
class Atom:
    """One atom file, parsed. `meta` is the frontmatter with dates as ISO strings."""

    path: Path
    kind: Kind
    meta: dict[str, Any]
    body: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def file_id(self) -> str:
        return self.path.stem

    @property
    def id(self) -> str:
        raw = self.meta.get("id")
        return str(raw) if raw is not None else self.file_id

    @property
    def date(self) -> dt.date | None:
        return as_date(self.meta.get("date"))

    @property
    def project(self) -> str | None:
        raw = self.meta.get("project")
        return None if raw is None else str(raw)

    @property
    def summary(self) -> str:
        raw = self.meta.get("summary")
        return "" if raw is None else str(raw)

    @property
    def tags(self) -> list[str]:
        return as_list(self.meta.get("tags"))

    @property
    def status(self) -> str:
        return split_status(self.meta.get("status"))[0]

    @property
    def status_ref(self) -> str | None:
        return split_status(self.meta.get("status"))[1]

    @property
    def group(self) -> str:
        return status_group(self.status)

    @property
    def evidence(self) -> list[str]:
        return as_list(self.meta.get("evidence"))

    @property
    def source_experiments(self) -> list[str]:
        return as_list(self.meta.get("source-experiments"))

    @property
    def links(self) -> list[str]:
        return as_list(self.meta.get("links"))

    @property
    def refs(self) -> int:
        raw = self.meta.get("refs")
        return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else 0

    @property
    def last_ref(self) -> str | None:
        raw = self.meta.get("last-ref")
        return str(raw) if raw else None

    def cited_experiments(self) -> list[str]:
        """Experiment ids this atom rests on (evidence and source-experiments), deduplicated."""
        return list(dict.fromkeys([*self.evidence, *self.source_experiments]))
