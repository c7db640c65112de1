"""Rendering one folder's index.md: its rows, groups and stats, through the index templates.

The packaged templates (`templates/index/*.md.j2`) are rendered by `render_packaged`, which
mirrors them in plain Python, whenever the store overrides none of them: importing Jinja
and compiling the templates costs more than rendering a folder of a thousand atoms, and a
regeneration after one edit renders one folder (measured: `cortex index regen` after one
edit of a 1,000-atom store, 0.17 s with it, 0.21 s through Jinja; a cold 10,000-atom run,
1.18 s of CPU with it, 1.38 s through Jinja). A store that overrides any of them renders
every index through Jinja's sandbox (cortexfs.templates). tests/regen/test_render.py
checks that both renderings agree.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cortexfs import escape
from cortexfs.atoms import Atom, Kind, as_date, as_list, split_status, status_group
from cortexfs.errors import AtomParseError

if TYPE_CHECKING:
    from cortexfs.store import Store

HOT_REFS = 5
COLD_DAYS = 14
STATS_CAP = 10  # ids listed per Stats line before "… and N more"
USE_WHEN = {
    "experiment": "you want to know what was tried in {project}, what happened and what it "
                  "showed — scan the summaries here, then open the EXP file for the details.",
    "knowledge": "you need an established fact, heuristic or anti-pattern of {project} — "
                 "each row cites the experiments it rests on.",
    "pattern": "you look for an invariant that holds across several experiments of "
               "{project} — each row names its source experiments.",
}
GROUP_ORDER = ("active", "invalidated", "superseded")  # the index's tables, in order
PLACEHOLDER = "\x00updated\x00"  # where the "Last updated" time goes (see cortexfs.regen.write)
TEMPLATE_FILES = ("_header.md.j2", "_rest.md.j2", "experiments.md.j2", "knowledge.md.j2",
                  "patterns.md.j2")
_ID_ORDER = re.compile(r"-(\d+)([a-z]?)")


def render(store: Store, project: str, kind: Kind, atoms: list[Atom], today: dt.date,
           dubious: list[AtomParseError], *, packaged: bool) -> str:
    """The index text of one folder, with PLACEHOLDER for the "Last updated" time; an atom
    whose date is no date (2026-13-45) is listed undated, and said in `dubious`. With
    `packaged` (see `uses_packaged_templates`), rendered without Jinja."""
    rows = [Row(a) for a in atoms]
    dubious += [undated(r.atom.path, r.atom.meta.get("date"))
                for r in rows if r.day is None and r.atom.meta.get("date") is not None]
    rows.sort(key=Row.order)
    groups: dict[str, list[Row]] = {"active": [], "invalidated": [], "superseded": []}
    for row in rows:
        groups[row.group].append(row)
    values: dict[str, Any] = dict(
        **_titles(kind, project), updated=PLACEHOLDER, total=len(rows), **groups,
        stats=stats(rows, groups, today))
    if packaged:
        return render_packaged(kind, values)
    from cortexfs import templates

    return templates.render(store, f"index/{kind.folder}.md.j2", **values)


def undated(path: object, date: object) -> AtomParseError:
    """What the index says of an atom whose `date` is no date (it lists it undated)."""
    return AtomParseError(str(path), f"`date` {date!r} is not a date, so the index lists it "
                          "as undated: write YYYY-MM-DD")


def _titles(kind: Kind, project: str) -> dict[str, str]:
    return dict(title=kind.title, project=escape.cell(project),
                use_when=USE_WHEN[kind.name].format(project=escape.cell(project)))


def uses_packaged_templates(store: Store) -> bool:
    """Whether the store overrides none of the index templates (then `render_packaged`
    renders what they would)."""
    override = store.templates_dir / "index"
    return not any(os.path.lexists(override / name) for name in TEMPLATE_FILES)


# --- rows ------------------------------------------------------------------------------------

class Row:
    """One table row: every field is a ready, escaped cell; `atom` is the Atom."""

    __slots__ = ("atom", "id", "date", "summary", "tags", "refs", "links", "evidence",
                 "sources", "status", "invalidated_by", "group", "stem", "status_name",
                 "status_ref", "day", "key")

    def __init__(self, atom: Atom) -> None:
        # straight from the frontmatter rather than through Atom's properties, with the
        # values that repeat (dates, statuses) remembered: this runs for every atom of every
        # folder that is rendered
        meta = atom.meta
        name = atom.path.name
        stem = name[:-3]
        self.atom = atom
        self.stem = stem
        self.id = f"[{stem}]({name})"
        self.day, self.date = _day(meta.get("date"))
        summary = meta.get("summary")
        self.summary = escape.cell(summary) if summary is not None else ""
        self.tags = list_cell(meta.get("tags"))
        refs = meta.get("refs")
        self.refs = refs if type(refs) is int and refs >= 0 else 0
        self.links = list_cell(meta.get("links"))
        self.evidence = list_cell(meta.get("evidence"))
        self.sources = list_cell(meta.get("source-experiments"))
        self.status_name, self.status_ref, self.group, self.status = _status(meta.get("status"))
        if self.group == "invalidated":
            inv_date = as_date(meta.get("invalidated-date"))
            by = self.status_ref or "—"
            self.invalidated_by = escape.cell(f"{by} ({inv_date.isoformat()})" if inv_date else by)
        else:
            self.invalidated_by = ""
        self.key = _id_key(stem)

    def order(self) -> tuple[Any, ...]:
        return _order(self.refs, self.day, self.key)


def _order(refs: int, day: dt.date | None, key: tuple[int, str, str]) -> tuple[Any, ...]:
    """Where a row stands in its table: refs descending, then date descending (undated
    last), then id (`key`: _id_key)."""
    return (-refs, day is None, -day.toordinal() if day else 0, key)


def _id_key(stem: str) -> tuple[int, str, str]:
    m = _ID_ORDER.search(stem)
    return (int(m[1]) if m else 0, m[2] if m else "", stem)


def atom_order(atom: Atom) -> tuple[Any, ...]:
    """Where `atom` stands within its index table (refs, newest date, id): `cortex list`
    sorts as the indexes do. Tables come in GROUP_ORDER."""
    return Row(atom).order()


_MEMO_MAX = 50_000
_DAYS: dict[object, tuple[dt.date | None, str]] = {}
_STATUSES: dict[object, tuple[str, str | None, str, str]] = {}


def _day(value: object) -> tuple[dt.date | None, str]:
    """(date or None, Date cell) of a frontmatter date."""
    key = value if isinstance(value, str) else repr(value)
    found = _DAYS.get(key)
    if found is None:
        if len(_DAYS) > _MEMO_MAX:  # a long-running watcher: keep memory bounded
            _DAYS.clear()
        day = as_date(value)
        found = _DAYS[key] = (day, day.isoformat() if day else escape.cell(value))
    return found


def _status(value: object) -> tuple[str, str | None, str, str]:
    """(status, the id it names, its group, Status cell) of a frontmatter status."""
    key = value if isinstance(value, str) else repr(value)
    found = _STATUSES.get(key)
    if found is None:
        if len(_STATUSES) > _MEMO_MAX:
            _STATUSES.clear()
        name, ref = split_status(value)
        found = _STATUSES[key] = (name, ref, status_group(name),
                                  escape.cell(f"{name} by {ref}" if ref else name))
    return found


# what makes a joined list need the careful path: spaces to strip, empty items, or a
# character that escape.cell() would escape
_LIST_ODD = re.compile(r"^[\s,]|\s$|\s,|, [\s,]|" + escape.SPECIAL)


def list_cell(value: object) -> str:
    """A list field (ids, tags) as one cell: `a, b, c`, as Atom's list properties read it."""
    if value is None:
        return ""
    if type(value) is list:
        try:
            joined = ", ".join(value)
        except TypeError:  # not all strings
            pass
        else:
            if not _LIST_ODD.search(joined):
                return joined
    return escape.cell(", ".join(as_list(value)))


