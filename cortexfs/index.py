"""Index regeneration (`cortex index regen`): index.md per atom folder, refs folded from logs.

For each selected project:
1. scan its atoms (cortexfs.loader: cached, fast-path parsed); malformed ones are reported
   and left out of the index;
2. fold `_meta/access-log.jsonl` incrementally (the folded counts and the byte offset are
   cached; a log that shrank or was replaced is folded again from the start) and write
   changed `refs` / `last-ref` into the atom frontmatter, touching only those two keys;
3. render `index.md` of each atom folder through the `index/*.md.j2` templates (the
   packaged ones without importing Jinja, see `render_packaged`). The "Last updated" line
   changes only when the rest of the file does, so a second run writes nothing. A digest
   of every input of a folder (its atom files, the access counts, the date, the templates,
   this code) is cached with the index file's stamp: when neither moved, the folder is not
   even rendered.
Then the store-wide generators of cortexfs.derived run with a RegenContext.

A cold run (atoms not in the cache) of several projects shares them with one forked worker
process, so that both cores parse and render; each process then lets the generators
prepare what they need of its projects (a generator module's optional `prepare(ctx,
names)`, which caches it), so that their per-project work is shared too.

`context(store)` gives other readers (the session brief) the same RegenContext without
regenerating, and `access_stats(project)` a project's log folded from the cached counts.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import importlib
import marshal
import os
import re
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cortexfs import accesslog, cache, escape, interrupt
from cortexfs.accesslog import AccessStats
from cortexfs.atoms import KINDS, Atom, Kind, as_date, as_list, split_status, status_group
from cortexfs.errors import AtomParseError, CortexError, OutsideStoreError, from_os_error
from cortexfs.loader import CRC, ERROR, SIZE, LoadedProject, ProjectScan, child_maker, scan_many

if TYPE_CHECKING:
    from cortexfs.store import Project, Store

RENDER_VERSION = 1  # bump when the rendering changes in a way the templates do not show
STATE_KIND = "regen-1"
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
_UPDATED = re.compile(r"^> Last updated: (.+)$", re.MULTILINE)
_PLACEHOLDER = "\x00updated\x00"
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T")
_ID_ORDER = re.compile(r"-(\d+)([a-z]?)")


@dataclass
class RegenResult:
    """What a regeneration wrote (or, in a dry run, would write)."""

    written: list[Path] = field(default_factory=list)  # every path written / that would change
    skipped: list[AtomParseError] = field(default_factory=list)  # malformed atoms, not indexed
    folded: list[Path] = field(default_factory=list)  # atoms whose refs / last-ref changed
    fold_errors: list[AtomParseError] = field(default_factory=list)  # refs not written back
    # indexed, but with a value the index cannot use (a `date` that is no date: undated)
    dubious: list[AtomParseError] = field(default_factory=list)
    projects: list[str] = field(default_factory=list)  # the projects regenerated
    _seen: set[Path] = field(default_factory=set, repr=False, compare=False)

    def add(self, path: Path) -> None:
        """Add `path` to `written` once (a first fold can write thousands of atoms)."""
        if path not in self._seen:
            self._seen.add(path)
            self.written.append(path)


@dataclass
class RegenContext:
    """What every derived generator (cortexfs.derived.GENERATORS) is called with.

    A generator is `fn(ctx: RegenContext, dry_run: bool) -> list[Path]`: it writes its files
    (or, when `dry_run`, writes nothing) and returns the paths that changed (would change).

    - `store`: the store.
    - `now`: the one clock of this run (timezone-aware UTC); use it instead of reading the
      time yourself so that every file of a run agrees.
    - `dry_run`: the same flag the generator receives.
    - `selected`: names of the projects this run regenerates (all of them for `--all`).
    - `projects`: name → LoadedProject for EVERY project of the store (not only the selected
      ones: store-wide files must not lose the others). Loaded lazily from the atom cache on
      first access. Atoms carry no body (`atom.body == ""`): read `atom.path` if you need
      it. Their `refs` / `last-ref` are the folded values (frontmatter and access log
      combined), also in a dry run. Treat them as read-only.
    - `access`: name → AccessStats (cortexfs.accesslog) folded from each project's
      `_meta/access-log.jsonl`, for every project, lazily.
    - `fingerprint(names, dated=True)`: a short digest of every input of those projects
      (atom files, access logs, this code and, unless `dated` is False, today's date: an
      index.md lists the atoms cold as of today) — equal fingerprints mean equal inputs,
      so a generator can store the fingerprint it rendered from and skip rendering next
      time. What does not depend on the date should use `dated=False`, or it would be
      rebuilt every morning.

    A regeneration that changes nothing must stay fast (10,000 atoms: 0.25 s for the whole
    `cortex` process): a generator should compare `fingerprint()` with the one it last
    rendered from before it touches `projects`.
    """

    store: Store
    now: dt.datetime
    dry_run: bool
    selected: list[str]
    projects: Mapping[str, LoadedProject]
    access: Mapping[str, AccessStats]
    _fingerprint: Callable[[list[str], bool], str] = field(
        repr=False, default=lambda names, dated: "")

    def fingerprint(self, names: list[str] | None = None, *, dated: bool = True) -> str:
        """Digest of the inputs of `names` (default: every project)."""
        return self._fingerprint(list(self.projects) if names is None else list(names), dated)


V = TypeVar("V")


class _Lazy(Mapping[str, V]):
    """A mapping over the store's project names whose values are computed on first use."""

    def __init__(self, names: list[str], make: Callable[[str], V]) -> None:
        self._names = names
        self._make = make
        self._values: dict[str, V] = {}

    def __getitem__(self, name: str) -> V:
        if name not in self._values:
            if name not in self._names:
                raise KeyError(name)
            self._values[name] = self._make(name)
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        return name in self._names  # (Mapping's would compute the value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def context(store: Store) -> RegenContext:
    """What the generators see, for a command that reads the same data without regenerating
    (the session brief): every project's folded atoms, access stats and fingerprints, from
    the caches where they are current. Nothing is written but caches of derived data."""
    store.require()
    run = _Run(store, dry_run=True)
    return run.context(store.project_names())


