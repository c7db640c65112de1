"""Walking a project's atom folders and loading its atoms: the one place every command gets
atom files and parsed atoms from.

`walk_folder` is the one walk of an atom folder (the names, their stat data, the other
entries); `scan` / `scan_many` walk a project and diff each file's stamp against the
cache to tell what changed since the last walk. Validation, regeneration, readiness and
the brief load atoms through them (`load_project`); recall walks through `walk_folder`
and keeps its own per-file record (cortexfs.recall.files). The speed-ups live here once:

- Parsed frontmatter (or the parse error and its line) is cached per project in
  `$CORTEX_HOME/.cache/atoms/<project>.bin`, keyed by file and checked against the file's
  mtime (ns), size and inode. A file that was racy when read (`cache.racy`: a later
  write could keep the same mtime) is re-checked by content next time, as git does for
  "racily clean" files. A missing, stale or corrupt cache only costs a re-parse.
- The cache keeps the file stamps (and each folder's listing) apart from the parsed
  frontmatter, in a file of its own (`<project>.infos.bin`) read only when someone asks
  for atoms: a regeneration that finds nothing changed never reads it; the few files
  parsed since it was written whole go to a delta beside it (`<project>.infos-delta.bin`),
  so that a new atom does not rewrite a project's infos. A folder whose
  mtime has not moved is not even listed again (see `walk_folder`).
- Frontmatter goes through the fast path of `cortexfs.frontmatter` (falling back to YAML).
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import marshal
import os
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from cortexfs import cache, wall
from cortexfs.atoms import KINDS, Atom, Kind
from cortexfs.errors import AtomParseError
from cortexfs.frontmatter import (
    MAX_ATOM_BYTES,
    check_size,
    decode,
    load_mapping,
    locate,
    not_a_file,
)
from cortexfs.store import Project

# A file's record — its stamp (cache.Stamp), CRC, racy flag and parse error — a plain tuple
# (what marshal keeps) with these fields; and its info, kept apart and loaded lazily (None
# for a file that is not a valid atom). The cache is keyed by these names: one written
# with other fields reads as no cache.
RECORD = ("mtime_ns", "size", "ino", "crc32", "racy", "error", "error_line")
INFO = ("meta", "body_start", "body_line")
MTIME, SIZE, INO, CRC, RACY, ERROR, ERROR_LINE = range(7)
Record = tuple[Any, ...]
Info = tuple[dict[str, Any], int, int]


@dataclass
class LoadedProject:
    """A project's atoms that parsed, the files that did not (with file and line), and the
    other entries of its atom folders (not named like an atom: validate reports some)."""

    project: Project
    atoms: list[Atom] = field(default_factory=list)
    errors: list[AtomParseError] = field(default_factory=list)
    others: list[tuple[Kind, str]] = field(default_factory=list)


@dataclass
class AtomFolder:
    """An atom folder as walked: the entries named like an atom of its kind, sorted, with
    their lstat (a link, folder or FIFO so named is listed: it is reported, not read); the
    names of its other entries; and `listed`, the folder's (mtime_ns, inode) when it was
    no longer racy ((0, 0) otherwise): while the folder still has them, it has the same
    entries (creating, removing or renaming one moves the mtime)."""

    names: list[str]
    stats: list[os.stat_result]
    others: list[str]
    listed: tuple[int, int] = (0, 0)


def walk_folder(folder: str | os.PathLike[str], kind: Kind,
                known: AtomFolder | None = None, *, stat: bool = True) -> AtomFolder:
    """The one walk of an atom folder (no folder, or a linked one: nothing); without
    `stat`, the names only (`stats` is empty).

    One stat per file is most of a big store's walk, so the loop around it is lean: stats
    relative to the folder's descriptor, and no listing at all when `known` (an earlier
    listing: its names and others) was listed at the folder's current `listed` stamp."""
    match = kind.file_re.match
    try:  # (a linked folder is refused: not part of the store, see cortexfs.wall)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return AtomFolder([], [], [])
    try:
        st = os.fstat(fd)
        listed = (0, 0) if cache.racy(st.st_mtime_ns, time.time_ns()) \
            else (st.st_mtime_ns, st.st_ino)
        if known is not None and listed != (0, 0) and known.listed == listed:
            names, others = known.names, known.others
        else:
            names, others = [], []
            for name in os.listdir(fd):
                (names if match(name) else others).append(name)
            names.sort()
            others.sort()
        if not stat:
            return AtomFolder(names, [], others, listed)
        stats = []
        kept = []
        stat_at = os.stat
        for name in names:
            try:
                stats.append(stat_at(name, dir_fd=fd, follow_symlinks=False))
                kept.append(name)
            except OSError:  # deleted since the listing
                continue
    finally:
        os.close(fd)
    return AtomFolder(kept, stats, others, listed)


