"""cortexfs.cli.index: `cortex index regen` — selection, commits, warnings, --check, JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from regen.helpers import git, isolate, realistic

from cortexfs.store import Project, Store


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixed clock, and no store-wide generators (as in tests/regen/)."""
    isolate(monkeypatch)

# --- the command -----------------------------------------------------------------------------


def test_cli_needs_a_selection(cli: Any, store: Store) -> None:
    result = cli("index", "regen")
    assert result.exit_code == 1
    assert "pass --all, or one or more project names" in result.stderr
    both = cli("index", "regen", "--all", "flywheel")
    assert both.exit_code == 1 and "not both" in both.stderr
    unknown = cli("index", "regen", "nope")
    assert unknown.exit_code == 1 and "no project named 'nope'" in unknown.stderr
    assert "Traceback" not in result.output + both.output + unknown.output


def test_cli_without_a_store(cli: Any) -> None:
    result = cli("index", "regen", "--all")
    assert result.exit_code == 1 and "cortex init" in result.stderr


def test_cli_regen_commits_and_warns(cli: Any, store: Store, project: Project,
                                     write_atom: Callable[..., Path]) -> None:
    realistic(project, write_atom)
    write_atom("EXP-009", frontmatter="id: [unclosed\n")
    result = cli("index", "regen", "flywheel")
    assert result.exit_code == 0, result.output
    assert "warning: context/projects/flywheel/experiments/EXP-009.md:3: invalid YAML" \
        in result.stderr
    assert "refs updated in 3 atoms, committed" in result.stdout
    assert git(store, "log", "-1", "--format=%s").strip() == "index: regenerate flywheel"
    # everything pending under context/ is committed, the malformed atom too (as it is:
    # it is the user's, and a later fix is committed the same way)
    assert git(store, "status", "--porcelain") == ""
    assert "EXP-009.md" in git(store, "show", "--name-only", "--format=", "HEAD")
    again = cli("index", "regen", "--all")
    assert again.exit_code == 0 and "indexes are up to date (1 project)" in again.stdout


def test_cli_regen_that_writes_nothing_commits_from_the_status_asked_early(
        cli: Any, store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """git status runs while the regeneration works: when it wrote nothing, that answer is
    what the commit takes (what was pending: a hand edit of an atom's body), and git is not
    asked again; when it wrote files, git is asked again after the writes."""
    from cortexfs import git as gitmod

    path = write_atom("EXP-001")
    assert cli("index", "regen", "--all").exit_code == 0
    assert git(store, "status", "--porcelain") == ""
    path.write_text(path.read_text() + "\nA note added by hand.\n")
    asked: list[object] = []
    real = gitmod.changes
    monkeypatch.setattr(gitmod, "changes", lambda *a, **k: asked.append(a) or real(*a, **k))
    result = cli("index", "regen", "--all")
    assert result.exit_code == 0, result.output
    assert "indexes are up to date" in result.stdout and asked == []
    assert git(store, "status", "--porcelain") == ""
    assert "EXP-001.md" in git(store, "show", "--name-only", "--format=", "HEAD")
    write_atom("EXP-002")  # a new row: the index is written, so git is asked after it
    result = cli("index", "regen", "--all")
    assert result.exit_code == 0 and len(asked) == 1
    assert git(store, "status", "--porcelain") == ""


def test_cli_regen_that_drains_set_aside_reads_asks_git_again(
        cli: Any, store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads set aside during a sync are appended to the log by the regeneration, which
    lists no file: git is asked after that write, and the log committed with the rest."""
    from cortexfs import accesslog, layout
    from cortexfs import git as gitmod

    write_atom("EXP-001")
    assert cli("index", "regen", "--all").exit_code == 0
    real = gitmod.changes_started

    def answered_at_once(*args: Any) -> Any:  # the early status done before any write
        answer = real(*args)()
        return lambda: answer

    monkeypatch.setattr(gitmod, "changes_started", answered_at_once)
    pending = store.home / layout.LOGS / layout.PENDING_READS / project.name
    pending.mkdir(parents=True)
    (pending / "1-1.jsonl").write_bytes(accesslog.format_line("EXP-404.md", "Read", "s"))
    result = cli("index", "regen", "--all")
    assert result.exit_code == 0 and "indexes are up to date" in result.stdout
    assert b"EXP-404.md" in project.access_log.read_bytes()
    assert git(store, "status", "--porcelain") == ""


def test_cli_check_and_no_commit(cli: Any, store: Store, project: Project,
                                 write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001")
    check = cli("index", "regen", "--all", "--check")
    assert check.exit_code == 1
    assert "would change: context/projects/flywheel/experiments/index.md" in check.stdout
    assert "out of date" in check.stderr
    assert not (project.root / "experiments" / "index.md").exists()
    head = git(store, "rev-parse", "HEAD")
    assert cli("index", "regen", "--all", "--no-commit").exit_code == 0
    assert git(store, "rev-parse", "HEAD") == head
    assert "index.md" in git(store, "status", "--porcelain", "--untracked-files=all")
    ok = cli("index", "regen", "--all", "--check")
    assert ok.exit_code == 0 and "up to date" in ok.stdout


def test_cli_json(cli: Any, store: Store, project: Project,
                  write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001")
    write_atom("EXP-002", frontmatter="- not a mapping\n")
    result = cli("index", "regen", "flywheel", "--format", "json", "--no-commit")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["projects"] == ["flywheel"]
    assert "context/projects/flywheel/experiments/index.md" in data["written"]
    assert data["skipped"] == [{"path": "context/projects/flywheel/experiments/EXP-002.md",
                                "line": 2, "reason": "frontmatter must be `key: value` lines, "
                                                     "not a list"}]
    assert data["committed"] is False
    bad = cli("index", "regen", "flywheel", "--format", "yaml")
    assert bad.exit_code == 1 and "unknown --format" in bad.stderr