def access_stats(project: Project) -> AccessStats:
    """The project's access log folded up to its end: from the counts the last regeneration
    cached (only what was appended since is read) when they still describe the log's start,
    else from byte 0. Saves nothing."""
    data = cache.load(_state_path(project), STATE_KIND)
    stats, _ = accesslog.resume(project.access_log,
                                data.get("log") if isinstance(data, dict) else None)
    return stats


def regenerate(store: Store, projects: list[str] | None = None, *, dry_run: bool = False,
               progress: bool = False, scans: Iterable[ProjectScan] = ()) -> RegenResult:
    """Regenerate the indexes of `projects` (all when None) and the store-wide files.

    With `dry_run`, nothing in the store is written (caches may be): `written` then lists
    what a real run would change — empty means the indexes are up to date. `scans`: scans
    (cortexfs.loader.scan_many) this process has just taken of some of the store's
    projects, e.g. to validate them, reused rather than taken again.
    """
    from cortexfs.fsutil import file_lock

    store.require()
    selected = store.select(projects)
    result = RegenResult(projects=[p.name for p in selected])
    lock = (contextlib.nullcontext() if dry_run
            else file_lock(store.locks_dir / "regen.lock", timeout=120,
                           what="index regeneration"))
    # A batch job that builds many small dicts and no cycles worth collecting: the collector
    # would only walk the growing heap over and over (a fifth of a cold run).
    collecting = gc.isenabled()
    gc.disable()
    try:
        with lock:
            return _regenerate(store, selected, dry_run, progress, result, list(scans))
    finally:
        if collecting:
            gc.enable()


def _regenerate(store: Store, selected: list[Project], dry_run: bool, progress: bool,
                result: RegenResult, scans: list[ProjectScan]) -> RegenResult:
    run = _Run(store, dry_run)
    for sc in scans:
        if sc.project.store.home == store.home:
            run.scans[sc.project.name] = sc
    mine, theirs = _share_out([p for p in selected if p.name not in run.scans]) \
        if len(run.scans) < len(selected) else (selected, [])
    mine = [p for p in selected if p not in theirs]
    worker = _Worker.start(store, theirs, dry_run, run.now) if theirs else None
    if worker is None:
        mine, theirs = selected, []
    done: list[str] = []
    try:
        _regenerate_all(run, selected, mine, theirs, worker, progress, result, done)
    except interrupt.Interrupted as e:
        # stopped between two files (each written whole); the next run does the rest
        projects = f"{len(selected)} project{'s' if len(selected) != 1 else ''}"
        if worker is not None and worker.stop():  # it had written files of its own
            e.done = f"regeneration of {projects} stopped part-way (files were written)"
        else:
            e.done = f"{len(done)} of {projects} regenerated ({len(result.written):,} " \
                     "file(s) written)"
        raise
    return result


def _regenerate_all(run: _Run, selected: list[Project], mine: list[Project],
                    theirs: list[Project], worker: _Worker | None, progress: bool,
                    result: RegenResult, done: list[str]) -> None:
    from cortexfs.derived import GENERATORS

    run.prescan(mine)
    bar = _Progress(enabled=progress, total=len(selected))
    for project in mine:
        interrupt.check()
        run.regenerate_project(project, result)
        done.append(project.name)
        bar.advance(project.name)
    if worker is not None:  # while it works: what the generators will need of ours
        run.prepare([p.name for p in mine])
    if worker is not None and not worker.join(result):
        for project in theirs:  # the worker failed: do its share here
            interrupt.check()
            run.regenerate_project(project, result)
    done.extend(p.name for p in theirs)
    bar.close()
    ctx = run.context([p.name for p in selected])
    for spec in GENERATORS:
        interrupt.check()
        module, _, name = spec.partition(":")
        generator = getattr(importlib.import_module(module), name)
        for path in generator(ctx, dry_run=run.dry_run):
            result.add(Path(path))
    run.save()  # what the generators made us scan and fold in other projects


