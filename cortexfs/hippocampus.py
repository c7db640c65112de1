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
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortexfs.accesslog import AccessStats
from cortexfs.atoms import Atom
from cortexfs.fsutil import write_if_changed
from cortexfs.strength import strength
from cortexfs.tokens import chars_for, estimate

if TYPE_CHECKING:
    from cortexfs.loader import LoadedProject
    from cortexfs.store import Store

FILE_NAME = "HIPPOCAMPUS.md"
HIER_DIR = ".hippocampus"
VERSION = "hippocampus.md v1.0"
MAX_TOKENS = 15_000  # spec §13 max_recommended_tokens: past it, go hierarchical
MASTER_MAX_TOKENS = 10_000  # spec §9.2: "Master index (~200 top entries, <10K tokens)"
QUICK_ACCESS = 20
DECAY_THRESHOLD = 0.1
WEEK_DAYS = 7
MONTH_DAYS = 30
MAX_REL_SHOWN = 8
MAX_SUMMARY = 300
BANDS = (("strong", 0.8), ("moderate", 0.5), ("weak", 0.3), ("decaying", 0.1), ("silent", 0.0))

_UNSAFE_TAG = re.compile(r"[^\w.+#/-]+")
_TOPIC_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.md$")
_TEMPORAL_FILE = re.compile(r"^\d{4}-\d{2}\.md$")


@dataclass
class IndexEntry:
    """One atom as the index shows it."""

    key: str  # project/ID
    project: str
    atom: Atom
    pointer: str  # path relative to the knowledge root
    created: dt.date | None
    accessed: dt.datetime | None  # last read, None when never read
    hits: int
    strength: float = 1.0
    rel: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # made safe for the hx comment
    priority: str | None = None
    src: str = "auto"

    @property
    def last_event(self) -> dt.datetime | None:
        if self.accessed is not None:
            return self.accessed
        return _midnight(self.created) if self.created else None

    @property
    def topic(self) -> str:
        return self.tags[0] if self.tags else "untagged"


_SAFE_TAGS: dict[str, str] = {}  # tag → its hx-safe form (a store has few distinct tags)


def _safe_tag(tag: str) -> str:
    safe = _SAFE_TAGS.get(tag)
    if safe is None:
        safe = _SAFE_TAGS[tag] = _UNSAFE_TAG.sub("_", tag).strip("_")
    return safe


def _entry(project: str, atom: Atom, created: dt.date | None, accessed: dt.datetime | None,
           hits: int) -> IndexEntry:
    tags = [t for t in map(_safe_tag, atom.tags) if t]
    priority = atom.meta.get("priority")
    src = atom.meta.get("src")
    return IndexEntry(
        f"{project}/{atom.id}", project, atom,
        f"projects/{project}/{atom.kind.folder}/{atom.path.name}", created, accessed, hits,
        tags=tags,
        priority=str(priority).strip().lower() if priority not in (None, "") else None,
        src=str(src).strip().lower() if src not in (None, "") else "auto")


@dataclass
class Index:
    """Everything the generated files are rendered from."""

    entries: list[IndexEntry]
    reference: dt.datetime | None  # the store clock: newest access or atom date
    skipped: Counter[str] = field(default_factory=Counter)  # why atoms are not indexed
    reads: int = 0

    @property
    def by_key(self) -> dict[str, IndexEntry]:
        return {e.key: e for e in self.entries}


# --- building ----------------------------------------------------------------------------------


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def parse_time(value: object) -> dt.datetime | None:
    """An access-log `ts`, `last-ref` or date as an aware UTC datetime; None if not one."""
    if isinstance(value, dt.datetime):
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