# --- the Stats section -----------------------------------------------------------------------

@dataclass
class Stats:
    """The Stats section's values, each line ready to print."""

    total: int
    active: int
    invalidated: int
    superseded: int
    challenged: str
    hot: str
    cold: str
    hot_refs: int = HOT_REFS
    cold_days: int = COLD_DAYS


def stats(rows: list[Row], groups: dict[str, list[Row]], today: dt.date) -> Stats:
    """Counts, and the challenged, hot and cold atoms (as of `today`) of one folder."""
    challenged = [escape.cell(f"{r.stem} (by {r.status_ref})" if r.status_ref else r.stem)
                  for r in groups["active"] if r.status_name == "challenged"]
    hot = [f"{r.stem} ({r.refs})" for r in rows if r.refs >= HOT_REFS]
    cutoff = today - dt.timedelta(days=COLD_DAYS)
    cold_rows = sorted((r for r in groups["active"]
                        if r.refs == 0 and r.day is not None and r.day < cutoff),
                       key=lambda r: (r.day, r.key))
    cold = [f"{r.stem} ({r.date})" for r in cold_rows]
    return Stats(len(rows), len(groups["active"]), len(groups["invalidated"]),
                 len(groups["superseded"]), _capped(challenged), _capped(hot), _capped(cold))


