"""cortexfs.regen.worker: a cold run split across two processes gives what one gives."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cortexfs import forked
from cortexfs.regen import (
    RegenResult,
    regenerate,
    worker,
)
from cortexfs.regen.run import Run
from cortexfs.store import Project, Store
from regen.helpers import log_line, realistic, write_log

# --- a cold run split across two processes ---------------------------------------------------


def two_projects(store: Store, project: Project, write_atom: Callable[..., Path]) -> Project:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    realistic(project, write_atom)
    for i in range(1, 6):
        write_atom(f"EXP-{i:03d}", target=other, summary=f"other {i}",
                   **({"frontmatter": "bad: [\n"} if i == 3 else {}))
    write_log(other, log_line("EXP-001.md", "2026-04-01T00:00:00.000Z"))
    return other


def outcome(store: Store, result: RegenResult) -> tuple[Any, ...]:
    files = {p.relative_to(store.home): p.read_text() for p in store.projects_dir.rglob("*.md")}
    return (sorted(result.written), sorted(str(e) for e in result.skipped),
            sorted(result.folded), files)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_worker_gives_the_same_result(
        store: Store, project: Project, write_atom: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    two_projects(store, project, write_atom)
    pristine = tmp_path / "pristine"
    shutil.copytree(store.home, pristine, symlinks=True)
    serial = outcome(store, regenerate(store))
    shutil.rmtree(store.home)
    shutil.copytree(pristine, store.home, symlinks=True)
    forks: list[list[str]] = []
    real_start = worker.start

    def start(*args: Any) -> Any:
        forks.append([p.name for p in args[1]])
        return real_start(*args)

    monkeypatch.setattr(worker, "FORK_MIN_FILES", 1)
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    monkeypatch.setattr(worker, "start", start)
    assert outcome(store, regenerate(store)) == serial
    assert forks == [["other"]]  # the larger cold project stays here, the other goes
    monkeypatch.setattr(worker, "start", real_start)
    assert regenerate(store).written == []  # warm: no worker, nothing to do


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_failing_worker_is_redone_in_process(
        store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    other = two_projects(store, project, write_atom)
    parent = os.getpid()
    real = Run.regenerate_project

    def dies_in_the_worker(self: Any, project: Project, result: Any) -> None:
        if os.getpid() != parent:
            raise RuntimeError("the worker dies")
        real(self, project, result)

    monkeypatch.setattr(worker, "FORK_MIN_FILES", 1)
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    monkeypatch.setattr(Run, "regenerate_project", dies_in_the_worker)
    result = regenerate(store)
    assert (project.root / "experiments" / "index.md").exists()
    assert (other.root / "experiments" / "index.md").exists()
    assert {Path(e.path).name for e in result.skipped} == {"EXP-003.md"}
    assert (other.root / "experiments" / "EXP-001.md") in result.folded


def test_no_worker_for_a_warm_or_small_run(store: Store, project: Project,
                                          write_atom: Callable[..., Path],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    two_projects(store, project, write_atom)
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    projects = store.projects()
    assert worker.share_out(projects) == (projects, [])  # below FORK_MIN_FILES
    monkeypatch.setattr(worker, "FORK_MIN_FILES", 1)
    assert worker.share_out(projects) == ([project], [store.project("other")])
    regenerate(store)
    assert worker.share_out(projects) == (projects, [])  # cached: warm
