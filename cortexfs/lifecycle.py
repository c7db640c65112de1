"""An atom's life after `cortex new`: reading it, changing it, retiring it, moving and
removing it — and retiring a whole project.

The CLI (cortexfs/cli/atoms.py, cli/core.py) and the MCP server are thin translators over
these functions.

- Reading (`locate`, `show`, `list_atoms`, `projects`) writes nothing but the access-log
  line of a read (`show` counts as one, as `read_atom` does).
- A change is worked out, and everything that could refuse it is checked, before any file
  is written: an operation returns a `Plan` (files to rewrite, create and delete, access-log
  lines to drop or move, folders to move), and `apply` carries it out inside the caller's
  `commit.transaction` — which snapshots every file first, so a failure puts them back —
  then regenerates the projects it touched, so that the change and the indexes that list
  it are committed as one commit.
- Frontmatter edits change only their keys (`frontmatter.set_keys`): every other byte
  stays. A file that changed on disk since the plan read it is not overwritten.

References between atoms (SPEC §2): `evidence`, `source-experiments`, `links` and the cause
of a status (`superseded:EXP-050`) name atoms of the same project. A body may mention any
id in prose. `rm` refuses while frontmatter references name the atom (`force` rewrites
them); `mv` moves atoms to another project with new ids there and rewrites every mention,
as sync's renumbering does (cortexfs.renumber.rewrite_text), refusing while a reference
would be left pointing across projects.

Archived projects go to `context/archive/<name>/`: outside `projects/`, so no index,
OVERVIEW.md, HIPPOCAMPUS.md, recall, brief, validation or readiness sees them, while their
files (indexes as last generated, access log) stay in the store and in git for a person to
read; `unarchive` moves one back.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortexfs import accesslog, authoring, cache, interrupt, layout, wall
from cortexfs.atoms import (
    ATOM_ID,
    EXPERIMENT,
    KIND_BY_PREFIX,
    KINDS,
    STATUSES,
    Atom,
    Kind,
    as_date,
    as_list,
    split_status,
    status_group,
)
from cortexfs.commit import Change
from cortexfs.errors import AtomParseError, InvalidInputError, OutsideStoreError
from cortexfs.frontmatter import MAX_ATOM_BYTES, Document, decode, parse, set_keys
from cortexfs.frontmatter import locate as locate_parts
from cortexfs.fsutil import atomic_write
from cortexfs.loader import Ahead, LoadedProject, ProjectScan, atom_paths, load_project
from cortexfs.store import Project, Store, check_project_name
from cortexfs.wording import plural

if TYPE_CHECKING:
    from cortexfs.commit import Transaction
    from cortexfs.validate import Finding

MAX_REASON = 300  # characters of an invalidated-reason (one line of an index cell)
# frontmatter keys that name other atoms of the project, and how `show` calls each
REFERENCE_KEYS = ("evidence", "source-experiments", "links", "status")
_GENERATED = (layout.INDEX, layout.CORTEX_MD)  # files regeneration writes: no mention is rewritten
_ID = re.compile(rf"(?i)({layout.PREFIX_PATTERN})-(\d{{1,9}})([a-z]?)")


# --- finding an atom -------------------------------------------------------------------------

@dataclass(frozen=True)
class Located:
    """An atom file of the store: its project, kind and path."""

    project: Project
    kind: Kind
    path: Path

    @property
    def id(self) -> str:
        return self.path.stem

    @property
    def rel(self) -> str:
        """Its path relative to context/ (how messages name it)."""
        return f"projects/{self.project.name}/{self.kind.folder}/{self.path.name}"


def canonical(atom_id: str) -> str:
    """One spelling per id for comparing: EXP-7, EXP-007 and exp-0007 are one experiment."""
    m = _ID.fullmatch(atom_id.strip())
    if m is None:
        return atom_id
    return f"{m[1].upper()}-{int(m[2])}{m[3].lower()}"


def _spellings(atom_id: str) -> tuple[Kind, list[str]]:
    """The kind of `atom_id` and the file names (without .md) it may have: as written, and
    with the number padded as `cortex new` writes it (EXP-7 → EXP-007)."""
    m = _ID.fullmatch(atom_id.strip())
    kind = KIND_BY_PREFIX.get(m[1].upper()) if m else None
    if m is None or kind is None or (m[3] and kind is not EXPERIMENT):
        raise InvalidInputError(f"{atom_id.strip()[:80]!r} is not an atom id: use EXP-NNN, "
                                "K-NNN or PAT-NNN")
    suffix = m[3].lower()
    given = f"{kind.prefix}-{m[2]}{suffix}"
    padded = kind.format_id(int(m[2])) + suffix
    return kind, list(dict.fromkeys([given, padded]))


def locate(store: Store, atom_id: str, project: str | None = None, *,
           besides: str | None = None) -> Located:
    """The atom `atom_id` (`PROJECT/ID` also names its project), in `project` or in the only
    project that has it (not counting `besides`: where `mv` moves it to)."""
    text = atom_id.strip()
    if "/" in text:
        where, _, text = text.rpartition("/")
        if project is not None and where != project:
            raise InvalidInputError(f"{atom_id!r} names project {where!r} but --project says "
                                    f"{project!r}: give one")
        project = where
    kind, names = _spellings(text)
    projects = [store.project(project)] if project else [
        p for p in store.projects() if p.name != besides]
    found: list[Located] = []
    for p in projects:
        for name in names:
            path = p.folder(kind) / f"{name}.md"
            if os.path.lexists(path):
                found.append(Located(p, kind, path))
                break
    if not found and besides is not None and any(
            os.path.lexists(store.projects_dir / besides / kind.folder / f"{n}.md")
            for n in names):
        raise InvalidInputError(f"{names[-1]} is already in project {besides}: name another "
                                "project")
    if not found:
        where = f"project {project}" if project else "any project"
        hint = f"`cortex list -p {project}`" if project else "`cortex list`"
        raise InvalidInputError(f"no atom {names[-1]} in {where}: {hint} lists the ids")
    if len(found) > 1:
        names_found = ", ".join(f.project.name for f in found)
        raise InvalidInputError(f"{names[-1]} exists in several projects ({names_found}): "
                                "name one with --project")
    wall.check(store.context, found[0].path)  # a link named like an atom is not one
    return found[0]


def only_project(store: Store, name: str | None) -> Project:
    """The named project, or the store's only project when none is named."""
    if name is not None:
        return store.project(name)
    names = store.project_names()
    if len(names) == 1:
        return store.project(names[0])
    if not names:
        raise InvalidInputError("the store has no project yet: create one with "
                                "`cortex project new NAME`")
    raise InvalidInputError(f"which project? pass --project NAME (projects: {', '.join(names)})")