def _capped(items: list[str]) -> str:
    if len(items) <= STATS_CAP:
        return ", ".join(items)
    return f"{', '.join(items[:STATS_CAP])} … and {len(items) - STATS_CAP} more"


# --- the packaged templates without Jinja ----------------------------------------------------

def _entries(n: int) -> str:
    return f"{n} {'entry' if n == 1 else 'entries'}"


def render_packaged(kind: Kind, v: dict[str, Any]) -> str:
    """What the packaged `index/<folder>.md.j2` renders from the values `v`, without Jinja."""
    out = [_header(v), v["updated"], "\n\n"]
    if not v["total"]:
        out.append("_No entries._\n")
        return "".join(out)
    for group in GROUP_ORDER:
        rows = v[group]
        out.append(_heading(group, len(rows)))
        if not rows:
            out.append("_None._\n")
            continue
        out.append(_TABLES[kind.name if group == "active" else group])
        out += map(_ROW_LINES[kind.name if group == "active" else group], rows)
    st = v["stats"]
    out.append(f"\n## Stats\n\n{_total_line(st.total, st.active, st.invalidated, st.superseded)}"
               f"- Challenged: {st.challenged or 'none'}\n"
               f"- Hot (refs ≥ {st.hot_refs}): {st.hot or 'none'}\n"
               f"- Cold (refs = 0, older than {st.cold_days} days): {st.cold or 'none'}\n")
    return "".join(out)


def _header(v: dict[str, Any]) -> str:
    """An index's text up to its "Last updated" time."""
    return (f"# {v['title']} Index — {v['project']}\n\nUse when: {v['use_when']}\n\n"
            "> Auto-generated by cortex from YAML frontmatter. Do not edit manually.\n"
            "> Last updated: ")


def _heading(group: str, n: int) -> str:
    title = {"active": "## Active", "invalidated": "\n## Invalidated",
             "superseded": "\n## Superseded / Deprecated"}[group]
    return f"{title} ({_entries(n)})\n\n"


def _total_line(total: int, active: int, invalidated: int, superseded: int) -> str:
    return (f"- Total: {total} ({active} active, {invalidated} invalidated, {superseded} "
            "superseded / deprecated)\n")


# the table head of each kind's active rows, and of the invalidated and superseded ones
_TABLES = {
    "experiment": "| ID | Date | Summary | Tags | Refs | Links |\n|---|---|---|---|---|---|\n",
    "knowledge": "| ID | Summary | Evidence | Refs |\n|---|---|---|---|\n",
    "pattern": "| ID | Summary | Tags | Sources | Refs |\n|---|---|---|---|---|\n",
    "invalidated": "> ⚠️ Proven wrong and kept as tombstones: do not build on their "
                   "conclusions.\n\n| ID | Date | Summary | Invalidated By | Refs |\n"
                   "|---|---|---|---|---|\n",
    "superseded": "| ID | Date | Summary | Status | Refs |\n|---|---|---|---|---|\n",
}
_ROW_LINES: dict[str, Callable[[Row], str]] = {
    "experiment": lambda r: f"| {r.id} | {r.date} | {r.summary} | {r.tags} | {r.refs} | "
                            f"{r.links} |\n",
    "knowledge": lambda r: f"| {r.id} | {r.summary} | {r.evidence} | {r.refs} |\n",
    "pattern": lambda r: f"| {r.id} | {r.summary} | {r.tags} | {r.sources} | {r.refs} |\n",
    "invalidated": lambda r: f"| {r.id} | {r.date} | {r.summary} | {r.invalidated_by} | "
                             f"{r.refs} |\n",
    "superseded": lambda r: f"| {r.id} | {r.date} | {r.summary} | {r.status} | {r.refs} |\n",
}


# --- one row more ----------------------------------------------------------------------------

_HEADINGS = {_heading(g, 0).strip("\n").partition(" (")[0]: g for g in GROUP_ORDER}


