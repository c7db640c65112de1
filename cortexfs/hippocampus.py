"""HIPPOCAMPUS.md: the sparse memory index of hippocampus.md v1.0, generated from the atoms
and access logs of every project (a derived generator run by `cortex index regen`).

One index entry per active atom (superseded and invalidated atoms are left to each
project's index.md): a heading, the summary, a `→` pointer to the atom file (relative to
the knowledge root) and `<!-- hx: id | created | accessed | hits | str | tags | rel -->`,
plus `pri` and `src` when the atom's frontmatter sets `priority` / `src` (default
`src=auto`). Ids are qualified by project (`flywheel/K-012`): bare ids repeat across projects.
`rel` is the atom's links, evidence and source experiments, both directions, among indexed
atoms of the same project.

Strength is `cortexfs.strength.strength` of the hours since the last access (or since the
atom's date when it was never read), with the priority, manual-source and 3+-related
modifiers. The file must not change while nothing happens (regeneration is idempotent and
`cortex ready` fails when it would change a byte), so the clock is the store's own: hours
are counted up to the newest event the store holds — the latest access-log timestamp or
atom date — which is also the header's `reindexed`. Like hippocampus.md v2's per-turn decay,
memory fades with activity, not while the agent is away; the next read or new atom moves
the clock and every strength with it.

Sections: Quick Access (top 20 by hits), By Topic (project · primary tag), By Time (this
week / this month / older, by last access relative to `reindexed`), Associations, Decay
Queue (str < 0.1), Meta. In the generated files `→` only ever introduces pointers (a `→`
in a summary is written `->`), which is what `check_pointers` relies on.

Past the spec's 15,000-token ceiling the index becomes hierarchical (hippocampus.md §9.2):
HIPPOCAMPUS.md is a master of at most 10,000 tokens (Quick Access in full, per-project
topic lines, the newest, most connected and weakest entries as one-liners), and
`.hippocampus/` holds `topics/<project>.md` (every entry in full), `temporal/YYYY-MM.md`
(one-liners by month of last access), `decay-queue.md` and `meta.json`.

Regeneration is incremental (`regen`): each project's entries — everything but their
strength, which depends on the store clock — are cached under
`.cache/hippocampus/<project>.bin`, keyed by that project's input fingerprint, so a change
in one project rebuilds that project's entries only — and one new atom (`cortex new`) is
added to them (`with_added`), when nothing else changed there. The hierarchical files are rendered
from each project's view (`project_view`: its figures, the heads of every ordering the
master shows, its rows of each month and of the decay queue), cached under
`.cache/hippocampus-views/<project>.bin` by the part's key and the store clock, so the
entries of a project whose inputs and clock did not move are not even read; a file whose
inputs did not move is not rendered. The result is byte for byte what a build from the
atoms gives; a missing, stale or corrupt cache only costs a rebuild.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import heapq
import itertools
import json
import marshal
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from cortexfs import escape, wall
from cortexfs.accesslog import AccessStats
from cortexfs.atoms import KINDS, Atom, as_date, split_status, status_group
from cortexfs.layout import HIPPOCAMPUS_DIR, HIPPOCAMPUS_MD
from cortexfs.strength import strength
from cortexfs.tokens import chars_for, estimate

if TYPE_CHECKING:
    from cortexfs.loader import LoadedProject
    from cortexfs.store import Store

VERSION = "hippocampus.md v1.0"
MAX_TOKENS = 15_000  # spec §13 max_recommended_tokens: past it, go hierarchical
MASTER_MAX_TOKENS = 10_000  # spec §9.2: "Master index (~200 top entries, <10K tokens)"
QUICK_ACCESS = 20
DECAY_THRESHOLD = 0.1
WEEK_DAYS = 7
MONTH_DAYS = 30
MAX_REL_SHOWN = 8
MAX_SUMMARY = 300
MAX_LINE_SUMMARY = 120
MASTER_CAPS = (40, 25, 15, 10, 6, 3, 1, 0)  # list lengths of the master, tried in turn
MASTER_PER_PROJECT = MASTER_CAPS[0] // 8  # a project's strongest entries shown, at most
BANDS = (("strong", 0.8), ("moderate", 0.5), ("weak", 0.3), ("decaying", 0.1), ("silent", 0.0))

_TOPIC_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.md\Z")
_TEMPORAL_FILE = re.compile(r"^\d{4}-\d{2}\.md\Z")
_DATETIME = dt.datetime  # (remembered: what is parsed once may outlive a patched class)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_US = dt.timedelta(microseconds=1)
_US_PER_DAY = 86_400_000_000
_KEY = attrgetter("key")
_HITS = attrgetter("hits")
_STRENGTH = attrgetter("strength")


class MemoryEntry:
    """One atom as the index shows it.

    `event_us` is the time of the last read, or of the atom's date when it was never read,
    in microseconds since the epoch (None when neither is known); `strength` is filled in
    once the store clock is known. `atom` is the Atom when the entry was built from one
    (None when it came from the cache). The rendered pieces (`pieces()`) depend on nothing
    but the entry itself, so they are cached with it.
    """

    __slots__ = ("key", "project", "kind", "pointer", "summary", "status", "created",
                 "accessed_day", "event_us", "event_day", "event_month", "hits", "rel", "tags",
                 "topic", "priority", "src", "strength", "atom", "_line")

    def __init__(self, key: str, project: str, kind: str, pointer: str, summary: str,
                 status: str, created: dt.date | None, accessed: dt.datetime | None, hits: int,
                 rel: list[str], tags: list[str], priority: str | None, src: str,
                 atom: Atom | None = None) -> None:
        self.key = key
        self.project = project
        self.kind = kind  # the atom folder: experiments, knowledge or patterns
        self.pointer = pointer  # path relative to the knowledge root
        self.summary = " ".join(summary.split())  # on one line
        self.status = status
        self.created = created
        event = accessed if accessed is not None else _day_start(created) if created else None
        if event is None:
            self.event_us, self.event_day, self.event_month = None, "never", "undated"
        else:  # (the times a store repeats — dates, reads — worked out once)
            self.event_us, self.event_day, self.event_month = \
                _memo(_EVENTS, event, _event_fields) if event.tzinfo is dt.UTC \
                else _event_fields(event)
        self.accessed_day = self.event_day if accessed is not None else "never"
        self.hits = hits
        self.rel = rel
        self.tags = tags  # made safe for the hx comment
        self.topic = tags[0] if tags else "untagged"  # the primary tag
        self.priority = priority
        self.src = src
        self.strength = 1.0
        self.atom = atom
        self._line: str | None = None  # the third piece, once made

    @property
    def id(self) -> str:
        return self.key[len(self.project) + 1:]

    def pieces(self) -> tuple[str, str, str]:
        """(entry text up to its strength, the rest of it, its one-liner up to the detail):
        see `render_entry` and `one_liner`. The first two are made afresh each time: an entry
        is rendered in full once per run (in its topic file) at most, save the few of Quick
        Access, and keeping them would hold ~1 KB per entry until the run ends (~100 MB of
        a 100,000-atom store's peak)."""
        tail = " | tags=" + ",".join(self.tags) if self.tags else ""
        if self.rel:
            shown = self.rel[:MAX_REL_SHOWN]
            more = len(self.rel) - len(shown)
            tail += " | rel=" + ",".join(shown) + (f",+{more}" if more else "")
        if self.priority:
            tail += f" | pri={_memo(_SAFE_WORDS, self.priority, escape.comment)}"
        return (f"{self.key}\n{clean_text(self.summary)}\n→ {self.pointer}\n<!-- hx: id={self.key}"
                f" | created={_day(self.created)} | accessed={self.accessed_day} | hits="
                f"{self.hits} | str=",
                f"{tail} | src={_memo(_SAFE_WORDS, self.src, escape.comment)} -->\n", self.line())

    def line(self) -> str:
        """The one-liner up to its detail (the third piece; cached with the entry, as every
        run that renders anything shows every entry's one-liner in the temporal files)."""
        if self._line is None:  # (the summary is on one line already)
            self._line = f"- {self.key} — {clean_text(self.summary, MAX_LINE_SUMMARY)}"
        return self._line

    # the cache form: a tuple of plain values (marshal writes nothing else)

    def to_row(self) -> tuple[Any, ...]:
        return (self.key, self.kind, self.pointer, self.summary, self.status,
                self.created.toordinal() if self.created else 0, self.accessed_day,
                self.event_us, self.event_day, self.event_month, self.hits, self.rel,
                self.tags, self.priority, self.src, self.line())

    @classmethod
    def from_row(cls, project: str, row: tuple[Any, ...]) -> MemoryEntry:
        self = cls.__new__(cls)
        (self.key, self.kind, self.pointer, self.summary, self.status, created,
         self.accessed_day, self.event_us, self.event_day, self.event_month, self.hits,
         self.rel, self.tags, self.priority, self.src, line) = row
        if not (isinstance(self.key, str) and isinstance(line, str)
                and isinstance(self.rel, list) and isinstance(self.tags, list)
                and isinstance(self.hits, int) and isinstance(created, int)
                and self.key.startswith(project + "/")):
            raise ValueError("not an entry")
        self.project = project
        self.topic = self.tags[0] if self.tags else "untagged"
        self.created = dt.date.fromordinal(created) if created else None
        self.strength = 1.0
        self.atom = None
        self._line = line
        return self


@dataclass
class Part:
    """One project's share of the index: its entries (strengths not yet set, in the order
    of their atoms), what it left out and why, the reads in its log, its newest event (µs
    since the epoch), how many atoms of each kind (atom folder) parsed, and the ids its
    entries cite that are none of them, each with the citing ids (both sorted): what an
    atom added later relates to (`with_added`)."""

    project: str
    entries: list[MemoryEntry]
    skipped: dict[str, int]
    reads: int
    newest_us: int | None
    kinds: dict[str, int]
    dangling: dict[str, list[str]] = field(default_factory=dict)

    def to_cache(self) -> tuple[Any, ...]:
        return ([e.to_row() for e in self.entries], self.skipped, self.reads, self.newest_us,
                self.kinds, self.dangling)

    @classmethod
    def from_cache(cls, project: str, data: Any) -> Part:
        rows, skipped, reads, newest_us, kinds, dangling = data
        if not (isinstance(skipped, dict) and isinstance(reads, int) and isinstance(kinds, dict)
                and (newest_us is None or isinstance(newest_us, int))
                and isinstance(rows, list) and isinstance(dangling, dict)):
            raise ValueError("not a part")
        return cls(project, [MemoryEntry.from_row(project, row) for row in rows], skipped,
                   reads, newest_us, kinds, dangling)


@dataclass
class MemoryIndex:
    """Everything the generated files are rendered from."""

    entries: list[MemoryEntry]
    reference: dt.datetime | None  # the store clock: newest access or atom date
    skipped: Counter[str] = field(default_factory=Counter)  # why atoms are not indexed
    reads: int = 0


# --- building ----------------------------------------------------------------------------------


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def _day_start(day: dt.date) -> dt.datetime:
    """_midnight, remembered per day."""
    found: dt.datetime = _memo(_MIDNIGHTS, day, _midnight)
    return found


def _event_fields(event: dt.datetime) -> tuple[int, str, str]:
    """(µs since the epoch, day, month) of an entry's event."""
    day = event.date().isoformat()
    return ((event - _EPOCH) // _US, day,
            day[:7] if event.year >= 1000 else event.strftime("%Y-%m"))


def parse_time(value: object) -> dt.datetime | None:
    """An access-log `ts`, `last-ref` or date as an aware UTC datetime; None if not one."""
    if isinstance(value, _DATETIME):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, dt.date):
        return _midnight(value)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.astimezone(dt.UTC) if when.tzinfo else when.replace(tzinfo=dt.UTC)


