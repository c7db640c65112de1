"""What `cortex view` shows, read from the store through the library.

Atoms come from the regeneration context (cortexfs.regen.context: parsed frontmatter from
the loader's cache, refs / last-ref folded from the access logs), tasks from
cortexfs.tasks, the phase from cortexfs.governance, the decay queue from
cortexfs.hippocampus, reads per day from cortexfs.view.history. Nothing here writes to the
store. Files that are symlinks are not part of the store: they are skipped (and counted),
never followed.
"""

from __future__ import annotations

import marshal
import os
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from cortexfs import cache, tasks, wall
from cortexfs.atoms import ATOM_ID, KINDS, Atom, split_status, status_group
from cortexfs.errors import AtomParseError, CortexError
from cortexfs.frontmatter import decode, locate, read_bytes
from cortexfs.layout import MISSION_MD, ROADMAP_MD, STATUS_MD, TASKS_ARCHIVE, TASKS_FILE, split_id
from cortexfs.status import phase_of
from cortexfs.store import PROJECT_NAME
from cortexfs.view.history import Days, daily_reads

if TYPE_CHECKING:
    from cortexfs.accesslog import AccessStats
    from cortexfs.hippocampus import MemoryEntry
    from cortexfs.regen import RegenContext
    from cortexfs.store import Project, Store
    from cortexfs.tasks import TaskFile

GOVERNANCE_TEXTS = (STATUS_MD, MISSION_MD, ROADMAP_MD)
# how an atom names another: the relation as seen from the atom named
RELATIONS = {"evidence": "cited as evidence by", "source": "a source experiment of",
             "link": "linked from", "status": "named in the status of"}


_CANONICAL: dict[str, str] = {}


def canonical_id(atom_id: str) -> str:
    """One spelling per id: EXP-7, EXP-007 and EXP-0007 are the same experiment."""
    found = _CANONICAL.get(atom_id)
    if found is None:
        parts = split_id(atom_id)
        found = f"{parts[0]}-{parts[1]}{parts[2]}" if parts else atom_id
        if len(_CANONICAL) < 100_000:
            _CANONICAL[atom_id] = found
    return found


def status_class(status: str, group: str) -> str:
    """The colour of a status (CSS class st-…): its group, challenged apart."""
    return "challenged" if status == "challenged" else group


