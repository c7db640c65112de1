"""Loading a project's atoms: the one place every command gets parsed atoms from.

Validation, regeneration, readiness, recall and the brief all call `load_project`, so the
speed-ups live here once:

- Parsed frontmatter (or the parse error and its line) is cached per project in
  `$CORTEX_HOME/.cache/atoms/<project>.bin`, keyed by file and checked against the file's
  mtime (ns), size and inode. A file changed within RACY_NS of being read (when a later
  write could keep the same mtime) is re-checked by content next time, as git does for
  "racily clean" files. A missing, stale or corrupt cache only costs a re-parse.
- Frontmatter goes through the fast path of `cortexfs.frontmatter` (falling back to YAML).
- When many files need parsing (a cold cache) on a machine with several cores, the work is
  split with a forked worker process.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import re
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortexfs import cache
from cortexfs.atoms import KINDS, Atom, Kind
from cortexfs.errors import AtomParseError
from cortexfs.frontmatter import MAX_ATOM_BYTES, check_size, decode, load_mapping, locate
from cortexfs.store import Project

CACHE_KIND = "atoms-1"
RACY_NS = 2_000_000_000  # mtime granularity we do not trust (FAT: 2 s; ext4/tmpfs: a tick)
PARALLEL_MIN = 1500  # below this many files to parse, a worker process costs more than it saves

# One cache entry (a tuple, because marshal and memory like them):
# (mtime_ns, size, ino, crc32, racy, meta | None, error | None, error_line, body_start, body_line)
_MTIME, _SIZE, _INO, _CRC, _RACY, _META, _ERR, _ERR_LINE, _BODY_START, _BODY_LINE = range(10)
Entry = tuple[Any, ...]
# exactly the file names Project.atom_paths takes for each kind (`EXP-042b.md`, `K-7.md` …)
_FILE_NAME = {k.prefix: re.compile(k.id_re.pattern.rstrip("$") + r"\.md$") for k in KINDS}


@dataclass
class LoadedProject:
    """A project's atoms that parsed, and the files that did not (with file and line)."""

    project: Project
    atoms: list[Atom] = field(default_factory=list)
    errors: list[AtomParseError] = field(default_factory=list)


def load_project(project: Project, *, bodies: bool = True) -> LoadedProject:
    """Parse every atom file of `project`, in kind then id order.

    With `bodies=False` the files are not read when the cache knows them (atom.body == "").
    """
    return scan(project).loaded(bodies=bodies)


def cache_path(project: Project) -> Path:
    return project.store.cache_dir / "atoms" / f"{project.name}.bin"


@dataclass
class ProjectScan:
    """Every atom file of a project with its (cached or fresh) parse, in kind then id order."""

    project: Project
    # kind folder → [(file name, entry)], names sorted as Project.atom_paths sorts them
    folders: dict[str, list[tuple[str, Entry]]]
    parsed: int = 0  # files parsed (not served by the cache) in this scan
    dirty: bool = False  # the cache file needs saving

    def entries(self) -> Iterator[tuple[Kind, str, Entry]]:
        for kind in KINDS:
            for name, entry in self.folders.get(kind.folder, []):
                yield kind, name, entry

    def stamp(self, kind: Kind) -> list[tuple[str, int, int, int]]:
        """(name, mtime_ns, size, crc32) of each file of a kind's folder: what its index
        is built from, parse errors included."""
        return [(name, e[_MTIME], e[_SIZE], e[_CRC]) for name, e in self.folders.get(
            kind.folder, [])]

    def loaded(self, *, bodies: bool = False) -> LoadedProject:
        """The atoms and parse errors as a LoadedProject."""
        out = LoadedProject(self.project)
        for kind in KINDS:
            folder = self.project.folder(kind)
            for name, e in self.folders.get(kind.folder, []):
                path = folder / name
                if e[_META] is None:
                    out.errors.append(AtomParseError(str(path), e[_ERR], e[_ERR_LINE]))
                    continue
                body = _read_body(path, e) if bodies else ""
                if body is None:  # changed since the scan: parse it again, whole
                    entry = _parse_file(str(path), None)
                    if entry[_META] is None:
                        out.errors.append(AtomParseError(str(path), entry[_ERR],
                                                         entry[_ERR_LINE]))
                        continue
                    e, body = entry, _read_body(path, entry) or ""
                out.atoms.append(Atom(path, kind, dict(e[_META]), body))
        return out

    def refresh(self, kind: Kind, name: str) -> Entry:
        """Re-read one file (after cortex rewrote it) and return its new entry."""
        path = self.project.folder(kind) / name
        entry = _parse_file(str(path), None)
        files = self.folders.setdefault(kind.folder, [])
        for i, (n, _) in enumerate(files):
            if n == name:
                files[i] = (name, entry)
                break
        else:
            files.append((name, entry))
            files.sort()
        self.dirty = True
        return entry

    def save(self) -> None:
        """Write the cache file if anything changed since it was read."""
        if not self.dirty:
            return
        data = {f"{folder}/{name}": entry
                for folder, files in self.folders.items() for name, entry in files}
        cache.save(cache_path(self.project), CACHE_KIND, data)
        self.dirty = False