def read(store: Store, located: Located) -> tuple[str, Document]:
    """The atom's text and its parsed frontmatter; one line saying what to fix when the file
    is not a readable atom."""
    try:
        raw = wall.read_bytes(store.context, located.path, MAX_ATOM_BYTES)
    except OutsideStoreError:
        raise
    except OSError as e:
        raise InvalidInputError(f"cannot read {located.rel}: {e.strerror}: it is not an atom "
                                "file") from None
    try:
        if len(raw) > MAX_ATOM_BYTES:
            raise AtomParseError(located.rel, f"over the {MAX_ATOM_BYTES:,}-byte limit of an "
                                 "atom")
        text = decode(raw, located.rel)
        return text, parse(text, located.rel)
    except AtomParseError as e:
        raise InvalidInputError(f"{e}: fix the file first (`cortex validate` lists every "
                                "problem)") from None


def _stamp(path: Path) -> cache.Stamp | None:
    try:
        return cache.stamp_of(os.lstat(path))
    except OSError:
        return None


# --- references ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reference:
    """`atom` names `target` by `relation` (a frontmatter key, or `body` for prose)."""

    atom: str
    relation: str
    target: str
    summary: str = ""  # of the atom on the other side, when it exists
    exists: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def named_in(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, id) for every atom the frontmatter names: evidence, source-experiments, links
    and the cause of its status."""
    out = []
    for key in REFERENCE_KEYS[:3]:
        out += [(key, v) for v in as_list(meta.get(key)) if ATOM_ID.fullmatch(v)]
    _, cause = split_status(meta.get("status"))
    if cause and ATOM_ID.fullmatch(cause):
        out.append(("status", cause))
    return out


def _citing(atoms: list[Atom], targets: set[str], skip: set[Path]) -> list[Reference]:
    """Frontmatter references to `targets` (canonical ids) from `atoms` outside `skip`."""
    return [Reference(atom.file_id, key, target, atom.summary) for atom in atoms
            if atom.path not in skip for key, target in named_in(atom.meta)
            if canonical(target) in targets]


def _body_mentions(project: Project, targets: set[str], skip: set[Path]) -> dict[Path, set[str]]:
    """Atom files whose body mentions one of `targets` (canonical ids), with the ids."""
    found: dict[Path, set[str]] = {}
    for _, path in atom_paths(project):
        if path in skip or wall.reason(project.store.context, path):
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            body = text[locate_parts(text).body_start:]
        except (OSError, AtomParseError):
            continue
        ids = {m for m in ATOM_ID.findall(body) if canonical(m) in targets}
        if ids:
            found[path] = ids
    return found


# --- reading ---------------------------------------------------------------------------------

@dataclass
class Shown:
    """`cortex show`: an atom with what it cites and what cites it."""

    located: Located
    text: str
    meta: dict[str, Any]
    body: str
    refs: int
    last_read: str | None
    cites: list[Reference]
    cited_by: list[Reference]
    mentioned_in: list[str]  # atoms whose body mentions it

    def to_json(self) -> dict[str, Any]:
        loc = self.located
        return {"id": loc.id, "project": loc.project.name, "kind": loc.kind.name,
                "path": f"{layout.CONTEXT_PREFIX}{loc.rel}", "frontmatter": self.meta,
                "body": self.body,
                "refs": self.refs, "last_read": self.last_read,
                "cites": [r.to_json() for r in self.cites],
                "cited_by": [r.to_json() for r in self.cited_by],
                "mentioned_in": self.mentioned_in}


def show(store: Store, located: Located, *, session: str = "cli", tool: str = "show") -> Shown:
    """The atom whole, what it cites, what cites it, its reads; the read is recorded in the
    project's access log (a read like any other)."""
    from cortexfs import autocommit

    text, doc = read(store, located)
    project = located.project
    atoms = load_project(project, bodies=False).atoms
    by_id = {canonical(a.file_id): a for a in atoms}
    cites = []
    for key, target in named_in(doc.meta):
        other = by_id.get(canonical(target))
        cites.append(Reference(located.id, key, target, other.summary if other else "",
                               other is not None))
    me = {canonical(located.id)}
    cited_by = _citing(atoms, me, {located.path})
    mentioned = sorted(p.stem for p in _body_mentions(project, me, {located.path}))
    stats = accesslog.current(project)[0]
    written = Atom(located.path, located.kind, doc.meta)  # its refs and last-ref as written
    refs = max(written.refs, stats.counts.get(located.path.name, 0))
    last = max(filter(None, [written.last_ref,
                             stats.newest.get(located.path.name)]), default=None)
    with contextlib.suppress(OutsideStoreError):  # a linked log is not counted into
        accesslog.append(project.access_log,
                         [accesslog.format_line(located.path.name, tool, session)])
        if os.environ.get("CORTEX_AUTOCOMMIT", "1") != "0":
            autocommit.request(str(store.home))  # committed as the hook's reads are
    return Shown(located, text, doc.meta, doc.body, refs, last, cites, cited_by, mentioned)