def build(loaded: Iterable[LoadedProject], stats: Mapping[str, AccessStats]) -> Index:
    """The index of the active atoms of `loaded` projects, with `stats` (project name →
    folded access log) giving hits and last access."""
    entries: list[IndexEntry] = []
    skipped: Counter[str] = Counter()
    newest: dt.datetime | None = None
    reads = 0
    for lp in loaded:
        name = lp.project.name
        st = stats.get(name) or AccessStats()
        project_entries: dict[str, IndexEntry] = {}
        cites: list[tuple[str, list[str]]] = []
        for atom in lp.atoms:
            file = atom.path.name
            count = st.counts.get(file, 0)
            reads += count
            hits = max(count, atom.refs)
            logged, noted = parse_time(st.newest.get(file)), parse_time(atom.last_ref)
            accessed = max(logged, noted) if logged and noted else logged or noted
            created = atom.date
            for t in (accessed, _midnight(created) if created else None):
                if t is not None and (newest is None or t > newest):
                    newest = t
            group = atom.group
            if group != "active":
                skipped[group] += 1
                continue
            if created is None and accessed is None:
                skipped["undated"] += 1
                continue
            entry = _entry(name, atom, created, accessed, hits)
            project_entries[atom.id] = entry
            cites.append((atom.id, [*atom.links, *atom.cited_experiments()]))
        related: dict[str, set[str]] = {aid: set() for aid in project_entries}
        for aid, targets in cites:
            for target in targets:
                if target in project_entries and target != aid:
                    related[aid].add(target)
                    related[target].add(aid)
        for aid, entry in project_entries.items():
            entry.rel = sorted(f"{name}/{r}" for r in related[aid])
            entries.append(entry)
    for entry in entries:
        event = entry.last_event
        hours = (newest - event).total_seconds() / 3600 if newest and event else 0.0
        entry.strength = strength(hours, priority=entry.priority, src=entry.src,
                                  related=len(entry.rel))
    entries.sort(key=lambda e: e.key)
    return Index(entries, newest, skipped, reads)


def collect(store: Store) -> Index:
    """Build the index straight from the store (what `check_pointers` and tests use)."""
    from cortexfs.accesslog import fold
    from cortexfs.loader import load_project

    projects = store.projects()
    loaded = [load_project(p, bodies=False) for p in projects]
    return build(loaded, {p.name: fold(p.access_log) for p in projects})


# --- rendering ---------------------------------------------------------------------------------


def _iso(when: dt.datetime | None) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else "never"


def _day(when: dt.datetime | dt.date | None) -> str:
    if when is None:
        return "never"
    return when.date().isoformat() if isinstance(when, dt.datetime) else when.isoformat()


def clean_text(text: str, limit: int = MAX_SUMMARY) -> str:
    """A summary made safe for one markdown line: no newline, no comment markers, no
    leading heading or pointer syntax, and `→` (which introduces pointers) written `->`."""
    text = " ".join(text.split())
    text = text.replace("→", "->").replace("<!--", "&lt;!--").replace("-->", "--&gt;")
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    if text.startswith(("#", ">", "=", "|")):
        text = "\\" + text
    return text or "_(no summary)_"


def hx_comment(entry: IndexEntry) -> str:
    """The entry's `<!-- hx: … -->` metadata line."""
    parts = [f"id={entry.key}", f"created={_day(entry.created)}",
             f"accessed={_day(entry.accessed)}", f"hits={entry.hits}",
             f"str={entry.strength:.2f}"]
    if entry.tags:
        parts.append("tags=" + ",".join(entry.tags))
    if entry.rel:
        shown = entry.rel[:MAX_REL_SHOWN]
        more = len(entry.rel) - len(shown)
        parts.append("rel=" + ",".join(shown) + (f",+{more}" if more else ""))
    if entry.priority:
        parts.append(f"pri={_UNSAFE_TAG.sub('_', entry.priority)}")
    parts.append(f"src={_UNSAFE_TAG.sub('_', entry.src)}")
    return "<!-- hx: " + " | ".join(parts) + " -->"


def render_entry(entry: IndexEntry, level: int = 3) -> str:
    """Heading, summary, pointer and hx metadata (hippocampus.md §5.1)."""
    return (f"{'#' * level} {entry.key}\n{clean_text(entry.atom.summary)}\n"
            f"→ {entry.pointer}\n{hx_comment(entry)}\n")