FORK_MIN_FILES = 2000  # parse work below which a second process costs more than it saves


def _share_out(projects: list[Project]) -> tuple[list[Project], list[Project]]:
    """(this process's projects, a worker's) — the worker gets half of the projects whose
    atoms are not cached (a cold run), by number of files, when that is worth a process."""
    from cortexfs.loader import cache_path

    if len(projects) < 2 or not can_fork():
        return projects, []
    sizes = {}
    for project in projects:
        if cache_path(project).exists():
            continue  # warm: cheap wherever it runs
        n = 0
        for kind in KINDS:
            with contextlib.suppress(OSError):
                n += len(os.listdir(project.folder(kind)))
        sizes[project.name] = n
    if sum(sizes.values()) < FORK_MIN_FILES:
        return projects, []
    theirs: list[Project] = []
    load = [0, 0]  # warm projects count as nothing; cold ones are dealt largest first
    for project in sorted(projects, key=lambda p: -sizes.get(p.name, 0)):
        side = 0 if load[0] <= load[1] else 1
        load[side] += sizes.get(project.name, 0)
        if side == 1:
            theirs.append(project)
    return [p for p in projects if p not in theirs], [p for p in projects if p in theirs]


def can_fork() -> bool:
    """Whether forking a worker process is possible and safe here."""
    # forking a process that runs other threads can deadlock the child on a lock one of them
    # held; cortex's commands are single-threaded, the MCP server and the watcher may not be
    return (hasattr(os, "fork") and (os.cpu_count() or 1) > 1
            and threading.active_count() == 1)


class _Worker:
    """A forked process that regenerates some projects' indexes and reports back."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self.fd = fd
        self.joined = False  # reaped: its pid may belong to another process now

    @classmethod
    def start(cls, store: Store, projects: list[Project], dry_run: bool,
              now: dt.datetime) -> _Worker | None:
        try:
            read_fd, write_fd = os.pipe()
        except OSError:
            return None
        gc.freeze()  # the child's pages stay shared with ours as long as nothing writes them
        try:
            pid = os.fork()
        except OSError:
            gc.unfreeze()
            os.close(read_fd)
            os.close(write_fd)
            return None
        if pid == 0:  # the worker: do the projects, report, leave without any cleanup
            status = 1
            try:
                os.close(read_fd)
                run = _Run(store, dry_run, now)
                part = RegenResult()
                for project in projects:
                    run.regenerate_project(project, part)
                run.prepare([p.name for p in projects])
                view = memoryview(marshal.dumps(_to_wire(part)))
                while view:
                    view = view[os.write(write_fd, view):]
                status = 0
            finally:
                os._exit(status)
        gc.unfreeze()
        os.close(write_fd)
        return cls(pid, read_fd)

    def stop(self) -> bool:
        """Ask the worker to stop at its next file boundary, and wait for it; True when it
        was still running (it may have written files its report would have named)."""
        import signal

        if self.joined:
            return False
        self.joined = True
        running = True
        try:
            os.kill(self.pid, signal.SIGTERM)
        except OSError:
            running = False
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        return running

    def join(self, result: RegenResult) -> bool:
        """Merge the worker's result into `result`; False if it failed (nothing merged)."""
        chunks = []
        with contextlib.suppress(OSError):
            while chunk := os.read(self.fd, 1 << 20):
                chunks.append(chunk)
        os.close(self.fd)
        _, status = os.waitpid(self.pid, 0)
        self.joined = True
        if status != 0:
            return False
        try:
            _from_wire(marshal.loads(b"".join(chunks)), result)
        except (ValueError, EOFError, TypeError):
            return False
        return True


def _to_wire(part: RegenResult) -> tuple[Any, ...]:
    def errors(items: list[AtomParseError]) -> list[tuple[str, str, int | None]]:
        return [(e.path, e.reason, e.line) for e in items]

    return ([str(p) for p in part.written], errors(part.skipped),
            [str(p) for p in part.folded], errors(part.fold_errors), errors(part.dubious))


def _from_wire(data: Any, result: RegenResult) -> None:
    written, skipped, folded, fold_errors, dubious = data
    result.dubious.extend(AtomParseError(*e) for e in dubious)
    for path in written:
        result.add(Path(path))
    result.skipped.extend(AtomParseError(*e) for e in skipped)
    result.folded.extend(Path(p) for p in folded)
    result.fold_errors.extend(AtomParseError(*e) for e in fold_errors)


