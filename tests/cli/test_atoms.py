"""cortexfs.cli.atoms: `cortex new` writes and commits an atom (and ends with the quick exit,
as `cortex index regen` does); each bad input is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cortexfs.loader import atom_paths


def test_new_writes_atom_and_commits(cli, project) -> None:
    result = cli("new", "exp", "-p", "flywheel", "-s", "Registry extraction", "-t", "a,b")
    assert result.exit_code == 0, result.output
    path = Path(result.stdout.strip())
    assert path.name == "EXP-001.md"
    text = path.read_text()
    assert "id: EXP-001\n" in text and "tags: [a, b]\n" in text and "## Reflection" in text
    log = subprocess.run(["git", "log", "--format=%s", "-1"], cwd=project.store.home,
                         capture_output=True, text=True).stdout
    assert log.strip() == "atom: add EXP-001 — Registry extraction"
    second = cli("new", "exp", "-p", "flywheel", "-s", "Next", "-t", "a")
    assert Path(second.stdout.strip()).name == "EXP-002.md"


@pytest.mark.parametrize("args", [
    ["new", "exp", "-p", "flywheel", "-s", "Registry extraction", "-t", "a,b"],
    ["index", "regen", "--all", "--format", "json"]])
def test_new_and_regen_end_with_a_quick_exit_once_committed(project, args: list[str]) -> None:
    """The console script ends `cortex new` and `cortex index regen` with os._exit once
    their commit is made and their output flushed (no interpreter teardown)."""
    code = ("import atexit, sys; atexit.register(lambda: sys.stderr.write('torn down'));"
            "from cortexfs.__main__ import main; sys.argv[0] = 'cortex'; main()")
    proc = subprocess.run([sys.executable, "-c", code, "--home", str(project.store.home),
                           *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "torn down" not in proc.stderr  # the quick exit was taken
    assert proc.stdout.endswith("EXP-001.md\n" if args[0] == "new" else "}\n")
    status = subprocess.run(["git", "status", "--porcelain", "--", "context"],
                            cwd=project.store.home, capture_output=True, text=True).stdout
    assert status == ""


def test_new_scans_the_other_projects_while_it_writes(cli, project, monkeypatch) -> None:
    """The other projects are walked by a forked process while the atom is written
    (loader.Ahead): the store-wide files still show what a person changed there, the commit
    takes it along, and no process outlives the command, refused or not."""
    import os

    from cortexfs import loader, scaffold

    monkeypatch.setattr(loader, "AHEAD_MIN_FILES", 0)  # (forked even for these few files)

    children = Path(f"/proc/self/task/{os.getpid()}/children")
    before = set(children.read_text().split()) if children.exists() else set()
    other, _ = scaffold.new_project(project.store, "second")
    assert cli("new", "exp", "-p", "second", "-s", "Other project run", "-t", "a").exit_code == 0
    atom = other.root / "experiments" / "EXP-001.md"
    atom.write_text(atom.read_text().replace("Other project run", "Edited by hand"))
    result = cli("new", "exp", "-p", "flywheel", "-s", "Registry extraction", "-t", "a,b")
    assert result.exit_code == 0, result.output
    hippocampus = (project.store.context / "HIPPOCAMPUS.md").read_text()
    assert "Edited by hand" in hippocampus and "Registry extraction" in hippocampus
    status = subprocess.run(["git", "status", "--porcelain", "--", "context"],
                            cwd=project.store.home, capture_output=True, text=True).stdout
    assert status == ""
    refused = cli("new", "exp", "-p", "flywheel", "-s", "Registry extraction", "-t", "a,b",
                  "--strict")
    assert refused.exit_code == 1 and "nearly duplicates" in refused.stderr
    assert not children.exists() or set(children.read_text().split()) <= before


@pytest.mark.parametrize("args, message", [
    (["new", "zzz", "-p", "flywheel", "-s", "s", "-t", "a"], "unknown atom type"),
    (["new", "exp", "-p", "nope", "-s", "s", "-t", "a"], "no project named 'nope'"),
    (["new", "exp", "-p", "flywheel", "-s", "  ", "-t", "a"], "summary is empty"),
    (["new", "exp", "-p", "flywheel", "-s", "s", "-t", "has space"], "invalid tag"),
    (["new", "k", "-p", "flywheel", "-s", "s", "-t", "a"], "knowledge needs evidence"),
    (["new", "k", "-p", "flywheel", "-s", "s", "-t", "a", "-e", "EXP-009"], "does not exist"),
    (["new", "pat", "-p", "flywheel", "-s", "s", "-t", "a"], "source experiments"),
    (["new", "exp", "-p", "flywheel", "-s", "s", "-t", "a", "-l", "FOO-1"], "not an atom id"),
])
def test_new_bad_input(cli, project, args: list[str], message: str) -> None:
    result = cli(*args)
    assert result.exit_code == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not any(atom_paths(project))
