"""`cortex watch`: events → debounced regeneration and commit; other programs' reads logged."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from watchdog.events import (
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
)

from cortexfs import accesslog, layout, watch
from cortexfs.store import Project, Store


def atom_text(atom_id: str, summary: str, project: str = "flywheel") -> str:
    return (f"---\nid: {atom_id}\ndate: 2026-03-09\nproject: {project}\n"
            f"summary: \"{summary}\"\ntags: [a, b]\n---\n\nBody.\n")


def wait_until(check: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.05)


class FakeRegen:
    """Stands in for regen.regenerate in the unit tests: records calls, writes nothing."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.written: list[Path] = []

    def __call__(self, store: Store, projects: list[str] | None) -> Any:
        self.calls.append(projects)
        return type("R", (), {"written": list(self.written)})()


@pytest.fixture
def regen() -> FakeRegen:
    return FakeRegen()


@pytest.fixture
def watcher(project: Project, regen: FakeRegen) -> watch.Watcher:
    return watch.Watcher(project.store, debounce=0.0, regenerate=regen)


def exp(project: Project, name: str = "EXP-001.md") -> Path:
    return project.root / "experiments" / name


def watch_lines(project: Project) -> list[dict[str, str]]:
    if not project.access_log.exists():
        return []
    lines = [json.loads(x) for x in project.access_log.read_text().splitlines()]
    return [x for x in lines if x["tool"] == "watch"]


def settle(w: watch.Watcher, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "HOLD", 0.0)
    w.tick()


# --- unit: which events count -------------------------------------------------------------------

def test_atom_changes_mark_the_project(watcher: watch.Watcher, project: Project,
                                       regen: FakeRegen) -> None:
    path = exp(project)
    path.write_text(atom_text("EXP-001", "one"))
    watcher.on_event(FileCreatedEvent(str(path)))
    watcher.tick()
    assert regen.calls == [["flywheel"]]
    out = subprocess.run(["git", "log", "-1", "--format=%B", "--name-only"],
                         cwd=project.store.home, capture_output=True, text=True).stdout
    assert out.startswith("index: regenerate flywheel\n\natoms: EXP-001.md")
    assert "context/projects/flywheel/experiments/EXP-001.md" in out
    watcher.tick()
    assert regen.calls == [["flywheel"]]  # nothing new: no second run


@pytest.mark.parametrize("rel", [
    "experiments/index.md", "experiments/.EXP-001.md.swp", "experiments/EXP-001.md~",
    "experiments/4913", "knowledge/EXP-001.md", "_meta/access-log.jsonl", "STATUS.md",
    "experiments/sub/EXP-001.md",
])
def test_other_files_are_ignored(watcher: watch.Watcher, project: Project, regen: FakeRegen,
                                 rel: str) -> None:
    watcher.on_event(FileModifiedEvent(str(project.root / rel)))
    watcher.tick()
    assert regen.calls == []


def test_atomic_save_and_delete_count(watcher: watch.Watcher, project: Project,
                                      regen: FakeRegen, store: Store) -> None:
    tmp = project.root / "experiments" / ".EXP-001.md.tmp"
    watcher.on_event(FileMovedEvent(str(tmp), str(exp(project))))
    watcher.tick()
    other = store.projects_dir / "other" / "patterns" / "PAT-002.md"
    watcher.on_event(FileDeletedEvent(str(exp(project, "EXP-003.md"))))
    watcher.tick()
    watcher.on_event(FileDeletedEvent(str(other)))  # its project is gone: refresh all
    watcher.tick()
    assert regen.calls == [["flywheel"], ["flywheel"], None]