class _Run:
    """The state of one regeneration: scans, folded stats and cached state per project."""

    def __init__(self, store: Store, dry_run: bool, now: dt.datetime | None = None) -> None:
        self.store = store
        self.dry_run = dry_run
        self.now = now or utc_now()
        self.today = self.now.date()
        self.scans: dict[str, ProjectScan] = {}
        self.stats: dict[str, AccessStats] = {}
        self.states: dict[str, dict[str, Any]] = {}
        self.folded: dict[str, dict[str, tuple[int, str | None]]] = {}
        self.digests: dict[tuple[str, str], str] = {}  # (project, kind prefix) → digest
        self.native: bool | None = None  # whether the packaged templates render (see below)
        self._identity: tuple[Any, ...] | None = None

    # --- inputs ----------------------------------------------------------------------------

    def prescan(self, projects: list[Project]) -> None:
        """Scan several projects at once (their stale files are parsed in one batch)."""
        todo = [p for p in projects if p.name not in self.scans]
        for sc in scan_many(todo, save=False):
            self.scans[sc.project.name] = sc

    def scan(self, project: Project) -> ProjectScan:
        if project.name not in self.scans:
            self.prescan([project])
        return self.scans[project.name]

    def state(self, project: Project) -> dict[str, Any]:
        if project.name not in self.states:
            data = cache.load(_state_path(project), STATE_KIND)
            self.states[project.name] = data if isinstance(data, dict) else {}
        return self.states[project.name]

    def access(self, project: Project) -> AccessStats:
        """The project's log folded up to its end, from the cached offset when still valid."""
        if project.name in self.stats:
            return self.stats[project.name]
        state = self.state(project)
        stats, log_state = accesslog.resume(project.access_log, state.get("log"))
        if state.get("log") != log_state:
            state["log"] = log_state
            state["dirty"] = True
        self.stats[project.name] = stats
        return stats

    def folded_values(self, project: Project) -> dict[str, tuple[int, str | None]]:
        """name → (refs, last-ref) for every atom whose folded values differ from what its
        frontmatter says (before the write-back, or in a dry run)."""
        if project.name not in self.folded:
            sc, stats = self.scan(project), self.access(project)
            out: dict[str, tuple[int, str | None]] = {}
            for kind, name, stamp in sc.entries():
                info = sc.info(kind, name) if stamp[ERROR] is None else None
                if info is None:
                    continue
                values = _fold_values(info[0], stats.counts.get(name, 0),
                                      stats.newest.get(name))
                if values is not None:
                    out[name] = values
            self.folded[project.name] = out
        return self.folded[project.name]

    def atoms(self, project: Project, kind: Kind | None = None) -> list[Atom]:
        """Parsed atoms (no bodies) with their folded refs / last-ref."""
        sc, folded = self.scan(project), self.folded_values(project)
        out = []
        for k in KINDS if kind is None else [kind]:
            child = child_maker(project.folder(k))
            for name, stamp in sc.folders.get(k.folder, []):
                info = sc.info(k, name) if stamp[ERROR] is None else None
                if info is None:
                    continue
                meta = dict(info[0])
                if name in folded:
                    refs, last = folded[name]
                    meta["refs"] = refs
                    if last is not None:
                        meta["last-ref"] = last
                out.append(Atom(child(name), k, meta))
        return out

    def loaded(self, name: str) -> LoadedProject:
        project = self.store.project(name)
        return LoadedProject(project, self.atoms(project), self.scan(project).errors())

    def identity(self) -> tuple[Any, ...]:
        """What else an index depends on: this code, the templates (the date apart)."""
        if self._identity is None:
            from cortexfs.templates import package_dir

            parts: list[Any] = [RENDER_VERSION, tuple(_stamp(Path(__file__)))]
            for folder in (self.store.templates_dir / "index",
                           package_dir("templates") / "index"):
                with contextlib.suppress(OSError):
                    parts.extend(sorted((e.name, *_stamp(Path(e.path)))
                                        for e in os.scandir(folder)))
            self._identity = tuple(parts)
        return self._identity

    def folder_digest(self, project: Project, kind: Kind, *, dated: bool = True) -> str:
        """A digest of everything one folder's index.md is rendered from (with `dated`
        False, all of it but the date)."""
        found = self.digests.get((project.name, kind.prefix))
        if found is None:
            sc, stats = self.scan(project), self.access(project)
            files = sc.digest_input(kind)
            counts = [(n, stats.counts.get(n), stats.newest.get(n)) for n, *_ in files]
            # marshal format 2 has no back-references: equal values always give equal bytes
            data = marshal.dumps((self.identity(), project.name, kind.prefix, files, counts), 2)
            found = self.digests[(project.name, kind.prefix)] = cache.digest(data).hex()
        if not dated:
            return found
        return cache.digest(f"{found}:{self.today.isoformat()}".encode()).hex()

    def fingerprint(self, names: list[str], dated: bool = True) -> str:
        parts = []
        for name in names:
            project = self.store.project(name)
            stats = self.access(project)
            parts.append((name, tuple(self.folder_digest(project, k, dated=dated)
                                      for k in KINDS), stats.offset, stats.bad_lines))
        return cache.digest(marshal.dumps(parts, 2), 8).hex()

    def save(self) -> None:
        """Write the caches of every project this run looked at, where they changed."""
        for sc in self.scans.values():
            sc.save()
        for name, state in self.states.items():
            if state.pop("dirty", False):
                cache.save(_state_path(self.store.project(name)), STATE_KIND, state)

    def prepare(self, names: list[str]) -> None:
        """Let the generators that can build per-project data ahead of time (a module-level
        `prepare(ctx, names)`, which caches what it builds) do it for `names`, in this
        process: on a cold run the forked worker does it for its projects and this process
        for its own while it waits, so that both cores share that work."""
        from cortexfs.derived import GENERATORS

        ctx = self.context(names)
        for spec in GENERATORS:
            module, _, _ = spec.partition(":")
            prepare = getattr(importlib.import_module(module), "prepare", None)
            if prepare is None:
                continue
            # only a head start: the parent builds whatever is missing, and reports any
            # error, when its generators run
            with contextlib.suppress(Exception):
                prepare(ctx, names)

    def context(self, selected: list[str]) -> RegenContext:
        names = self.store.project_names()
        return RegenContext(
            store=self.store, now=self.now, dry_run=self.dry_run, selected=selected,
            projects=_Lazy(names, self.loaded),
            access=_Lazy(names, lambda n: self.access(self.store.project(n))),
            _fingerprint=self.fingerprint,
        )

    # --- one project -----------------------------------------------------------------------

    def regenerate_project(self, project: Project, result: RegenResult) -> None:
        sc = self.scan(project)
        result.skipped.extend(sc.errors())
        state = self.state(project)
        indexes = state.setdefault("index", {})
        paths = {k: project.folder(k) / "index.md" for k in KINDS}
        if not all(indexes.get(k.folder) == [self.folder_digest(project, k), *_stamp(paths[k])]
                   for k in KINDS):
            # something moved: fold, then render what changed (nothing is read otherwise)
            self._write_back(project, result)
            pending = self.folded_values(project)  # not written back: dry run or errors
            for kind in KINDS:
                interrupt.check()
                self._render_folder(project, kind, paths[kind], pending, state, result)
        sc.save()
        if state.pop("dirty", False):
            cache.save(_state_path(project), STATE_KIND, state)

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
        old = _read_text(path)
        text = self.render(project, kind, result)
        kept = _UPDATED.search(old or "")
        if old is not None and text.replace(_PLACEHOLDER, kept[1] if kept else "") == old:
            if settled:
                indexes[kind.folder] = [digest, *_stamp(path)]
                state["dirty"] = True
            return
        result.add(path)
        if self.dry_run:
            return
        from cortexfs.fsutil import write_if_changed

        try:
            write_if_changed(path, text.replace(_PLACEHOLDER, self.now.strftime(
                "%Y-%m-%dT%H:%M:%SZ")), root=self.store.context)
        except OutsideStoreError:
            raise
        except OSError as e:
            if e.filename is None:
                e.filename = str(path)  # (a failed write(2) names no file)
            problem = from_os_error(e)  # a full disk says so, not "make it writable"
            if problem is not None:
                raise problem from None
            raise CortexError(f"cannot write {path}: {e.strerror}; make it a writable file "
                              "(or remove it) and run the regeneration again") from None
        if settled:
            indexes[kind.folder] = [digest, *_stamp(path)]
            state["dirty"] = True

    def _write_back(self, project: Project, result: RegenResult) -> None:
        """Write changed refs / last-ref into the atoms (only those two keys)."""
        folded = self.folded_values(project)
        if not folded:
            return
        sc = self.scan(project)
        edits: list[tuple[Kind, str, Path, str, bytes, dict[str, Any]]] = []
        for kind, name, stamp in list(sc.entries()):
            if name not in folded:
                continue
            path = project.folder(kind) / name
            if self.dry_run:
                result.folded.append(path)
                result.add(path)
                continue
            refs, last = folded[name]
            updates: dict[str, Any] = {"refs": refs}
            if last is not None:
                updates["last-ref"] = last
            try:
                text, seen = _with_keys_if_unchanged(path, stamp, updates)
            except AtomParseError as e:
                result.fold_errors.append(e)
                continue
            edits.append((kind, name, path, text, seen, updates))
        done = _replace_files([edit[2:] for edit in edits], self.store.context)
        for (kind, name, path, *_), error in zip(edits, done, strict=True):
            if error is not None:
                result.fold_errors.append(error)
                continue
            result.folded.append(path)
            result.add(path)
            sc.refresh(kind, name)
        # the rewritten atoms now say what the log says: fold again from their new stamps
        del self.folded[project.name]
        for kind in KINDS:
            self.digests.pop((project.name, kind.prefix), None)

    def render(self, project: Project, kind: Kind, result: RegenResult | None = None) -> str:
        """The index text of one folder, with _PLACEHOLDER for the "Last updated" time; an
        atom whose date is no date (2026-13-45) is listed undated, and said in `result`."""
        rows = [_Row(a) for a in self.atoms(project, kind)]
        if result is not None:
            result.dubious += [
                AtomParseError(str(r.atom.path), f"`date` {r.atom.meta.get('date')!r} is not "
                               "a date, so the index lists it as undated: write YYYY-MM-DD")
                for r in rows if r.day is None and r.atom.meta.get("date") is not None]
        rows.sort(key=_Row.order)
        groups: dict[str, list[_Row]] = {"active": [], "invalidated": [], "superseded": []}
        for row in rows:
            groups[row.group].append(row)
        values: dict[str, Any] = dict(
            title=kind.title, project=escape.cell(project.name),
            use_when=USE_WHEN[kind.name].format(project=escape.cell(project.name)),
            updated=_PLACEHOLDER, total=len(rows), **groups,
            stats=_stats(rows, groups, self.today))
        if self.native is None:
            self.native = packaged_templates_only(self.store)
        if self.native:
            return render_packaged(kind, values)
        from cortexfs import templates

        return templates.render(self.store, f"index/{kind.folder}.md.j2", **values)