_MEMO_MAX = 50_000  # per memo: a long-running watcher keeps its memory bounded
_DATES: dict[str, dt.date | None] = {}
_STATUSES: dict[str | None, tuple[str, str]] = {}
_TIMES: dict[str, dt.datetime | None] = {}
_MIDNIGHTS: dict[dt.date, dt.datetime] = {}
_EVENTS: dict[dt.datetime, tuple[int, str, str]] = {}  # (UTC times only: equal instants in
# other zones fall on other days)


def _memo(table: dict[Any, Any], key: Any, make: Any) -> Any:
    found = table.get(key, table)
    if found is table:
        if len(table) > _MEMO_MAX:
            table.clear()
        found = table[key] = make(key)
    return found


def _atom_date(meta: dict[str, Any]) -> dt.date | None:
    """Atom.date, with the dates a store repeats remembered."""
    value = meta.get("date")
    return _memo(_DATES, value, as_date) if type(value) is str else as_date(value)


def _atom_status(meta: dict[str, Any]) -> tuple[str, str]:
    """(Atom.status, its group), remembered per raw value."""
    value = meta.get("status")
    if value is None or type(value) is str:
        return _memo(_STATUSES, value, lambda v: (s := split_status(v)[0], status_group(s)))
    status = split_status(value)[0]
    return status, status_group(status)


def _time(value: object) -> dt.datetime | None:
    """parse_time, with the timestamps seen twice (the log's and last-ref) parsed once."""
    if type(value) is str:
        return _memo(_TIMES, value, parse_time)
    return parse_time(value) if value else None


def project_part(name: str, atoms: Iterable[Atom], stats: AccessStats | None) -> Part:
    """The entries of one project's active atoms, with `stats` (its folded access log)
    giving hits and last access."""
    st = stats or AccessStats()
    skipped: Counter[str] = Counter()
    newest: dt.datetime | None = None
    reads = 0
    entries: dict[str, MemoryEntry] = {}
    cites: list[tuple[str, list[str]]] = []
    counts, logged_newest = st.counts, st.newest
    kinds: Counter[str] = Counter()
    for atom in atoms:
        meta = atom.meta
        file = atom.path.name
        folder = atom.kind.folder
        kinds[folder] += 1
        count = counts.get(file, 0)
        reads += count
        hits = max(count, atom.refs)
        raw_last = meta.get("last-ref")  # Atom.last_ref: str(raw) if raw else None
        logged = _time(logged_newest.get(file))
        noted = _time(raw_last if type(raw_last) is str or not raw_last else str(raw_last))
        accessed = max(logged, noted) if logged and noted else logged or noted
        created = _atom_date(meta)
        if accessed is not None and (newest is None or accessed > newest):
            newest = accessed
        if created is not None:
            midnight = _day_start(created)
            if newest is None or midnight > newest:
                newest = midnight
        status, group = _atom_status(meta)
        if group != "active":
            skipped[group] += 1
            continue
        if created is None and accessed is None:
            skipped["undated"] += 1
            continue
        priority, src = meta.get("priority"), meta.get("src")
        atom_id = atom.id
        entries[atom_id] = MemoryEntry(
            f"{name}/{atom_id}", name, folder, f"projects/{name}/{folder}/{file}",
            atom.summary, status, created, accessed, hits, [],
            [t for t in (_memo(_SAFE_WORDS, t, escape.comment) for t in atom.tags) if t],
            str(priority).strip().lower() if priority not in (None, "") else None,
            str(src).strip().lower() if src not in (None, "") else "auto", atom)
        cites.append((atom_id, [*atom.links, *atom.cited_experiments()]))
    related: dict[str, set[str]] = {aid: set() for aid in entries}
    dangling: dict[str, set[str]] = {}
    for aid, targets in cites:
        for target in targets:
            if target not in entries:
                dangling.setdefault(target, set()).add(aid)
            elif target != aid:
                related[aid].add(target)
                related[target].add(aid)
    for aid, entry in entries.items():
        if related[aid]:
            entry.rel = sorted(f"{name}/{r}" for r in related[aid])
    return Part(name, list(entries.values()), dict(skipped), reads,
                (newest - _EPOCH) // _US if newest is not None else None, dict(kinds),
                {target: sorted(ids) for target, ids in sorted(dangling.items())})