def atom_paths(project: Project, kind: Kind | None = None) -> Iterator[tuple[Kind, Path]]:
    """(kind, path) of every atom file of `project` (of `kind`), in id order within each
    kind, without reading or stat-ing them."""
    for k in [kind] if kind else KINDS:
        folder = project.folder(k)
        if wall.reason(project.store.context, folder):
            continue  # a linked folder is not part of the store
        child = child_maker(folder)
        for name in walk_folder(folder, k, stat=False).names:
            yield k, child(name)


def load_project(project: Project, *, bodies: bool = True) -> LoadedProject:
    """Parse every atom file of `project`, in kind then id order.

    With `bodies=False` the files are not even read when the cache knows them
    (`atom.body == ""`): what validation, indexes and rankings need.
    """
    return scan(project).loaded(bodies=bodies)


def cache_path(project: Project) -> Path:
    return project.store.cache_dir / "atoms" / f"{project.name}.bin"


def child_maker(folder: Path) -> Callable[[str], Path]:
    """`folder / name`, several times faster: pathlib's own shortcut for a plain file name."""
    fast: Callable[[str], Path] | None = getattr(folder, "_make_child_relpath", None)
    return fast if fast is not None else folder.joinpath


def files_digest(files: list[tuple[str, Record]]) -> bytes:
    """`ProjectScan.inputs_digest` of a folder holding `files` ((name, stamp), by name)."""
    # marshal format 2 has no back-references: equal values always give equal bytes
    return cache.digest(marshal.dumps([(name, s[MTIME], s[SIZE], s[CRC]) for name, s in files],
                                      2))