# --- the packaged templates without Jinja --------------------------------------------------
#
# Importing Jinja and compiling the templates costs more than rendering a folder of a
# thousand atoms, and a regeneration after one edit renders one folder. So while a store
# overrides none of the index templates and the packaged ones are exactly the files
# `render_packaged` mirrors (their digest is PACKAGED_TEMPLATES), they are rendered here;
# tests/test_index.py checks that both renderings agree.

TEMPLATE_FILES = ("_header.md.j2", "_rest.md.j2", "experiments.md.j2", "knowledge.md.j2",
                  "patterns.md.j2")
PACKAGED_TEMPLATES = "ccf5468a7d68d820ef3a5460d0063a99"


def packaged_templates_digest() -> str:
    """The digest of the packaged index templates, as PACKAGED_TEMPLATES holds it."""
    from cortexfs.templates import package_dir

    folder = package_dir("templates") / "index"
    data = b"".join(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0"
                    for name in TEMPLATE_FILES)
    return cache.digest(data).hex()


def packaged_templates_only(store: Store) -> bool:
    """Whether the index templates in use are the packaged ones `render_packaged` mirrors."""
    override = store.templates_dir / "index"
    if any(os.path.lexists(override / name) for name in TEMPLATE_FILES):
        return False
    try:
        return packaged_templates_digest() == PACKAGED_TEMPLATES
    except OSError:
        return False


