"""One regeneration's state: what it scanned, folded and cached of each project, and the
regeneration of one project's index.md files from it."""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import marshal
import os
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortexfs import accesslog, cache, interrupt, layout
from cortexfs.accesslog import AccessStats
from cortexfs.atoms import KINDS, Atom, Kind
from cortexfs.errors import AtomParseError
from cortexfs.loader import (
    ERROR,
    MTIME,
    Ahead,
    Info,
    LoadedProject,
    ProjectScan,
    Record,
    child_maker,
    files_digest,
    scan_many,
)
from cortexfs.regen import fold, render, write
from cortexfs.regen.records import Lazy, RegenContext, RegenResult

if TYPE_CHECKING:
    from cortexfs.store import Project, Store

STATE_KIND = "regen-1"
_CODE = Path(__file__).parent  # this package: a new cortex may render differently


def state_path(project: Project) -> Path:
    """The cache of what regeneration last did in `project` (each index's digest)."""
    return project.store.cache_dir / "regen" / f"{project.name}.bin"


def utc_now() -> dt.datetime:
    """The clock of a regeneration (whole seconds, UTC); tests replace it."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


class Run:
    """The state of one regeneration: scans, folded stats and cached state per project."""

    def __init__(self, store: Store, dry_run: bool, now: dt.datetime | None = None) -> None:
        self.store = store
        self.dry_run = dry_run
        self.now = now or utc_now()
        self.today = self.now.date()
        self.scans: dict[str, ProjectScan] = {}
        self.stats: dict[str, AccessStats] = {}
        self.states: dict[str, dict[str, Any]] = {}
        self.folded: dict[str, fold.Folded] = {}
        self.digests: dict[tuple[str, str], str] = {}  # (project, kind prefix) → digest
        self.packaged: bool | None = None  # whether the packaged templates render (see render)
        self._identity: tuple[Any, ...] | None = None
        self.ahead: Ahead | None = None  # scans of some projects under way (taken when needed)

    # --- inputs ----------------------------------------------------------------------------

    def prescan(self, projects: list[Project]) -> None:
        """Scan several projects at once (their stale files are parsed in one batch)."""
        todo = [p for p in projects if p.name not in self.scans]
        if self.ahead is not None and any(p.name in self.ahead.names for p in todo):
            for sc in self.ahead.take():
                self.scans.setdefault(sc.project.name, sc)
            self.ahead = None
            todo = [p for p in todo if p.name not in self.scans]
        for sc in scan_many(todo, save=False):
            self.scans[sc.project.name] = sc

    def scan(self, project: Project) -> ProjectScan:
        if project.name not in self.scans:
            self.prescan([project])
        return self.scans[project.name]

    def state(self, project: Project) -> dict[str, Any]:
        if project.name not in self.states:
            data = cache.load(state_path(project), STATE_KIND)
            self.states[project.name] = data if isinstance(data, dict) else {}
        return self.states[project.name]

    def access(self, project: Project) -> AccessStats:
        """The project's log folded up to its end (accesslog.current: only what was appended
        since any reader last folded it is read)."""
        if project.name not in self.stats:
            self.stats[project.name] = accesslog.current(project)[0]  # the shared fold
        return self.stats[project.name]

    def folded_values(self, project: Project) -> fold.Folded:
        """name → (refs, last-ref) for every atom whose folded values differ from what its
        frontmatter says (before the write-back, or in a dry run)."""
        if project.name not in self.folded:
            sc, stats = self.scan(project), self.access(project)
            out: fold.Folded = {}
            for kind in KINDS:
                for name, stamp in self._unsettled(project, kind):
                    info = sc.info(kind, name) if stamp[ERROR] is None else None
                    if info is None:
                        continue
                    values = fold.fold_values(info[0], stats.counts.get(name, 0),
                                              stats.newest.get(name))
                    if values is not None:
                        out[name] = values
            self.folded[project.name] = out
        return self.folded[project.name]

    def _unsettled(self, project: Project, kind: Kind) -> list[tuple[str, Record]]:
        """The files of a folder whose folded values may differ from their frontmatter: all
        of them, but where the folder's index was last written or checked with none
        pending (see _render_folder) from the inputs the folder still has (none), or has
        but for its newest file (that one: `cortex new`, whose project's other atoms then
        need not be read at all)."""
        files = self.scan(project).folders.get(kind.folder, [])
        saved = self.state(project).get("index", {}).get(kind.folder)
        if not files or not _kept(saved):
            return files
        if saved[0] == self.folder_digest(project, kind):
            return []
        gained = self._gained(project, kind, saved)
        return [gained] if gained is not None else files

    def _gained(self, project: Project, kind: Kind, saved: list[Any],
                ) -> tuple[str, Record] | None:
        """The newest file of a folder whose other inputs are, digest for digest and today,
        those its index was last written or checked with (`saved`, see `_kept`); None when
        the folder changed otherwise."""
        files = self.scan(project).folders.get(kind.folder, [])
        if not files:
            return None
        newest = max(files, key=_mtime)  # (ns: no two alike, in practice)
        return newest if self.folder_digest(project, kind, without=newest[0]) == saved[0] \
            else None

    def atom(self, project: Project, kind: Kind, name: str,
             stamps: dict[str, Record] | None = None) -> Atom | None:
        """One file's atom as `atoms` makes it (None when it is not a valid atom); `stamps`:
        the folder's files as scanned, by name, when the caller has them."""
        if stamps is None:
            stamps = dict(self.scan(project).folders.get(kind.folder, []))
        stamp = stamps.get(name)
        if stamp is None or stamp[ERROR] is not None:
            return None
        info = self.scan(project).info(kind, name)
        return None if info is None else _folded_atom(
            project.folder(kind) / name, kind, info, self.folded_values(project).get(name))

    def atoms(self, project: Project, kind: Kind | None = None) -> list[Atom]:
        """Parsed atoms (no bodies) with their folded refs / last-ref."""
        sc, folded = self.scan(project), self.folded_values(project)
        out = []
        for k in KINDS if kind is None else [kind]:
            child = child_maker(project.folder(k))
            for name, stamp in sc.folders.get(k.folder, []):
                info = sc.info(k, name) if stamp[ERROR] is None else None
                if info is not None:
                    out.append(_folded_atom(child(name), k, info, folded.get(name)))
        return out

    def loaded(self, name: str) -> LoadedProject:
        project = self.store.project(name)
        return LoadedProject(project, self.atoms(project), self.scan(project).errors())

    def identity(self) -> tuple[Any, ...]:
        """What else an index depends on: this code, the templates (the date apart)."""
        if self._identity is None:
            from cortexfs.templates import package_dir

            parts: list[Any] = []
            for folder in (_CODE, self.store.templates_dir / "index",
                           package_dir("templates") / "index"):
                with contextlib.suppress(OSError):
                    parts.extend(sorted((e.name, *_stamp(Path(e.path)))
                                        for e in os.scandir(folder)
                                        if e.name.endswith((".py", ".j2"))))
            self._identity = tuple(parts)
        return self._identity

    def folder_digest(self, project: Project, kind: Kind, *, dated: bool = True,
                      without: str | None = None) -> str:
        """A digest of everything one folder's index.md is rendered from (with `dated`
        False, all of it but the date); `without`: as if that file were not there."""
        found = self.digests.get((project.name, kind.prefix)) if without is None else None
        if found is None:
            sc, stats = self.scan(project), self.access(project)
            files = sc.folders.get(kind.folder, [])
            if without is not None:
                files = [f for f in files if f[0] != without]
            # the files that were read, their counts and newest reads (in C, by map and
            # filter: a folder has thousands of files)
            counts = stats.counts
            read = list(filter(counts.__contains__, map(itemgetter(0), files)))
            reads = (read, list(map(counts.__getitem__, read)),
                     list(map(stats.newest.get, read)))
            # marshal format 2 has no back-references: equal values always give equal bytes
            data = marshal.dumps((self.identity(), project.name, kind.prefix,
                                  sc.inputs_digest(kind) if without is None
                                  else files_digest(files), reads), 2)
            found = cache.digest(data).hex()
            if without is None:
                self.digests[(project.name, kind.prefix)] = found
        if not dated:
            return found
        return cache.digest(f"{found}:{self.today.isoformat()}".encode()).hex()

    def fingerprint(self, names: list[str], dated: bool = True,
                    without: tuple[Kind, str] | None = None) -> str:
        """A digest of the inputs of projects `names`; `without` (one project only): as if
        that file of the kind were not there."""
        parts = []
        for name in names:
            project = self.store.project(name)
            stats = self.access(project)
            parts.append((name, tuple(self.folder_digest(
                project, k, dated=dated,
                without=without[1] if without is not None and without[0] is k else None)
                for k in KINDS), stats.offset, stats.bad_lines))
        return cache.digest(marshal.dumps(parts, 2), 8).hex()

    def added(self, name: str, before: str, since: int) -> Atom | None:
        """The atom whose file is all that project `name` has more than when its undated
        fingerprint was `before`, at `since` (ns since the epoch); the project's newest
        file is tried (what `cortex new` just wrote), if it is newer than that. None when
        that file does not explain the difference."""
        project = self.store.project(name)
        newest: tuple[int, Kind, str] | None = None
        for kind, file, stamp in self.scan(project).entries():
            if stamp and (newest is None or stamp[MTIME] > newest[0]):
                newest = (stamp[MTIME], kind, file)
        if newest is None or newest[0] <= since \
                or self.fingerprint([name], False, newest[1:]) != before:
            return None
        return self.atom(project, newest[1], newest[2])

    def save(self) -> None:
        """Write the caches of every project this run looked at, where they changed."""
        for sc in self.scans.values():
            sc.save()
        for name, state in self.states.items():
            if state.pop("dirty", False):
                cache.save(state_path(self.store.project(name)), STATE_KIND, state)

    def context(self, selected: list[str]) -> RegenContext:
        names = self.store.project_names()
        return RegenContext(
            store=self.store, now=self.now, dry_run=self.dry_run, selected=selected,
            projects=Lazy(names, self.loaded),
            access=Lazy(names, lambda n: self.access(self.store.project(n))),
            _fingerprint=self.fingerprint, _added=self.added,
        )

    # --- one project -----------------------------------------------------------------------

    def regenerate_project(self, project: Project, result: RegenResult) -> None:
        """Fold the project's log into its atoms and write the index.md files that changed."""
        sc = self.scan(project)
        result.skipped.extend(sc.errors())
        state = self.state(project)
        indexes = state.setdefault("index", {})
        paths = {k: project.folder(k) / layout.INDEX for k in KINDS}
        if not all(indexes.get(k.folder) == [self.folder_digest(project, k), *_stamp(paths[k])]
                   for k in KINDS):
            # something moved: fold, then render what changed (nothing is read otherwise)
            self.write_back(project, result)
            pending = self.folded_values(project)  # not written back: dry run or errors
            for kind in KINDS:
                interrupt.check()
                self._render_folder(project, kind, paths[kind], pending, state, result)
        sc.save()
        if state.pop("dirty", False):
            cache.save(state_path(project), STATE_KIND, state)

    def _render_folder(self, project: Project, kind: Kind, path: Path,
                       pending: dict[str, Any], state: dict[str, Any],
                       result: RegenResult) -> None:
        digest = self.folder_digest(project, kind)
        indexes = state["index"]
        if indexes.get(kind.folder) == [digest, *_stamp(path)]:
            return  # the same inputs as when this very file was written or checked
        # a folder whose atoms still await their folded refs must be looked at next time too
        settled = not any(name in pending for name, _ in self.scan(project).folders.get(
            kind.folder, []))
        said = len(result.dubious)
        text = self.with_added(project, kind, path, indexes.get(kind.folder), result)
        if text is None:
            text = self.render(project, kind, result)

        def settle() -> None:  # (and what it said of the atoms' dates: see with_added)
            if settled:
                indexes[kind.folder] = [digest, *_stamp(path)]
                state.setdefault("undated", {})[kind.folder] = [
                    [Path(e.path).name, e.reason] for e in result.dubious[said:]]
                state["dirty"] = True

        if write.unchanged(write.read_text(path), text):
            settle()
            return
        result.add(path)
        if self.dry_run:
            return
        write.write_index(path, text, self.now, self.store.context)
        settle()

    def write_back(self, project: Project, result: RegenResult) -> None:
        """Write changed refs / last-ref into the atoms (only those two keys)."""
        folded = self.folded_values(project)
        if not folded:
            return
        fold.write_back(project, self.scan(project), folded, self.dry_run, result)
        # the rewritten atoms now say what the log says: fold again from their new stamps
        del self.folded[project.name]
        for kind in KINDS:
            self.digests.pop((project.name, kind.prefix), None)

    def render(self, project: Project, kind: Kind, result: RegenResult | None = None) -> str:
        """The index text of one folder (see cortexfs.regen.render.render)."""
        if self.packaged is None:
            self.packaged = render.uses_packaged_templates(self.store)
        dubious = result.dubious if result is not None else []
        return render.render(self.store, project.name, kind, self.atoms(project, kind),
                             self.today, dubious, packaged=self.packaged)

    def with_added(self, project: Project, kind: Kind, path: Path, saved: Any,
                   result: RegenResult) -> str | None:
        """The index text of a folder that holds one file more than when its index was last
        written or checked (`saved`: what was then kept of it), made from that index
        (render.with_row: `cortex new`); None when that is not so, or not surely so.

        That is so when the folder's inputs without its newest file (what `cortex new` just
        wrote) are what they were, digest for digest, today, and the index file is the one
        then written or checked (its stamp): so its text is what a render of the other rows
        gives."""
        if self.packaged is None:
            self.packaged = render.uses_packaged_templates(self.store)
        if not self.packaged or not _kept(saved) or saved[1:] != _stamp(path):
            return None
        gained = self._gained(project, kind, saved)
        if gained is None or gained[1][MTIME] <= saved[1]:
            return None
        name = gained[0]
        stamps = dict(self.scan(project).folders.get(kind.folder, []))
        added, old = self.atom(project, kind, name, stamps), write.read_text(path)
        if added is None or old is None:
            return None

        def order_of(listed: str) -> tuple[Any, ...] | None:
            atom = self.atom(project, kind, listed, stamps) if listed != name else None
            return render.Row(atom).order() if atom is not None else None

        undated = self.state(project).get("undated", {}).get(kind.folder)
        if not (isinstance(undated, list) and all(
                isinstance(u, list) and len(u) == 2 and all(isinstance(v, str) for v in u)
                for u in undated)):
            return None
        row = render.Row(added)
        text = render.with_row(kind, project.name, old, row, self.today,
                               {u[0] for u in undated}, order_of)
        if text is None:
            return None
        # what rendering them all says of the rows' dates: what it said then, and of this one
        undated = list(undated)
        if row.day is None and added.meta.get("date") is not None:
            bisect.insort(undated, [name, render.undated(added.path, added.meta["date"]).reason])
        folder = project.folder(kind)
        result.dubious.extend(AtomParseError(str(folder / n), reason) for n, reason in undated)
        return text


def _kept(saved: Any) -> bool:
    """Whether `saved` has the shape of what the state keeps of a folder's index: [its
    inputs' dated digest, the index file's stamp (mtime ns, size, inode)]."""
    return isinstance(saved, list) and len(saved) == 4


def _folded_atom(path: Path, kind: Kind, info: Info, values: tuple[int, str | None] | None,
                 ) -> Atom:
    """The atom of a file that parsed, with the refs / last-ref folding gave it (`values`)."""
    meta = dict(info[0])
    if values is not None:
        meta["refs"] = values[0]
        if values[1] is not None:
            meta["last-ref"] = values[1]
    return Atom(path, kind, meta)


def _mtime(file: tuple[str, Record]) -> int:
    return int(file[1][MTIME])


def _stamp(path: Path) -> list[int]:
    try:
        st = os.stat(path)
    except OSError:
        return [0, -1, 0]
    return [st.st_mtime_ns, st.st_size, st.st_ino]
