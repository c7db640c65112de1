"""Hermetic test fixtures: every test gets its own HOME, CORTEX_HOME and git identity."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cortexfs.store import Project, Store


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME and CORTEX_HOME into tmp_path and pin git's identity and config."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CORTEX_HOME", str(tmp_path / "cortex"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Cortex Test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@cortexfs.invalid")
    monkeypatch.delenv("CORTEX_DEBUG", raising=False)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    return home


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An initialised store (git repository included) with no projects."""
    from cortexfs import git, scaffold

    s = Store(tmp_path / "cortex")
    created = scaffold.init_store(s)
    written = git.ensure_repo(s)
    git.commit_paths(s, [*created, *written], "chore: initialise cortex store")
    return s


@pytest.fixture
def project(store: Store) -> Project:
    """A scaffolded project named `flywheel`."""
    from cortexfs import scaffold

    p, _ = scaffold.new_project(store, "flywheel")
    return p


class Cli:
    """Runs `cortex` in-process with CliRunner; stdout and stderr kept apart."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Any:
        from cortexfs.cli.main import app

        return self.runner.invoke(app, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def cli() -> Cli:
    return Cli()


ATOM_DEFAULTS: dict[str, dict[str, str]] = {
    "EXP": {"folder": "experiments"},
    "K": {"folder": "knowledge", "extra": "evidence: [EXP-001]\n"},
    "PAT": {"folder": "patterns", "extra": "source-experiments: [EXP-001]\n"},
}


@pytest.fixture
def write_atom(project: Project) -> Callable[..., Path]:
    """Write an atom file by hand: write_atom("EXP-001", summary=..., frontmatter=...)."""

    def _write(atom_id: str, summary: str = "A summary", tags: str = "[a, b]",
               date: str = "2026-03-09", extra: str | None = None, body: str = "\nBody.\n",
               frontmatter: str | None = None, target: Project | None = None) -> Path:
        prefix = atom_id.split("-")[0]
        spec = ATOM_DEFAULTS[prefix]
        proj = target or project
        if frontmatter is None:
            frontmatter = (f"id: {atom_id}\ndate: {date}\nproject: {proj.name}\n"
                           f"summary: \"{summary}\"\ntags: {tags}\n"
                           + (spec.get("extra", "") if extra is None else extra))
        path = proj.root / spec["folder"] / f"{atom_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\n{frontmatter}---\n{body}", encoding="utf-8")
        return path

    return _write
