"""The stores tests start from: a hermetic HOME, stores built once per test process and
copied into each test, and `cortex` run in-process."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cortexfs.store import Project, Store


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
    """Runs `cortex` in-process with CliRunner; stdout and stderr kept apart.

    CliRunner turns the typer `app` into click commands on every run: ~25 ms for 38 commands,
    most of what a short command costs. The click command built for the first run serves the
    rest of the test process (`_built_once`): it keeps nothing of a run
    (`CortexGroup.make_context` resets cortex's own state)."""

    def __init__(self) -> None:
        _built_once()
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Any:
        from cortexfs.cli.main import app

        return self.runner.invoke(app, list(args), input=input, catch_exceptions=False)


def _built_once() -> None:
    """Make CliRunner build cortex's `app` into click commands once per test process (any
    other app, such as `app_for`'s slim copies, is built on each run as before)."""
    import typer.testing

    from cortexfs.cli.main import app

    build = typer.testing._get_command
    if getattr(build, "built_for", None) is app:
        return
    built = build(app)

    def get_command(typer_app: Any) -> Any:
        return built if typer_app is app else build(typer_app)

    get_command.built_for = app  # type: ignore[attr-defined]
    typer.testing._get_command = get_command


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


ATOM_DEFAULTS: dict[str, dict[str, str]] = {
    "EXP": {"folder": "experiments"},
    "K": {"folder": "knowledge", "extra": "evidence: [EXP-001]\n"},
    "PAT": {"folder": "patterns", "extra": "source-experiments: [EXP-001]\n"},
}


def write_atom(project: Project, atom_id: str, summary: str = "A summary", tags: str = "[a, b]",
               date: str = "2026-03-09", extra: str | None = None, body: str = "\nBody.\n",
               frontmatter: str | None = None) -> Path:
    """Write an atom file of `project` by hand (the conftest's `write_atom` fixture)."""
    spec = ATOM_DEFAULTS[atom_id.split("-")[0]]
    if frontmatter is None:
        frontmatter = (f"id: {atom_id}\ndate: {date}\nproject: {project.name}\n"
                       f"summary: \"{summary}\"\ntags: {tags}\n"
                       + (spec.get("extra", "") if extra is None else extra))
    path = project.root / spec["folder"] / f"{atom_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{frontmatter}---\n{body}", encoding="utf-8")
    return path
