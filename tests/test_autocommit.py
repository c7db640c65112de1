"""Access-log auto-commit: the hook hands off to a detached, debounced committer."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import accesslog, autocommit, git, hook, layout
from cortexfs.commit import commit_paths
from cortexfs.store import Project, Store

MESSAGE = "chore: update access log"


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_AUTOCOMMIT_DEBOUNCE", "0.4")
    monkeypatch.delenv("CORTEX_AUTOCOMMIT", raising=False)


def wait_until(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {check.__doc__ or check}")
        time.sleep(0.05)


def git_out(store: Store, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=store.home, capture_output=True, text=True,
                          check=True).stdout


def log_commits(store: Store) -> int:
    return git_out(store, "log", "--format=%s").splitlines().count(MESSAGE)


def committer_idle(store: Store) -> bool:
    """no committer holds the lock"""
    return not autocommit.is_locked(store.home / ".locks" / layout.AUTOCOMMIT_LOCK)


def log_clean(store: Store, project: Project) -> bool:
    """the access log is committed as it is"""
    rel = str(project.access_log.relative_to(store.home))
    return git_out(store, "status", "--porcelain", "--", rel) == ""


def read(project: Project, atom: Path, session: str = "s") -> None:
    payload = json.dumps({"session_id": session, "cwd": "/", "tool_name": "Read",
                          "tool_input": {"file_path": str(atom)}})
    assert hook.main(["--home", str(project.store.home)], payload.encode()) == 0


@pytest.fixture
def atom(project: Project) -> Path:
    from cortexfs import scaffold  # noqa: F401 - the project fixture scaffolds it

    path = project.root / "experiments" / "EXP-001.md"
    path.write_text("---\nid: EXP-001\n---\n")
    commit_paths(project.store, [project.root], "project: add flywheel")
    return path


def test_thousand_reads_end_up_in_git_in_a_few_commits(
        store: Store, project: Project, atom: Path) -> None:
    for i in range(1000):
        read(project, atom, session=f"s{i % 7}")
    wait_until(lambda: log_clean(store, project) and committer_idle(store))
    committed = git_out(store, "show", f"HEAD:{project.access_log.relative_to(store.home)}")
    lines = committed.splitlines()
    assert len(lines) == 1000 and all(json.loads(line)["file"] == "EXP-001.md" for line in lines)
    assert 1 <= log_commits(store) <= 5, git_out(store, "log", "--oneline")
    assert not (store.logs_dir / "hook.log").exists()


def test_reads_after_a_commit_start_a_new_batch(store: Store, project: Project,
                                                atom: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(autocommit.DEBOUNCE_ENV, "0.1")  # (one read: nothing to batch)
    read(project, atom)
    wait_until(lambda: log_clean(store, project) and committer_idle(store))
    assert log_commits(store) == 1
    monkeypatch.setenv(autocommit.DEBOUNCE_ENV, "0.4")
    read(project, atom)
    read(project, atom)
    wait_until(lambda: log_clean(store, project) and committer_idle(store))
    assert log_commits(store) == 2
    assert len(project.access_log.read_text().splitlines()) == 3


def test_only_access_logs_are_committed(store: Store, project: Project, atom: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(autocommit.DEBOUNCE_ENV, "0.1")  # (one read: nothing to batch)
    (store.home / "mine.txt").write_text("user's staged work\n")
    git_out(store, "add", "mine.txt")
    atom.write_text("---\nid: EXP-001\n---\nedited by the user, not committed\n")
    read(project, atom)
    wait_until(lambda: log_clean(store, project) and committer_idle(store))
    changed = git_out(store, "show", "--name-only", "--format=", "HEAD").split()
    assert changed == [str(project.access_log.relative_to(store.home))]
    status = git_out(store, "status", "--porcelain")
    assert "A  mine.txt" in status and " M context/projects/flywheel/experiments/EXP-001.md" \
        in status


def test_held_index_lock_means_retry_not_loss(store: Store, project: Project, atom: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from git_holders import hold_index_lock, release

    monkeypatch.setattr(git, "LOCK_WAIT_SECONDS", 0.2)
    accesslog.access_logs(str(store.home))
    holder = hold_index_lock(store.home)  # a live git process: its lock is not stale
    monkeypatch.setenv("CORTEX_AUTOCOMMIT", "0")  # run the committer in-process instead
    read(project, atom)
    done: list[int] = []
    # (max_delay: the retry comes a quarter of a second after a failure, not after the
    # second it waits at the least otherwise)
    worker = threading.Thread(target=lambda: done.append(
        autocommit.run(str(store.home), debounce=0.1, max_delay=0.25, retry_for=30)))
    worker.start()
    wait_until(lambda: "will retry" in (store.logs_dir / layout.AUTOCOMMIT_LOG).read_text()
               if (store.logs_dir / layout.AUTOCOMMIT_LOG).exists() else False)
    assert worker.is_alive()
    release(holder)
    worker.join(timeout=30)
    assert done and done[0] >= 1
    # the line is in HEAD once the lock is gone (the lines never left the work tree)
    committed = git_out(store, "show", f"HEAD:{project.access_log.relative_to(store.home)}")
    assert committed == project.access_log.read_text() and log_commits(store) >= 1
    assert log_clean(store, project)  # and the index caught up with HEAD


def test_a_second_committer_leaves_at_once(store: Store, project: Project) -> None:
    fd = autocommit.try_lock(store.locks_dir / layout.AUTOCOMMIT_LOCK)
    assert fd is not None
    try:
        start = time.monotonic()
        assert autocommit.run(str(store.home), debounce=5) == 0
        assert time.monotonic() - start < 1
        assert autocommit.request(str(store.home)) is False  # one is pending: no spawn
    finally:
        os.close(fd)


def test_no_git_no_committer(tmp_path: Path, project: Project, atom: Path) -> None:
    import shutil

    shutil.rmtree(project.store.home / ".git")
    assert autocommit.request(str(project.store.home)) is False
    read(project, atom)
    assert not (project.store.home / ".locks" / layout.AUTOCOMMIT_LOCK).exists()


def test_disabled_by_environment(store: Store, project: Project, atom: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_AUTOCOMMIT", "0")
    read(project, atom)
    # no committer was asked for: `request` takes the committer's lock before it starts one
    assert not (store.locks_dir / layout.AUTOCOMMIT_LOCK).exists()
    assert not log_clean(store, project) and log_commits(store) == 0


def test_debounce_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(autocommit.DEBOUNCE_ENV, "2.5")
    assert autocommit.debounce_seconds() == 2.5
    monkeypatch.setenv(autocommit.DEBOUNCE_ENV, "soon")
    assert autocommit.debounce_seconds() == autocommit.DEFAULT_DEBOUNCE