@dataclass
class ProjectScan:
    """Every atom file of a project with its stamp, in kind then id order; the parsed
    frontmatter is fetched on demand (`info`, `loaded`)."""

    project: Project
    # kind folder → [(file name, stamp)], sorted by name (as walk_folder lists them)
    folders: dict[str, list[tuple[str, Record]]]
    others: dict[str, list[str]] = field(default_factory=dict)  # kind folder → AtomFolder.others
    listed: dict[str, tuple[int, int]] = field(default_factory=dict)  # → AtomFolder.listed
    digests: dict[str, bytes] = field(default_factory=dict)  # kind folder → inputs_digest
    parsed: int = 0  # files parsed (not served by the cache) in this scan
    dirty: bool = False  # the cache file needs saving
    saving: bool = False  # save it again after a load that had to parse files (`scan`'s save)
    _token: bytes = b""  # names the infos (file, or delta on it) that go with the stamps read
    _base: bytes = b""  # names the infos file a delta rests on, when the stamps name a delta
    _infos: dict[str, Info] | None = None  # the cached infos, unmarshalled
    _fresh: dict[str, Info] = field(default_factory=dict)  # infos parsed by this process
    _delta: tuple[bytes, dict[str, Info]] = (b"", {})  # (_token, the delta it names) (`info`)

    def entries(self) -> Iterator[tuple[Kind, str, Record]]:
        for kind in KINDS:
            for name, stamp in self.folders.get(kind.folder, []):
                yield kind, name, stamp

    def errors(self) -> list[AtomParseError]:
        """The files that are not valid atoms, with file, line and reason."""
        out: list[AtomParseError] = []
        for kind in KINDS:
            folder = self.project.folder(kind)
            out.extend(AtomParseError(str(folder / name), s[ERROR], s[ERROR_LINE])
                       for name, s in self.folders.get(kind.folder, []) if s[ERROR] is not None)
        return out

    def inputs_digest(self, kind: Kind) -> bytes:
        """A digest of (name, mtime_ns, size, crc32) of each file of a kind's folder: what
        its index is built from, parse errors included. Kept in the cache with the records,
        so that a folder whose records did not change is not digested again."""
        found = self.digests.get(kind.folder)
        if found is None:
            found = self.digests[kind.folder] = files_digest(self.folders.get(kind.folder, []))
        return found

    def info(self, kind: Kind, name: str) -> Info | None:
        """(meta, body_start, body_line) of a file that parsed; None for a bad one."""
        key = f"{kind.folder}/{name}"
        found = self._fresh.get(key)
        if found is None and self._infos is None:
            # a file parsed since the infos were saved whole is in the delta: one asked for
            # alone (the duplicate gate's newest atom) is found there, without unmarshalling
            # the infos of the whole project (~10 ms of `cortex new` on 10,000 atoms)
            if self._delta[0] != self._token:
                self._delta = (self._token, self._delta_on(None) or {})
            found = self._delta[1].get(key)
        if found is None:
            found = self._cached_infos().get(key)
        if found is None:  # the cache lost it: parse the file again
            stamp = self.refresh(kind, name)
            found = self._fresh.get(key) if stamp[ERROR] is None else None
        return found

    def _cached_infos(self) -> dict[str, Info]:
        """The infos file, if it is the one the stamps were saved with, or the one a delta
        the stamps were saved with rests on, that delta applied (else nothing: every file
        asked for is parsed again)."""
        if self._infos is None:
            data: Any = None
            saved = cache.load(infos_path(self.project), INFOS_KIND) if self._token else None
            if isinstance(saved, tuple) and len(saved) == 2 and isinstance(saved[1], bytes):
                delta = {} if saved[0] == self._token else self._delta_on(saved[0])
                if delta is not None:
                    with contextlib.suppress(ValueError, EOFError, TypeError):
                        data = marshal.loads(saved[1])
                    if isinstance(data, dict):
                        data.update(delta)
            self._infos = data if isinstance(data, dict) else {}
        return self._infos

    def _delta_on(self, base: Any) -> dict[str, Info] | None:
        """The infos of the delta file when the stamps were saved with it and it rests on
        the infos file `base` names (None: it does not; with `base` None, on whichever)."""
        saved = cache.load(delta_path(self.project), DELTA_KIND)
        if not (isinstance(saved, tuple) and len(saved) == 2 and isinstance(saved[0], bytes)
                and isinstance(saved[1], bytes) and (base is None or saved[0] == base)
                and cache.digest(saved[0] + saved[1]) == self._token):
            return None
        data: Any = None
        with contextlib.suppress(ValueError, EOFError, TypeError):
            data = marshal.loads(saved[1])
        if not isinstance(data, dict):
            return None
        self._base = saved[0]
        return data

    def loaded(self, *, bodies: bool = False) -> LoadedProject:
        """The atoms and parse errors as a LoadedProject."""
        with collector_paused():
            out = self._loaded(bodies)
        if self.saving and self._fresh:  # (infos the cache had lost, or files changed since)
            self.save()
        return out

    def _loaded(self, bodies: bool) -> LoadedProject:
        out = LoadedProject(self.project, others=[
            (kind, name) for kind in KINDS for name in self.others.get(kind.folder, [])])
        for kind in KINDS:
            folder = self.project.folder(kind)
            child = child_maker(folder)
            for name, stamp in list(self.folders.get(kind.folder, [])):
                path = child(name)
                info = None if stamp[ERROR] is not None else self.info(kind, name)
                body = ""
                if info is not None and bodies:
                    text = _read_text(path, stamp)
                    if text is None:  # changed since the scan: parse it again, whole
                        stamp = self.refresh(kind, name)
                        info = self.info(kind, name) if stamp[ERROR] is None else None
                        text = _read_text(path, stamp) if info is not None else None
                    body = text[info[1]:] if text is not None and info is not None else ""
                if info is None:
                    out.errors.append(AtomParseError(str(path), stamp[ERROR] or "cannot read",
                                                     stamp[ERROR_LINE]))
                    continue
                out.atoms.append(Atom(path, kind, dict(info[0]), body))
        return out

    def refresh(self, kind: Kind, name: str) -> Record:
        """Re-read one file (after it was rewritten) and return its new stamp."""
        stamp, info, _ = _parse_file(str(self.project.folder(kind) / name), None)
        self._set(kind.folder, name, stamp, info)
        self.digests.pop(kind.folder, None)
        files = self.folders.setdefault(kind.folder, [])
        # a binary search: a first fold rewrites tens of thousands of atoms, one at a time
        i = bisect.bisect_left(files, (name,))
        if i < len(files) and files[i][0] == name:
            files[i] = (name, stamp)
        else:
            files.insert(i, (name, stamp))
        return stamp

    def _save_delta(self) -> bool:
        """Save the infos parsed since the infos file was written whole as a delta on it,
        up to DELTA_MAX of them (False: write the infos file whole). A new atom or a few
        edited ones do not rewrite the infos of the whole project (~1,300 atoms: ~5 ms).
        The infos the stamps name are the delta they were saved with, if any, else the
        infos file itself, which must still be there."""
        delta = self._delta_on(None)
        if delta is None:
            self._base, delta = self._token, {}
        delta.update(self._fresh)
        if len(delta) > DELTA_MAX:
            return False
        saved = cache.load(infos_path(self.project), INFOS_KIND)  # (its rows stay bytes)
        if not (isinstance(saved, tuple) and len(saved) == 2 and saved[0] == self._base):
            return False  # no infos file to rest on (lost, or another save's)
        blob = marshal.dumps(delta)
        if not cache.save(delta_path(self.project), DELTA_KIND, (self._base, blob)):
            return False
        if self._infos is not None:
            self._infos.update(self._fresh)
        self._token, self._fresh = cache.digest(self._base + blob), {}
        return True

    def _set(self, folder: str, name: str, stamp: Record, info: Info | None) -> None:
        key = f"{folder}/{name}"
        if info is not None:
            self._fresh[key] = info
        else:
            self._fresh.pop(key, None)
        self.dirty = True

    def save(self) -> None:
        """Write the cache files if anything changed since they were read: the stamps, and
        the infos when files were parsed (first, so that the stamps never name infos that
        are not there; a token links the two)."""
        if not self.dirty:
            return
        if (self._fresh or not self._token) and not (self._token and self._save_delta()):
            kept = {f"{folder}/{name}" for folder, files in self.folders.items()
                    for name, _ in files}
            infos = {k: v for k, v in self._cached_infos().items() if k in kept}
            infos.update(self._fresh)
            blob = marshal.dumps(infos)
            token = cache.digest(blob)
            if not cache.save(infos_path(self.project), INFOS_KIND, (token, blob)):
                return
            self._token, self._base, self._infos, self._fresh = token, b"", infos, {}
        folders = {kind.folder: (self.listed.get(kind.folder, (0, 0)),
                                 self.others.get(kind.folder, []),
                                 self.folders[kind.folder], self.inputs_digest(kind))
                   for kind in KINDS if kind.folder in self.folders}
        cache.save(cache_path(self.project), CACHE_KIND, (folders, self._token))
        self.dirty = False


