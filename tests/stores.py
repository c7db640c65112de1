"""The stores tests start from: a hermetic HOME, stores built once per test process and
copied into each test, and `cortex` run in-process."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cortexfs.store import Store


def hermetic(monkeypatch: pytest.MonkeyPatch, root: Path) -> Path:
    """Point HOME and CORTEX_HOME into `root` and pin git's identity and config."""
    home = root / "home"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CORTEX_HOME", str(root / "cortex"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Cortex Test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@cortexfs.invalid")
    monkeypatch.delenv("CORTEX_DEBUG", raising=False)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    return home


class Templates:
    """Stores built once per test process and copied into each test that asks for one.

    Building a store runs `git init` and a first commit (~90 ms), and a populated one a few
    `cortex` commands (~0.4 s); a copy takes ~10 ms. A copy is the same bytes at another path,
    which is the same store: nothing in a store names its own path (test_a_store_names_not_its_path
    in tests/test_store.py checks it)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def build(self, name: str, build: Callable[[Store], None]) -> Path:
        """The store `build` makes, in a hermetic HOME of its own, made the first time only."""
        source = self.root / name
        if not source.exists():
            with pytest.MonkeyPatch.context() as monkeypatch:
                hermetic(monkeypatch, source)
                build(Store(source / "cortex"))
        return source / "cortex"

    def copy(self, name: str, build: Callable[[Store], None], dest: Path) -> Store:
        """A copy at `dest` of the store `build` makes, replacing what is there."""
        source = self.build(name, build)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(source, dest, symlinks=True)
        return Store(dest)


class Cli:
    """Runs `cortex` in-process with CliRunner; stdout and stderr kept apart."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Any:
        from cortexfs.cli.main import app

        return self.runner.invoke(app, list(args), input=input, catch_exceptions=False)


def initialised(s: Store) -> None:
    """What `cortex init` makes of a store, committed (no projects)."""
    from cortexfs import git, scaffold
    from cortexfs.commit import commit_paths

    created = scaffold.init_store(s)
    written = git.ensure_repo(s)
    commit_paths(s, [*created, *written], "chore: initialise cortex store")


def with_flywheel(s: Store) -> None:
    """An initialised store and the project `flywheel`, scaffolded and not committed."""
    from cortexfs import scaffold

    initialised(s)
    scaffold.new_project(s, "flywheel")