class Clock:
    """The watcher's `time`, its monotonic clock moved on by the test (`sleep`)."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_debounce_waits_for_quiet(project: Project, regen: FakeRegen,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(watch, "time", clock)
    w = watch.Watcher(project.store, debounce=0.5, regenerate=regen)
    w.on_event(FileModifiedEvent(str(exp(project))))
    w.tick()
    clock.sleep(0.3)
    w.on_event(FileModifiedEvent(str(exp(project))))
    clock.sleep(0.3)
    w.tick()
    assert regen.calls == []
    clock.sleep(0.3)
    w.tick()
    assert regen.calls == [["flywheel"]]


def test_own_writes_are_ignored(watcher: watch.Watcher, project: Project,
                                regen: FakeRegen) -> None:
    path = exp(project)
    path.write_text(atom_text("EXP-001", "one"))
    regen.written = [path]  # as when regeneration writes refs / last-ref into the atom
    watcher.on_event(FileCreatedEvent(str(path)))
    watcher.tick()
    watcher.on_event(FileModifiedEvent(str(path)))
    watcher.tick()
    assert regen.calls == [["flywheel"]]


def test_failed_regeneration_is_retried(project: Project) -> None:
    from cortexfs.errors import GitError

    calls: list[list[str]] = []

    def flaky(store: Store, projects: list[str] | None) -> Any:
        calls.append(projects)
        if len(calls) == 1:
            raise GitError("git is busy")
        return type("R", (), {"written": []})()

    watcher = watch.Watcher(project.store, debounce=0.0, regenerate=flaky)
    watcher.on_event(FileModifiedEvent(str(exp(project))))
    watcher.tick()
    assert "will retry" in (project.store.logs_dir / "watch.log").read_text()
    watcher.tick(force=True)
    assert calls == [["flywheel"], ["flywheel"]]


# --- unit: reads ------------------------------------------------------------------------------

def test_a_read_becomes_a_watch_line(watcher: watch.Watcher, project: Project,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    exp(project).write_text(atom_text("EXP-001", "one"))
    watcher.on_event(FileClosedNoWriteEvent(str(exp(project))))
    watcher.on_event(FileClosedNoWriteEvent(str(project.root / "STATUS.md")))
    watcher.tick()
    assert watch_lines(project) == []  # held back a moment for the hook's own line
    settle(watcher, monkeypatch)
    [line] = watch_lines(project)
    assert line["file"] == "EXP-001.md" and line["session"] == "" and line["ts"].endswith("Z")


def test_a_read_the_hook_logged_is_not_counted_twice(
        watcher: watch.Watcher, project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    watcher.on_event(FileClosedNoWriteEvent(str(exp(project))))
    watcher.on_event(FileClosedNoWriteEvent(str(exp(project, "EXP-002.md"))))
    accesslog.append(project.access_log, [accesslog.format_line("EXP-001.md", "Read", "s")])
    settle(watcher, monkeypatch)
    assert [x["file"] for x in watch_lines(project)] == ["EXP-002.md"]


def test_scans_and_own_regeneration_are_not_reads(
        watcher: watch.Watcher, project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(watch.SCAN_FILES + 1):  # grep -r, a backup, cortex validate…
        watcher.on_event(FileClosedNoWriteEvent(str(exp(project, f"EXP-{i:03d}.md"))))
    settle(watcher, monkeypatch)
    assert watch_lines(project) == []
    watcher.state.own_active = True  # the watcher regenerating
    watcher.on_event(FileClosedNoWriteEvent(str(exp(project))))
    watcher.state.own_active = False
    sentinel = str(project.store.context / "CORTEX.md")
    watcher.state.own_sentinel = sentinel  # …and its events still coming in after that
    watcher.state.own_deadline = time.monotonic() + 60
    watcher.on_event(FileClosedNoWriteEvent(str(exp(project))))
    settle(watcher, monkeypatch)
    assert watch_lines(project) == []
    watcher.on_event(FileClosedNoWriteEvent(sentinel))  # the end of cortex's own events
    watcher.on_event(FileClosedNoWriteEvent(str(exp(project))))
    settle(watcher, monkeypatch)
    assert len(watch_lines(project)) == 1


def test_reads_while_another_cortex_regenerates_are_not_counted(
        watcher: watch.Watcher, project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "OWN_GRACE", 0.0)  # (no grace period after the lock is let go)
    lock = project.store.locks_dir / "regen.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        watcher.on_event(FileClosedNoWriteEvent(str(exp(project))))
    finally:
        os.close(fd)
    settle(watcher, monkeypatch)
    assert watch_lines(project) == []
    watcher.on_event(FileClosedNoWriteEvent(str(exp(project))))
    settle(watcher, monkeypatch)
    assert len(watch_lines(project)) == 1


def test_watch_lines_are_committed(watcher: watch.Watcher, project: Project,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    watcher.log_debounce = 0.0
    watcher.on_event(FileClosedNoWriteEvent(str(exp(project))))
    settle(watcher, monkeypatch)
    watcher.tick()
    out = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=project.store.home,
                         capture_output=True, text=True).stdout
    assert out.strip() == "chore: update access log"


# --- the CLI and real processes -------------------------------------------------------------------

def cortex(store: Store, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cortexfs", "--home", str(store.home), *args],
                          capture_output=True, text=True, timeout=60, **kw)


def git(store: Store, *args: str) -> str:
    # never `git status` here: it may read atom files, which the watcher would count
    return subprocess.run(["git", *args], cwd=store.home, capture_output=True, text=True,
                          check=True).stdout


def committed(store: Store, rel: str) -> str | None:
    proc = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=store.home, capture_output=True,
                          text=True)
    return proc.stdout if proc.returncode == 0 else None


class OwnWork:
    """The watcher's own work as a second inotify watch of context/ sees it: the index.md
    files it regenerates, and the sentinel file it makes and removes once a regeneration and
    its commit are over (a read until that file's event counts as the watcher's own)."""

    SENTINEL = ".cortex-watch."

    def __init__(self, context: Path) -> None:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        self.context = context
        self.names: list[str] = []  # index.md, sentinels and markers, in inotify's order
        names = self.names

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                for path in (event.src_path, getattr(event, "dest_path", "")):
                    name = os.path.basename(os.fsdecode(path))
                    if name == "index.md" or name.startswith((OwnWork.SENTINEL, ".marker.")):
                        names.append(name)

        self.observer = Observer()
        self.observer.schedule(Handler(), str(context), recursive=True)
        self.observer.start()

    def wait_done(self) -> None:
        """Wait until the regeneration that wrote the last index.md so far has ended.

        A marker file made now comes, in this watch's events, after everything done
        until now (inotify keeps the order): once it is seen, the last index.md written
        before it must be followed by a sentinel."""
        marker = self.context / f".marker.{len(self.names)}.tmp"  # (*.tmp: git ignores it)
        marker.touch()
        marker.unlink()

        def done() -> bool:
            seen = list(self.names)
            if marker.name not in seen:
                return False
            rest = [n for n in seen if not n.startswith(".marker.")]
            return bool(rest) and rest[-1].startswith(self.SENTINEL)

        wait_until(done, what="the end of the watcher's own work")

    def stop(self) -> None:
        self.observer.stop()
        self.observer.join(timeout=10)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify read events")
def test_watcher_end_to_end(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    store = project.store
    monkeypatch.setenv(watch.DEBOUNCE_ENV, "0.1")
    own = OwnWork(store.context)
    started = cortex(store, "watch")
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.split("(pid ")[1].split(")")[0])
    try:
        status = cortex(store, "watch", "--status")
        assert status.returncode == 0 and f"pid {pid}" in status.stdout
        second = cortex(store, "watch", "--foreground")
        assert second.returncode == 1 and "already running" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1

        index = "context/projects/flywheel/experiments/index.md"
        exp(project).write_text(atom_text("EXP-001", "first try"))
        wait_until(lambda: "first try" in (committed(store, index) or ""), what="first index")
        assert committed(store, "context/projects/flywheel/experiments/EXP-001.md")
        assert "index: regenerate flywheel" in git(store, "log", "--format=%s")

        # an editor's atomic save: temp file, then rename over the atom
        tmp = project.root / "experiments" / ".EXP-001.md.swx"
        tmp.write_text(atom_text("EXP-001", "second try"))
        os.replace(tmp, exp(project))
        wait_until(lambda: "second try" in (committed(store, index) or ""), what="re-save")

        exp(project, "EXP-002.md").write_text(atom_text("EXP-002", "short-lived"))
        wait_until(lambda: "EXP-002" in (committed(store, index) or ""), what="EXP-002")
        exp(project, "EXP-002.md").unlink()
        wait_until(lambda: "EXP-002" not in (committed(store, index) or "x EXP-002"),
                   what="EXP-002 gone")
        assert committed(store, "context/projects/flywheel/experiments/EXP-002.md") is None
        assert watch_lines(project) == []  # regeneration read the atoms: not counted

        # a read in the very moment the watcher finishes its own commit would count as its
        # own: let it get there first
        own.wait_done()
        subprocess.run(["cat", str(exp(project))], capture_output=True, check=True)
        wait_until(lambda: watch_lines(project), what="the watch line of `cat`")
    except AssertionError:
        print((store.logs_dir / "watch.log").read_text())  # shown by pytest on failure
        raise
    finally:
        stopped = cortex(store, "watch", "--stop")
        own.stop()
    assert stopped.returncode == 0 and f"pid {pid}" in stopped.stdout
    # (the watcher logged every read it held on its way out: no second line came)
    assert [x["file"] for x in watch_lines(project)] == ["EXP-001.md"]
    assert cortex(store, "watch", "--status").returncode == 1
    assert not watch.pid_file(store).exists()
    # the watch line was committed on the way out
    log = committed(store, "context/projects/flywheel/_meta/access-log.jsonl") or ""
    assert '"tool": "watch"' in log
    again = cortex(store, "watch", "--stop")
    assert again.returncode == 0 and "nothing to stop" in again.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")
def test_a_started_watcher_is_already_watching(project: Project) -> None:
    """`cortex watch` returns on the watcher's pid file, which was written before its
    observer was in place: a change made at once could be missed. And a killed watcher's
    pid file, left over, is not taken for the new one's meanwhile."""
    store = project.store
    watch.pid_file(store).write_text("4194304\n")  # (above any pid: none's)
    pid = watch.start_background(store)
    try:
        log = (store.logs_dir / layout.WATCH_LOG).read_text()
        assert f"watching {store.context} (pid {pid})" in log
    finally:
        assert watch.stop(store) == pid
    assert not watch.pid_file(store).exists()


def test_foreground_stops_on_sigterm(project: Project) -> None:
    store = project.store
    proc = subprocess.Popen([sys.executable, "-m", "cortexfs", "--home", str(store.home),
                             "watch", "--foreground"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: watch.running_pid(store) == proc.pid, what="the watcher")
        proc.terminate()
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "watching" in out and "stopped" in out
    assert watch.running_pid(store) is None


def test_watch_needs_a_store_and_one_mode(cli: Any, store: Store, tmp_path: Path) -> None:
    both = cli("watch", "--stop", "--status")
    assert both.exit_code == 1 and "at most one of" in both.stderr
    none = cli("--home", str(tmp_path / "nowhere"), "watch", "--status")
    assert none.exit_code == 1 and "cortex init" in none.stderr
    status = cli("watch", "--status")
    assert status.exit_code == 1 and "no watcher running" in status.stdout