def scan(project: Project, *, save: bool = True) -> ProjectScan:
    """Stat every atom file of `project`, parse those the cache does not know, and (unless
    `save` is False) write the cache back when it changed."""
    return scan_many([project], save=save)[0]


def scan_many(projects: list[Project], *, save: bool = True,
              meanwhile: Callable[[], None] | None = None) -> list[ProjectScan]:
    """`scan` for several projects, parsing all their stale files in one batch.

    A big walk (FORK_MIN_FILES files or more at the last walk, on two cores or more) is
    shared with one forked process (cortexfs.forked.share: each takes the next folder when
    free): the child stats its folders and compares them with the cached records itself,
    so that only what changed crosses the pipe. A failure of the child costs its folders
    walked here, never a different answer. `meanwhile` is called once the walk has
    started (after the fork: a thread may be started there)."""
    walk = _Walk(projects)
    if walk.files >= FORK_MIN_FILES:
        walk.share()
    if meanwhile is not None:
        meanwhile()
    return walk.finish(save)


class _Walk:
    """One scan_many: the cached records of its projects, the folders to walk (jobs), and a
    forked process taking some of them when shared."""

    def __init__(self, projects: list[Project]) -> None:
        self.projects = projects
        self.now = time.time_ns()
        self.scans: list[ProjectScan] = []
        self.jobs: list[tuple[int, Kind, Cached]] = []
        for i, project in enumerate(projects):
            sc = ProjectScan(project, {})
            saved = cache.load(cache_path(project), CACHE_KIND)
            known: dict[str, Any] = {}
            if (isinstance(saved, tuple) and len(saved) == 2 and isinstance(saved[0], dict)
                    and isinstance(saved[1], bytes)):
                known, sc._token = saved
            sc.dirty = set(known) != {kind.folder for kind in KINDS}
            self.scans.append(sc)
            self.jobs.extend((i, kind, _folder_entry(known.get(kind.folder))) for kind in KINDS)
        self.weights = [len(before[1]) for _, _, before in self.jobs]
        self.files = sum(self.weights)  # at the last walk
        self.shared: Any = None

    def share(self) -> None:
        """Start a forked process taking folders from the queue (when one can be forked)."""
        from cortexfs import forked  # (threading with it: not on a small store's path)

        projects, jobs, now = self.projects, self.jobs, self.now
        self.shared = forked.share(
            sorted(range(len(jobs)), key=lambda j: -self.weights[j]),
            lambda j: _folder_diff(projects[jobs[j][0]], jobs[j][1], jobs[j][2], now,
                                   compact=True))

    def stop(self) -> None:
        if self.shared is not None:
            self.shared.stop()
            self.shared = None

    def finish(self, save: bool) -> list[ProjectScan]:
        """Walk the folders nobody took, parse the stale files: the scans."""
        projects, jobs, scans, shared, now = \
            self.projects, self.jobs, self.scans, self.shared, self.now
        for sc in scans:
            sc.saving = save
        diffs: dict[int, FolderDiff] = {}
        if shared is not None:
            try:
                for j in shared.mine():
                    i, kind, before = jobs[j]
                    diffs[j] = _folder_diff(projects[i], kind, before, now)
                for j, diff in shared.join().items():
                    diffs[j] = _unpack(diff, jobs[j][2])
            except BaseException:
                shared.stop()
                raise
        for j, (i, kind, before) in enumerate(jobs):
            if j not in diffs:  # (not shared, or the child failed)
                diffs[j] = _folder_diff(projects[i], kind, before, now)
        stale: list[tuple[ProjectScan, str, str, str, Stat]] = []
        for j, (i, kind, _) in enumerate(jobs):
            sc, diff = scans[i], diffs[j]
            sc.folders[kind.folder] = diff.files
            if diff.digest is not None:
                sc.digests[kind.folder] = diff.digest
            if diff.walled:
                continue
            sc.others[kind.folder] = diff.others
            sc.listed[kind.folder] = diff.listed
            sc.dirty = sc.dirty or diff.dirty
            where = str(projects[i].folder(kind)) + os.sep
            stale.extend((sc, kind.folder, name, where + name, st) for name, st in diff.stale)
        if stale:
            parsed = _parse_many([(path, st) for _, _, _, path, st in stale])
            fresh: dict[tuple[int, str, str], Record] = {}
            for (sc, folder, name, _, _), (stamp, info) in zip(stale, parsed, strict=True):
                fresh[(id(sc), folder, name)] = stamp
                sc._set(folder, name, stamp, info)
                sc.parsed += 1
            for sc in scans:
                for folder, files in sc.folders.items():
                    for i, (name, stamp) in enumerate(files):
                        if not stamp:
                            files[i] = (name, fresh[(id(sc), folder, name)])
        if save:
            for sc in scans:
                sc.save()
        return scans


