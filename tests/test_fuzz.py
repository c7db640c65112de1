"""Fuzzing the trust boundary (issue 12): hostile hook payloads, frontmatter and TASKS.yaml.

Derandomized (the same examples every run) and sized to stay well under a minute in all;
benchmarks/fuzz.py runs the same strategies for longer, against real hook processes. For
every input: the hook exits 0 within its CPU bound and never logs "a bug"; a command exits
0 or 1 with one-line messages and no "internal error"; a parser raises nothing but its
own error; and nothing outside the store (reached through planted links) is touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fuzz_inputs import frontmatter, payload, tasks_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortexfs import hook
from cortexfs.errors import AtomParseError
from cortexfs.store import Project, Store

FIXTURES = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
            HealthCheck.data_too_large, HealthCheck.large_base_example]
HOOK_CPU = 1.0  # seconds: the hook's bound is MAX_SECONDS of work plus the JSON parse


def fuzz(examples: int) -> Callable[[Any], Any]:
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                    suppress_health_check=FIXTURES)


@pytest.fixture
def hostile(store: Store, project: Project, write_atom: Callable[..., Path],
            outside: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A store with atoms and links out of it; the paths a payload may name."""
    monkeypatch.setenv("CORTEX_AUTOCOMMIT", "0")
    atoms = [write_atom(f"EXP-00{i}") for i in (1, 3)] + [write_atom("K-001")]
    o = outside.root
    links = {project.root / "experiments" / "EXP-009.md": o / "atom.md",
             project.root / "knowledge" / "K-009.md": o / "passwd",
             store.projects_dir / "evil": o / "project",
             store.context / ".hippocampus": o / "hippocampus"}
    for link, target in links.items():
        link.symlink_to(target)
    project.access_log.parent.mkdir(exist_ok=True)
    outside.reset_atimes()
    return [str(p) for p in (*atoms, *links, o / "passwd", o / "atom.md", store.projects_dir)]


def _sane(result: Any, args: tuple[str, ...]) -> None:
    assert result.exit_code in (0, 1), (args, result.output[-2000:])
    assert "internal error" not in result.stderr and "Traceback" not in result.output, args
    lines = result.stderr.splitlines()
    assert all(line.startswith(("error: ", "warning: ")) for line in lines), (args, lines)
    assert sum(line.startswith("error: ") for line in lines) <= 1, (args, lines)


@fuzz(250)
@given(data=st.data())
def test_hook_payloads(hostile: list[str], store: Store, outside: Any, data: Any) -> None:
    raw = data.draw(payload(hostile))
    log = store.logs_dir / "hook.log"
    seen = log.stat().st_size if log.exists() else 0
    start = time.process_time()
    assert hook.main(["--home", str(store.home)], raw) == 0
    assert time.process_time() - start < HOOK_CPU
    new = log.read_bytes()[seen:].decode() if log.exists() else ""
    assert "a bug" not in new, new
    outside.assert_untouched("the hook")


@fuzz(400)
@given(text=frontmatter())
def test_frontmatter_parses_or_says_why(text: str) -> None:
    from cortexfs.frontmatter import decode, parse

    try:
        parse(decode(text.encode("utf-8", "surrogatepass"), "EXP-002.md"), "EXP-002.md")
    except AtomParseError as e:
        assert "\n" not in str(e)


@fuzz(20)
@given(text=frontmatter())
def test_commands_on_a_fuzzed_atom(hostile: list[str], cli: Any, project: Project,
                                   outside: Any, text: str) -> None:
    (project.root / "experiments" / "EXP-002.md").write_bytes(
        text.encode("utf-8", "surrogatepass"))
    for args in (("validate",), ("index", "regen", "--all", "--no-commit"), ("brief",),
                 ("recall", "a", "--no-dense")):
        _sane(cli(*args), args)
    outside.assert_untouched("a command")


@fuzz(200)
@given(text=tasks_file())
def test_tasks_yaml_parses_into_problems(text: str) -> None:
    from cortexfs import tasks

    tf = tasks.parse(text, Path("TASKS.yaml"))
    assert all("\n" not in p.message for p in tf.problems)


@fuzz(20)
@given(text=tasks_file())
def test_commands_on_a_fuzzed_tasks_file(hostile: list[str], cli: Any, project: Project,
                                         outside: Any, text: str) -> None:
    (project.root / "TASKS.yaml").write_text(text)
    for args in (("tasks", "list"), ("tasks", "add", "more", "-p", "flywheel", "--no-commit"),
                 ("tasks", "done", "T-1", "-p", "flywheel", "--no-commit"), ("validate",)):
        _sane(cli(*args), args)
    outside.assert_untouched("a tasks command")
