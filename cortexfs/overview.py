"""Generated overviews: OVERVIEW.md and the generated block of every CORTEX.md.

A derived generator (see `cortexfs.derived`): `cortex index regen` calls `regen` after the
indexes. It writes

- `context/OVERVIEW.md`: one table row per project — the phase from its STATUS.md, its atom
  counts, the date of its newest atom — and the date of the newest scan report in `scans/`;
- in every folder of the knowledge root (hidden folders, `_meta`-style folders starting with
  `_` and empty folders excepted), the block of its CORTEX.md between the markers
  `layout.GENERATED_START` / `GENERATED_END`: the folder's files and sub-folders, one line
  each with a description (a markdown file's frontmatter summary or first heading; a
  sub-folder's CORTEX.md title). Atom folders list their non-atom files and a count of atoms,
  pointing to index.md rather than repeating it.

Text outside the markers is never touched. A CORTEX.md without markers gets the block
appended at its end (with the markers, so later runs replace only the block); a folder
without a CORTEX.md gets one from the folder template. A CORTEX.md with a start marker but
no end marker is left alone (validation reports it). Nothing written depends on the clock:
a second run writes nothing.
"""

from __future__ import annotations

import itertools
import marshal
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortexfs import cache, escape, frontmatter, layout, templates, wall
from cortexfs.atoms import KINDS, Atom
from cortexfs.errors import AtomParseError, OutsideStoreError
from cortexfs.fsutil import Writes, write_if_changed
from cortexfs.layout import (
    CORTEX_MD,
    EMPTY_BLOCK,
    GENERATED_END,
    GENERATED_START,
    OVERVIEW_MD,
    PROJECT_FOLDERS,
    STORE_FOLDERS,
)
from cortexfs.status import phase_of
from cortexfs.store import Store

if TYPE_CHECKING:
    from cortexfs.regen import RegenContext

MAX_ENTRIES = 200  # a folder block lists at most this many files and folders
MAX_DESCRIPTION = 120
HEAD_BYTES = 8192  # descriptions come from the start of a file only
SKIP_DIRS = frozenset({"node_modules", "__pycache__"})
_SCAN_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$")
_ATOM_FOLDERS = {k.folder: k for k in KINDS}
# Files described by their name alone: the task queue, the access log, and the files other
# generators write, which are not read (they may not exist yet in this run, and a description
# must not depend on the order generators run in).
_BY_NAME = {
    layout.INDEX: "generated index of this folder's atoms (do not edit)",
    OVERVIEW_MD: "one line per project: phase, atom counts, newest atom (generated)",
    layout.HIPPOCAMPUS_MD: "sparse memory index: most used atoms, by topic and time (generated)",
    layout.TASKS_FILE: "structured task queue (see: cortex tasks list)",
    layout.ACCESS_LOG: "access log (one JSON line per read)",
}


# --- which folders ---------------------------------------------------------------------------


def _visible(name: str) -> bool:
    return not name.startswith((".", "_")) and name not in SKIP_DIRS


@dataclass
class Listing:
    """The visible files and sub-folders of one folder, sorted."""

    files: list[str]
    dirs: list[str]