_FOLDER_ORDER = {kind.folder: i for i, kind in enumerate(KINDS)}


def _atom_order(entry: MemoryEntry) -> tuple[int, str]:
    """Where an entry's atom comes in a project's atoms: kind, then file name."""
    return _FOLDER_ORDER.get(entry.kind, len(KINDS)), entry.pointer.rpartition("/")[2]


def with_added(part: Part, atom: Atom, stats: AccessStats | None) -> Part | None:
    """`part` with one more atom (a new file: `cortex new`'s), exactly the part
    `project_part` makes of all of them; None when that is not certain here and the caller
    builds it afresh: the atom is not indexed, its id is taken, its kind is new to the
    project, or the entries are not in their atoms' order (an id used twice)."""
    name = part.project
    one = project_part(name, [atom], stats)
    if len(one.entries) != 1 or not set(one.kinds) <= set(part.kinds):
        return None
    new = one.entries[0]
    by_id = {e.id: e for e in part.entries}
    places = [_atom_order(e) for e in part.entries]
    # (an id used by two files leaves one entry for both, placed by the first, pointing at
    # the last: the atoms parsed and not left out then outnumber the entries)
    if new.id in by_id or len(by_id) != len(places) \
            or sum(part.kinds.values()) - sum(part.skipped.values()) != len(places) \
            or any(a >= b for a, b in zip(places, places[1:], strict=False)):
        return None
    dangling = {target: set(ids) for target, ids in part.dangling.items()}
    related = dangling.pop(new.id, set())  # the entries citing it
    for target in [*atom.links, *atom.cited_experiments()]:
        if target in by_id:
            related.add(target)
        elif target != new.id:
            dangling.setdefault(target, set()).add(new.id)
    for aid in related:
        by_id[aid].rel = sorted({*by_id[aid].rel, f"{name}/{new.id}"})
    new.rel = sorted(f"{name}/{r}" for r in related)
    at = bisect.bisect(places, _atom_order(new))
    newest = max((t for t in (part.newest_us, one.newest_us) if t is not None), default=None)
    return Part(name, [*part.entries[:at], new, *part.entries[at:]], part.skipped,
                part.reads + one.reads, newest,
                {folder: n + one.kinds.get(folder, 0) for folder, n in part.kinds.items()},
                {target: sorted(ids) for target, ids in sorted(dangling.items())})


def assemble(parts: Iterable[Part]) -> MemoryIndex:
    """The index of several projects' parts: the store clock is the newest event of any,
    and every entry's strength is counted up to it."""
    entries: list[MemoryEntry] = []
    skipped: Counter[str] = Counter()
    reads = 0
    ref_us: int | None = None
    for part in parts:
        entries += part.entries
        skipped.update(part.skipped)
        reads += part.reads
        if part.newest_us is not None and (ref_us is None or part.newest_us > ref_us):
            ref_us = part.newest_us
    _set_strengths(entries, ref_us)
    entries.sort(key=_KEY)
    reference = _EPOCH + ref_us * _US if ref_us is not None else None
    return MemoryIndex(entries, reference, +skipped, reads)


def _set_strengths(entries: Iterable[MemoryEntry], ref_us: int | None) -> None:
    """Each entry's strength, counted up to the store clock `ref_us` (µs since the epoch)."""
    for entry in entries:
        event = entry.event_us
        # exactly timedelta.total_seconds() / 3600 of the two instants
        hours = (ref_us - event) / 10**6 / 3600 if ref_us is not None and event is not None \
            else 0.0
        entry.strength = strength(hours, priority=entry.priority, src=entry.src,
                                  related=len(entry.rel))


def build(loaded: Iterable[LoadedProject], stats: Mapping[str, AccessStats]) -> MemoryIndex:
    """The index of the active atoms of `loaded` projects, with `stats` (project name →
    folded access log) giving hits and last access."""
    return assemble(project_part(lp.project.name, lp.atoms, stats.get(lp.project.name))
                    for lp in loaded)


# --- rendering ---------------------------------------------------------------------------------


def _iso(when: dt.datetime | None) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else "never"


def _day(when: dt.datetime | dt.date | None) -> str:
    if when is None:
        return "never"
    return when.date().isoformat() if isinstance(when, _DATETIME) else when.isoformat()


def clean_text(text: str, limit: int = MAX_SUMMARY) -> str:
    """A summary as one escaped markdown line (escape.line: no newline, HTML, comment
    markers, links or leading block syntax), clipped, with `→` (which introduces pointers
    here) written `->`."""
    text = escape.line(text, limit)
    if "→" in text:
        text = text.replace("→", "->")  # (after escaping: `>` alone is no markup here)
    return text or "_(no summary)_"


_SAFE_WORDS: dict[str, str] = {}


def render_entry(entry: MemoryEntry, level: int = 3) -> str:
    """Heading, summary, pointer and hx metadata (hippocampus.md §5.1)."""
    head, tail, _ = entry.pieces()
    return f"{'#' * level} {head}{entry.strength:.2f}{tail}"


def one_liner(entry: MemoryEntry, detail: str = "") -> str:
    extra = f" ({detail})" if detail else ""
    return f"{entry.line()}{extra} → {entry.pointer}\n"