def _str(value: object) -> str | None:
    return str(value) if value else None


@dataclass
class Listed:
    """One row of `cortex list`: an atom (refs / last-ref folded from the access log)."""

    project: str
    atom: Atom

    def to_json(self) -> dict[str, Any]:
        a = self.atom
        return {"id": a.file_id, "project": self.project, "kind": a.kind.name,
                "path": f"context/projects/{self.project}/{a.kind.folder}/{a.path.name}",
                "date": a.date.isoformat() if a.date else _str(a.meta.get("date")),
                "status": _str(a.meta.get("status")) or "active", "group": a.group,
                "summary": a.summary, "tags": a.tags, "refs": a.refs,
                "last_ref": a.last_ref, "links": a.links, "evidence": a.cited_experiments()}


def check_status_filter(status: str) -> str:
    name = status.strip().lower()
    if name not in STATUSES:
        raise InvalidInputError(f"unknown --status {status[:40]!r}: use one of "
                                f"{', '.join(STATUSES)}")
    return name


def list_atoms(store: Store, project: str | None = None, kind: Kind | None = None,
               status: str | None = None, tags: list[str] | None = None,
               since: dt.date | None = None) -> list[Listed]:
    """The atoms that match every filter, project by project, kind by kind, in each index's
    order: Active, Invalidated, Superseded, each by refs, newest date, id.

    `status` matches an atom's status or its group (`active` lists valid, partial … too;
    `superseded` lists refined, stale and deprecated too); every tag of `tags` must be one
    of the atom's; `since` keeps atoms dated that day or later."""
    from cortexfs.regen import context
    from cortexfs.regen.render import GROUP_ORDER, atom_order

    if status is not None:
        status = check_status_filter(status)
    names = [store.project(project).name] if project else store.project_names()
    wanted = {t.lower() for t in tags or []}
    ctx = context(store)
    out: list[Listed] = []
    for name in names:
        atoms = ctx.projects[name].atoms
        for k in [kind] if kind else KINDS:
            rows = [a for a in atoms if a.kind is k
                    and (status is None or status in (a.status, a.group))
                    and wanted <= {t.lower() for t in a.tags}
                    and (since is None or (a.date is not None and a.date >= since))]
            for group in GROUP_ORDER:
                out += [Listed(name, a) for a in sorted((a for a in rows if a.group == group),
                                                         key=atom_order)]
    return out


def projects(store: Store) -> list[dict[str, Any]]:
    """Each project with its atom counts, phase (STATUS.md) and open tasks; then the
    archived ones (name and `archived: true`)."""
    from cortexfs.status import phase_of
    from cortexfs.tasks import load as load_tasks

    out: list[dict[str, Any]] = []
    for project in store.projects():
        counts = {k.folder: sum(1 for _ in atom_paths(project, k)) for k in KINDS}
        status = wall.text_or_none(store.context, project.root / layout.STATUS_MD)
        try:
            open_tasks: int | None = load_tasks(project).open_count()
        except InvalidInputError:
            open_tasks = None
        out.append({"name": project.name, "archived": False, "atoms": counts,
                    "phase": phase_of(status), "open_tasks": open_tasks})
    out += [{"name": name, "archived": True} for name in archived(store)]
    return out