def with_row(kind: Kind, project: str, old: str, row: Row, today: dt.date,
             undated: AbstractSet[str],
             order_of: Callable[[str], tuple[Any, ...] | None]) -> str | None:
    """What `render` gives with the packaged templates for the rows of `old` plus `row`,
    made from `old`: the text it gave for those rows, its time read as PLACEHOLDER (`cortex
    new` adds one row to a folder of thousands: the others are not rendered again). `row`'s
    line goes where Row.order puts it among its table's, found by halving, and is counted
    in its heading and the Total; nothing else of a render changes, which is checked: None
    when `row` would change more (a Stats list, a table not there yet) or `old` is not laid
    out as `render_packaged` lays it out.

    Where a listed row stands is read from its line where its table has a Date column
    (`undated`: the file names whose `date` is no date, listed as it is), else asked of
    `order_of` (a listed file name → where its row stands; None: not known)."""
    if row.refs >= HOT_REFS or row.group == "active" and (
            row.status_name == "challenged" or row.refs == 0 and row.day is not None
            and row.day < today - dt.timedelta(days=COLD_DAYS)):
        return None  # (it would be listed in Stats)
    head = _header(_titles(kind, project))
    if not old.startswith(head) or not old.endswith("\n"):
        return None
    lines = old.split("\n")
    updated = head.count("\n")  # the "Last updated" line, then a blank one
    if lines[updated + 1] != "":
        return None
    lines[updated] = f"> Last updated: {PLACEHOLDER}"
    counts: dict[str, int] = {}
    heads: list[int] = []  # the line of each group's heading, then of "## Stats"
    for i in range(updated + 2, len(lines)):
        line = lines[i]
        if not line.startswith("#"):
            continue
        title, _, rest = line.partition(" (")
        group = _HEADINGS.get(title)
        said = rest.partition(" ")[0]
        if group is not None and group not in counts and said.isdigit() \
                and line == _heading(group, int(said)).strip("\n"):
            counts[group] = int(said)
            heads.append(i)
        elif line == "## Stats" and len(counts) == 3 and len(lines) > i + 2 \
                and lines[i + 1] == "":
            heads.append(i)
            break
        else:
            return None
    if len(heads) != 4 or list(counts) != list(GROUP_ORDER):
        return None
    total = heads[-1] + 2
    if lines[total] + "\n" != _total_line(sum(counts.values()), *counts.values()):
        return None
    # each table's rows: the lines that start with "| [", in one block, as many as said
    listed: list[int] = []
    for group, begin, end in zip(GROUP_ORDER, heads, heads[1:], strict=False):
        rows = [j for j in range(begin + 1, end) if lines[j].startswith("| [")]
        if len(rows) != counts[group] or rows and rows[-1] - rows[0] != len(rows) - 1:
            return None
        if group == row.group:
            listed = rows
    if not listed:
        return None  # (a table that is not there yet)
    key = row.order()
    table = kind.name if row.group == "active" else row.group
    lo, hi = 0, len(listed)
    while lo < hi:  # the first listed row that stands after `row`
        mid = (lo + hi) // 2
        line = lines[listed[mid]]
        stem, sep, rest = line[3:].partition("](")
        name = rest.partition(") | ")[0]
        found = None if not sep or name != f"{stem}.md" \
            else _order_in(line, stem, table, undated) or order_of(name)
        if found is None or found == key:
            return None
        if found < key:
            lo = mid + 1
        else:
            hi = mid
    n = counts[row.group] = counts[row.group] + 1
    lines[heads[GROUP_ORDER.index(row.group)]] = _heading(row.group, n).strip("\n")
    lines[total] = _total_line(sum(counts.values()), *counts.values()).rstrip("\n")
    lines.insert(listed[lo] if lo < len(listed) else listed[-1] + 1,
                 _ROW_LINES[table](row)[:-1])
    return "\n".join(lines)


_DATED = {"experiment": 6, "invalidated": 5, "superseded": 5}  # tables with a Date: columns


def _order_in(line: str, stem: str, table: str, undated: AbstractSet[str]) \
        -> tuple[Any, ...] | None:
    """Row.order of the row `line` of a table with a Date column (its 2nd cell; Refs its
    5th), read from the line (no cell holds " | ": a cell's `|` is escaped); None when the
    table has no Date or the line does not say it surely."""
    columns = _DATED.get(table)
    cells = line[2:-2].split(" | ")
    if columns is None or len(cells) != columns or not (cells[4].isascii()
                                                        and cells[4].isdigit()):
        return None
    day: dt.date | None = None
    if cells[1] and f"{stem}.md" not in undated:  # (an empty Date: no `date` at all)
        try:
            day = dt.date.fromisoformat(cells[1])
        except ValueError:
            return None
        if day.isoformat() != cells[1]:
            return None
    return _order(int(cells[4]), day, _id_key(stem))