def _entries(n: int) -> str:
    return f"{n} {'entry' if n == 1 else 'entries'}"


def render_packaged(kind: Kind, v: dict[str, Any]) -> str:
    """What the packaged `index/<folder>.md.j2` renders from the values `v`, without Jinja."""
    out = [f"# {v['title']} Index — {v['project']}\n\nUse when: {v['use_when']}\n\n"
           "> Auto-generated by cortex from YAML frontmatter. Do not edit manually.\n"
           f"> Last updated: {v['updated']}\n\n"]
    if not v["total"]:
        out.append("_No entries._\n")
        return "".join(out)
    active, invalidated, superseded = v["active"], v["invalidated"], v["superseded"]
    out.append(f"## Active ({_entries(len(active))})\n\n")
    if not active:
        out.append("_None._\n")
    elif kind.name == "experiment":
        out.append("| ID | Date | Summary | Tags | Refs | Links |\n|---|---|---|---|---|---|\n")
        out += [f"| {r.id} | {r.date} | {r.summary} | {r.tags} | {r.refs} | {r.links} |\n"
                for r in active]
    elif kind.name == "knowledge":
        out.append("| ID | Summary | Evidence | Refs |\n|---|---|---|---|\n")
        out += [f"| {r.id} | {r.summary} | {r.evidence} | {r.refs} |\n" for r in active]
    else:
        out.append("| ID | Summary | Tags | Sources | Refs |\n|---|---|---|---|---|\n")
        out += [f"| {r.id} | {r.summary} | {r.tags} | {r.sources} | {r.refs} |\n"
                for r in active]
    out.append(f"\n## Invalidated ({_entries(len(invalidated))})\n\n")
    if invalidated:
        out.append("> ⚠️ Proven wrong and kept as tombstones: do not build on their "
                   "conclusions.\n\n| ID | Date | Summary | Invalidated By | Refs |\n"
                   "|---|---|---|---|---|\n")
        out += [f"| {r.id} | {r.date} | {r.summary} | {r.invalidated_by} | {r.refs} |\n"
                for r in invalidated]
    else:
        out.append("_None._\n")
    out.append(f"\n## Superseded / Deprecated ({_entries(len(superseded))})\n\n")
    if superseded:
        out.append("| ID | Date | Summary | Status | Refs |\n|---|---|---|---|---|\n")
        out += [f"| {r.id} | {r.date} | {r.summary} | {r.status} | {r.refs} |\n"
                for r in superseded]
    else:
        out.append("_None._\n")
    st = v["stats"]
    out.append(f"\n## Stats\n\n- Total: {st.total} ({st.active} active, {st.invalidated} "
               f"invalidated, {st.superseded} superseded / deprecated)\n"
               f"- Challenged: {st.challenged or 'none'}\n"
               f"- Hot (refs ≥ {st.hot_refs}): {st.hot or 'none'}\n"
               f"- Cold (refs = 0, older than {st.cold_days} days): {st.cold or 'none'}\n")
    return "".join(out)


