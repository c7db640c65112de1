"""cortexfs.store: where a store lives, which projects it holds, and the errors that say
what to do when a store or a project is not there."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from cortexfs import scaffold
from cortexfs.errors import (
    InvalidInputError,
    NotAStoreError,
    OutsideStoreError,
    ProjectNotFoundError,
)
from cortexfs.store import Project, Store, check_project_name


def test_a_store_s_places(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    assert store.context == tmp_path / "s" / "context"
    assert store.projects_dir == tmp_path / "s" / "context" / "projects"
    assert (store.cache_dir.name, store.logs_dir.name, store.locks_dir.name,
            store.templates_dir.name) == (".cache", "logs", ".locks", "templates")
    project = Project(store, "flywheel")
    assert project.root == store.projects_dir / "flywheel"
    assert project.access_log == project.root / "_meta" / "access-log.jsonl"
    assert store.rel(project.access_log) == "projects/flywheel/_meta/access-log.jsonl"
    assert store.rel(str(store.context)) == "."
    assert store.home_rel(project.access_log) == "context/projects/flywheel/_meta/access-log.jsonl"
    assert store.home_rel(str(store.home / "logs")) == "logs"


def test_at_and_open_resolve_the_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_HOME", str(tmp_path / "env"))
    assert Store.at().home == tmp_path / "env"
    assert Store.at(tmp_path / "option").home == tmp_path / "option"
    with pytest.raises(NotAStoreError, match=r"^no cortex store at .*/env: run `cortex init` "
                                             r"\(or point CORTEX_HOME / --home at an existing "
                                             r"store\)$"):
        Store.open()
    scaffold.init_store(Store.at())
    assert Store.open().exists()


def test_a_linked_context_is_not_a_store(tmp_path: Path) -> None:
    real = Store(tmp_path / "real")
    scaffold.init_store(real)
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "context").symlink_to(real.context)
    with pytest.raises(OutsideStoreError):
        Store.open(tmp_path / "linked")


def test_projects_are_the_plain_folders_sorted(store: Store, tmp_path: Path) -> None:
    for name in ("zeta", "alpha"):
        scaffold.new_project(store, name)
    (store.projects_dir / ".hidden").mkdir()
    (store.projects_dir / "_private").mkdir()
    (store.projects_dir / "a-file").write_text("x")
    (tmp_path / "elsewhere").mkdir()
    (store.projects_dir / "linked").symlink_to(tmp_path / "elsewhere")
    assert store.project_names() == ["alpha", "zeta"]
    assert [p.name for p in store.projects()] == ["alpha", "zeta"]
    assert [p.name for p in store.select(None)] == ["alpha", "zeta"]
    assert [p.name for p in store.select(["zeta", "alpha", "zeta"])] == ["zeta", "alpha"]
    assert store.folder_projects(store.context / "archive") == []


def test_a_missing_project_says_how_to_make_it_or_what_was_meant(store: Store) -> None:
    scaffold.new_project(store, "flywheel")
    assert store.project("flywheel") == Project(store, "flywheel")
    with pytest.raises(ProjectNotFoundError) as typo:
        store.project("flywheal")
    assert str(typo.value) == ("no project named 'flywheal': did you mean 'flywheel'? "
                               "(projects: flywheel)")
    with pytest.raises(ProjectNotFoundError) as new:
        store.project("other")
    assert str(new.value) == ("no project named 'other' (projects: flywheel); create it with "
                              "`cortex project new other`")


@pytest.mark.parametrize("name", ["", ".hidden", "-dash", "a/b", "..", "a" * 65, "tab\there",
                                  "end\n", "ünï"])
def test_bad_project_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidInputError, match=r"^invalid project name .*: use letters, "):
        check_project_name(name)


def test_good_project_names_pass() -> None:
    for name in ("a", "A1", "my.project_2-x", "9" * 64):
        check_project_name(name)


def test_a_store_names_not_its_path(cli: Any, store: Store, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A store copied or moved to another path is the same store: no file in it (git's,
    the caches, the logs) names the path it was made at, and the copy is clean and current.
    The tests' store templates (tests/stores.py) rest on this."""
    monkeypatch.setenv("CORTEX_AUTOCOMMIT", "0")
    monkeypatch.setenv("CORTEX_EMBED_MODEL", "off")
    for args in (["project", "new", "flywheel"],
                 ["new", "exp", "-s", "Cache invalidation cut stale reads", "-t", "cache"],
                 ["new", "k", "-s", "Invalidate caches on write", "-e", "EXP-001"],
                 ["show", "EXP-001"], ["tasks", "add", "Measure the cache"],
                 ["index", "regen", "--all"], ["validate"], ["ready"], ["brief"],
                 ["recall", "cache"], ["maintain"], ["list"], ["status"], ["commit"]):
        result = cli(*args)
        assert result.exit_code in (0, 1), (args, result.output)
    # a cache keeps what a file's or folder's stat data vouches for only once it is older
    # than the racy window: age everything, so that every cache keeps all it can
    aged = time.time_ns() - 10 * 10**9
    for path in [store.home, *store.home.rglob("*")]:
        if not path.is_symlink():
            os.utime(path, ns=(aged, aged))
    for args in (["index", "regen", "--all"], ["validate"], ["ready"], ["brief"],
                 ["recall", "cache"]):
        assert cli(*args).exit_code in (0, 1), args
    needle = str(store.home).encode()
    assert [p for p in sorted(store.home.rglob("*"))
            if p.is_file() and needle in p.read_bytes()] == []

    moved = tmp_path / "moved"
    shutil.copytree(store.home, moved, symlinks=True)
    monkeypatch.setenv("CORTEX_HOME", str(moved))
    assert cli("index", "regen", "--all", "--check").exit_code == 0
    assert cli("commit").stdout == "nothing to commit under context/\n"
    copied = cli("validate", "-f", "json")
    monkeypatch.setenv("CORTEX_HOME", str(store.home))
    assert copied.stdout.replace(str(moved), "STORE") == \
        cli("validate", "-f", "json").stdout.replace(str(store.home), "STORE")