def one_liner(entry: IndexEntry, detail: str = "") -> str:
    summary = clean_text(entry.atom.summary, 120)
    extra = f" ({detail})" if detail else ""
    return f"- {entry.key} — {summary}{extra} → {entry.pointer}\n"


def quick_access(index: Index) -> list[IndexEntry]:
    read = [e for e in index.entries if e.hits > 0]
    read.sort(key=lambda e: (-e.hits, -e.strength, e.key))
    return read[:QUICK_ACCESS]


def _by_strength(entries: Iterable[IndexEntry]) -> list[IndexEntry]:
    return sorted(entries, key=lambda e: (-e.strength, -e.hits, e.key))


def _recent_first(entries: Iterable[IndexEntry]) -> list[IndexEntry]:
    epoch = dt.datetime.min.replace(tzinfo=dt.UTC)
    return sorted(entries, key=lambda e: (-(e.last_event or epoch).timestamp(), e.key))


def time_buckets(index: Index) -> dict[str, list[IndexEntry]]:
    """This Week / This Month / Older by last access (or date), relative to `reference`."""
    out: dict[str, list[IndexEntry]] = {"This Week": [], "This Month": [], "Older": []}
    ref = index.reference
    for entry in _recent_first(index.entries):
        event = entry.last_event
        age = (ref - event).days if ref and event else 0
        bucket = "This Week" if age < WEEK_DAYS else "This Month" if age < MONTH_DAYS \
            else "Older"
        out[bucket].append(entry)
    return out


def decay_queue(index: Index) -> list[IndexEntry]:
    weak = [e for e in index.entries if e.strength < DECAY_THRESHOLD]
    return sorted(weak, key=lambda e: (e.strength, e.key))


def _header(index: Index, extra: str = "") -> str:
    return (f"<!-- {VERSION} | entries: {len(index.entries)} | "
            f"reindexed: {_iso(index.reference)}{extra} -->\n")


_INTRO = ("> Auto-generated by `cortex index regen` from atoms and access logs. Do not edit.\n"
          "> Pointers are paths relative to the knowledge root (the folder of HIPPOCAMPUS.md).\n"
          "> Strength is computed as of `reindexed`, the newest read or atom in the store.\n")


def _meta_lines(index: Index, layout: str) -> list[str]:
    entries = index.entries
    kinds = Counter(e.atom.kind.folder for e in entries)
    bands = band_counts(entries)
    avg = sum(e.strength for e in entries) / len(entries) if entries else 0.0
    projects = len({e.project for e in entries})
    lines = [
        f"- Entries: {len(entries)} in {projects} project{'s' if projects != 1 else ''} "
        f"(" + ", ".join(f"{k} {kinds[k]}" for k in ("experiments", "knowledge", "patterns"))
        + ")",
        f"- Average strength: {avg:.2f}",
        "- Strength: " + " · ".join(f"{name} {bands[name]}" for name, _ in BANDS),
        f"- Reads recorded: {index.reads}; store clock (reindexed): {_iso(index.reference)}",
    ]
    if index.skipped:
        lines.append("- Not indexed: " + ", ".join(
            f"{n} {why}" for why, n in sorted(index.skipped.items()))
            + " (see each project's index.md)")
    lines.append(f"- Layout: {layout}")
    return [line + "\n" for line in lines]


def band_counts(entries: Iterable[IndexEntry]) -> Counter[str]:
    counts: Counter[str] = Counter({name: 0 for name, _ in BANDS})
    for e in entries:
        for name, floor in BANDS:
            if e.strength >= floor:
                counts[name] += 1
                break
    return counts


def _section(title: str, comment: str) -> list[str]:
    return [f"\n## {title}\n", f"<!-- {comment} -->\n"]