def archived(store: Store) -> list[str]:
    """Names of the archived projects."""
    return store.folder_projects(store.context / layout.ARCHIVE)


# --- plans -----------------------------------------------------------------------------------

@dataclass
class Plan:
    """What an operation will write, worked out (and checked) before anything is."""

    message: str  # the commit message
    writes: dict[Path, tuple[str, tuple[int, int, int] | None]] = field(default_factory=dict)
    creates: dict[Path, str] = field(default_factory=dict)
    deletes: list[Path] = field(default_factory=list)
    # access logs: path → (file names whose lines go, lines to append)
    logs: dict[Path, tuple[set[str], list[bytes]]] = field(default_factory=dict)
    trees: list[tuple[Path, Path | None]] = field(default_factory=list)  # folder → dest / gone
    regenerate: list[str] | None = field(default_factory=list)  # None: every project
    notes: list[str] = field(default_factory=list)  # what else it did, for the user
    result: dict[str, Any] = field(default_factory=dict)  # what to report (ids, paths)

    @property
    def empty(self) -> bool:
        return not (self.writes or self.creates or self.deletes or self.logs or self.trees)

    def rewrite(self, path: Path, old: str, new: str) -> None:
        if new != old:
            self.writes[path] = (new, _stamp(path))


def apply(store: Store, plan: Plan, txn: Transaction) -> Change:
    """Carry `plan` out inside `txn` (each file snapshotted first, so that a failure puts it
    back), then regenerate the projects it touched; the change for the commit."""
    change = Change(message=plan.message)
    for path, (text, stamp) in plan.writes.items():
        interrupt.check()
        if stamp is not None and _stamp(path) != stamp:
            raise InvalidInputError(f"{store.rel(path)} changed while cortex was working on "
                                    "it: run the command again")
        txn.keep(path)
        atomic_write(path, text, root=store.context)
        txn.add(Change([path]))
    for path, text in plan.creates.items():
        interrupt.check()
        wall.makedirs(store.context, path.parent)
        authoring.write_new(path, text)
        txn.add(Change([path], created=[path]))
    for path in plan.deletes:
        interrupt.check()
        txn.keep(path)
        path.unlink(missing_ok=True)
        txn.add(Change([path]))
    for log, (drop, append) in plan.logs.items():
        interrupt.check()
        txn.keep(log)
        if drop:
            _drop_log_lines(log, drop)
        if append:
            wall.makedirs(store.context, log.parent)
            accesslog.append(log, append)
        txn.add(Change([log]))
    for source, dest in plan.trees:
        interrupt.check()
        _move_tree(store, source, dest, txn)
    if plan.regenerate is None or plan.regenerate:
        change.merge(regenerate(store, plan.regenerate, txn,
                                warn=lambda m: plan.notes.append(f"warning: {m}")))
    return change


def regenerate(store: Store, names: list[str] | None, txn: Transaction | None = None,
               warn: Callable[[str], None] | None = None,
               scans: Iterable[ProjectScan] = (), ahead: Ahead | None = None) -> Change:
    """Regenerate `names` (every project when None) and the store-wide files, as a Change
    whose indexes need no second regeneration by the committer.

    With `txn`, a failed command regenerates them again once its files are put back, so
    that the indexes list the atoms as they are (and, HEAD being consistent, equal HEAD's
    again). With `warn`, a regeneration that fails for a reason in the store (a template
    override that does what a template may not, an unreadable file) is said through it and
    the change goes on without it: knowledge is recorded even when the indexes cannot be
    rebuilt (the committer then leaves what rests on them uncommitted, and says so).
    `scans`, `ahead`: scans this command has taken (with what it wrote since refreshed in
    them), and scans of projects it did not write, taken meanwhile, as cortexfs.regen takes
    them; used by the first regeneration only (the one after an undo scans afresh)."""
    from cortexfs.errors import CortexError, EnvironmentProblem
    from cortexfs.regen import regenerate as regen

    def run(scans: Iterable[ProjectScan] = (), ahead: Ahead | None = None) -> list[Path]:
        existing = None if names is None else [n for n in names if (
            store.projects_dir / n).is_dir()]
        # ([]: none left, the store-wide files)
        result = regen(store, existing or None, scans=scans, ahead=ahead)
        if result.drained and txn is not None:
            txn.wrote_unlisted()  # (lines appended to access logs: not in `written`)
        if warn is not None:
            for problem in result.dubious:
                warn(f"{store.rel(Path(problem.path))}: {problem.reason}")
        return result.written

    def again() -> list[str]:
        run()
        return []  # (the files it restores are HEAD's again: nothing to name)

    if txn is not None:
        txn.after_undo(again)
    try:
        written = run(scans, ahead)
    except EnvironmentProblem:
        raise
    except CortexError as e:
        if warn is None:
            raise
        target = " ".join(names) if names else "--all"
        warn(f"the indexes could not be regenerated ({e}): fix that, then run `cortex index "
             f"regen {target}`")
        return Change()
    return Change(list(written), regenerated={n for n in names or store.project_names()})


