"""Bad input across commands (SPEC §11): one line that says what to do, exit 1, no crash."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs.store import Project


def _one_error_line(result: object) -> str:
    stderr: str = result.stderr  # type: ignore[attr-defined]
    assert result.exit_code == 1, stderr  # type: ignore[attr-defined]
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr
    return stderr


@pytest.mark.parametrize(("args", "says"), [
    (["recall", "foo", "--k", "abc"], "'abc' is not a valid int. (see `cortex recall --help`)"),
    (["brief", "--budget", "abc"], "(see `cortex brief --help`)"),
    (["tasks", "archive", "--older-than", "soon"], "(see `cortex tasks archive --help`)"),
    (["--bogus"], "No such option: --bogus (see `cortex --help`)"),
    (["bogus"], "No such command 'bogus'."),
    (["tasks", "bogus"], "(see `cortex tasks --help`)"),
    (["new", "exp"], "Missing option '--project'"),
    (["recall"], "Missing argument 'query'."),
    (["index", "regen", "--formt", "json"], "Possible options: --format"),
    (["memory", "lint", "a", "b"], "unexpected extra argument"),
])
def test_usage_errors_are_one_line_and_exit_1(cli, args: list[str], says: str) -> None:
    # click's own handling would print a boxed usage text and exit 2, which in cortex
    # means a bug (see cortexfs/cli/main.py)
    assert says in _one_error_line(cli(*args))


def test_a_group_without_a_command_prints_its_help_and_exits_1(cli) -> None:
    result = cli("tasks")
    assert result.exit_code == 1
    assert "Usage: cortex tasks" in result.output and "archive" in result.output


def test_recall_k_out_of_range_names_the_value_given(cli, project: Project) -> None:
    assert "not -1" in _one_error_line(cli("recall", "foo", "--k", "-1", "--no-dense"))


BOMB = "".join(
    ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"]
    + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9)])


@pytest.mark.parametrize("extra", [BOMB, "x: &a [*a]\n"], ids=["alias-bomb", "alias-loop"])
def test_an_atom_whose_yaml_aliases_explode_is_reported_not_a_crash(
        cli, write_atom: Callable[..., Path], extra: str) -> None:
    write_atom("EXP-001")
    bad = write_atom("EXP-002", frontmatter=("id: EXP-002\ndate: 2026-03-09\n"
                                             "project: flywheel\nsummary: s\ntags: [a]\n"
                                             + extra))
    before = bad.read_bytes()
    result = cli("validate", "flywheel")
    assert result.exit_code == 1
    assert "EXP-002.md:2  [frontmatter]" in result.stdout and "alias" in result.stdout
    regen = cli("index", "regen", "flywheel", "--no-commit")
    assert regen.exit_code == 0, regen.stderr
    assert "EXP-002.md:2: the YAML" in regen.stderr and "internal error" not in regen.stderr
    new = cli("new", "exp", "-p", "flywheel", "-s", "another", "-t", "a", "--no-commit")
    assert new.exit_code == 0, new.stderr
    assert bad.read_bytes() == before