def quick_access(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    """The QUICK_ACCESS most read of `entries`."""
    return heapq.nsmallest(QUICK_ACCESS, (e for e in entries if e.hits > 0),
                           key=lambda e: (-e.hits, -e.strength, e.key))


def _strength_order(e: MemoryEntry) -> tuple[float, int, str]:
    return (-e.strength, -e.hits, e.key)


# The orders below sort in stable passes on one plain key each, from the last tie-breaker to
# the first (the key order is one cheap pass over the entries, which come in it): the same
# order as one sort on a tuple key, ~3x faster (tuples made and compared per entry: 0.17 s
# of a 100,000-atom regeneration went to `recent_first` alone).
def by_strength(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    """In `_strength_order`."""
    out = sorted(entries, key=_KEY)
    out.sort(key=_HITS, reverse=True)  # (reverse keeps equal ones in their order)
    out.sort(key=_STRENGTH, reverse=True)
    return out


NEVER_US = (dt.datetime.min.replace(tzinfo=dt.UTC) - _EPOCH) // _US


def _event_us(e: MemoryEntry) -> int:
    return e.event_us if e.event_us is not None else NEVER_US


def recent_first(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    """Newest event first, then by key."""
    out = sorted(entries, key=_KEY)
    out.sort(key=_event_us, reverse=True)
    return out


def time_buckets(index: MemoryIndex) -> dict[str, list[MemoryEntry]]:
    """This Week / This Month / Older by last access (or date), relative to `reference`."""
    ref = (index.reference - _EPOCH) // _US if index.reference is not None else None
    return _buckets(ref, recent_first(index.entries))


def _buckets(ref: int | None, recent: Iterable[MemoryEntry]) -> dict[str, list[MemoryEntry]]:
    """time_buckets of entries in `recent_first` order, with the clock `ref` in µs."""
    out: dict[str, list[MemoryEntry]] = {"This Week": [], "This Month": [], "Older": []}
    for entry in recent:
        event = entry.event_us
        age = (ref - event) // _US_PER_DAY if ref is not None and event is not None else 0
        bucket = "This Week" if age < WEEK_DAYS else "This Month" if age < MONTH_DAYS \
            else "Older"
        out[bucket].append(entry)
    return out


def decay_queue(index: MemoryIndex) -> list[MemoryEntry]:
    """The entries below DECAY_THRESHOLD, weakest first, then by key."""
    weak = sorted((e for e in index.entries if e.strength < DECAY_THRESHOLD), key=_KEY)
    weak.sort(key=_STRENGTH)
    return weak


def _header(figures: _Figures, extra: str = "") -> str:
    return (f"<!-- {VERSION} | entries: {figures.entries} | "
            f"reindexed: {_iso(figures.reference)}{extra} -->\n")


_INTRO = ("> Auto-generated by `cortex index regen` from atoms and access logs. Do not edit.\n"
          "> Pointers are paths relative to the knowledge root (the folder of HIPPOCAMPUS.md).\n"
          "> Strength is computed as of `reindexed`, the newest read or atom in the store.\n")


@dataclass
class _Figures:
    """The store-wide figures of the index (its header and Meta section): from the entries,
    or summed over the projects' views."""

    entries: int
    projects: int
    kinds: Counter[str]
    bands: Counter[str]
    average: float
    reads: int
    reference: dt.datetime | None
    skipped: Counter[str]

    @classmethod
    def of_index(cls, index: MemoryIndex) -> _Figures:
        entries = index.entries
        return cls(len(entries), len({e.project for e in entries}),
                   Counter(e.kind for e in entries), band_counts(entries),
                   sum(e.strength for e in entries) / len(entries) if entries else 0.0,
                   index.reads, index.reference, index.skipped)

    @classmethod
    def of_views(cls, views: Mapping[str, dict[str, Any]], reference: dt.datetime | None,
                 reads: int, skipped: Counter[str]) -> _Figures:
        kinds: Counter[str] = Counter()
        bands: Counter[str] = Counter({name: 0 for name, _ in BANDS})
        count = 0
        for view in views.values():
            count += view["n"]
            kinds.update(view["kinds"])
            bands.update(view["bands"])
        # summed in the entries' key order, as of_index does: the same float to the last bit
        in_order = sorted(views.items(), key=lambda item: item[0] + "/")
        total = sum(itertools.chain.from_iterable(v["strengths"] for _, v in in_order))
        return cls(count, sum(1 for v in views.values() if v["n"]), kinds, bands,
                   total / count if count else 0.0, reads, reference, skipped)


def _meta_section(figures: _Figures, layout: str) -> list[str]:
    """The Meta section, which ends both layouts' HIPPOCAMPUS.md."""
    kinds, bands, projects = figures.kinds, figures.bands, figures.projects
    lines = [
        f"- Entries: {figures.entries} in {projects} project{'s' if projects != 1 else ''} "
        f"(" + ", ".join(f"{k} {kinds[k]}" for k in ("experiments", "knowledge", "patterns"))
        + ")",
        f"- Average strength: {figures.average:.2f}",
        "- Strength: " + " · ".join(f"{name} {bands[name]}" for name, _ in BANDS),
        f"- Reads recorded: {figures.reads}; store clock (reindexed): "
        f"{_iso(figures.reference)}",
    ]
    if figures.skipped:
        lines.append("- Not indexed: " + ", ".join(
            f"{n} {why}" for why, n in sorted(figures.skipped.items()))
            + " (see each project's index.md)")
    lines.append(f"- Layout: {layout}")
    return [*_section("Meta", "Index statistics and health.", blank=True),
            *(line + "\n" for line in lines)]


def band_counts(entries: Iterable[MemoryEntry]) -> Counter[str]:
    counts: Counter[str] = Counter({name: 0 for name, _ in BANDS})
    for e in entries:
        for name, floor in BANDS:
            if e.strength >= floor:
                counts[name] += 1
                break
    return counts


def _section(title: str, comment: str, *, blank: bool = False) -> list[str]:
    """A section's heading and comment (and the blank line its body starts with)."""
    return [f"\n## {title}\n", f"<!-- {comment} -->\n", *(["\n"] if blank else [])]


def render_single(index: MemoryIndex) -> str:
    """The whole index in one file (hippocampus.md §5.3)."""
    figures = _Figures.of_index(index)
    out = [_header(figures), "# HIPPOCAMPUS.md — Memory Index\n\n", _INTRO]
    out += _section("Quick Access",
                    "Most-accessed entries, sorted by hits. Pattern completion starts here.")
    qa = quick_access(index.entries)
    out += ["\n" + render_entry(e) for e in qa] or ["\n_No reads recorded yet._\n"]
    out += _section("By Topic", "Every entry, by project and primary tag, strongest first.")
    groups: dict[tuple[str, str], list[MemoryEntry]] = {}
    for e in by_strength(index.entries):  # each group in that order too
        groups.setdefault((e.project, e.topic), []).append(e)
    for (project, topic), members in sorted(groups.items()):
        out.append(f"\n### {project} · {topic}\n")
        out += ["\n" + render_entry(e, 4) for e in members]
    if not groups:
        out.append("\n_No entries._\n")
    out += _section("By Time", "By last access (or date when never read), relative to "
                               "reindexed.")
    for bucket, members in time_buckets(index).items():
        out.append(f"\n### {bucket}\n\n")
        out += [one_liner(e, e.event_day) for e in members] or ["_None._\n"]
    out += _section("Associations", "Cross-reference map: which entries relate to which.",
                    blank=True)
    linked = [e for e in index.entries if e.rel]
    out += [f"- {e.key} ↔ {', '.join(e.rel)}\n" for e in linked] or ["_None._\n"]
    out += _section("Decay Queue", f"Entries below strength {DECAY_THRESHOLD}, weakest first: "
                                   "candidates for pruning.", blank=True)
    out += [one_liner(e, f"str {e.strength:.2f}") for e in decay_queue(index)] or ["_Empty._\n"]
    out += _meta_section(figures, f"single file (hierarchical past ~{MAX_TOKENS:,} tokens)")
    return "".join(out)


def _topic_file(reference: dt.datetime | None, project: str, members: list[MemoryEntry]) -> str:
    """A project's topic file; `members` strongest first."""
    out = [f"<!-- {VERSION} | topic: {project} | entries: {len(members)} | "
           f"reindexed: {_iso(reference)} -->\n",
           f"# HIPPOCAMPUS — {project}\n\n", _INTRO]
    groups: dict[str, list[MemoryEntry]] = {}
    for e in members:
        groups.setdefault(e.topic, []).append(e)
    for topic, group in sorted(groups.items()):
        out.append(f"\n## {topic}\n")
        out += ["\n" + render_entry(e) for e in group]
    return "".join(out)


def _temporal_file(reference: dt.datetime | None, month: str, lines: list[str]) -> str:
    out = [f"<!-- {VERSION} | month: {month} | entries: {len(lines)} | "
           f"reindexed: {_iso(reference)} -->\n",
           f"# HIPPOCAMPUS — {month}\n\n", _INTRO,
           "\nEntries whose last access (or date, when never read) falls in this month.\n\n"]
    return "".join(out + lines)


def _decay_file(reference: dt.datetime | None, lines: list[str]) -> str:
    out = [f"<!-- {VERSION} | decay-queue | entries: {len(lines)} | "
           f"reindexed: {_iso(reference)} -->\n",
           "# HIPPOCAMPUS — Decay Queue\n\n", _INTRO,
           f"\nEntries below strength {DECAY_THRESHOLD}, weakest first.\n\n"]
    return "".join(out + (lines or ["_Empty._\n"]))


def topic_path(project: str) -> str:
    """Where a project's topic file goes (relative to the knowledge root)."""
    return f"{HIPPOCAMPUS_DIR}/topics/{project}.md"


def temporal_path(month: str) -> str:
    """Where a month's temporal file goes (relative to the knowledge root)."""
    return f"{HIPPOCAMPUS_DIR}/temporal/{month}.md"


DECAY_PATH = f"{HIPPOCAMPUS_DIR}/decay-queue.md"
_HEADS = MASTER_CAPS[0]  # the longest list the master shows of any ordering


def project_view(entries: list[MemoryEntry], ref_us: int | None) -> dict[str, Any]:
    """What the hierarchical files show of one project's entries (in key order, strengths
    counted up to the store clock `ref_us`), as plain values a cache can hold: its figures,
    the first `_HEADS` of every ordering the master picks from, and every entry's line of
    each month and of the decay queue as marshal blobs (read only when their file is
    rendered) with a digest of each (`sigs`: what the file keys of `file_keys` are made of).

    Each ordering of the store is a merge of the projects' (its ties are broken by key), so
    the files rendered from the views are those rendered from the entries."""
    from cortexfs.cache import digest

    recent = recent_first(entries)
    months: dict[str, list[tuple[int, str, str]]] = {}
    for e in recent:
        months.setdefault(e.event_month, []).append((-_event_us(e), e.key,
                                                     one_liner(e, e.event_day)))
    buckets = _buckets(ref_us, recent)
    weak = [e for e in entries if e.strength < DECAY_THRESHOLD]
    weak.sort(key=_STRENGTH)
    decay = [(e.strength, e.key, one_liner(e, f"str {e.strength:.2f}")) for e in weak]
    linked = [e for e in entries if e.rel]
    tags = Counter(e.topic for e in entries)  # in key order: among equally common, the first
    # marshal format 2 has no back-references: equal rows always give equal bytes
    blobs = {month: marshal.dumps(rows, 2) for month, rows in months.items()}
    decay_blob = marshal.dumps(decay, 2)
    sigs = {month: digest(blob).hex() for month, blob in blobs.items()}
    sigs[""] = digest(decay_blob).hex()
    return {
        "n": len(entries),
        "kinds": dict(Counter(e.kind for e in entries)),
        "bands": dict(band_counts(entries)),
        "strengths": [e.strength for e in entries],
        "tags": tags.most_common(6),
        "strongest": [one_liner(e, f"str {e.strength:.2f}") for e in
                      heapq.nsmallest(MASTER_PER_PROJECT, entries, key=_strength_order)],
        "quick": [(-e.hits, -e.strength, e.key, render_entry(e)) for e in quick_access(entries)],
        "buckets": {name: ([(-_event_us(e), e.key, one_liner(e, e.event_day))
                            for e in buckets[name][:_HEADS]], len(buckets[name]))
                    for name in ("This Week", "This Month")},
        "older": dict(Counter(e.event_month for e in buckets["Older"])),
        "linked": [(-len(e.rel), e.key, _association(e)) for e in
                   heapq.nsmallest(_HEADS, linked, key=lambda e: (-len(e.rel), e.key))],
        "linked_n": len(linked),
        "decay_head": decay[:_HEADS],
        "decay_n": len(decay),
        "months": blobs,
        "month_sizes": {month: len(rows) for month, rows in months.items()},
        "decay": decay_blob,
        "sigs": sigs,
    }


def _association(e: MemoryEntry) -> str:
    more = len(e.rel) - MAX_REL_SHOWN
    return f"- {e.key} ↔ {', '.join(e.rel[:MAX_REL_SHOWN])}{f' (+{more})' if more > 0 else ''}\n"


def file_keys(views: Mapping[str, dict[str, Any]], reference: dt.datetime | None) \
        -> dict[str, str]:
    """A key of everything each temporal file and the decay queue is rendered from (the
    clock and each project's share of its lines): equal keys, equal files."""
    from cortexfs.cache import digest

    shares: dict[str, list[tuple[str, str]]] = {}
    for project, view in sorted(views.items()):
        for month, sig in view["sigs"].items():
            shares.setdefault(temporal_path(month) if month else DECAY_PATH, []).append(
                (project, sig))
    clock = _iso(reference)
    return {rel: digest(marshal.dumps((clock, rows), 2)).hex() for rel, rows in shares.items()}


def _merged(blobs: Iterable[bytes | None]) -> list[str]:
    """The lines of the sorted rows in `blobs` (from the views), merged in their order."""
    rows = [marshal.loads(blob) for blob in blobs if blob is not None]
    # (timsort finds the sorted runs and merges them in C: ~3x the speed of heapq.merge)
    return [line for _, _, line in (sorted(itertools.chain.from_iterable(rows))
                                    if len(rows) > 1 else rows[0] if rows else [])]


def render_hierarchical(index: MemoryIndex, known_topics: Iterable[str] = ()) \
        -> Iterator[tuple[str, str]]:
    """Master HIPPOCAMPUS.md plus the `.hippocampus/` files, as (path relative to the
    knowledge root, text), one at a time: a writer holds one file's text, not all of them
    (30 MB of topic files at 100,000 atoms). The topic files of `known_topics` (projects
    whose topic file the caller knows to be up to date) are left out."""
    by_project: dict[str, list[MemoryEntry]] = {}
    for e in index.entries:  # (in key order, each project's too)
        by_project.setdefault(e.project, []).append(e)
    ref_us = (index.reference - _EPOCH) // _US if index.reference is not None else None
    views = {project: project_view(members, ref_us) for project, members in by_project.items()}
    # (without `topics`, every file comes as text)
    yield from cast(Iterator[tuple[str, str]], render_views(
        views, _Figures.of_index(index), lambda project: by_strength(by_project[project]),
        {topic_path(p) for p in known_topics}))


def render_views(views: Mapping[str, dict[str, Any]], figures: _Figures,
                 members: Any, skip: AbstractSet[str] = frozenset(),
                 topics: Mapping[str, bytes] | None = None,
                 ) -> Iterator[tuple[str, str | bytes]]:
    """The hierarchical files of the projects' `views` (see `project_view`), as
    `render_hierarchical` gives them, but those in `skip` (paths known to be up to date).
    `members(project)` gives a project's entries strongest first, for its topic file, unless
    `topics` holds that file already (in UTF-8: a str of it takes twice the memory, as `→`
    is not Latin-1). The views' month and decay blobs are taken
    out of them as their files are rendered."""
    reference = figures.reference
    sizes: Counter[str] = Counter()
    for view in views.values():
        sizes.update(view["month_sizes"])
    # each blob makes one file: let go of it once read (~14 MB of a 100,000-atom store's peak)
    for month in sorted(sizes):
        if temporal_path(month) not in skip:
            yield temporal_path(month), _temporal_file(
                reference, month, _merged(v["months"].pop(month, None) for v in views.values()))
    if DECAY_PATH not in skip:
        yield DECAY_PATH, _decay_file(reference, _merged(v.pop("decay") for v in views.values()))
    made = dict(topics or {})
    for project, view in views.items():  # (once the blobs are let go)
        if view["n"] and topic_path(project) not in skip:
            topic = made.pop(project, None)
            yield topic_path(project), topic if topic is not None else \
                _topic_file(reference, project, members(project))
    decay_n = sum(view["decay_n"] for view in views.values())
    stats = _meta_json(figures, views, sizes, decay_n)
    yield f"{HIPPOCAMPUS_DIR}/meta.json", json.dumps(stats, indent=1, sort_keys=True) + "\n"
    master = _Master(views, figures, decay_n)
    for cap in MASTER_CAPS:
        text = master.render(cap)
        if estimate(text) <= MASTER_MAX_TOKENS:
            break
    yield HIPPOCAMPUS_MD, text


def _meta_json(figures: _Figures, views: Mapping[str, dict[str, Any]], sizes: Counter[str],
               decay_n: int) -> dict[str, Any]:
    return {
        "version": VERSION, "reindexed": _iso(figures.reference), "entries": figures.entries,
        "reads": figures.reads, "not_indexed": dict(sorted(figures.skipped.items())),
        "average_strength": round(figures.average, 4) if figures.entries else 0.0,
        "strength_bands": dict(figures.bands),
        "decay_queue": decay_n,
        "topics": {p: {"entries": v["n"], "file": topic_path(p)}
                   for p, v in sorted(views.items()) if v["n"]},
        "temporal": {m: {"entries": n, "file": temporal_path(m)} for m, n in sorted(sizes.items())},
    }


def _entries(n: int) -> str:
    return f"{n:,} entr{'y' if n == 1 else 'ies'}"


def _more(shown: int, total: int, where: str) -> list[str]:
    return [f"- … {total - shown:,} more → {where}\n"] if total > shown else []


class _Master:
    """The master HIPPOCAMPUS.md of the hierarchical layout at a given size (`cap`): the
    orderings it picks from are merged from the views once, whatever the number of sizes
    tried."""

    def __init__(self, views: Mapping[str, dict[str, Any]], figures: _Figures,
                 decay_n: int) -> None:
        self.figures = figures
        every = list(views.values())
        self.quick = [row[3] for row in heapq.nsmallest(
            QUICK_ACCESS, itertools.chain.from_iterable(v["quick"] for v in every))]
        self.projects = sorted(((project, v["n"], v["tags"], v["strongest"])
                                for project, v in views.items() if v["n"]),
                               key=lambda p: (-p[1], p[0]))
        self.buckets = {name: ([row[2] for row in itertools.islice(
            heapq.merge(*(v["buckets"][name][0] for v in every)), _HEADS)],
            sum(v["buckets"][name][1] for v in every)) for name in ("This Week", "This Month")}
        older: Counter[str] = Counter()
        for v in every:
            older.update(v["older"])
        self.older = [(m, older[m]) for m in sorted(older, reverse=True)]
        self.linked = [row[2] for row in heapq.nsmallest(
            _HEADS, itertools.chain.from_iterable(v["linked"] for v in every))]
        self.linked_count = sum(v["linked_n"] for v in every)
        self.queue = [row[2] for row in itertools.islice(
            heapq.merge(*(v["decay_head"] for v in every)), _HEADS)]
        self.queue_count = decay_n

    def render(self, cap: int) -> str:
        figures = self.figures
        out = [_header(figures, " | layout: hierarchical"),
               "# HIPPOCAMPUS.md — Memory Index\n\n", _INTRO,
               f"> Past ~{MAX_TOKENS:,} tokens this is the master index: every entry is in "
               f"`{HIPPOCAMPUS_DIR}/`.\n"]
        out += _section("Quick Access",
                        "Most-accessed entries, sorted by hits. Pattern completion starts here.")
        qa = self.quick[: max(cap // 2, 3) if cap < 40 else QUICK_ACCESS]
        out += ["\n" + text for text in qa] or ["\n_No reads recorded yet._\n"]
        out += _section("By Topic", "One topic file per project, every entry in full; its "
                                    "strongest entries here.")
        per_project = max(cap // 8, 1) if cap else 0
        for n, (project, size, tags, strongest) in enumerate(self.projects):
            if n >= max(cap, 5):
                out.append(f"\n- … {len(self.projects) - n:,} more projects → "
                           f"{HIPPOCAMPUS_DIR}/meta.json\n")
                break
            out.append(f"\n### {project}\n{_entries(size)} → {HIPPOCAMPUS_DIR}/topics/{project}.md"
                       f"\nTop tags: {', '.join(f'{t} ({c})' for t, c in tags)}\n")
            if per_project:
                out.append("\n")
                out += strongest[:per_project]
        out += _section("By Time", "By last access (or date when never read), relative to "
                                   "reindexed; each month in full in its temporal file.")
        for bucket in ("This Week", "This Month"):
            members, count = self.buckets[bucket]
            out.append(f"\n### {bucket}\n\n")
            out += members[:cap] or ["_None._\n"]
            out += _more(min(cap, count), count, f"{HIPPOCAMPUS_DIR}/temporal/")
        out.append("\n### Older\n\n")
        limit = max(cap, 12)
        out += [f"- {m}: {_entries(n)} → {HIPPOCAMPUS_DIR}/temporal/{m}.md\n"
                for m, n in self.older[:limit]] or ["_None._\n"]
        out += _more(min(limit, len(self.older)), len(self.older), f"{HIPPOCAMPUS_DIR}/meta.json")
        out += _section("Associations", "The most connected entries; every entry's rel is in "
                                        "its topic file.", blank=True)
        out += self.linked[:cap] or ["_None._\n"]
        out += _more(min(cap, self.linked_count), self.linked_count, f"{HIPPOCAMPUS_DIR}/topics/")
        out += _section("Decay Queue", f"Entries below strength {DECAY_THRESHOLD}, weakest "
                                       "first.", blank=True)
        out += self.queue[:cap] or ["_Empty._\n"]
        out += _more(min(cap, self.queue_count), self.queue_count, DECAY_PATH)
        out += _meta_section(figures, f"hierarchical, statistics → {HIPPOCAMPUS_DIR}/meta.json")
        return "".join(out)


def surely_hierarchical(index: MemoryIndex) -> bool:
    """Whether the index is too large for one file without rendering it to find out: each
    entry takes at least its pointer twice (By Topic, By Time) plus ~60 characters."""
    return _chars(index.entries) > chars_for(MAX_TOKENS)


def _chars(entries: Iterable[MemoryEntry]) -> int:
    """What `surely_hierarchical` counts of `entries`."""
    return sum(2 * len(e.pointer) + 60 for e in entries)


def render(index: MemoryIndex, known_topics: Iterable[str] = ()) -> Iterable[tuple[str, str]]:
    """Every generated file, as (path relative to the knowledge root, text), made as they
    are taken; in the hierarchical layout, without the topic files of `known_topics`."""
    if not surely_hierarchical(index):
        single = render_single(index)
        if estimate(single) <= MAX_TOKENS:
            return [(HIPPOCAMPUS_MD, single)]
    return render_hierarchical(index, known_topics)


# --- writing -----------------------------------------------------------------------------------


def _existing_generated(context: Path) -> list[Path]:
    """The `.hippocampus/` files a previous run may have written (and only those)."""
    root = context / HIPPOCAMPUS_DIR
    found: list[Path] = []
    for sub, pattern in (("topics", _TOPIC_FILE), ("temporal", _TEMPORAL_FILE)):
        folder = root / sub
        if wall.reason(context, folder):
            continue  # a linked folder: not part of the store, never listed or cleaned
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        found += [folder / n for n in names if pattern.match(n) or n == "undated.md"]
    found += [p for p in (root / "decay-queue.md", root / "meta.json")
              if p.is_file() and not wall.reason(context, p)]
    return found


def _write_files(context: Path, files: Iterable[tuple[str, str | bytes]], dry_run: bool,
                 known: Mapping[str, Any], kept: AbstractSet[str] = frozenset()) \
        -> tuple[list[Path], dict[str, list[Any]]]:
    """Write the files (path relative to `context`, text: each written as it comes, then
    let go) that differ from what is on disk and delete stale `.hippocampus/` ones: (paths
    written or deleted — in a dry run, that would be —, the state of every generated file
    as left on disk). `known` is that state from the last run: a file whose
    text and stat data both match it is not even read. `kept`: files known to be up to
    date, left as they are."""
    import time

    from cortexfs.cache import FileState, digest, file_state, still
    from cortexfs.fsutil import Writes

    written: list[tuple[str, Path]] = []
    states: dict[str, FileState] = {}
    now_ns = time.time_ns()
    made: list[str] = []
    digests: list[tuple[str, Path, str]] = []
    with Writes(root=context) as writes:  # (their fsyncs overlap)
        for rel, text in files:
            made.append(rel)
            path = context / rel
            data = text if isinstance(text, bytes) else text.encode("utf-8")
            hexdigest = digest(data).hex()
            saved = known.get(rel)
            same = isinstance(saved, list) and saved[:1] == [hexdigest] and still(path, saved)
            if not same:
                try:
                    same = wall.read_bytes(context, path, len(data)) == data
                except OSError:  # missing, or a link (never read; replaced by the write)
                    same = False
            if not same:
                written.append((rel, path))
                if not dry_run:
                    writes.write(path, data)  # (compared already: not again)
            del text, data  # (the next file is made once this one is let go)
            if same or not dry_run:
                digests.append((rel, path, hexdigest))
    for rel, path, hexdigest in digests:  # (as each file is now on disk)
        state = file_state(path, hexdigest, now_ns)
        if state is not None:
            states[rel] = state
    changed = [path for _, path in sorted(written)]
    states = dict(sorted(states.items()))
    for rel in kept:
        states[rel] = known[rel]
    wanted = {context / rel for rel in (*made, *kept)}
    for stale in sorted(set(_existing_generated(context)) - wanted):
        changed.append(stale)
        if not dry_run:
            stale.unlink(missing_ok=True)
    if not dry_run:
        for sub in ("topics", "temporal", ""):
            folder = context / HIPPOCAMPUS_DIR / sub
            if not wall.reason(context, folder) and folder.is_dir() and not os.listdir(folder):
                folder.rmdir()
    return changed, states


def write(store: Store, index: MemoryIndex, dry_run: bool = False) -> list[Path]:
    """Write the generated files that differ and delete stale `.hippocampus/` ones; the paths
    written or deleted (in a dry run, that would be)."""
    return _write_files(store.context, render(index), dry_run, {})[0]


# --- the generator -----------------------------------------------------------------------------

CACHE_KIND = "hippocampus"
PART_KIND = "hippocampus-part"
VIEW_KIND = "hippocampus-view"


def _part_path(store: Store, name: str) -> Path:
    return store.cache_dir / "hippocampus" / f"{name}.bin"


class _Share:
    """One project's part as the generator needs it: its key (None when its inputs cannot be
    told apart) and what the files need of it before its entries — newest event, reads,
    what was left out, `_chars` — at once; its entries only when asked (`part`), from the
    cached rows or as built; its view (`project_view`) from its own cache when neither the
    part nor the store clock moved."""

    def __init__(self, ctx: Any, project: str, key: str | None, head: tuple[Any, ...],
                 rows: bytes | None = None, part: Part | None = None) -> None:
        self.ctx, self.project, self.key = ctx, project, key
        self.head = head  # what the files need of the part before its entries (see `_share`)
        self.newest_us, self.reads, self.skipped, self.chars = head
        self._rows, self._part = rows, part
        self._entries: list[MemoryEntry] | None = None

    def part(self) -> Part:
        if self._part is None:
            if self._rows is None and self.key:  # (the head came from the generator's state)
                self._rows = _cached_rows(self.ctx.store, self.project, self.key)
            try:
                self._part = Part.from_cache(self.project, marshal.loads(self._rows or b""))
            except (ValueError, TypeError, EOFError):  # not what this code writes: build it
                self._part = project_part(self.project, self.ctx.projects[self.project].atoms,
                                          self.ctx.access[self.project])
            self._rows = None  # (3 MB per 10,000 entries, read once)
        return self._part

    def entries(self, ref_us: int | None) -> list[MemoryEntry]:
        """The part's entries in key order, their strengths counted up to `ref_us`."""
        if self._entries is None:
            self._entries = sorted(self.part().entries, key=_KEY)
            _set_strengths(self._entries, ref_us)
        return self._entries

    def view(self, ref_us: int | None, clock: str) -> dict[str, Any]:
        from cortexfs import cache

        path = self.ctx.store.cache_dir / "hippocampus-views" / f"{self.project}.bin"
        if self.key:
            saved = cache.load(path, VIEW_KIND)
            if isinstance(saved, tuple) and len(saved) == 3 and saved[:2] == (self.key, clock) \
                    and isinstance(saved[2], dict):
                return saved[2]
        view = project_view(self.entries(ref_us), ref_us)
        if self.key:
            cache.save(path, VIEW_KIND, (self.key, clock, view))
        return view


def _cached_rows(store: Store, name: str, key: str) -> bytes | None:
    """The rows of a project's part as cached under `key` (None when they are not)."""
    from cortexfs import cache

    saved = cache.load(_part_path(store, name), PART_KIND)
    if isinstance(saved, tuple) and len(saved) == 3 and saved[0] == key \
            and isinstance(saved[2], bytes):
        return saved[2]
    return None


def _head_ok(head: Any) -> bool:
    return isinstance(head, tuple) and len(head) == 4 \
        and (head[0] is None or isinstance(head[0], int)) and isinstance(head[1], int) \
        and isinstance(head[2], dict) and isinstance(head[3], int)


FORK_MIN_CHARS = 3_000_000  # (`_chars`: ~20,000 entries) of topic files to render, from which
# half of their views and topic files are made in a forked process


class _Apart:
    """The views and topic files of some projects, made in a forked process (cortexfs.forked)
    while this one makes the others' (the topic files all at once then, not each let go as
    written): on a cold 100,000-atom run the store-wide files took ~1.5 s of one core while
    the other was idle. Only for FORK_MIN_CHARS of topic files to render, and only where a
    process can be forked; whatever the process fails to give is made here, the same."""

    def __init__(self, names: set[str], child: Any = None) -> None:
        self.names, self._child = names, child

    @classmethod
    def start(cls, stale: list[_Share], ref_us: int | None, clock: str,
              reference: dt.datetime | None) -> _Apart:
        """Give the process about half of the `stale` shares (those whose topic file is to
        be rendered), by size."""
        from cortexfs import forked

        if sum(s.chars for s in stale) < FORK_MIN_CHARS or len(stale) < 2 \
                or not forked.can_fork():
            return cls(set())
        # the shares whose entries this process does not hold (a cold run's worker built
        # them), else about half of them by size
        theirs = [s for s in stale if s._part is None]
        if len(theirs) in (0, len(stale)):
            load, theirs = [0, 0], []
            for share in sorted(stale, key=lambda s: -s.chars):
                side = 0 if load[0] <= load[1] else 1
                load[side] += share.chars
                if side:
                    theirs.append(share)

        def work() -> list[tuple[str, dict[str, Any], bytes | None]]:
            out = []
            for share in theirs:
                view = share.view(ref_us, clock)
                out.append((share.project, view, _topic_file(
                    reference, share.project, by_strength(share.entries(ref_us))).encode()
                    if view["n"] else None))
                share._part = share._entries = None  # (let go before the next one's)
            return out

        child = forked.start(work)
        return cls({s.project for s in theirs} if child is not None else set(), child)

    def join(self) -> dict[str, tuple[dict[str, Any], bytes | None]]:
        """project → (its view, its topic file in UTF-8) as the process made them (none of
        what it failed to make)."""
        if self._child is None:
            return {}
        out: dict[str, tuple[dict[str, Any], bytes | None]] = {}
        with contextlib.suppress(TypeError, ValueError):
            for project, view, topic in self._child.join() or ():
                if project in self.names and isinstance(view, dict) \
                        and isinstance(topic, bytes | None):
                    out[project] = (view, topic)
        return out


# (cache file, key) → a share `prepare` built in this process, for the `regen` that follows
_PREPARED: dict[tuple[Path, str], _Share] = {}


def _share(ctx: Any, name: str, heads: Mapping[str, Any] | None = None) -> _Share:
    """A project's share — from the cache when its inputs have not changed, else built (and
    cached). `heads`: the generator's state, project → (part key, head) as last rendered:
    a project whose key did not move has its part file read only if its entries are needed
    (on 10,000 atoms, ~3 MB of rows read and checksummed by every `cortex new`)."""
    from cortexfs import cache

    key = ctx.fingerprint([name], dated=False)
    path = _part_path(ctx.store, name)
    prepared = _PREPARED.pop((path, key), None) if key else None
    if prepared is not None:
        prepared.ctx = ctx
        return prepared
    known = heads.get(name) if heads and key else None
    if isinstance(known, tuple) and len(known) == 2 and known[0] == key \
            and _head_ok(known[1]):
        return _Share(ctx, name, key, known[1])
    part = None
    if key:
        saved = cache.load(path, PART_KIND)
        if isinstance(saved, tuple) and len(saved) == 3 and _head_ok(saved[1]) \
                and isinstance(saved[2], bytes):
            if saved[0] == key:
                return _Share(ctx, name, key, saved[1], rows=saved[2])
            part = _added_to(ctx, name, saved[0], saved[2], path)
    if part is None:
        part = project_part(name, ctx.projects[name].atoms, ctx.access[name])
    head = (part.newest_us, part.reads, part.skipped, _chars(part.entries))
    if key:
        cache.save(path, PART_KIND, (key, head, marshal.dumps(part.to_cache())))
    return _Share(ctx, name, key or None, head, part=part)


def _added_to(ctx: Any, name: str, key: str, rows: bytes, path: Path) -> Part | None:
    """The part cached (at `path`) under `key` with the one atom the project has gained
    since (see `RegenContext.added`): on 10,000 atoms, ~15 ms of `cortex new` were the
    rebuild of its project's ~1,000 entries. None when the project changed otherwise."""
    atom = ctx.added(name, key, path)
    if atom is None:
        return None
    try:
        cached = Part.from_cache(name, marshal.loads(rows))
    except (ValueError, TypeError, EOFError):
        return None
    return with_added(cached, atom, ctx.access[name])


def parts(ctx: Any, names: Iterable[str]) -> list[Part]:
    """The parts of `names` (cached where current; see `regen`); `assemble` makes an
    index of them. `ctx` is a regeneration context (cortexfs.regen.context)."""
    return [_share(ctx, name).part() for name in names]


def prepare(ctx: Any, names: list[str]) -> None:
    """Build and cache the parts of `names` (a regeneration calls this in the process that
    regenerated their indexes, so that a cold run builds them on both cores). The parts
    built are kept for this process's `regen` (not read back from the cache: ~0.2 s of a
    100,000-atom cold run), without their atoms."""
    _PREPARED.clear()
    for name in names:
        share = _share(ctx, name)
        if share.key and share._part is not None:
            for entry in share._part.entries:
                entry.atom = None
            _PREPARED[(_part_path(ctx.store, name), share.key)] = share


def regen(ctx: Any, dry_run: bool = False) -> list[Path]:
    """The derived-generator entry point (listed in cortexfs.derived.GENERATORS).

    Remembers (in `.cache/hippocampus.bin`) the input fingerprint it last rendered from and
    the state of the files that rendering left on disk: when both still hold, nothing is
    loaded or rendered — `cortex ready` asks this at every session start. Otherwise the
    projects whose inputs are unchanged come from their cached parts. In the hierarchical
    layout the files are rendered from the projects' views (`project_view`, cached per part
    and store clock), so the entries of a project whose inputs and clock did not move are
    not even read; and a file whose key — the part's key and the clock for a topic file,
    `file_keys` for a temporal file and the decay queue — is the one it was last written
    with, and which is still as written, is not rendered at all.
    """
    from cortexfs import cache

    store = ctx.store
    context = store.context
    state_path = store.cache_dir / "hippocampus.bin"
    key = ctx.fingerprint(dated=False)
    saved = cache.load(state_path, CACHE_KIND)
    known: dict[str, Any] = {}
    saved_keys: dict[str, Any] = {}
    heads = saved.get("heads") if isinstance(saved, dict) else None
    if isinstance(saved, dict) and isinstance(saved.get("files"), dict):
        known = saved["files"]
        if saved.get("key") == key and known:
            generated = {p.relative_to(context).as_posix() for p in _existing_generated(context)}
            if set(known) >= generated and HIPPOCAMPUS_MD in known \
                    and all(cache.still(context / rel, st) for rel, st in known.items()):
                _PREPARED.clear()
                return []
        if isinstance(saved.get("keys"), dict):
            saved_keys = saved["keys"]
    try:
        shares = [_share(ctx, name, heads if isinstance(heads, dict) else None)
                  for name in ctx.projects]
    finally:
        _PREPARED.clear()
    ref_us = max((s.newest_us for s in shares if s.newest_us is not None), default=None)
    reference = _EPOCH + ref_us * _US if ref_us is not None else None
    clock = reference.isoformat() if reference else "never"
    keys = {topic_path(s.project): f"{s.key}:{clock}" for s in shares if s.key and s.chars}
    files: Iterable[tuple[str, str | bytes]]
    skip: set[str] = set()

    def current(rel: str) -> bool:  # its key is the one it was written with, and it is as written
        return saved_keys.get(rel) == keys.get(rel) and cache.still(context / rel, known.get(rel))

    if sum(s.chars for s in shares) > chars_for(MAX_TOKENS):  # surely hierarchical
        stale = [s for s in shares if s.chars and not current(topic_path(s.project))]
        apart = _Apart.start(stale, ref_us, clock, reference)
        mine = {s.project: s.view(ref_us, clock) for s in shares if s.project not in apart.names}
        topics = {s.project: _topic_file(reference, s.project,
                                         by_strength(s.entries(ref_us))).encode()
                  for s in stale if apart.names and s.project in mine and mine[s.project]["n"]}
        theirs = apart.join()
        topics.update((p, topic) for p, (_, topic) in theirs.items() if topic)
        views = {s.project: mine[s.project] if s.project in mine else theirs[s.project][0]
                 if s.project in theirs else s.view(ref_us, clock) for s in shares}
        keys.update(file_keys(views, reference))
        skip = {rel for rel in keys if current(rel)}
        skipped: Counter[str] = Counter()
        for s in shares:
            skipped.update(s.skipped)
        figures = _Figures.of_views(views, reference, sum(s.reads for s in shares), +skipped)
        by_name = {s.project: s for s in shares}
        files = render_views(views, figures,
                             lambda project: by_strength(by_name[project].entries(ref_us)),
                             skip, topics)
    else:
        files = render(assemble(s.part() for s in shares))
    changed, states = _write_files(context, files, dry_run, known, skip)
    if not dry_run or not changed:
        cache.save(state_path, CACHE_KIND, {
            "key": key, "files": states,
            "keys": {rel: file_key for rel, file_key in keys.items() if rel in states},
            "heads": {s.project: (s.key, s.head) for s in shares if s.key}})
    return changed


# --- pointer checks (cortex ready) -------------------------------------------------------------


@dataclass(frozen=True)
class PointerProblem:
    """A `→` pointer in a generated hippocampus file that leads nowhere."""

    file: Path
    line: int
    pointer: str
    reason: str

    def __str__(self) -> str:
        return (f"{self.file}:{self.line}: pointer {self.pointer!r} {self.reason}: run "
                "`cortex index regen --all`")


def pointers_of(line: str) -> list[str]:
    """The paths a line points to: what follows its `→`, split on ` | `, `§section` dropped."""
    at = line.find("→")
    if at < 0:
        return []
    return [part.strip().split(" §", 1)[0].strip() for part in line[at + 1:].split(" | ")]


_POINTER = re.compile(r"→([^\n]*)")


def check_pointers(store: Store) -> list[PointerProblem]:
    """Every dangling pointer in HIPPOCAMPUS.md and `.hippocampus/*.md` (none when the index
    has not been generated: whether it is current is a separate check). A pointer must be a
    relative path that stays inside the knowledge root and names something that exists."""
    context = store.context
    files = [context / HIPPOCAMPUS_MD] if (context / HIPPOCAMPUS_MD).is_file() else []
    files += sorted(p for p in _existing_generated(context) if p.suffix == ".md")
    problems: list[PointerProblem] = []
    exists: dict[str, str | None] = {}  # pointer → why it is dangling (None: it is fine)
    listed = _Listed(str(context))
    for path in files:
        text = wall.text_or_none(context, path, 10 * wall.MAX_TEXT)
        if text is None:
            continue
        for m in _POINTER.finditer(text):
            for pointer in pointers_of(m.group(0)):
                if pointer not in exists:
                    exists[pointer] = _dangling(listed, pointer)
                reason = exists[pointer]
                if reason is not None:
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(PointerProblem(path, line, pointer, reason))
    return problems


def _dangling(listed: _Listed, pointer: str) -> str | None:
    if not pointer:
        return "is empty"
    normal = os.path.normpath(pointer)
    if os.path.isabs(pointer) or normal == ".." or normal.startswith("../"):
        return "leads out of the knowledge root"
    if not listed.exists(normal):
        return "leads to nothing in the knowledge root"
    return None


class _Listed:
    """os.path.exists under a root, one directory listing per folder rather than a stat per
    path (an index points at thousands of files in a few dozen folders)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.folders: dict[str, dict[str, bool]] = {}  # folder → name → is a symlink

    def exists(self, rel: str) -> bool:
        folder, name = os.path.split(rel)
        entries = self.folders.get(folder)
        if entries is None:
            entries = {}
            try:
                with os.scandir(os.path.join(self.root, folder)) as it:
                    entries = {e.name: e.is_symlink() for e in it}
            except OSError:
                pass
            self.folders[folder] = entries
        if entries.get(name) is False:
            return True  # listed, and not a link that may lead nowhere
        # a link, or not listed (which a case-insensitive file system may still find)
        return os.path.exists(os.path.join(self.root, rel))