def _drop_log_lines(log: Path, files: set[str]) -> None:
    """Remove the access-log lines about `files` (a late append is dropped too)."""
    from cortexfs import renumber

    def keep(data: bytes) -> bytes:
        return b"".join(line for line in data.splitlines(keepends=True)
                        if accesslog.entry_file(line) not in files)

    renumber.replace_log(log, keep, keep)


def _log_lines(log: Path, files: dict[str, str]) -> list[bytes]:
    """The log's lines about `files` (old name → new name), renamed."""
    try:
        data = accesslog.read(log)
    except (OSError, OutsideStoreError):
        return []
    found = (accesslog.renamed(line, files) for line in data.splitlines(keepends=True)
             if line.endswith(b"\n"))
    return [line for line in found if line is not None]


def _tree_files(root: Path) -> list[Path]:
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        out += [Path(folder, n) for n in names if not os.path.islink(os.path.join(folder, n))]
    return out


def _move_tree(store: Store, source: Path, dest: Path | None, txn: Transaction) -> None:
    """Move (or, with no `dest`, remove) a folder of the store; every file is snapshotted
    first so that a failed command puts it back."""
    wall.check(store.context, source)
    files = _tree_files(source)
    txn.keep(*files)
    if dest is None:
        shutil.rmtree(source)
        txn.add(Change(files))
        return
    wall.check(store.context, dest)
    txn.fresh(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, dest)
    txn.add(Change([*files, *(dest / f.relative_to(source) for f in files)]))


# --- changing an atom ------------------------------------------------------------------------

def check_text(store: Store, located: Located, text: str) -> list[Finding]:
    """Validate `text` as the new content of `located` (with the rest of its project as it
    is): refuse with the first error, in one line; the warnings."""
    from cortexfs.validate import ERROR, check_project

    project = located.project
    draft = store.cache_dir / "drafts" / "check" / project.name / located.kind.folder \
        / located.path.name
    draft.parent.mkdir(parents=True, exist_ok=True)
    try:
        draft.write_text(text, encoding="utf-8", newline="")
        try:
            doc = parse(text, located.rel)
        except AtomParseError as e:
            raise InvalidInputError(f"{e}: not saved") from None
        loaded = load_project(project, bodies=False)
        atoms = [a for a in loaded.atoms if a.path != located.path]
        atoms.append(Atom(draft, located.kind, doc.meta, doc.body))
        findings = [f for f in check_project(project, LoadedProject(project, atoms, []))
                    if f.path == located.rel]
    finally:
        with contextlib.suppress(OSError):
            draft.unlink()
    errors = [f for f in findings if f.severity == ERROR]
    if errors:
        more = f" (and {plural(len(errors) - 1, 'more error')})" if len(errors) > 1 else ""
        raise InvalidInputError(f"{errors[0].location}: {errors[0].message}{more}: not saved")
    return findings


def update(store: Store, located: Located, *, body: str | None = None,
           summary: str | None = None, tags: list[str] | None = None,
           links: list[str] | None = None) -> Plan:
    """Change an atom's body, summary, tags or links (only those keys; the body whole)."""
    text, doc = read(store, located)
    updates: dict[str, Any] = {}
    notes: list[str] = []
    if summary is not None:
        authoring.check_summary(summary)
        updates["summary"] = summary.strip()
    for key, given, check in (("tags", tags, authoring.check_tags),
                              ("links", links, authoring.check_links)):
        if given is not None:
            updates[key] = list(dict.fromkeys(x.strip() for x in given if x.strip()))
            check(updates[key])
    if "summary" in updates or "tags" in updates:
        new_summary = str(updates.get("summary", doc.meta.get("summary") or ""))
        new_tags = updates.get("tags", as_list(doc.meta.get("tags")))
        completed, notes = authoring.conventional_tags(located.kind, new_summary, new_tags)
        if notes:
            updates["tags"] = completed
        authoring.check_anti_pattern(located.kind, new_summary, completed)
    if not updates and body is None:
        raise InvalidInputError("nothing to change: give a body, summary, tags or links")
    new = _set_keys(text, updates, located.rel, f"`cortex edit {located.id}`") if updates \
        else text
    if body is not None:
        if not body.strip():
            raise InvalidInputError("the body is empty: give the text of the atom (its "
                                    "sections), or leave the body out to keep it")
        new = new[:locate_parts(new).body_start] + "\n" + body.strip() + "\n"
    _check_size(new)
    warnings = check_text(store, located, new)
    what = ", ".join([*updates, *(["body"] if body is not None else [])])
    plan = Plan(f"atom: edit {located.id} ({what})", regenerate=[located.project.name])
    plan.rewrite(located.path, text, new)
    plan.notes = notes + [f"warning: {f.message}" for f in warnings]
    plan.result = {"id": located.id, "project": located.project.name, "changed": what,
                   "unchanged": new == text}
    return plan