def walk(store: Store, skip: Path | None = None,
         listings: dict[str, Any] | None = None) -> dict[Path, Listing]:
    """Every folder of the knowledge root that should have a CORTEX.md (parents first), with
    what it holds; `skip` (and what is under it) is left out.

    Hidden folders, folders starting with `_` (such as `_meta`), and folders holding no
    visible file at any depth (git cannot hold them, so a fresh clone would not have them)
    are left out. One scandir per folder — or none with `listings`, a cache (path under
    context/, which a moved store keeps → the folder's mtime, inode and entries) that this
    updates: a folder whose mtime and inode are as cached has the same entries (any entry
    created, removed or renamed in a folder moves its mtime), unless it changed within
    cache.RACY_NS of being listed or holds symbolic links, which are never cached.
    """
    found: dict[Path, Listing] = {}
    now = time.time_ns()
    known = dict(listings) if listings is not None else {}
    if listings is not None:
        listings.clear()  # what is left of it: the folders visited this time

    def entries_of(folder: Path) -> tuple[list[str], list[str]] | None:
        key = store.rel(folder)
        st = None
        if listings is not None:
            try:
                st = os.stat(folder)
            except OSError:
                return None
            saved = known.get(key)
            if (isinstance(saved, list) and len(saved) == 4
                    and saved[:2] == [st.st_mtime_ns, st.st_ino]):
                listings[key] = saved
                return saved[2], saved[3]
        files: list[str] = []
        dirs: list[str] = []
        links = False
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    name = entry.name
                    if name.startswith("."):
                        continue
                    links = links or entry.is_symlink()
                    if entry.is_dir(follow_symlinks=False):
                        dirs.append(name)
                    elif entry.is_file(follow_symlinks=False):  # a link: not in the store
                        files.append(name)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return None
        if listings is not None and st is not None and not links \
                and not cache.racy(st.st_mtime_ns, now):
            listings[key] = [st.st_mtime_ns, st.st_ino, files, dirs]
        return files, dirs

    def visit(folder: Path) -> bool:
        raw = entries_of(folder)
        if raw is None:
            return False
        listing = Listing(list(raw[0]), [])
        found[folder] = listing
        for name in raw[1]:
            path = folder / name
            if _visible(name) and path != skip and visit(path):
                listing.dirs.append(name)
        if not listing.files and not listing.dirs:
            del found[folder]  # its sub-folders, empty too, removed themselves
            return False
        listing.files.sort(key=str.casefold)
        listing.dirs.sort(key=str.casefold)
        return True

    if store.context.is_dir():
        visit(store.context)
    # parents first, siblings by name
    return dict(sorted(found.items(), key=lambda item: [p.casefold() for p in item[0].parts]))


# --- descriptions ------------------------------------------------------------------------------


def _head(root: Path, path: Path) -> str:
    """The start of a file of the store ("" when it is not one: cortexfs.wall)."""
    try:
        return wall.read_bytes(root, path, HEAD_BYTES)[:HEAD_BYTES].decode("utf-8", "replace")
    except OSError:
        return ""