def render_single(index: Index) -> str:
    """The whole index in one file (hippocampus.md §5.3)."""
    out = [_header(index), "# HIPPOCAMPUS.md — Memory Index\n\n", _INTRO]
    out += _section("Quick Access",
                    "Most-accessed entries, sorted by hits. Pattern completion starts here.")
    qa = quick_access(index)
    out += ["\n" + render_entry(e) for e in qa] or ["\n_No reads recorded yet._\n"]
    out += _section("By Topic", "Every entry, by project and primary tag, strongest first.")
    groups: dict[tuple[str, str], list[IndexEntry]] = {}
    for e in index.entries:
        groups.setdefault((e.project, e.topic), []).append(e)
    for (project, topic), members in sorted(groups.items()):
        out.append(f"\n### {project} · {topic}\n")
        out += ["\n" + render_entry(e, 4) for e in _by_strength(members)]
    if not groups:
        out.append("\n_No entries._\n")
    out += _section("By Time", "By last access (or date when never read), relative to "
                               "reindexed.")
    for bucket, members in time_buckets(index).items():
        out.append(f"\n### {bucket}\n\n")
        out += [one_liner(e, _day(e.last_event)) for e in members] or ["_None._\n"]
    out += _section("Associations", "Cross-reference map: which entries relate to which.")
    linked = [e for e in index.entries if e.rel]
    out.append("\n")
    out += [f"- {e.key} ↔ {', '.join(e.rel)}\n" for e in linked] or ["_None._\n"]
    out += _section("Decay Queue", f"Entries below strength {DECAY_THRESHOLD}, weakest first: "
                                   "candidates for pruning.")
    out.append("\n")
    out += [one_liner(e, f"str {e.strength:.2f}") for e in decay_queue(index)] or ["_Empty._\n"]
    out += _section("Meta", "Index statistics and health.")
    out.append("\n")
    out += _meta_lines(index, f"single file (hierarchical past ~{MAX_TOKENS:,} tokens)")
    return "".join(out)


def _topic_file(index: Index, project: str, members: list[IndexEntry]) -> str:
    out = [f"<!-- {VERSION} | topic: {project} | entries: {len(members)} | "
           f"reindexed: {_iso(index.reference)} -->\n",
           f"# HIPPOCAMPUS — {project}\n\n", _INTRO]
    groups: dict[str, list[IndexEntry]] = {}
    for e in members:
        groups.setdefault(e.topic, []).append(e)
    for topic, group in sorted(groups.items()):
        out.append(f"\n## {topic}\n")
        out += ["\n" + render_entry(e) for e in _by_strength(group)]
    return "".join(out)


def _temporal_file(index: Index, month: str, members: list[IndexEntry]) -> str:
    out = [f"<!-- {VERSION} | month: {month} | entries: {len(members)} | "
           f"reindexed: {_iso(index.reference)} -->\n",
           f"# HIPPOCAMPUS — {month}\n\n", _INTRO,
           "\nEntries whose last access (or date, when never read) falls in this month.\n\n"]
    out += [one_liner(e, _day(e.last_event)) for e in members]
    return "".join(out)


def _decay_file(index: Index, queue: list[IndexEntry]) -> str:
    out = [f"<!-- {VERSION} | decay-queue | entries: {len(queue)} | "
           f"reindexed: {_iso(index.reference)} -->\n",
           "# HIPPOCAMPUS — Decay Queue\n\n", _INTRO,
           f"\nEntries below strength {DECAY_THRESHOLD}, weakest first.\n\n"]
    out += [one_liner(e, f"str {e.strength:.2f}") for e in queue] or ["_Empty._\n"]
    return "".join(out)


def _month(entry: IndexEntry) -> str:
    event = entry.last_event
    return event.strftime("%Y-%m") if event else "undated"