def scan(project: Project, *, save: bool = True) -> ProjectScan:
    """Stat every atom file of `project`, parse those the cache does not know, and (unless
    `save` is False) write the cache back when it changed."""
    known = cache.load(cache_path(project), CACHE_KIND)
    if not isinstance(known, dict):
        known = {}  # no cache, or one from another version: parse everything
    result = ProjectScan(project, {})
    stale: list[tuple[str, str, str, os.stat_result]] = []  # (folder, name, path, stat)
    now = time.time_ns()
    seen = 0
    for kind in KINDS:
        folder_path = project.folder(kind)
        files: list[tuple[str, Entry]] = []
        result.folders[kind.folder] = files
        try:
            it = os.scandir(folder_path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with it:
            match = _FILE_NAME[kind.prefix].match
            names = sorted((d.name, d) for d in it if match(d.name))
        for name, dirent in names:
            try:
                st = dirent.stat()
            except OSError:
                continue  # vanished since listing it
            seen += 1
            entry = known.get(f"{kind.folder}/{name}")
            if (entry is not None and len(entry) == 10 and entry[_MTIME] == st.st_mtime_ns
                    and entry[_SIZE] == st.st_size and entry[_INO] == st.st_ino
                    and (not entry[_RACY] or _same_content(entry, dirent.path))):
                if entry[_RACY] and now - st.st_mtime_ns >= RACY_NS:
                    entry = (*entry[:_RACY], False, *entry[_RACY + 1:])
                    result.dirty = True
                files.append((name, entry))
            else:
                files.append((name, ()))  # a placeholder, filled in below
                stale.append((kind.folder, name, dirent.path, st))
    if stale:
        parsed = _parse_many([(path, st) for _, _, path, st in stale])
        fresh = {(folder, name): entry
                 for (folder, name, _, _), entry in zip(stale, parsed, strict=True)}
        for folder, files in result.folders.items():
            for i, (name, entry) in enumerate(files):
                if not entry:
                    files[i] = (name, fresh[(folder, name)])
        result.parsed = len(stale)
        result.dirty = True
    if len(known) != seen:
        result.dirty = True  # files were deleted
    if save:
        result.save()
    return result


def _same_content(entry: Entry, path: str) -> bool:
    """For a file written around the time it was read, whose stamp may hide a later write."""
    raw = _read(path, entry[_SIZE])
    return raw is not None and len(raw) == entry[_SIZE] and zlib.crc32(raw) == entry[_CRC]


def _read(path: str, size_hint: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        want = size_hint + 1  # one more byte: notice a file that grew since stat
        while True:
            chunk = os.read(fd, max(want, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            want = 65536
            if sum(map(len, chunks)) > MAX_ATOM_BYTES:
                break
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _parse_file(path: str, st: os.stat_result | None) -> Entry:
    """Read and parse one atom file into a cache entry (an error entry when it is bad)."""
    now = time.time_ns()
    if st is None:
        try:
            st = os.stat(path)
        except OSError as e:
            return _error_entry(None, 0, f"cannot read: {e.strerror}", None, racy=True)
    try:
        check_size(st.st_size, path)
    except AtomParseError as e:
        return _error_entry(st, 0, e.reason, None)
    raw = _read(path, st.st_size)
    if raw is None:
        # unreadable now (permissions, vanished): never trust this entry, ask again next time
        return _error_entry(st, 0, "cannot read the file: check its permissions", None,
                            racy=True)
    crc = zlib.crc32(raw)
    racy = now - st.st_mtime_ns < RACY_NS or len(raw) != st.st_size
    try:
        text = decode(raw, path)
        span = locate(text, path)
        meta = load_mapping(text[span.fm_start:span.fm_end], path, first_line=2)
    except AtomParseError as e:
        return _error_entry(st, crc, e.reason, e.line, racy=racy)
    return (st.st_mtime_ns, st.st_size, st.st_ino, crc, racy, meta, None, None,
            span.body_start, span.body_line)


def _error_entry(st: os.stat_result | None, crc: int, reason: str, line: int | None,
                 racy: bool = False) -> Entry:
    mtime, size, ino = (st.st_mtime_ns, st.st_size, st.st_ino) if st else (0, -1, 0)
    return (mtime, size, ino, crc, racy, None, reason, line, 0, 0)


def _read_body(path: Path, entry: Entry) -> str | None:
    """The body of a file whose frontmatter is cached; None if the file has changed."""
    raw = _read(str(path), entry[_SIZE])
    if raw is None or len(raw) != entry[_SIZE] or zlib.crc32(raw) != entry[_CRC]:
        return None
    try:
        return decode(raw, str(path))[entry[_BODY_START]:]
    except AtomParseError:
        return None


def _parse_many(items: list[tuple[str, os.stat_result]]) -> list[Entry]:
    """Parse files, splitting the work with a forked worker when it is worth it."""
    if len(items) < PARALLEL_MIN or not _can_fork():
        return [_parse_file(path, st) for path, st in items]
    half = len(items) // 2
    mine, theirs = items[:half], items[half:]
    try:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
    except OSError:
        return [_parse_file(path, st) for path, st in items]
    if pid == 0:  # the worker: parse, send the entries back, and leave without cleanup
        status = 1
        try:
            os.close(read_fd)
            data = marshal.dumps([_parse_file(path, st) for path, st in theirs])
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    results = [_parse_file(path, st) for path, st in mine]
    chunks = []
    with contextlib.suppress(OSError):
        while chunk := os.read(read_fd, 1 << 20):
            chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    worker: Any = None
    if status == 0:
        with contextlib.suppress(ValueError, EOFError, TypeError):
            worker = marshal.loads(b"".join(chunks))
    if not isinstance(worker, list) or len(worker) != len(theirs):
        worker = [_parse_file(path, st) for path, st in theirs]  # the worker failed: redo
    return results + worker


def _can_fork() -> bool:
    # forking a process that runs other threads can deadlock the child on a lock one of them
    # held; cortex's commands are single-threaded, the MCP server and the watcher may not be
    return (hasattr(os, "fork") and (os.cpu_count() or 1) > 1
            and threading.active_count() == 1 and sys.platform != "win32")