def _clip(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > MAX_DESCRIPTION:
        text = text[:MAX_DESCRIPTION - 1].rstrip() + "…"
    return text


def describe_markdown(text: str) -> str:
    """A markdown file in one line: its frontmatter summary, else its first heading, else
    its first line of text."""
    try:
        span = frontmatter.locate(text)
    except AtomParseError:
        body = text  # no frontmatter (or one not closed within the start of the file)
    else:
        body = text[span.body_start:]
        try:
            meta = frontmatter.load_mapping(text[span.fm_start:span.fm_end], "", 2)
        except AtomParseError:
            meta = {}  # frontmatter that is not YAML: the file is described by its text
        summary = meta.get("summary")
        if isinstance(summary, (str, int, float)) and str(summary).strip():
            return _clip(str(summary))
    first_text = ""
    in_comment = False
    for line in body.splitlines():
        stripped = line.strip()
        if in_comment:
            in_comment = "-->" not in stripped
            continue
        if stripped.startswith("<!--"):
            in_comment = "-->" not in stripped
            continue
        m = _HEADING.match(stripped)
        if m and m.group(1):
            return _clip(m.group(1))
        if stripped and not first_text:
            first_text = stripped
    return _clip(first_text)


_MARKDOWN = (".md", ".markdown")
_COMMENTED = (".yaml", ".yml", ".toml", ".sh", ".py")


def _reads_content(name: str) -> bool:
    """Whether a file's description comes from its content (else from its name alone)."""
    return name not in _BY_NAME and os.path.splitext(name)[1].lower() in _MARKDOWN + _COMMENTED


def _describe_file(root: Path, path: Path) -> str:
    name = path.name
    if name in _BY_NAME:
        return _BY_NAME[name]
    suffix = path.suffix.lower()
    if suffix in _MARKDOWN:
        return describe_markdown(_head(root, path))
    if suffix in _COMMENTED:
        for line in _head(root, path).splitlines():
            if line.startswith("#") and not line.startswith("#!"):
                return _clip(line.lstrip("#").strip())
    return ""


# --- blocks ------------------------------------------------------------------------------------


@dataclass
class _Plan:
    """The CORTEX.md text of each folder as it will be after this run (new ones included)."""

    store: Store
    texts: dict[Path, str]  # CORTEX.md path → current or planned text

    def title(self, folder: Path) -> str:
        text = self.texts.get(folder / CORTEX_MD)
        if text is None:
            return ""
        return describe_markdown(text)


def new_cortex_md(store: Store, folder: Path) -> str:
    """The CORTEX.md a folder gets when it has none (folder template, empty block)."""
    rel = folder.relative_to(store.context).parts
    if len(rel) == 2 and rel[0] == layout.PROJECTS:
        return templates.render(store, "project/CORTEX.md.j2", project=escape.line(rel[1]),
                                date="", generated_block=EMPTY_BLOCK)
    known = (PROJECT_FOLDERS if len(rel) == 3 and rel[0] == layout.PROJECTS else
             STORE_FOLDERS if len(rel) == 1 else {})
    title, purpose = known.get(folder.name, (
        folder.name.replace("-", " ").replace("_", " ").capitalize(),
        "Say here what this folder holds and how to find things in it; the list below "
        "is generated."))
    if len(rel) == 3 and rel[0] == layout.PROJECTS:
        title = f"{title} — {rel[1]}"
    return templates.render(store, "store/folder-CORTEX.md.j2", title=escape.line(title),
                            purpose=purpose, generated_block=EMPTY_BLOCK)


def _other_files(folder: Path, listing: Listing) -> list[str]:
    """The files of a folder but its atoms and its CORTEX.md (filtered in C: an atom folder
    lists thousands of names on every regeneration)."""
    atom_kind = _ATOM_FOLDERS.get(folder.name)
    names = (itertools.filterfalse(atom_kind.file_re.match, listing.files)
             if atom_kind is not None else listing.files)
    return [name for name in names if name != CORTEX_MD]


def render_block(plan: _Plan, folder: Path, listing: Listing) -> str:
    """The generated block of `folder`'s CORTEX.md, markers included."""
    kind = _ATOM_FOLDERS.get(folder.name)
    files = _other_files(folder, listing)  # (atoms are counted, not listed)
    atom_ids = ([name[:-3] for name in filter(kind.file_re.match, listing.files)]
                if kind is not None else [])
    atom_count = len(atom_ids)
    lines = [GENERATED_START, "## Contents", ""]
    entries: list[str] = []
    if folder == plan.store.context:
        for name in (OVERVIEW_MD, layout.HIPPOCAMPUS_MD):
            if name not in files and _expected(plan.store, name):
                files.append(name)
        files.sort(key=str.casefold)
    if kind is not None and folder.parent.parent == plan.store.projects_dir \
            and layout.INDEX not in files:
        files.insert(0, layout.INDEX)
    for name in files:
        desc = _describe_file(plan.store.context, folder / name)
        entries.append(f"- [{escape.cell(name)}]({escape.link(name)})"
                       + (f" — {escape.line(desc)}" if desc else ""))
    if kind is not None and atom_count:
        keys = [_id_sort(atom_id) for atom_id in atom_ids]  # (unique: no ties to order)
        first, last = min(keys)[1], max(keys)[1]
        span = first if atom_count == 1 else f"{first} … {last}"
        entries.append(f"- {atom_count} {kind.name} atom{'s' if atom_count != 1 else ''} "
                       f"`{kind.prefix}-NNN.md` ({span}): find them through index.md")
    for name in listing.dirs:
        title = plan.title(folder / name)
        entries.append(f"- [{escape.cell(name)}/]({escape.link(name)}/{CORTEX_MD})"
                       + (f" — {escape.line(title)}" if title else ""))
    if not entries:
        entries.append("_Nothing here yet._")
    if len(entries) > MAX_ENTRIES:
        rest = len(entries) - MAX_ENTRIES
        entries = [*entries[:MAX_ENTRIES], f"- … and {rest} more"]
    lines.extend(entries)
    lines.append(GENERATED_END)
    return "\n".join(lines)


_ID_NUMBER = re.compile(r"-(\d+)")


def _id_sort(atom_id: str) -> tuple[int, str]:
    m = _ID_NUMBER.search(atom_id)
    return (int(m.group(1)) if m else 0, atom_id)


def _expected(store: Store, name: str) -> bool:
    """Whether a store-level generated file will exist after regeneration."""
    if name == OVERVIEW_MD:
        return True
    from cortexfs import derived

    return (store.context / name).exists() or any(
        "hippocampus" in spec for spec in derived.GENERATORS)


def splice_block(text: str, block: str) -> str | None:
    """`text` with its generated block replaced by `block` (appended when it has no markers);
    None when the markers are broken (a start without an end, or the wrong way round)."""
    eol = "\r\n" if "\r\n" in text else "\n"
    start = text.find(GENERATED_START)
    end = text.find(GENERATED_END, start + 1 if start >= 0 else 0)
    block = block.replace("\n", eol)
    if start < 0:
        if GENERATED_END in text:
            return None
        body = text.rstrip("\r\n")
        return (body + eol + eol if body else "") + block + eol
    if end < 0:
        return None
    return text[:start] + block + text[end + len(GENERATED_END):]


def has_broken_markers(text: str) -> bool:
    return splice_block(text, "") is None


def cortex_md_updates(store: Store, folders: Mapping[Path, Listing] | None = None,
                      only: Iterable[Path] | None = None) -> dict[Path, str]:
    """Every CORTEX.md whose text would change, with its new text (`folders`: what `walk`
    returns, when the caller has it; `only`: of those, the folders to look at — the
    CORTEX.md of their sub-folders is read too, for its title)."""
    if folders is None:
        folders = walk(store)
    todo = list(folders) if only is None else list(only)
    needed = set(todo) | {folder / name for folder in todo if folder in folders
                          for name in folders[folder].dirs}
    texts: dict[Path, str] = {}
    new: set[Path] = set()
    for folder in folders:
        if folder not in needed:
            continue
        path = folder / CORTEX_MD
        try:
            texts[path] = wall.read_bytes(store.context, path, 10 * wall.MAX_TEXT).decode()
        except OutsideStoreError:
            continue  # a link: not part of the store, neither read nor replaced
        except FileNotFoundError:
            texts[path] = new_cortex_md(store, folder)
            new.add(path)
        except (UnicodeDecodeError, OSError):
            continue  # not a text file we can edit: leave it to the user
    plan = _Plan(store, texts)
    changes: dict[Path, str] = {}
    for folder in todo:
        listing = folders[folder]
        path = folder / CORTEX_MD
        if path not in texts:
            continue
        updated = splice_block(texts[path], render_block(plan, folder, listing))
        if updated is None:
            continue
        if path in new or updated != texts[path]:
            changes[path] = updated
    return changes


# --- OVERVIEW.md -------------------------------------------------------------------------------


@dataclass
class ProjectLine:
    """One project's row in OVERVIEW.md."""

    name: str
    phase: str
    counts: dict[str, int]
    newest: str | None


AtomSummary = tuple[dict[str, int], str | None]  # atoms per kind folder, newest atom date


def summarize(atoms: Sequence[Atom]) -> AtomSummary:
    """Atom counts per kind and the date of the newest atom."""
    return _counted(({k.folder: 0 for k in KINDS}, None), atoms)


def _counted(summary: AtomSummary, atoms: Sequence[Atom]) -> AtomSummary:
    """`summary` (its counts updated in place) with `atoms` counted in."""
    counts, newest = summary
    for atom in atoms:
        counts[atom.kind.folder] += 1
        day = atom.date
        if day is not None and (newest is None or day.isoformat() > newest):
            newest = day.isoformat()
    return counts, newest


def _phase(store: Store, name: str) -> str:
    """The phase a project's STATUS.md states ("" when none)."""
    # (missing, a link, a folder, too big: no phase to show)
    phase = phase_of(wall.text_or_none(store.context, store.projects_dir / name / layout.STATUS_MD))
    return _clip(phase) if phase else ""


def last_scan(store: Store) -> str | None:
    """Name of the newest scan report in `scans/` (by the date its name starts with)."""
    try:
        names = [n for n in os.listdir(store.context / "scans")
                 if _SCAN_DATE.match(n) and n.endswith(".md")]
    except (FileNotFoundError, NotADirectoryError):
        return None
    return max(names) if names else None


def render_overview(store: Store, lines: list[ProjectLine]) -> str:
    scan = last_scan(store)
    match = _SCAN_DATE.match(scan) if scan else None
    values: dict[str, Any] = dict(
        projects=[{"name": escape.cell(p.name), "link": escape.link(p.name),
                   "phase": escape.cell(p.phase) or "—",
                   "experiments": p.counts["experiments"], "knowledge": p.counts["knowledge"],
                   "patterns": p.counts["patterns"], "newest": p.newest or "—"}
                  for p in lines],
        last_scan=match.group(1) if match else None,
        last_scan_file=escape.line(scan) if scan else None,
        last_scan_link=escape.link(scan) if scan else None,
    )
    if os.path.lexists(store.templates_dir / OVERVIEW_TEMPLATE):
        return templates.render(store, OVERVIEW_TEMPLATE, **values)
    return render_packaged(values)


OVERVIEW_TEMPLATE = "store/OVERVIEW.md.j2"


def render_packaged(v: dict[str, Any]) -> str:
    """What the packaged store/OVERVIEW.md.j2 renders from the values `v`, without Jinja:
    importing Jinja and compiling the template is ~30 ms of a `cortex new`, which renders
    nothing else through it (tests/test_overview.py checks that both agree)."""
    out = ["# Overview\n\n> Auto-generated by cortex from each project's STATUS.md and "
           "atoms. Do not edit manually.\n\n"]
    if v["last_scan"]:
        out.append(f"Last knowledge scan: {v['last_scan']} ([scans/{v['last_scan_file']}]"
                   f"(scans/{v['last_scan_link']})).\n")
    else:
        out.append("No knowledge scan yet (reports go in `scans/`, one per date: "
                   "`YYYY-MM-DD.md`).\n")
    out.append("\n")
    if v["projects"]:
        out.append("| Project | Phase | Experiments | Knowledge | Patterns | Newest atom |\n"
                   "|---|---|---|---|---|---|\n")
        out += [f"| [{p['name']}](projects/{p['link']}/STATUS.md) | {p['phase']} | "
                f"{p['experiments']} | {p['knowledge']} | {p['patterns']} | {p['newest']} |\n"
                for p in v["projects"]]
    else:
        out.append("_No projects yet: create one with `cortex project new NAME`._\n")
    return "".join(out)


# --- the generator -----------------------------------------------------------------------------


def refresh(store: Store, atoms: Mapping[str, Sequence[Atom]], dry_run: bool = False) \
        -> list[Path]:
    """Write OVERVIEW.md and the CORTEX.md blocks; the paths written (or, dry, to write).

    `atoms` maps every project name to its parsed atoms.
    """
    changes: dict[Path, str] = {}
    lines = [ProjectLine(name, _phase(store, name), *summarize(atoms.get(name, ())))
             for name in store.project_names()]
    overview = store.context / OVERVIEW_MD
    text = render_overview(store, lines)
    try:
        current = wall.read_bytes(store.context, overview, 10 * wall.MAX_TEXT).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        current = None
    if current != text:
        changes[overview] = text
    changes.update(cortex_md_updates(store))
    if dry_run:
        return sorted(changes)
    return sorted(p for p, t in changes.items()
                  if write_if_changed(p, t, root=store.context))


CACHE_KIND = "overview"


def regen(ctx: RegenContext, dry_run: bool = False) -> list[Path]:
    """The derived-generator entry point (listed in cortexfs.derived.GENERATORS).

    Incremental, with its state in `.cache/overview.bin`: a project's atom summary is kept
    with the regeneration fingerprint it was computed from (`.cache/overview/`, see
    `prepare`) and its phase with the stat data of its STATUS.md; OVERVIEW.md is rendered
    only when those rows, the scans or the template moved (or the file itself changed);
    and a folder's CORTEX.md block is recomputed only when the signature of everything it
    is made from — the folder's entries, the stat data of each file a description is read
    from, of its CORTEX.md and of its sub-folders' — moved (`_block_signatures`). Stat data
    younger than cache.RACY_NS vouches for nothing: what rests on it is recomputed next
    time. Nothing is ever remembered from a dry run that would change something.
    """
    store = ctx.store
    now = time.time_ns()
    path = store.cache_dir / "overview.bin"
    saved = cache.load(path, CACHE_KIND)
    state: dict[str, Any] = saved if isinstance(saved, dict) else {}
    new: dict[str, Any] = {"phases": {}, "listings": {}}
    changes: dict[Path, str] = {}

    # OVERVIEW.md
    lines = []
    old_phases = state.get("phases")
    for name in store.project_names():
        summary = _summary(ctx, name)
        lines.append(ProjectLine(name, _cached_phase(store, name, now, old_phases,
                                                     new["phases"]), *summary))
    overview = store.context / OVERVIEW_MD
    key = _overview_key(store, lines, now)
    old = state.get("overview")
    vouched = None  # the text OVERVIEW.md holds after this run, when its state is to be kept
    if key is not None and isinstance(old, list) and len(old) == 2 and old[0] == key \
            and cache.still(overview, old[1]):
        new["overview"] = old
    else:
        text = render_overview(store, lines)
        try:
            current = wall.read_bytes(store.context, overview, 10 * wall.MAX_TEXT).decode()
        except (OSError, UnicodeDecodeError):
            current = None
        if current != text:
            changes[overview] = text
        if key is not None and (current == text or not dry_run):
            vouched = text

    # the CORTEX.md blocks
    listings = state.get("listings")
    new["listings"] = dict(listings) if isinstance(listings, dict) else {}
    folders = walk(store, listings=new["listings"])
    signatures = _block_signatures(store, folders, now)
    old_signatures = state.get("blocks")
    if not isinstance(old_signatures, dict):
        old_signatures = {}
    todo = [folder for folder in folders if (key := store.rel(folder)) not in signatures
            or old_signatures.get(key) != signatures[key]]
    if todo:
        blocks = cortex_md_updates(store, folders, todo)
        changes.update(blocks)
        for written_md in blocks:  # the files it writes are new: vouch for them next time
            signatures.pop(store.rel(written_md.parent), None)
    new["blocks"] = signatures

    if dry_run:
        written = sorted(changes)
    else:
        with Writes(root=store.context) as writes:  # (their fsyncs overlap)
            written = sorted(p for p, t in changes.items()
                             if write_if_changed(p, t, root=store.context, writes=writes))
    if vouched is not None:
        state_now = cache.file_state(overview, cache.digest(vouched.encode()).hex(), now)
        if state_now is not None:
            new["overview"] = [key, state_now]
    if (not dry_run or not changes) and new != state:
        cache.save(path, CACHE_KIND, new)
    return written


SUMMARY_KIND = "overview-summary"


def _summary(ctx: RegenContext, name: str) -> AtomSummary:
    """A project's atom summary: from its cache file (`.cache/overview/<project>.bin`) when
    its regeneration fingerprint is the same, else from its atoms (and cached)."""
    if name not in ctx.projects:
        return summarize(())
    fingerprint = ctx.fingerprint([name], dated=False)
    path = ctx.store.cache_dir / "overview" / f"{name}.bin"
    hit = cache.load(path, SUMMARY_KIND) if fingerprint else None
    if isinstance(hit, list) and len(hit) == 3 and isinstance(hit[1], dict):
        if hit[0] == fingerprint:
            return hit[1], hit[2]
        added = _added_to(ctx, name, hit, path)
        summary = added if added is not None else summarize(ctx.projects[name].atoms)
    else:
        summary = summarize(ctx.projects[name].atoms)
    if fingerprint:
        cache.save(path, SUMMARY_KIND, [fingerprint, *summary])
    return summary


def _added_to(ctx: RegenContext, name: str, hit: list[Any], path: Path) -> AtomSummary | None:
    """The summary cached (`hit`, at `path`) with the one atom the project has gained since
    (RegenContext.added: `cortex new`, which then needs none of the project's other atoms);
    None when the project changed otherwise."""
    counts, newest = hit[1], hit[2]
    if sorted(counts) != sorted(k.folder for k in KINDS) \
            or not (newest is None or isinstance(newest, str)):
        return None
    atom = ctx.added(name, hit[0], path)
    if atom is None:
        return None
    return _counted((dict(counts), newest), [atom])


def prepare(ctx: RegenContext, names: list[str]) -> None:
    """Compute and cache the atom summaries of `names` (a regeneration calls this in the
    process that regenerated their indexes: on a cold run, on both cores)."""
    for name in names:
        _summary(ctx, name)


def _cached_phase(store: Store, name: str, now: int, old: Any, new: dict[str, Any]) -> str:
    """A project's phase: from the cache while its STATUS.md keeps its stat data."""
    stamp = cache.stamp(store.projects_dir / name / layout.STATUS_MD, now)
    hit = old.get(name) if isinstance(old, dict) else None
    if stamp is not None and isinstance(hit, list) and len(hit) == 2 \
            and hit[0] == list(stamp) and isinstance(hit[1], str):
        phase: str = hit[1]
    else:
        phase = _phase(store, name)
    if stamp is not None:
        new[name] = [list(stamp), phase]
    return phase


def _overview_key(store: Store, lines: list[ProjectLine], now: int) -> str | None:
    stamps = templates.stamps(store, now)
    if stamps is None:
        return None
    data = (stamps, last_scan(store),
            [(p.name, p.phase, sorted(p.counts.items()), p.newest) for p in lines])
    return cache.digest(marshal.dumps(data, 2)).hex()


def _block_signatures(store: Store, folders: Mapping[Path, Listing], now: int) -> dict[str, str]:
    """Per folder (by its path under context/, which a moved store keeps), a digest of
    everything its CORTEX.md block is made from: its entries, the stat data of the files it
    describes, of its CORTEX.md and of its sub-folders' (their titles), the templates. A
    folder is left out when one of those files is missing or changed too recently for its
    stat data to vouch for its content.
    (Per folder: a new atom changes one folder's block, and the other ~50 are not read.)"""
    from cortexfs import derived

    stamps = templates.stamps(store, now)
    if stamps is None:
        return {}
    common = cache.digest(marshal.dumps([stamps, list(derived.GENERATORS)], 2)).hex()
    own = {folder: cache.stamp(folder / CORTEX_MD, now) for folder in folders}
    out: dict[str, str] = {}
    for folder, listing in folders.items():
        titles = [own.get(folder / name) for name in listing.dirs]
        if own[folder] is None or None in titles:
            continue
        described = []
        for name in _other_files(folder, listing):  # atoms are counted, not read
            if _reads_content(name):
                stamp = cache.stamp(folder / name, now)
                if stamp is None:
                    break
                described.append((name, stamp))
        else:
            key = store.rel(folder)
            out[key] = cache.digest(marshal.dumps(
                (common, key, listing.files, listing.dirs, own[folder], titles,
                 described), 2)).hex()
    return out