def render_hierarchical(index: Index) -> dict[str, str]:
    """Master HIPPOCAMPUS.md plus the `.hippocampus/` files, keyed by path relative to the
    knowledge root."""
    files: dict[str, str] = {}
    by_project: dict[str, list[IndexEntry]] = {}
    for e in index.entries:
        by_project.setdefault(e.project, []).append(e)
    for project, members in by_project.items():
        files[f"{HIER_DIR}/topics/{project}.md"] = _topic_file(index, project, members)
    by_month: dict[str, list[IndexEntry]] = {}
    for e in _recent_first(index.entries):
        by_month.setdefault(_month(e), []).append(e)
    for month, members in by_month.items():
        files[f"{HIER_DIR}/temporal/{month}.md"] = _temporal_file(index, month, members)
    queue = decay_queue(index)
    files[f"{HIER_DIR}/decay-queue.md"] = _decay_file(index, queue)
    files[f"{HIER_DIR}/meta.json"] = json.dumps(_meta_json(index, by_project, by_month, queue),
                                                indent=1, sort_keys=True) + "\n"
    for cap in (40, 25, 15, 10, 6, 3, 1, 0):
        master = _master(index, by_project, by_month, queue, cap)
        if estimate(master) <= MASTER_MAX_TOKENS:
            break
    files[FILE_NAME] = master
    return files


def _meta_json(index: Index, by_project: dict[str, list[IndexEntry]],
               by_month: dict[str, list[IndexEntry]], queue: list[IndexEntry]) -> dict[str, Any]:
    entries = index.entries
    return {
        "version": VERSION, "reindexed": _iso(index.reference), "entries": len(entries),
        "reads": index.reads, "not_indexed": dict(sorted(index.skipped.items())),
        "average_strength": round(sum(e.strength for e in entries) / len(entries), 4)
        if entries else 0.0,
        "strength_bands": dict(band_counts(entries)),
        "decay_queue": len(queue),
        "topics": {p: {"entries": len(m), "file": f"{HIER_DIR}/topics/{p}.md"}
                   for p, m in sorted(by_project.items())},
        "temporal": {m: {"entries": len(v), "file": f"{HIER_DIR}/temporal/{m}.md"}
                     for m, v in sorted(by_month.items())},
    }


def _entries(n: int) -> str:
    return f"{n:,} entr{'y' if n == 1 else 'ies'}"


def _more(shown: int, total: int, where: str) -> list[str]:
    return [f"- … {total - shown:,} more → {where}\n"] if total > shown else []