@dataclass
class AtomModel:
    """One atom as the site shows it. `atom.meta` carries the folded refs / last-ref and no
    body; `stamp` is the file's (mtime_ns, size, inode), what its body is known by. The
    rest is worked out once: every page that names the atom shows it.

    `signature` digests everything about the atom that any page shows (its frontmatter,
    folded refs, stamp and reads): a page's key is made of the signatures of the atoms it
    shows, so that finding it unchanged costs no more than that."""

    atom: Atom
    stamp: tuple[int, int, int]
    reads: dict[str, int]  # day → reads
    stem: str = field(init=False)  # the file name without .md: the page's name
    href: str = field(init=False)  # its page, relative to the project's folder
    status: str = field(init=False)
    status_text: str = field(init=False)  # `superseded:EXP-050`
    status_class: str = field(init=False)
    group: str = field(init=False)  # active | superseded | invalidated
    day: str = field(init=False)  # its date, ISO, or ""
    signature: bytes = field(init=False)
    # (relation, id, the atom it names or None) for each atom it names, in frontmatter order
    cited: list[tuple[str, str, AtomModel | None]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        a = self.atom
        self.stem = a.path.name[:-3]
        self.href = f"{quote(self.stem, safe='')}.html"
        self.status, ref = split_status(a.meta.get("status"))
        self.status_text = f"{self.status}:{ref}" if ref else self.status
        self.group = status_group(self.status)
        self.status_class = status_class(self.status, self.group)
        day = a.date
        self.day = day.isoformat() if day else ""
        self.signature = cache.digest(marshal.dumps(
            (a.meta, self.stamp, sorted(self.reads.items())), 2))


@dataclass
class ProjectModel:
    """One project: its atoms (by file), what cites what, tasks, governance texts, reads."""

    project: Project
    atoms: list[AtomModel]
    errors: list[AtomParseError]  # atom files that did not parse
    symlinks: list[str]  # atom files (relative to the project) skipped as symlinks
    stats: AccessStats
    history: Days
    texts: dict[str, str | None]
    phase: str
    tasks: TaskFile | None
    tasks_error: str | None
    by_id: dict[str, AtomModel] = field(default_factory=dict)
    # stem → (relation, the atom that names it this way)
    backlinks: dict[str, list[tuple[str, AtomModel]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.project.name

    def resolve(self, atom_id: str) -> AtomModel | None:
        """The atom an id names in this project (any spelling of its number)."""
        return self.by_id.get(canonical_id(atom_id))

    def href(self, atom_id: str) -> str | None:
        """The page of the atom an id names in this project (for links in markdown)."""
        target = self.resolve(atom_id)
        return target.href if target is not None else None

    def link(self) -> None:
        """Work out what each atom names (`cited`) and what names it (`backlinks`)."""
        for am in self.atoms:
            self.by_id.setdefault(canonical_id(am.stem), am)
        for am in self.atoms:  # an id in the frontmatter that differs from the file name
            self.by_id.setdefault(canonical_id(am.atom.id), am)
        for am in self.atoms:
            a = am.atom
            named = [("evidence", i) for i in a.evidence]
            named += [("source", i) for i in a.source_experiments]
            named += [("link", i) for i in a.links]
            if a.status_ref and ATOM_ID.fullmatch(a.status_ref):
                named.append(("status", a.status_ref))
            seen = set()
            for relation, target_id in named:
                target = self.resolve(target_id)
                am.cited.append((relation, target_id, target))
                if target is None or target is am or (relation, target.stem) in seen:
                    continue
                seen.add((relation, target.stem))
                self.backlinks.setdefault(target.stem, []).append((relation, am))

    def open_tasks(self) -> int:
        return self.tasks.open_count() if self.tasks else 0

    def last_activity(self) -> str | None:
        """The newest of the newest atom's date and the newest read (a day)."""
        days = [am.day for am in self.atoms if am.day]
        reads = [ts[:10] for ts in self.stats.newest.values()]
        return max([*days, *reads], default=None)


def select(store: Store, names: list[str] | None) -> tuple[list[Project], list[str]]:
    """The projects to show (`names`, or all) and why others are not shown."""

    shown, skipped = [], []
    for project in store.select(names):
        if not PROJECT_NAME.fullmatch(project.name):
            skipped.append(f"{project.name}: not a valid project name (rename the folder)")
        elif os.path.islink(project.root):
            skipped.append(f"{project.name}: the project folder is a symlink (not part of the "
                           "store)")
        else:
            shown.append(project)
    return shown, skipped


def fingerprint(ctx: RegenContext, project: Project, now_ns: int) -> str | None:
    """A digest of everything a project's pages are made from — its atom files and access
    log (the regeneration fingerprint), its governance files, its folders — without
    reading the atoms; None when a file changed too recently for its stat data to tell."""
    parts: list[Any] = [ctx.fingerprint([project.name], dated=False)]
    for name in (*GOVERNANCE_TEXTS, TASKS_FILE, TASKS_ARCHIVE):
        found = cache.stamp(project.root / name, now_ns)
        if found is None:
            return None
        parts.append(found)
    for folder in (project.root, *(project.folder(k) for k in KINDS)):
        try:  # a file that became a symlink changes its folder's mtime
            st = os.lstat(folder)
        except OSError:
            parts.append(None)
            continue
        parts.append((st.st_mode, st.st_ino, st.st_mtime_ns))
    return cache.digest(marshal.dumps(parts, 2)).hex()


def decay_queue(ctx: RegenContext, shown: set[str]) -> list[MemoryEntry]:
    """HIPPOCAMPUS.md's decay queue (weakest first) for the projects in `shown`; the store
    clock, and with it every strength, is the whole store's."""
    from cortexfs import hippocampus

    index = hippocampus.assemble(hippocampus.parts(ctx, list(ctx.projects)))
    return [e for e in hippocampus.decay_queue(index) if e.project in shown]


def load_project(ctx: RegenContext, project: Project) -> ProjectModel:
    """Everything a project's pages show."""
    loaded = ctx.projects[project.name]
    history = daily_reads(project)
    atoms: list[AtomModel] = []
    # the loader reports a linked atom as an error (cortexfs.wall): here it is one of these
    symlinks = [os.path.join(*e.path.split(os.sep)[-2:]) for e in loaded.errors
                if os.path.islink(e.path)]
    errors = [e for e in loaded.errors if not os.path.islink(e.path)]
    linked_folders = {k.folder for k in KINDS if os.path.islink(project.folder(k))}
    for atom in loaded.atoms:
        rel = f"{atom.kind.folder}/{atom.path.name}"
        try:
            st = os.lstat(atom.path)
        except OSError:
            continue  # deleted since the scan
        if atom.kind.folder in linked_folders or stat.S_ISLNK(st.st_mode):
            symlinks.append(rel)
            continue
        atoms.append(AtomModel(atom, cache.stamp_of(st),
                               history.get(atom.path.name, {})))
    texts = {name: wall.text_or_none(project.store.context, project.root / name)
             for name in GOVERNANCE_TEXTS}
    tasks, tasks_error = _tasks(project)
    pm = ProjectModel(project, atoms, errors, symlinks, ctx.access[project.name],
                      history, texts, phase_of(texts[STATUS_MD]) or "", tasks, tasks_error)
    pm.link()
    return pm


def _tasks(project: Project) -> tuple[TaskFile | None, str | None]:
    path = project.root / TASKS_FILE
    if os.path.islink(path):
        return None, f"{TASKS_FILE} is a symlink: not part of the store, not shown"
    try:
        return tasks.load(project), None
    except CortexError as e:
        return None, str(e).replace(str(path), TASKS_FILE)


def read_body(am: AtomModel) -> str | None:
    """The atom's body (after the frontmatter) as its file holds it now; None when the file
    is gone, a symlink, or no longer parses."""

    path = am.atom.path
    try:
        text = decode(read_bytes(path), str(path))
        return text[locate(text, str(path)).body_start:]
    except AtomParseError:
        return None