class Ahead:
    """A scan of some projects begun now and taken later (`take`): `cortex new` writes its
    atom meanwhile, and the store-wide files need the other projects' stamps afterwards
    (~9,000 stats on 10,000 atoms, ~25 ms). Their folders are walked by a forked process
    (cortexfs.forked.share), on the other core; whatever it has not taken by then is walked
    here, as scan_many does (no process can be forked, or fewer than AHEAD_MIN_FILES files
    to walk: all of it). A thread would not do:
    the walk's Python holds the GIL, so it would advance only while this process waits.
    Only for projects the caller does not write before it takes the scans; they are not
    saved here, but by whoever takes them, with its own.

    Only a person's edits can move the files between the walk and its use, as they can
    during any walk: the caller holds the store's git lock, which every cortex command that
    writes atoms holds around its regeneration (cortexfs.commit.transaction, the watcher).
    As a context manager, the forked process is stopped on leaving if it was not taken."""

    def __init__(self, projects: list[Project]) -> None:
        self.names = {p.name for p in projects}
        self._walk: _Walk | None = _Walk(projects)
        if self._walk.files >= AHEAD_MIN_FILES:
            self._walk.share()

    def take(self) -> list[ProjectScan]:
        """The scans; empty once taken."""
        walk, self._walk = self._walk, None
        return walk.finish(save=False) if walk is not None else []

    def close(self) -> None:
        """Drop the scans if they were not taken (the forked process stopped and reaped)."""
        walk, self._walk = self._walk, None
        if walk is not None:
            walk.stop()

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