def replace(store: Store, located: Located, old: str, new: str) -> Plan:
    """The atom's whole text, edited (`cortex edit`): validated, and written only if the
    file still holds `old`."""
    _check_size(new)
    warnings = check_text(store, located, new)
    current, _ = read(store, located)
    if current != old:
        raise InvalidInputError(f"{located.rel} changed while you were editing it: not saved")
    plan = Plan(f"atom: edit {located.id}", regenerate=[located.project.name])
    plan.rewrite(located.path, old, new)
    plan.notes = [f"warning: {f.message}" for f in warnings]
    plan.result = {"id": located.id, "project": located.project.name, "unchanged": new == old}
    return plan


def _set_keys(text: str, updates: dict[str, Any], path: str, how: str | None = None) -> str:
    """frontmatter.set_keys, refused in one line that says to edit the file by hand (`how`)
    when its frontmatter has a shape set_keys does not rewrite."""
    try:
        return set_keys(text, updates, path)
    except AtomParseError as e:
        raise InvalidInputError(f"{e}: edit it by hand {f'({how})' if how else 'first'}") \
            from None


def _check_size(text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_ATOM_BYTES:
        raise InvalidInputError(f"the atom would be {len(raw):,} bytes, over the "
                                f"{MAX_ATOM_BYTES:,}-byte limit: split it into several atoms")
    try:
        decode(raw, "the new text")
    except AtomParseError as e:
        raise InvalidInputError(f"{e.reason}: write plain text") from None


def set_status(store: Store, located: Located, status: str, reason: str | None = None,
               *, message: str | None = None) -> Plan:
    """Set `status: NAME[:CAUSE]` (SPEC §2), with the tombstone fields of `invalidated`:
    `invalidated-date` (today, unless already set) and `invalidated-reason`; leaving
    `invalidated` removes them. Only those keys change."""
    name, cause = split_status(status)
    if name not in STATUSES:
        raise InvalidInputError(f"unknown status {name[:40]!r}: use one of "
                                f"{', '.join(STATUSES)} (optionally :ID of the atom that "
                                "caused it)")
    text, doc = read(store, located)
    if cause is not None:
        cause_at = locate(store, cause, located.project.name)
        if cause_at.path == located.path:
            raise InvalidInputError(f"{located.id} cannot be the cause of its own status: "
                                    "name another atom, or none")
        cause = cause_at.id
    if reason is not None:
        reason = _check_reason(reason)
    value = f"{name}:{cause}" if cause else name
    updates: dict[str, Any] = {"status": value}
    current, _ = split_status(doc.meta.get("status"))
    if name == "invalidated":
        if not (cause or reason or doc.meta.get("invalidated-reason")):
            raise InvalidInputError(f"say why {located.id} is invalid: `cortex invalidate "
                                    f"{located.id} --reason TEXT`, or `cortex status "
                                    f"{located.id} invalidated:EXP-NNN` naming the atom that "
                                    "showed it")
        if current != "invalidated" or as_date(doc.meta.get("invalidated-date")) is None:
            updates["invalidated-date"] = dt.date.today().isoformat()
        if reason:
            updates["invalidated-reason"] = reason
    else:
        if reason is not None:
            raise InvalidInputError("a reason goes with invalidated: use `cortex invalidate ID "
                                    "--reason TEXT`")
        updates |= {key: None for key in ("invalidated-date", "invalidated-reason")
                    if key in doc.meta}
    new = _set_keys(text, updates, located.rel, f"`cortex edit {located.id}`")
    plan = Plan(message or f"atom: {located.id} status {value}",
                regenerate=[located.project.name])
    plan.rewrite(located.path, text, new)
    was = _str(doc.meta.get("status")) or "active"
    plan.result = {"id": located.id, "project": located.project.name, "status": value,
                   "was": was, "unchanged": new == text}
    return plan


def _check_reason(reason: str) -> str:
    text = " ".join(reason.split())
    if not text:
        raise InvalidInputError("the reason is empty: say in one line why the atom is invalid")
    if len(text) > MAX_REASON or not text.isprintable():
        raise InvalidInputError(f"the reason must be one line of at most {MAX_REASON} "
                                "printable characters: put details in the body")
    return text


def supersede(store: Store, old: Located, by: str) -> Plan:
    """`old` is superseded by the atom `by` (of the same project, and active)."""
    new = locate(store, by, old.project.name)
    if new.path == old.path:
        raise InvalidInputError(f"{old.id} cannot supersede itself: name the atom that "
                                "replaces it")
    _, new_doc = read(store, new)
    group = status_group(split_status(new_doc.meta.get("status"))[0])
    if group != "active":
        raise InvalidInputError(f"{new.id} is {new_doc.meta.get('status')}: supersede "
                                f"{old.id} by an active atom")
    _, old_doc = read(store, old)
    if split_status(old_doc.meta.get("status"))[0] == "invalidated":
        raise InvalidInputError(f"{old.id} is invalidated (a tombstone): it stays invalidated")
    return set_status(store, old, f"superseded:{new.id}",
                      message=f"atom: supersede {old.id} by {new.id}")


def invalidate(store: Store, located: Located, reason: str, by: str | None = None) -> Plan:
    """`located` is a tombstone: `status: invalidated[:BY]`, the date and the reason."""
    text = _check_reason(reason)
    status = f"invalidated:{by}" if by else "invalidated"
    return set_status(store, located, status, text,
                      message=f"atom: invalidate {located.id} — {text}")


# --- moving and removing ---------------------------------------------------------------------

def remove(store: Store, located: Located, *, force: bool = False) -> Plan:
    """Delete an atom (git history keeps it) and its access-log lines. Refused while other
    atoms' frontmatter names it, unless `force`: then the id is taken out of their lists and
    status causes (refused still where that would leave knowledge without evidence or a
    pattern without sources). Body mentions are reported, not rewritten."""
    _, doc = read(store, located)
    project = located.project
    atoms = load_project(project, bodies=False).atoms
    me = {canonical(located.id)}
    citing = _citing(atoms, me, {located.path})
    if citing and not force:
        raise InvalidInputError(f"{located.id} is cited by {_describe(citing)}: change those "
                                "atoms first (or supersede/invalidate it instead), or pass "
                                "--force to take the id out of them")
    plan = Plan(f"atom: remove {located.id} — {doc.meta.get('summary') or ''}".rstrip(" —"),
                regenerate=[project.name])
    by_path = {a.file_id: a for a in atoms}
    for ref_atom in sorted({r.atom for r in citing}):
        atom = by_path[ref_atom]
        text, cdoc = read(store, Located(project, atom.kind, atom.path))
        updates: dict[str, Any] = {}
        for key in REFERENCE_KEYS[:3]:
            values = as_list(cdoc.meta.get(key))
            kept = [v for v in values if canonical(v) not in me]
            if len(kept) < len(values):
                if not kept and key in atom.kind.required:
                    raise InvalidInputError(
                        f"{atom.file_id} rests on {located.id} alone ({key}): give it other "
                        f"evidence or invalidate it before removing {located.id}")
                updates[key] = kept
        name, cause = split_status(cdoc.meta.get("status"))
        if cause and canonical(cause) in me:
            updates["status"] = name
        new = _set_keys(text, updates, str(atom.path))
        plan.rewrite(atom.path, text, new)
        plan.notes.append(f"rewrote {atom.file_id}: took {located.id} out of "
                          f"{', '.join(updates)}")
    mentions = _body_mentions(project, me, {located.path})
    if mentions:
        plan.notes.append(f"warning: still mentioned in the body of "
                          f"{', '.join(sorted(p.stem for p in mentions))} (prose, not changed)")
    plan.deletes.append(located.path)
    plan.logs[project.access_log] = ({located.path.name}, [])
    plan.result = {"id": located.id, "project": project.name,
                   "rewritten": sorted({r.atom for r in citing})}
    return plan


def _describe(refs: list[Reference]) -> str:
    by_atom: dict[str, list[str]] = {}
    for r in refs:
        by_atom.setdefault(r.atom, []).append(r.relation)
    return ", ".join(f"{a} ({', '.join(dict.fromkeys(keys))})"
                     for a, keys in sorted(by_atom.items()))


def move(store: Store, atoms: list[Located], target: str) -> Plan:
    """Move `atoms` (of one project) to project `target`, each with the next free id there.

    Every mention is rewritten as sync's renumbering rewrites one (frontmatter keys through
    set_keys, prose by word): inside the moved atoms old ids become their new ids; in the
    source project's other files (atoms' bodies, STATUS.md, TASKS.yaml …) a moved id becomes
    `TARGET/NEW-ID`. Their access-log lines move with them. Refused while a frontmatter
    reference would cross projects (a moved atom citing one that stays, or the other way
    round): move those together."""
    from cortexfs import renumber

    if not atoms:
        raise InvalidInputError("name the atoms to move")
    source = atoms[0].project
    if any(a.project.name != source.name for a in atoms):
        raise InvalidInputError("the atoms to move come from several projects: move each "
                                "project's atoms in a command of its own")
    dest = store.project(target)
    if dest.name == source.name:
        raise InvalidInputError(f"{', '.join(a.id for a in atoms)} already in project "
                                f"{source.name}: name another project")
    moving = {a.path: a for a in atoms}
    loaded = load_project(source, bodies=False).atoms
    ids = {canonical(a.id) for a in atoms}
    outward = [Reference(a.file_id, key, t) for a in loaded if a.path in moving
               for key, t in named_in(a.meta) if canonical(t) not in ids]
    if outward:
        stay = sorted({r.target for r in outward})
        raise InvalidInputError(f"{_describe(outward)} cite {', '.join(stay)}, which would "
                                f"stay in {source.name}: move them together (`cortex mv "
                                f"{' '.join([*(a.id for a in atoms), *stay])} --project "
                                f"{dest.name}`), or take the references out first")
    inward = _citing(loaded, ids, set(moving))
    if inward:
        raise InvalidInputError(f"{', '.join(sorted({r.target for r in inward}))} is cited by "
                                f"{_describe(inward)}, which would stay in {source.name}: move "
                                "them along, or take the references out first")
    mapping: dict[str, str] = {}
    taken: dict[str, int] = {}
    for a in sorted(atoms, key=lambda x: (x.kind.prefix, canonical(x.id))):
        number = taken.get(a.kind.prefix) or authoring.next_number(dest, a.kind)
        taken[a.kind.prefix] = number + 1
        mapping[a.id] = a.kind.format_id(number)
    plan = Plan(f"atom: move {', '.join(f'{k} → {v}' for k, v in mapping.items())} "
                f"from {source.name} to {dest.name}", regenerate=[source.name, dest.name])
    for a in atoms:
        text, _ = read(store, a)
        moved = renumber.rewrite_text(text, mapping, a.rel)
        moved = _set_keys(moved, {"project": dest.name}, a.rel)
        plan.creates[dest.folder(a.kind) / f"{mapping[a.id]}.md"] = moved
        plan.deletes.append(a.path)
    pointers = {old: f"{dest.name}/{new}" for old, new in mapping.items()}
    for path in _project_texts(source, skip=set(moving)):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        new_text = renumber.rewrite_text(text, pointers, store.rel(path))
        if new_text != text:
            plan.rewrite(path, text, new_text)
            plan.notes.append(f"rewrote the mentions in {store.rel(path)}")
    files = {f"{old}.md": f"{new}.md" for old, new in mapping.items()}
    lines = _log_lines(source.access_log, files)
    plan.logs[source.access_log] = (set(files), [])
    if lines:
        plan.logs[dest.access_log] = (set(), lines)
    plan.result = {"from": source.name, "to": dest.name, "moved": mapping}
    return plan


def _project_texts(project: Project, skip: set[Path]) -> list[Path]:
    """The project's text files a mention may sit in: atoms, governance files, decisions —
    not the generated index.md and CORTEX.md files (regenerated after the move) nor the
    access log, nor links."""
    from cortexfs import renumber

    return sorted(path for path in _tree_files(project.root)
                  if path not in skip and path.name not in _GENERATED
                  and path.name != layout.ACCESS_LOG and path.name.endswith(renumber.TEXT_SUFFIXES)
                  and not wall.reason(project.store.context, path))


# --- projects --------------------------------------------------------------------------------

def remove_project(store: Store, name: str, *, force: bool = False) -> Plan:
    """Delete a project's folder (git history keeps it). Refused while it holds atoms or
    open tasks, unless `force`."""
    project = store.project(name)
    atoms, open_tasks = _contents(project)
    if (atoms or open_tasks) and not force:
        what = " and ".join(x for x in (plural(atoms, "atom") if atoms else "",
                                        plural(open_tasks, "open task") if open_tasks else "")
                            if x)
        raise InvalidInputError(f"project {name} holds {what}: pass --force to remove it "
                                f"anyway (git history keeps it), or `cortex project archive "
                                f"{name}` to keep it out of the way")
    return Plan(f"project: remove {name}", regenerate=None, trees=[(project.root, None)],
                result={"project": name, "atoms": atoms})


def _contents(project: Project) -> tuple[int, int]:
    from cortexfs.tasks import load as load_tasks

    atoms = sum(1 for _ in atom_paths(project))
    try:
        open_tasks = sum(1 for t in load_tasks(project).tasks if t.status != "done")
    except InvalidInputError:
        open_tasks = 0
    return atoms, open_tasks


def archive_project(store: Store, name: str) -> Plan:
    """Move a project to context/archive/NAME/ (see the module docstring)."""
    project = store.project(name)
    dest = store.context / layout.ARCHIVE / name
    if os.path.lexists(dest):
        raise InvalidInputError(f"{store.rel(dest)} already exists: rename or remove it, "
                                "then archive the project")
    return Plan(f"project: archive {name}", regenerate=None, trees=[(project.root, dest)],
                result={"project": name,
                        "archived_to": f"{layout.CONTEXT_PREFIX}{store.rel(dest)}"})


def unarchive_project(store: Store, name: str) -> Plan:
    """Move an archived project back to context/projects/."""
    check_project_name(name)
    source = store.context / layout.ARCHIVE / name
    if wall.reason(store.context, source) or not source.is_dir():
        names = archived(store)
        raise InvalidInputError(f"no archived project named {name!r} (archived: "
                                f"{', '.join(names) or 'none'})")
    dest = store.projects_dir / name
    if os.path.lexists(dest):
        raise InvalidInputError(f"a project named {name} exists already: rename one of them "
                                "first")
    return Plan(f"project: unarchive {name}", regenerate=[name], trees=[(source, dest)],
                result={"project": name})