def _master(index: Index, by_project: dict[str, list[IndexEntry]],
            by_month: dict[str, list[IndexEntry]], queue: list[IndexEntry], cap: int) -> str:
    out = [_header(index, " | layout: hierarchical"), "# HIPPOCAMPUS.md — Memory Index\n\n",
           _INTRO,
           f"> Past ~{MAX_TOKENS:,} tokens this is the master index: every entry is in "
           f"`{HIER_DIR}/`.\n"]
    out += _section("Quick Access",
                    "Most-accessed entries, sorted by hits. Pattern completion starts here.")
    qa = quick_access(index)[: max(cap // 2, 3) if cap < 40 else QUICK_ACCESS]
    out += ["\n" + render_entry(e) for e in qa] or ["\n_No reads recorded yet._\n"]
    out += _section("By Topic", "One topic file per project, every entry in full; its "
                                "strongest entries here.")
    projects = sorted(by_project.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    per_project = max(cap // 8, 1) if cap else 0
    for n, (project, members) in enumerate(projects):
        if n >= max(cap, 5):
            out.append(f"\n- … {len(projects) - n:,} more projects → {HIER_DIR}/meta.json\n")
            break
        tags = Counter(e.topic for e in members).most_common(6)
        out.append(f"\n### {project}\n{_entries(len(members))} → {HIER_DIR}/topics/{project}.md"
                   f"\nTop tags: {', '.join(f'{t} ({c})' for t, c in tags)}\n")
        if per_project:
            out.append("\n")
            out += [one_liner(e, f"str {e.strength:.2f}")
                    for e in _by_strength(members)[:per_project]]
    out += _section("By Time", "By last access (or date when never read), relative to "
                               "reindexed; each month in full in its temporal file.")
    buckets = time_buckets(index)
    for bucket in ("This Week", "This Month"):
        members = buckets[bucket]
        out.append(f"\n### {bucket}\n\n")
        out += [one_liner(e, _day(e.last_event)) for e in members[:cap]] or ["_None._\n"]
        out += _more(min(cap, len(members)), len(members), f"{HIER_DIR}/temporal/")
    out.append("\n### Older\n\n")
    older_months = Counter(_month(e) for e in buckets["Older"])
    months = sorted(older_months, reverse=True)
    limit = max(cap, 12)
    out += [f"- {m}: {_entries(older_months[m])} → {HIER_DIR}/temporal/{m}.md\n"
            for m in months[:limit]] or ["_None._\n"]
    out += _more(min(limit, len(months)), len(months), f"{HIER_DIR}/meta.json")
    out += _section("Associations", "The most connected entries; every entry's rel is in its "
                                    "topic file.")
    linked = sorted((e for e in index.entries if e.rel), key=lambda e: (-len(e.rel), e.key))
    out.append("\n")
    out += [f"- {e.key} ↔ {', '.join(e.rel[:MAX_REL_SHOWN])}"
            f"{f' (+{len(e.rel) - MAX_REL_SHOWN})' if len(e.rel) > MAX_REL_SHOWN else ''}\n"
            for e in linked[:cap]] or ["_None._\n"]
    out += _more(min(cap, len(linked)), len(linked), f"{HIER_DIR}/topics/")
    out += _section("Decay Queue", f"Entries below strength {DECAY_THRESHOLD}, weakest first.")
    out.append("\n")
    out += [one_liner(e, f"str {e.strength:.2f}") for e in queue[:cap]] or ["_Empty._\n"]
    out += _more(min(cap, len(queue)), len(queue), f"{HIER_DIR}/decay-queue.md")
    out += _section("Meta", "Index statistics and health.")
    out.append("\n")
    out += _meta_lines(index, f"hierarchical, statistics → {HIER_DIR}/meta.json")
    return "".join(out)


def render(index: Index) -> dict[str, str]:
    """Every generated file (path relative to the knowledge root → text)."""
    # each entry is at least its pointer twice (By Topic, By Time) plus ~60 characters:
    # when that alone is over the ceiling, skip rendering a single file that cannot fit
    floor = sum(2 * len(e.pointer) + 60 for e in index.entries)
    if floor <= chars_for(MAX_TOKENS):
        single = render_single(index)
        if estimate(single) <= MAX_TOKENS:
            return {FILE_NAME: single}
    return render_hierarchical(index)


# --- writing -----------------------------------------------------------------------------------


def _existing_generated(context: Path) -> list[Path]:
    """The `.hippocampus/` files a previous run may have written (and only those)."""
    root = context / HIER_DIR
    found: list[Path] = []
    for sub, pattern in (("topics", _TOPIC_FILE), ("temporal", _TEMPORAL_FILE)):
        folder = root / sub
        if folder.is_dir():
            found += [folder / n for n in os.listdir(folder)
                      if pattern.match(n) or n == "undated.md"]
    found += [p for p in (root / "decay-queue.md", root / "meta.json") if p.is_file()]
    return found


def write(store: Store, index: Index, dry_run: bool = False) -> list[Path]:
    """Write the generated files that differ and delete stale `.hippocampus/` ones; the paths
    written or deleted (in a dry run, that would be)."""
    context = store.context
    files = {context / rel: text for rel, text in render(index).items()}
    changed: list[Path] = []
    for path, text in sorted(files.items()):
        try:
            same = path.read_bytes() == text.encode("utf-8")
        except OSError:
            same = False
        if same:
            continue
        changed.append(path)
        if not dry_run:
            write_if_changed(path, text)
    for stale in sorted(set(_existing_generated(context)) - set(files)):
        changed.append(stale)
        if not dry_run:
            stale.unlink(missing_ok=True)
    if not dry_run:
        for sub in ("topics", "temporal", ""):
            folder = context / HIER_DIR / sub
            if folder.is_dir() and not os.listdir(folder):
                folder.rmdir()
    return changed


def refresh(store: Store, loaded: Sequence[LoadedProject], stats: Mapping[str, AccessStats],
            dry_run: bool = False) -> list[Path]:
    """Regenerate HIPPOCAMPUS.md (and `.hippocampus/`) from parsed atoms and folded logs."""
    return write(store, build(loaded, stats), dry_run)


CACHE_KIND = "hippocampus-1"


def _cache_key(ctx: Any) -> str:
    # the inputs (atoms, logs) and this module itself: a new cortex may render differently
    here = os.stat(__file__)
    return f"{ctx.fingerprint()}:{here.st_mtime_ns}:{here.st_size}"


def _on_disk(context: Path, names: Iterable[str]) -> dict[str, str]:
    from cortexfs.cache import digest

    out = {}
    for rel in names:
        try:
            out[rel] = digest((context / rel).read_bytes()).hex()
        except OSError:
            out[rel] = ""
    return out


def regen(ctx: Any, dry_run: bool = False) -> list[Path]:
    """The derived-generator entry point (listed in cortexfs.derived.GENERATORS).

    Remembers (in `.cache/hippocampus.bin`) the input fingerprint it last rendered from and
    the digests of the files that rendering left on disk: when both still hold, nothing is
    loaded or rendered — `cortex ready` asks this at every session start.
    """
    from cortexfs import cache

    store = ctx.store
    context = store.context
    cache_path = store.cache_dir / "hippocampus.bin"
    key = _cache_key(ctx)
    saved = cache.load(cache_path, CACHE_KIND)
    generated = {p.relative_to(context).as_posix() for p in _existing_generated(context)}
    if (isinstance(saved, dict) and saved.get("key") == key
            and isinstance(saved.get("files"), dict)
            and set(saved["files"]) >= generated
            and _on_disk(context, saved["files"]) == saved["files"]):
        return []
    loaded = [ctx.projects[name] for name in ctx.projects]
    index = build(loaded, ctx.access)
    changed = write(store, index, dry_run)
    if not dry_run or not changed:
        names = [FILE_NAME, *(p.relative_to(context).as_posix()
                              for p in _existing_generated(context))]
        cache.save(cache_path, CACHE_KIND, {"key": key, "files": _on_disk(context, names)})
    return changed


_HX = re.compile(r"<!--\s*hx:(.*?)-->", re.DOTALL)


def parse_hx(text: str) -> dict[str, str]:
    """The fields of the first `<!-- hx: k=v | k=v … -->` comment in `text` (which may span
    lines, as in the spec's example); {} when there is none."""
    m = _HX.search(text)
    if not m:
        return {}
    fields: dict[str, str] = {}
    for part in m.group(1).split("|"):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields[key.strip()] = " ".join(value.split())
    return fields


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
                "`cortex index regen`")


def pointers_of(line: str) -> list[str]:
    """The paths a line points to: what follows its `→`, split on ` | `, `§section` dropped."""
    at = line.find("→")
    if at < 0:
        return []
    out = []
    for part in line[at + 1:].split(" | "):
        path = part.strip().split(" §", 1)[0].strip()
        out.append(path)
    return out


_POINTER = re.compile(r"→([^\n]*)")


def check_pointers(store: Store) -> list[PointerProblem]:
    """Every dangling pointer in HIPPOCAMPUS.md and `.hippocampus/*.md` (none when the index
    has not been generated: whether it is current is a separate check). A pointer must be a
    relative path that stays inside the knowledge root and names something that exists."""
    context = store.context
    files = [context / FILE_NAME] if (context / FILE_NAME).is_file() else []
    files += sorted(p for p in _existing_generated(context) if p.suffix == ".md")
    problems: list[PointerProblem] = []
    exists: dict[str, str | None] = {}  # pointer → why it is dangling (None: it is fine)
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for m in _POINTER.finditer(text):
            for pointer in pointers_of(m.group(0)):
                if pointer not in exists:
                    exists[pointer] = _dangling(context, pointer)
                reason = exists[pointer]
                if reason is not None:
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(PointerProblem(path, line, pointer, reason))
    return problems


def _dangling(context: Path, pointer: str) -> str | None:
    if not pointer:
        return "is empty"
    normal = os.path.normpath(pointer)
    if os.path.isabs(pointer) or normal == ".." or normal.startswith("../"):
        return "leads out of the knowledge root"
    if not os.path.exists(context / normal):
        return "leads to nothing in the knowledge root"
    return None