FORK_MIN_FILES = 20_000  # files (at the last walk) below which a forked walk costs more
# files (at the last walk) below which Ahead walks them itself when taken: a fork and the
# copy-on-write it causes cost ~3-5 ms, a stat ~2.5 us here
AHEAD_MIN_FILES = 2_000
Stat = tuple[int, int, int, int]  # (mtime_ns, size, inode, mode) of a file to parse


@dataclass
class FolderDiff:
    """One atom folder walked and compared with its cached records: its records (a stale
    file's is a placeholder `()`, to be parsed), the stale files with their stat data, its
    other entries and listing stamp, and whether the cache needs saving for it."""

    files: list[tuple[str, Record]]
    stale: list[tuple[str, Stat]] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    listed: tuple[int, int] = (0, 0)
    dirty: bool = False
    walled: bool = False  # a linked project or folder: not part of the store (validate says)
    digest: bytes | None = None  # the records' inputs_digest when they are the cached ones


def _folder_diff(project: Project, kind: Kind, before: Cached, now: int,
                 *, compact: bool = False) -> Any:
    """Walk one atom folder and compare it with its cached records (`_folder_entry`),
    applying the racy-mtime rule. With `compact` (in the forked child), what crosses the
    pipe: the records only when they are not exactly the cached ones (see `_unpack`)."""
    kind_folder = project.folder(kind)
    if wall.reason(project.store.context, kind_folder):
        return (True,) if compact else FolderDiff([], walled=True)
    listing = walk_folder(kind_folder, kind, before[0])
    dirty = (before[0] is None or listing.listed != before[0].listed
             or listing.others != before[0].others)
    same = before[0] is not None and listing.names == before[0].names
    # the same names as last time (the usual case): the records side by side
    records: Any = before[1] if same else None
    if records is None:
        dirty = True  # files were created or deleted
        found = dict(before[1])
        records = [(name, found.get(name, ())) for name in listing.names]
    files: list[tuple[str, Record]] = []
    stale: list[tuple[str, Stat]] = []
    where = str(kind_folder) + os.sep
    for (name, stamp), st in zip(records, listing.stats, strict=True):
        if (len(stamp) == len(RECORD)
                and stamp[MTIME] == st.st_mtime_ns and stamp[SIZE] == st.st_size
                and stamp[INO] == st.st_ino
                and (not stamp[RACY] or _same_bytes(where + name, stamp) is not None)):
            if stamp[RACY] and not cache.racy(st.st_mtime_ns, now):
                stamp = (*stamp[:RACY], False, *stamp[RACY + 1:])
                dirty, same = True, False
            files.append((name, stamp))
        else:
            same = False
            files.append((name, ()))  # a placeholder, filled in after parsing
            stale.append((name, (st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode)))
    if compact:
        return (False, listing.others, listing.listed, dirty, None if same else files, stale)
    if same:
        return FolderDiff(before[1], stale, listing.others, listing.listed, dirty,
                          digest=before[2])
    return FolderDiff(files, stale, listing.others, listing.listed, True)