def utc_now() -> dt.datetime:
    """The clock of a regeneration (whole seconds, UTC); tests replace it."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


# --- folding ---------------------------------------------------------------------------------


def _state_path(project: Project) -> Path:
    return project.store.cache_dir / "regen" / f"{project.name}.bin"


def _fold_values(meta: dict[str, Any], count: int, newest: str | None) \
        -> tuple[int, str | None] | None:
    """(refs, last-ref) to write when they differ from the frontmatter's, else None.

    The log is the lifetime record, but refs carried over from before the log existed (an
    imported store) are never lowered: refs = max(frontmatter, log); last-ref likewise.
    """
    raw_refs = meta.get("refs")
    valid_refs = type(raw_refs) is int and raw_refs >= 0
    if not count and newest is None and (valid_refs or raw_refs is None):
        return None  # never read: nothing to fold (the commonest case, kept cheap)
    fm_refs = raw_refs if valid_refs and isinstance(raw_refs, int) else 0
    raw_last = meta.get("last-ref")
    fm_last = raw_last if isinstance(raw_last, str) and _ISO.match(raw_last) else None
    refs = fm_refs if fm_refs > count else count
    last = fm_last if newest is None or (fm_last is not None and fm_last > newest) else newest
    refs_same = (valid_refs and raw_refs == refs) or (refs == 0 and raw_refs is None)
    last_same = last is None or raw_last == last
    if refs_same and last_same:
        return None
    return refs, last


def _with_keys_if_unchanged(path: Path, stamp: tuple[Any, ...], updates: dict[str, Any]) \
        -> tuple[str, bytes]:
    """The file's text with `updates` set, and the bytes it was made from, provided it is
    still the file that was scanned: one edited since is left for the next run."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            raw = f.read()
    except OSError as e:  # (ELOOP: made a link since the scan — never written through)
        raise AtomParseError(str(path), f"cannot read to update refs: {e.strerror}") from None
    if len(raw) != stamp[SIZE] or zlib.crc32(raw) != stamp[CRC]:
        raise AtomParseError(str(path), "changed while cortex was regenerating: its refs "
                             "will be updated by the next `cortex index regen`")
    return _set_keys(raw, updates, path), raw


def _set_keys(raw: bytes, updates: dict[str, Any], path: Path) -> str:
    from cortexfs.frontmatter import decode, set_keys

    return set_keys(decode(raw, str(path)), updates, str(path))


def _keys_setter(updates: dict[str, Any], path: Path) -> Callable[[bytes], bytes]:
    return lambda raw: _set_keys(raw, updates, path).encode("utf-8")


BATCH_SYNC_MIN = 8  # from this many files on, one sync(2) for all instead of fsync per file


def _replace_files(edits: list[tuple[Path, str, bytes, dict[str, Any]]],
                   root: Path) -> list[AtomParseError | None]:
    """Atomically replace each file with its new text; None per success, else the error.

    Each edit is (path, new text, the bytes it was made from, the keys it sets). Like
    fsutil.rewrite (temporary file in the same folder, durable before an exchange that keeps
    any save made meanwhile, see fsutil) but, for many files, with a single sync(2) instead
    of one fsync each: folding a long log into thousands of atoms must not take a minute. A
    file saved meanwhile gets its keys set on what it holds now.
    """
    from cortexfs import wall
    from cortexfs.fsutil import rewrite, swap_in, write_temp

    # a link made since the scan is refused (never written through): see swap_in
    batch = len(edits) >= BATCH_SYNC_MIN
    temps: list[str | None] = []
    out: list[AtomParseError | None] = []
    try:
        for path, text, _, _ in edits:
            interrupt.check()
            try:
                wall.check(root, path.parent)
                temps.append(write_temp(path, text.encode("utf-8"), durable=not batch))
                out.append(None)
            except OSError as e:
                temps.append(None)
                out.append(AtomParseError(str(path), f"cannot write refs: {_refusal(e)}"))
        if batch:
            os.sync()  # every temporary file is on disk before any rename
        for i, (path, text, seen, updates) in enumerate(edits):
            interrupt.check()
            temp, temps[i] = temps[i], None
            if temp is None:
                continue
            try:
                if not swap_in(temp, path, seen, text.encode("utf-8")):
                    # saved meanwhile (or removed): set the keys on what it holds now
                    rewrite(path, _keys_setter(updates, path))
            except AtomParseError as e:
                out[i] = e
            except CortexError as e:  # saved again and again while cortex retried
                out[i] = AtomParseError(str(path), str(e))
            except OSError as e:
                out[i] = AtomParseError(str(path), f"cannot write refs: {_refusal(e)}")
    finally:
        for leftover in temps:
            if leftover is not None:
                with contextlib.suppress(OSError):
                    os.unlink(leftover)
    return out


