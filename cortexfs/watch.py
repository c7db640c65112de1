"""`cortex watch`: keep the indexes and git up to date while atoms change, and count reads.

A watchdog observer over `context/`. An atom created, changed, moved or deleted marks its
project; once the project has been quiet for DEBOUNCE seconds it is regenerated
(`cortexfs.regen.regenerate`) and the changed atoms plus everything regeneration wrote are
committed (`index: regenerate <projects>`). On Linux, inotify also reports files opened and
closed without writing: such a read of an atom by another program becomes a `"tool": "watch"`
access-log line, unless

- cortex itself caused it: the watcher's own regeneration and commit, or any cortex process
  holding the store's regeneration, git or view lock (`.locks/regen.lock`, `git.lock`,
  `view.lock`), and a short grace period after (regeneration, `git add` and `cortex view`
  read the atoms),
- the agent's hook or another cortex command already logged that read (a line for the
  same atom from another tool within a few seconds), or
- it is part of a scan: more than SCAN_FILES atoms of one project read within a second
  (a `grep -r`, a backup, an indexer, `cortex validate` run by hand) — that is not reading.

One watcher per CORTEX_HOME: it holds an flock on `.locks/watch.lock` for its lifetime and
writes its pid to `.watch.pid`. Events for cortex's own files (index.md, generated files,
`_meta/`, temporary files) are ignored.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortexfs import accesslog, autocommit, layout
from cortexfs.autocommit import debounce_seconds, is_locked, try_lock
from cortexfs.errors import CortexError, LockTimeoutError
from cortexfs.store import Project, Store

DEBOUNCE = 2.0  # seconds of quiet before a changed project is regenerated
DEBOUNCE_ENV = "CORTEX_WATCH_DEBOUNCE"
LOG_DEBOUNCE = 5.0  # seconds of quiet before the watcher commits the reads it logged
OWN_GRACE = 1.5  # seconds after cortex's work (with no sentinel) during which reads are its own
SENTINEL_WAIT = 10.0  # at most this long for the sentinel's event to come back
HOLD = 2.0  # seconds a read waits for the hook's own line before it is logged as "watch"
DEDUP_WINDOW = 5.0  # a line of another tool this close to a read means it was that tool
SCAN_WINDOW = 1.0
SCAN_FILES = 5  # more distinct atoms of one project read within SCAN_WINDOW = a scan
TICK = 0.1
WATCH_TOOL = "watch"


@dataclass
class _PendingRead:
    project: str
    name: str
    wall: float  # time.time() of the read
    seen: float  # time.monotonic() of the read


@dataclass
class _State:
    """What the observer thread hands to the main loop (guarded by `lock`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    dirty: dict[str, float] = field(default_factory=dict)  # project → last change (monotonic)
    changed: dict[str, set[Path]] = field(default_factory=dict)  # project → atom paths touched
    reads: list[_PendingRead] = field(default_factory=list)
    own_active: bool = False  # the watcher is regenerating / committing
    # After that, events keep arriving for a moment: everything up to the creation of this
    # uniquely named sentinel file (inotify delivers events in order) is still cortex's own
    # doing; if the sentinel's event never comes, `own_deadline` (monotonic) ends the window.
    own_sentinel: str | None = None
    own_deadline: float = 0.0
    own_writes: set[Path] = field(default_factory=set)  # files regeneration just wrote

    def own(self, now: float) -> bool:
        return self.own_active or (self.own_sentinel is not None and now < self.own_deadline)


def pid_file(store: Store) -> Path:
    return store.home / layout.WATCH_PID


def lock_file(store: Store) -> Path:
    return store.locks_dir / layout.WATCH_LOCK


def running_pid(store: Store) -> int | None:
    """The pid of the watcher running for this store, or None."""
    if not is_locked(lock_file(store)):
        return None  # nobody holds the lock: no watcher, whatever the pid file says
    try:
        return int(pid_file(store).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return -1  # running, but its pid file is not there (yet)


def already_running(store: Store, pid: int | None) -> LockTimeoutError:
    shown = f" (pid {pid})" if pid and pid > 0 else ""
    return LockTimeoutError(f"a watcher is already running for {store.home}{shown}: see "
                            "`cortex watch --status`, stop it with `cortex watch --stop`")


class Watcher:
    """The watcher's state and loop; `run()` blocks until `stop()` or a signal."""

    def __init__(self, store: Store, *, debounce: float | None = None,
                 log_debounce: float = LOG_DEBOUNCE, record_reads: bool = True,
                 echo: Callable[[str], None] | None = None,
                 regenerate: Callable[[Store, list[str] | None], Any] | None = None) -> None:
        self.store = store
        self.debounce = debounce_seconds(DEBOUNCE_ENV, DEBOUNCE) if debounce is None \
            else debounce
        self.log_debounce = log_debounce
        self.record_reads = record_reads and sys.platform.startswith("linux")
        self.echo = echo
        self._regenerate = regenerate or _default_regenerate
        self.state = _State()
        self._stop = threading.Event()
        self._context = os.path.realpath(store.context)
        self._logs_dirty_since: float | None = None
        self._recent: dict[str, dict[str, list[tuple[float, str]]]] = {}  # project → file → …
        self._log_offsets: dict[str, int] = {}
        self._retry: dict[str, set[Path]] = {}  # commits that failed, to try again
        self._retry_at = 0.0
        self._sentinels = 0
        self._busy_until = 0.0  # another cortex process was regenerating or committing
        self._busy_locks = [store.locks_dir / layout.REGEN_LOCK, store.locks_dir / layout.GIT_LOCK,
                            store.locks_dir / layout.VIEW_LOCK]  # (cortex view reads atom bodies)

    # --- logging -------------------------------------------------------------------------

    def log(self, message: str) -> None:
        line = autocommit.log(str(self.store.home), layout.WATCH_LOG, message)
        if self.echo is not None:
            self.echo(line)

    # --- events (observer thread) --------------------------------------------------------

    def _classify(self, path: str) -> tuple[str, str, str] | None:
        """(project, folder, name) for a path inside an atom folder (or the folder itself)."""
        if not path:
            return None
        rel = os.path.relpath(os.path.realpath(os.path.dirname(path)), self._context)
        parts = rel.split(os.sep) + [os.path.basename(path)]
        if parts[0] != layout.PROJECTS or len(parts) not in (3, 4):
            return None
        project, folder = parts[1], parts[2]
        if not layout.is_project_folder(project) or folder not in layout.ATOM_FOLDERS:
            return None
        return project, folder, parts[3] if len(parts) == 4 else ""

    def on_event(self, event: Any) -> None:
        """Watchdog callback: note atom changes and reads for the main loop."""
        from watchdog.events import FileClosedNoWriteEvent

        now = time.monotonic()
        paths = [p for p in (event.src_path, getattr(event, "dest_path", "")) if p]
        paths = [os.fsdecode(p) for p in paths]
        with self.state.lock:
            if paths and paths[0] == self.state.own_sentinel:
                self.state.own_sentinel = None  # every event before this one was ours
                self.state.own_writes.clear()
                return
        if isinstance(event, FileClosedNoWriteEvent):
            if self.record_reads:
                self._on_read(paths[0], now)
            return
        for path in paths:
            where = self._classify(path)
            if where is None:
                continue
            project, folder, name = where
            if event.is_directory:
                # a project or atom folder moved or deleted: regenerate the project
                if name == "" or name in layout.ATOM_FOLDERS:
                    self._mark(project, None, now)
                continue
            if layout.atom_folder(name) != folder:
                continue  # editors' temp files, index.md, anything not an atom
            atom = Path(path)
            with self.state.lock:
                if atom in self.state.own_writes and self.state.own(now):
                    continue  # our own refs / last-ref write
            self._mark(project, atom, now)

    def _mark(self, project: str, atom: Path | None, now: float) -> None:
        with self.state.lock:
            self.state.dirty[project] = now
            touched = self.state.changed.setdefault(project, set())
            if atom is not None:
                touched.add(atom)

    def _on_read(self, path: str, now: float) -> None:
        where = self._classify(path)
        if where is None:
            return
        project, folder, name = where
        if layout.atom_folder(name) != folder:
            return
        with self.state.lock:
            if self.state.own(now):
                return
        if self._cortex_busy(now):
            return
        with self.state.lock:
            self.state.reads.append(_PendingRead(project, name, time.time(), now))

    def _cortex_busy(self, now: float) -> bool:
        """True while (or just after) another cortex process regenerates or commits."""
        if now < self._busy_until:
            return True
        for path in self._busy_locks:
            if is_locked(path):
                self._busy_until = now + OWN_GRACE
                return True
        return False

    # --- the main loop -------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def run(self, ready: Callable[[], None] | None = None) -> None:
        """Observe until stopped; regenerate, commit and log reads as events come."""
        from watchdog.events import (
            DirCreatedEvent,
            DirDeletedEvent,
            DirMovedEvent,
            FileClosedEvent,
            FileClosedNoWriteEvent,
            FileCreatedEvent,
            FileDeletedEvent,
            FileModifiedEvent,
            FileMovedEvent,
            FileSystemEventHandler,
        )
        from watchdog.observers import Observer

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                try:
                    watcher.on_event(event)
                except Exception:  # one odd event must not kill the observer thread
                    watcher.log(f"error handling {event!r}: {traceback.format_exc()}")

        wanted: list[Any] = [FileCreatedEvent, FileModifiedEvent, FileDeletedEvent,
                             FileMovedEvent, FileClosedEvent, DirCreatedEvent,
                             DirDeletedEvent, DirMovedEvent]
        if self.record_reads:
            wanted.append(FileClosedNoWriteEvent)
        self.store.context.mkdir(parents=True, exist_ok=True)
        observer = Observer()
        observer.schedule(Handler(), str(self.store.context), recursive=True,
                          event_filter=wanted)
        observer.start()
        try:
            self.log(f"watching {self.store.context} (pid {os.getpid()})")
            if ready is not None:
                ready()  # (may fail: writing the pid file; the observer is stopped all the same)
            while not self._stop.wait(TICK):
                try:
                    self.tick()
                except Exception:  # a bug must not end the watcher: log it, keep watching
                    self.log(f"error (a bug; please report it): {traceback.format_exc()}")
        finally:
            observer.stop()
            observer.join(timeout=5)
            self.flush()
            self.log("stopped")

    def tick(self, force: bool = False) -> None:
        """One pass of the loop: regenerate quiet projects, log settled reads, commit."""
        now = time.monotonic()
        with self.state.lock:
            due = sorted(p for p, t in self.state.dirty.items()
                         if force or now - t >= self.debounce)
            changed: dict[str, set[Path]] = {}
            for p in due:
                del self.state.dirty[p]
                changed[p] = self.state.changed.pop(p, set())
        if due:
            self._regenerate_and_commit(due, changed)
        elif self._retry and (force or now >= self._retry_at):
            retry, self._retry = self._retry, {}
            self._regenerate_and_commit(sorted(retry), retry)
        self._settle_reads(force)
        if self._logs_dirty_since is not None and (
                force or time.monotonic() - self._logs_dirty_since >= self.log_debounce):
            self._commit_logs()

    def flush(self) -> None:
        """Do now whatever is waiting (at shutdown)."""
        try:
            self.tick(force=True)
        except Exception:
            self.log(f"error while flushing: {traceback.format_exc()}")

    # --- regeneration and commits --------------------------------------------------------

    def _regenerate_and_commit(self, projects: list[str], changed: dict[str, set[Path]]
                               ) -> None:
        from cortexfs import git
        from cortexfs.commit import Change, commit_change

        with self.state.lock:
            self.state.own_active = True
        written: list[Path] = []
        try:
            existing = [p for p in projects if (self.store.projects_dir / p).is_dir()]
            # a project that is gone altogether still shows in the store-wide files
            # (OVERVIEW.md, HIPPOCAMPUS.md): then refresh everything
            targets = existing if len(existing) == len(projects) else None
            # the git lock first (regeneration takes its own lock inside): the order every
            # cortex command takes them in
            with git.git_lock(self.store):
                result = self._regenerate(self.store, targets)
                written = [Path(p) for p in getattr(result, "written", []) or []]
                self.log(f"regenerated {', '.join(targets or ['all projects'])}: "
                         f"{len(written)} file(s) written")
                paths = sorted({*written, *(a for p in projects for a in changed.get(p, ()))})
                if paths:
                    names = ", ".join(projects)
                    atoms = sorted({a.name for p in projects for a in changed.get(p, ())})
                    body = f"\n\natoms: {', '.join(atoms)}" if atoms else ""
                    done = commit_change(self.store, Change(
                        paths, f"index: regenerate {names}{body}",
                        regenerated=set(targets or self.store.project_names())),
                        everything=False)
                    if done.commit:
                        self.log(f"committed {len(done.paths)} path(s): index: regenerate "
                                 f"{names}")
                    if done.warning:
                        self.log(done.warning)
        except CortexError as e:
            self.log(f"regenerating {', '.join(projects)} failed, will retry: {e}")
            self._schedule_retry(projects, changed)
        except Exception:
            self.log(f"regenerating {', '.join(projects)} failed (a bug), will retry: "
                     f"{traceback.format_exc()}")
            self._schedule_retry(projects, changed)
        finally:
            self._sentinels += 1
            # as the observer reports paths (not resolved); *.tmp is git-ignored
            sentinel = self.store.context / f".cortex-watch.{os.getpid()}.{self._sentinels}.tmp"
            with self.state.lock:
                self.state.own_active = False
                self.state.own_writes.update(written)
                self.state.own_sentinel = str(sentinel)
                self.state.own_deadline = time.monotonic() + SENTINEL_WAIT
            try:
                os.close(os.open(sentinel, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                os.unlink(sentinel)
            except OSError:  # a read-only context/: fall back to a grace period
                with self.state.lock:
                    self.state.own_deadline = time.monotonic() + OWN_GRACE

    def _schedule_retry(self, projects: list[str], changed: dict[str, set[Path]]) -> None:
        for p in projects:
            self._retry.setdefault(p, set()).update(changed.get(p, ()))
        self._retry_at = time.monotonic() + max(self.debounce, 5.0)

    def _commit_logs(self) -> None:
        try:
            autocommit.commit_logs(str(self.store.home))
            self._logs_dirty_since = None
        except Exception as e:  # a held index.lock…: the lines stay, try again later
            self.log(f"committing the access logs failed, will retry: {e}")
            self._logs_dirty_since = time.monotonic()

    # --- reads ---------------------------------------------------------------------------

    def _settle_reads(self, force: bool) -> None:
        """Log the reads old enough that the hook's own line would have arrived."""
        if not force and accesslog.being_replaced(self.store.home):
            return  # the hook's lines may be set aside meanwhile: look once they are back
        now = time.monotonic()
        with self.state.lock:
            reads = self.state.reads
            ready = [r for r in reads if force or now - r.seen >= HOLD]
            if not ready:
                return
            self.state.reads = [r for r in reads if not (force or now - r.seen >= HOLD)]
            everything = reads
        scans = self._scans(everything)
        lines: dict[str, list[bytes]] = {}
        seen: set[tuple[str, str, int]] = set()
        for r in ready:
            if id(r) in scans:
                continue
            key = (r.project, r.name, int(r.wall))  # one open/close pair is one read
            if key in seen or self._logged_elsewhere(r):
                continue
            seen.add(key)
            ts = accesslog.timestamp(r.wall)
            lines.setdefault(r.project, []).append(
                accesslog.format_line(r.name, WATCH_TOOL, "", ts))
        for project, project_lines in lines.items():
            log_path = Project(self.store, project).access_log
            try:
                accesslog.append(log_path, project_lines)
            except OSError as e:
                self.log(f"cannot append to {log_path}: {e}")
                continue
            if self._logs_dirty_since is None:
                self._logs_dirty_since = time.monotonic()

    @staticmethod
    def _scans(reads: list[_PendingRead]) -> set[int]:
        """ids of reads that belong to a burst over many atoms of one project."""
        by_project: dict[str, list[_PendingRead]] = {}
        for r in reads:
            by_project.setdefault(r.project, []).append(r)
        out: set[int] = set()
        for group in by_project.values():
            group.sort(key=lambda r: r.seen)
            start = 0
            for end in range(len(group)):
                while group[end].seen - group[start].seen > SCAN_WINDOW:
                    start += 1
                window = group[start:end + 1]
                if len({r.name for r in window}) > SCAN_FILES:
                    out.update(id(r) for r in window)
        return out

    def _logged_elsewhere(self, r: _PendingRead) -> bool:
        """True when another tool (the hook, recall…) logged this atom around this read."""
        return any(tool != WATCH_TOOL and abs(wall - r.wall) <= DEDUP_WINDOW
                   for wall, tool in self._refresh_recent(r.project).get(r.name, ()))

    def _refresh_recent(self, project: str) -> dict[str, list[tuple[float, str]]]:
        """The project's log lines of the last minute, read incrementally."""
        path = Project(self.store, project).access_log
        recent = self._recent.setdefault(project, {})
        key = str(path)
        try:
            size = path.stat().st_size
        except OSError:
            return recent
        offset = self._log_offsets.get(key)
        if offset is None or offset > size:
            offset = max(0, size - 64 * 1024)  # first look (or a rewritten log): the tail
        if size > offset:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(size - offset)
            end = data.rfind(b"\n") + 1
            self._log_offsets[key] = offset + end
            for raw in data[:end].splitlines():
                try:
                    entry = json.loads(raw)
                    wall = dt.datetime.fromisoformat(entry["ts"]).timestamp()
                    recent.setdefault(str(entry["file"]), []).append(
                        (wall, str(entry.get("tool", ""))))
                except (ValueError, KeyError, TypeError):
                    continue
        else:
            self._log_offsets[key] = offset
        horizon = time.time() - 60
        self._recent[project] = recent = {
            name: kept for name, seen in recent.items()
            if (kept := [(w, t) for w, t in seen if w >= horizon])}
        return recent


def _default_regenerate(store: Store, projects: list[str] | None) -> Any:
    from cortexfs import regen

    return regen.regenerate(store, projects)


# --- the process: foreground, daemon, status, stop ----------------------------------------------

def run_foreground(store: Store, echo: Callable[[str], None] | None = None,
                   ready: Callable[[], None] | None = None, **options: Any) -> None:
    """Hold the store's watch lock, write the pid file and watch until SIGTERM/SIGINT."""
    fd = try_lock(lock_file(store))
    if fd is None:
        raise already_running(store, running_pid(store))
    with contextlib.suppress(FileNotFoundError):
        pid_file(store).unlink()  # a killed watcher's: while we hold the lock, only ours
    watcher = Watcher(store, echo=echo, **options)
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def watching() -> None:
        # the pid file says "watching" (start_background returns on it): written once the
        # observer is in place, not before, or a change made just after `cortex watch`
        # returned could be missed
        from cortexfs.fsutil import atomic_write

        atomic_write(pid_file(store), f"{os.getpid()}\n")
        if ready is not None:
            ready()

    try:
        for sig in previous:
            signal.signal(sig, lambda *_: watcher.stop())
        watcher.run(ready=watching)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        with contextlib.suppress(OSError, ValueError):
            if int(pid_file(store).read_text(encoding="ascii").strip()) == os.getpid():
                pid_file(store).unlink()
        os.close(fd)


def start_background(store: Store, wait: float = 15.0) -> int:
    """Start a detached watcher (`python -m cortexfs.watch`); its pid once it is watching."""
    pid = running_pid(store)
    if pid is not None:
        raise already_running(store, pid)
    store.logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = store.logs_dir / layout.WATCH_LOG
    with open(log_path, "ab") as log, open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cortexfs.watch", "--home", str(store.home)],
            stdin=devnull, stdout=log, stderr=log, start_new_session=True, close_fds=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CortexError(f"the watcher exited at once (code {proc.returncode}): see "
                              f"{log_path}")
        if running_pid(store) == proc.pid:
            return proc.pid
        time.sleep(0.05)
    raise CortexError(f"the watcher (pid {proc.pid}) did not start within {wait:.0f}s: see "
                      f"{log_path}")


def stop(store: Store, wait: float = 15.0) -> int | None:
    """Stop the running watcher (SIGTERM, then wait for it to finish); its pid, or None."""
    pid = running_pid(store)
    deadline = time.monotonic() + wait
    while pid is not None and pid < 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # starting: it writes its pid file once it is watching
        pid = running_pid(store)
    if pid is None:
        return None
    if pid <= 0:
        raise CortexError(f"a watcher holds {lock_file(store)} but {pid_file(store)} is "
                          "missing: find it with `fuser` and stop it by hand")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if running_pid(store) is None:
            return pid
        time.sleep(0.05)
    raise CortexError(f"the watcher (pid {pid}) did not stop within {wait:.0f}s: kill it "
                      f"with `kill -9 {pid}`")


def main(argv: list[str] | None = None) -> int:
    """`python -m cortexfs.watch --home HOME`: the detached watcher process."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cortexfs.watch")
    parser.add_argument("--home", required=True)
    args = parser.parse_args(argv)
    try:
        store = Store.open(args.home)
        run_foreground(store)  # its log is logs/watch.log (stdout and stderr go there too)
    except CortexError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