def _unpack(diff: Any, cached: Cached) -> FolderDiff:
    """A FolderDiff from the child's compact form (its records None: the cached ones)."""
    if diff[0]:
        return FolderDiff([], walled=True)
    _, others, listed, dirty, files, stale = diff
    if files is None:
        return FolderDiff(cached[1], [], others, tuple(listed), dirty, digest=cached[2])
    return FolderDiff(files, [tuple(s) for s in stale], others, tuple(listed), True)


# What the atoms cache is saved under: its name and the fields of its rows. It holds, per
# atom folder, ((mtime_ns, inode) of the folder when listed, its other entries, [(atom file
# name, record)], their inputs_digest), and the token of the infos file that goes with it.
CACHE_KIND = ("atoms", RECORD)


def infos_path(project: Project) -> Path:
    """The parsed frontmatter of the atoms cache, apart: a scan that finds nothing changed
    never reads it."""
    return project.store.cache_dir / "atoms" / f"{project.name}.infos.bin"


# What the infos file is saved under: (token, {"folder/name": info} marshalled).
INFOS_KIND = ("atom-infos", INFO)


DELTA_MAX = 64  # infos parsed since the infos file was written whole, kept apart


def delta_path(project: Project) -> Path:
    """The infos parsed since the infos file was written whole (`ProjectScan._save_delta`)."""
    return project.store.cache_dir / "atoms" / f"{project.name}.infos-delta.bin"


# What the delta file is saved under: (token of the infos file it rests on, {"folder/name":
# info} marshalled); the stamps name it by the digest of both.
DELTA_KIND = ("atom-infos-delta", INFO)


# a folder's entry of the atoms cache: its listing, its records, their inputs_digest
Cached = tuple[AtomFolder | None, list[tuple[str, Record]], bytes | None]


def _folder_entry(saved: Any) -> Cached:
    """A folder's entry of the atoms cache as Cached; (None, [], None) when it has none or
    one of another shape."""
    try:
        (mtime, ino), others, files, digest = saved
        names = list(map(itemgetter(0), files))
    except (TypeError, ValueError):
        return None, [], None
    return AtomFolder(names, [], others, (mtime, ino)), files, digest