def _refusal(e: OSError) -> str:
    """What the file system said, as the user has to fix it (a full disk: "disk full")."""
    if isinstance(e, OutsideStoreError):
        return str(e)
    problem = from_os_error(e)
    return str(problem) if problem is not None else str(e.strerror or e)


# --- rendering -------------------------------------------------------------------------------

class _Row:
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
        self.tags = _ids(meta.get("tags"))
        refs = meta.get("refs")
        self.refs = refs if type(refs) is int and refs >= 0 else 0
        self.links = _ids(meta.get("links"))
        self.evidence = _ids(meta.get("evidence"))
        self.sources = _ids(meta.get("source-experiments"))
        self.status_name, self.status_ref, self.group, self.status = _status(meta.get("status"))
        if self.group == "invalidated":
            inv_date = as_date(meta.get("invalidated-date"))
            by = self.status_ref or "—"
            self.invalidated_by = escape.cell(f"{by} ({inv_date.isoformat()})" if inv_date else by)
        else:
            self.invalidated_by = ""
        m = _ID_ORDER.search(stem)
        self.key = (int(m[1]) if m else 0, m[2] if m else "", stem)

    def order(self) -> tuple[Any, ...]:
        """Refs descending, then date descending (undated last), then id."""
        day = self.day
        return (-self.refs, day is None, -day.toordinal() if day else 0, self.key)


def atom_order(atom: Atom) -> tuple[Any, ...]:
    """Where `atom` stands within its index table (refs, newest date, id): `cortex list`
    sorts as the indexes do. Tables come in GROUP_ORDER."""
    return _Row(atom).order()


GROUP_ORDER = ("active", "invalidated", "superseded")  # the index's tables, in order

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
_IDS_ODD = re.compile(r"^[\s,]|\s$|\s,|, [\s,]|" + escape.SPECIAL)


def _ids(value: object) -> str:
    """A list field (ids, tags) as one cell: `a, b, c`, as Atom's list properties read it."""
    if value is None:
        return ""
    if type(value) is list:
        try:
            joined = ", ".join(value)
        except TypeError:  # not all strings
            pass
        else:
            if not _IDS_ODD.search(joined):
                return joined
    return escape.cell(", ".join(as_list(value)))


def _capped(items: list[str]) -> str:
    if len(items) <= STATS_CAP:
        return ", ".join(items)
    return f"{', '.join(items[:STATS_CAP])} … and {len(items) - STATS_CAP} more"


@dataclass
class _Stats:
    total: int
    active: int
    invalidated: int
    superseded: int
    challenged: str
    hot: str
    cold: str
    hot_refs: int = HOT_REFS
    cold_days: int = COLD_DAYS


def _stats(rows: list[_Row], groups: dict[str, list[_Row]], today: dt.date) -> _Stats:
    challenged = [escape.cell(f"{r.stem} (by {r.status_ref})" if r.status_ref else r.stem)
                  for r in groups["active"] if r.status_name == "challenged"]
    hot = [f"{r.stem} ({r.refs})" for r in rows if r.refs >= HOT_REFS]
    cutoff = today - dt.timedelta(days=COLD_DAYS)
    cold_rows = sorted((r for r in groups["active"]
                        if r.refs == 0 and r.day is not None and r.day < cutoff),
                       key=lambda r: (r.day, r.key))
    cold = [f"{r.stem} ({r.date})" for r in cold_rows]
    return _Stats(len(rows), len(groups["active"]), len(groups["invalidated"]),
                  len(groups["superseded"]), _capped(challenged), _capped(hot), _capped(cold))


# --- small helpers ---------------------------------------------------------------------------


def _stamp(path: Path) -> list[int]:
    try:
        st = os.stat(path)
    except OSError:
        return [0, -1, 0]
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _read_text(path: Path) -> str | None:
    """A generated file's text; None when missing, unreadable or a link (never read)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            return f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


class _Progress:
    """A rich progress bar on a terminal, shown only once a run has taken a while."""

    DELAY = 0.5

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled = enabled and sys.stdout.isatty() and sys.stderr.isatty()
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.bar: Any = None
        self.task: Any = None

    def advance(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.bar is None and self.done < self.total \
                and time.monotonic() - self.started > self.DELAY:
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("regenerating indexes", total=self.total)
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, description=f"indexed {label}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