def _same_bytes(path: str, stamp: Record) -> bytes | None:
    """The file's bytes if they are still those its record was made from (size and CRC),
    else None: for a file written around the time it was read, whose stamp may hide a later
    write, and for a body read after the scan."""
    raw = _read(path, stamp[SIZE])
    return raw if raw is not None and len(raw) == stamp[SIZE] \
        and zlib.crc32(raw) == stamp[CRC] else None


def _read(path: str, size_hint: int) -> bytes | None:
    try:
        # never wait on a FIFO, never read through a link
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        chunks = []
        total = 0
        want = size_hint + 1  # one more byte: notice a file that grew since stat
        while total <= MAX_ATOM_BYTES:
            chunk = os.read(fd, max(want, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_text(path: Path, stamp: Record) -> str | None:
    """The text of a file whose parse is cached; None if the file has changed."""
    raw = _same_bytes(str(path), stamp)
    if raw is None:
        return None
    try:
        return decode(raw, str(path))
    except AtomParseError:
        return None


def _parse_file(path: str, st: Stat | None) \
        -> tuple[Record, Info | None, tuple[bytes, str] | None]:
    """Read and parse one atom file (`st`: its lstat as the walk took it, else taken here):
    its stamp, its info and (bytes, text) unless it is not a valid atom."""
    now = time.time_ns()
    if st is None:
        try:
            ls = os.lstat(path)
        except OSError as e:
            return (0, -1, 0, 0, True, f"cannot read: {e.strerror}", None), None, None
        st = (ls.st_mtime_ns, ls.st_size, ls.st_ino, ls.st_mode)
    mtime_ns, size, _, mode = st
    stamp = st[:3]
    reason = not_a_file(mode)
    if reason:  # reading a FIFO would block for ever (and a link is never read through)
        return (*stamp, 0, True, reason, None), None, None
    try:
        check_size(size, path)
    except AtomParseError as e:
        return (*stamp, 0, False, e.reason, None), None, None
    raw = _read(path, size)
    if raw is None:
        # unreadable now (permissions, vanished): never trust this stamp, look again next time
        return (*stamp, 0, True, "cannot read the file: check its permissions", None), None, None
    crc = zlib.crc32(raw)
    racy = cache.racy(mtime_ns, now) or len(raw) != size
    try:
        text = decode(raw, path)
        span = locate(text, path)
        meta = load_mapping(text[span.fm_start:span.fm_end], path, first_line=2)
    except AtomParseError as e:
        return (*stamp, crc, racy, e.reason, e.line), None, None
    return (*stamp, crc, racy, None, None), (meta, span.body_start, span.body_line), (raw, text)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused, for a batch of work that allocates a dict
    per atom and nothing cyclic (parsing, loading, checking thousands of atoms): the
    collector would only walk the growing heap again and again. Loading 100,000 atoms from
    the cache: 3.1-3.5 s with it, 1.2-1.8 s without."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _parse_many(items: list[tuple[str, Stat]]) -> list[tuple[Record, Info | None]]:
    """Parse files. (A cold regeneration splits its projects across two processes, see
    cortexfs.regen.worker; splitting here, after the heap has grown, costs more than it saves.)"""
    with collector_paused():
        return [_parse_file(path, st)[:2] for path, st in items]  # (not the texts: memory)


def read_atom(path: Path, kind: Kind) -> tuple[Atom, bytes] | AtomParseError:
    """One atom file read and parsed on its own, body included, past the cache: for an
    index that keeps its own record of each file (recall). Returns the atom and the bytes
    it was parsed from, or why the file is not an atom."""
    stamp, info, read = _parse_file(str(path), None)
    if info is None or read is None:
        return AtomParseError(str(path), stamp[ERROR], stamp[ERROR_LINE])
    return Atom(path, kind, info[0], read[1][info[1]:]), read[0]
