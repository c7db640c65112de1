"""CLI conventions every command keeps (issue 15): --home and --format before or after the
command name, JSON from every command that prints a report or a list, shell completion,
counts worded right."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_commands import cli_commands
from stores import Cli, Templates, initialised

from cortexfs.store import Store
from cortexfs.wording import plural

# Arguments that make each command do its job on the `walked` store. A command missing here
# fails the walk: a new command must say how it prints JSON (or join NO_JSON, saying why).
ARGS: dict[tuple[str, ...], list[str]] = {
    ("init",): [],
    ("project", "new"): ["beta"],
    ("project", "list"): [],
    ("project", "archive"): ["gamma"],
    ("project", "unarchive"): ["gamma"],
    ("project", "rm"): ["beta"],
    ("new",): ["exp", "-p", "flywheel", "-s", "Walked", "-t", "walk"],
    ("show",): ["EXP-001"],
    ("list",): [],
    ("edit",): ["EXP-001"],
    ("supersede",): ["EXP-001", "--by", "EXP-002"],
    ("invalidate",): ["EXP-002", "--reason", "walked over"],
    ("mv",): ["EXP-003", "-p", "gamma"],
    ("rm",): ["EXP-004"],
    ("validate",): [],
    ("index", "regen"): ["--all"],
    ("hooks", "install"): [],
    ("hooks", "uninstall"): [],
    ("hooks", "status"): [],
    ("watch",): ["--status"],
    ("commit",): [],
    ("sync",): [],
    ("status",): [],
    ("remote", "set"): ["https://example.invalid/store.git"],
    ("tasks", "add"): ["Walk every command", "-p", "flywheel"],
    ("tasks", "list"): [],
    ("tasks", "done"): ["T-1", "-p", "flywheel"],
    ("tasks", "archive"): [],
    ("decision", "new"): ["Walk the commands"],
    ("maintain",): [],
    ("ready",): [],
    ("memory", "lint"): [],
    ("memory", "stats"): [],
    ("memory", "prune"): ["--dry-run"],
    ("brief",): [],
    ("recall",): ["walked", "--no-dense"],
    ("view",): [],
}
NO_JSON = {("mcp",): "speaks the MCP protocol on stdout"}
EXIT_1 = {("ready",), ("validate",), ("watch",), ("memory", "lint")}  # a failed check


def test_every_command_is_walked() -> None:
    assert set(cli_commands()) == set(ARGS) | set(NO_JSON)


def _walked(s: Store) -> None:
    initialised(s)
    cli = Cli()
    for args in (["project", "new", "flywheel"], ["project", "new", "gamma"],
                 *(["new", "exp", "-p", "flywheel", "-s", f"Atom {n}", "-t", "x"]
                   for n in range(1, 5))):
        assert cli(*args).exit_code == 0
    (s.context / "user" / "MEMORY.md").write_text("<!-- neocortex.md v1.0 -->\n")


@pytest.fixture
def walked(store: Store, templates: Templates, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Store:
    """Two projects, flywheel with EXP-001..004, and a MEMORY.md: built once per test process
    and copied in (tests/stores.py)."""
    monkeypatch.setenv("CORTEX_AUTOCOMMIT", "0")
    monkeypatch.setenv("CORTEX_EMBED_MODEL", "off")
    monkeypatch.setenv("EDITOR", "true")  # saves the file unchanged
    monkeypatch.chdir(tmp_path)
    walked = templates.copy("walked", _walked, store.home)
    monkeypatch.setenv("CORTEX_HOME", str(tmp_path / "not-the-store"))  # --home says it
    return walked


def test_every_command_prints_json_and_takes_home_after_its_name(cli: Any,
                                                                  walked: Store) -> None:
    for path in [c for c in cli_commands() if c in ARGS]:
        if path == ("project", "rm"):
            assert cli("--home", str(walked.home), "project", "new", "beta").exit_code == 0
        args = [*path, *ARGS[path], "--home", str(walked.home), "--format", "json"]
        result = cli(*args)
        assert result.exit_code == (1 if path in EXIT_1 else 0) or (
            path in EXIT_1 and result.exit_code == 0), (args, result.output)
        try:
            json.loads(result.stdout)
        except ValueError:
            pytest.fail(f"`cortex {' '.join(args)}` printed no JSON: {result.stdout[:300]!r}")


@pytest.mark.parametrize("where", ["before", "after"])
def test_global_options_go_before_or_after_the_command(cli: Any, walked: Store,
                                                       where: str) -> None:
    options = ["--home", str(walked.home), "-f", "json"]
    args = [*options, "list"] if where == "before" else ["list", *options]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["total"] == 4
    nested = ["tasks", "list", *options] if where == "after" else [*options, "tasks", "list"]
    assert json.loads(cli(*nested).stdout) == {"tasks": [], "problems": []}


def test_a_bad_format_is_one_line(cli: Any, walked: Store) -> None:
    result = cli("list", "--home", str(walked.home), "--format", "xml")
    assert result.exit_code == 1
    assert result.stderr == ("error: unknown --format 'xml': use text or json (see `cortex "
                             "list --help`)\n")


def test_shell_completion_is_on() -> None:
    """`cortex --show-completion` and the completion protocol itself (what the installed
    script runs on each Tab)."""
    cortex = Path(sys.executable).parent / "cortex"
    env = {**os.environ, "_CORTEX_COMPLETE": "complete_bash", "COMP_WORDS": "cortex supe",
           "COMP_CWORD": "1"}
    proc = subprocess.run([str(cortex)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["supersede"], proc.stdout + proc.stderr
    # typer takes the shell from the process tree, not from an argument: from a bash, as
    # in a user's terminal (`; exit`: a lone command would be exec'd, leaving no bash
    # above it). Run under a plain `sh`, the old form said "Shell sh not supported".
    shown = subprocess.run(["bash", "-c", f"'{cortex}' --show-completion; exit $?"],
                           capture_output=True, text=True, timeout=60)
    assert "_CORTEX_COMPLETE=complete_bash" in shown.stdout


def test_counts_are_worded_right(cli: Any, walked: Store) -> None:
    assert plural(1, "error") == "1 error" and plural(2, "error") == "2 errors"
    assert plural(1, "entry") == "1 entry" and plural(3, "entry") == "3 entries"
    assert plural(0, "match") == "0 matches" and plural(1200, "atom", sep=True) == "1,200 atoms"
    home = ["--home", str(walked.home)]
    (walked.context / "user" / "MEMORY.md").write_text(  # one error: no counts line
        "<!-- neocortex.md v1.0 -->\n<!-- agent: a -->\n<!-- consolidated: 2026-01-01 -->\n"
        "\n# Memory\n\n" + "".join(f"## {name}\n\n" for name in (
            "Identity", "People", "Projects", "Knowledge", "Patterns", "Lessons", "Context")))
    lint = cli("memory", "lint", *home)
    assert "1 error," in lint.stdout and "1 errors" not in lint.stdout
    assert cli("project", "new", "solo", *home).exit_code == 0
    assert cli("new", "exp", "-p", "solo", "-s", "Only one", "-t", "x", *home).exit_code == 0
    brief = cli("brief", *home).stdout
    assert "(1 experiment, 0 knowledge, 0 patterns)" in brief and "1 experiments" not in brief
    ready = cli("ready", *home).stdout
    assert "gap(s)" not in ready and "file(s)" not in ready


# Private names tests still reach, each waiting for its module's owner to make it public or to
# give the test another way in (/work/notes/s21-requests.md says why each is wanted). The list
# only shrinks: a name that is no longer reached must leave it.
PRIVATE_PENDING: set[str] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_names_reached(source: str) -> set[str]:
    """The private names of cortexfs a test module reaches: imported (`from m import _x`),
    read as an attribute of something it imported from cortexfs (`m._x`, `m.C._y`) or of an
    object it holds (`index._walk`: named as written), or named to setattr / getattr /
    monkeypatch (`setattr(m, "_x", …)`, "cortexfs.m._x"). Other packages' private names
    (`os._exit`) and an object's own (`self._x`) are not cortexfs's."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name → what it is in cortexfs
    others: set[str] = {"self", "cls"}  # names of other packages' modules and objects
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                if alias.name.split(".")[0] == "cortexfs":
                    bound[name] = alias.name if alias.asname else "cortexfs"
                else:
                    others.add(name)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (node.module or "").split(".")[0] == "cortexfs":
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    if _private(alias.name):
                        found.add(f"{node.module}.{alias.name}")
                else:
                    others.add(alias.asname or alias.name)

    def named(target: ast.expr) -> str | None:
        """What `target` is in cortexfs (its own text for an object the test holds)."""
        if isinstance(target, ast.Name) and target.id not in others:
            return bound.get(target.id, target.id)
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = [node.attr]
            base = node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if (where := named(base)) is not None:
                names = [where, *reversed(chain)]
                for end, name in enumerate(names[1:], 2):
                    if _private(name):
                        found.add(".".join(names[:end]))
                        break
        elif isinstance(node, ast.Call) and node.args and (
                getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in (
                "setattr", "getattr", "delattr", "hasattr"):
            target = node.args[0]
            name = node.args[1] if len(node.args) > 1 else None
            if (where := named(target)) is not None and isinstance(name, ast.Constant) \
                    and isinstance(name.value, str) and _private(name.value):
                found.add(f"{where}.{name.value}")
            elif isinstance(target, ast.Constant) and isinstance(target.value, str) \
                    and target.value.startswith("cortexfs.") \
                    and any(_private(part) for part in target.value.split(".")):
                found.add(target.value)  # monkeypatch.setattr("cortexfs.m._x", …)
    return found


def test_the_private_name_finder_finds_each_way_in() -> None:
    source = ("import cortexfs.hook as h\nfrom cortexfs import brief, sync as s\n"
              "from cortexfs.view.build import _Shares, build\n"
              "import os\nh._tokens('x'); brief.Brief._cache; s.push; build.__doc__\n"
              "os._exit; self._mine; index._walk(); setattr(index, '_x', 1)\n"
              "monkeypatch.setattr(s, '_push', None); setattr(brief, 'public', 1)\n"
              "monkeypatch.setattr('cortexfs.ready._file_checks', None)\n")
    assert private_names_reached(source) == {
        "cortexfs.hook._tokens", "cortexfs.brief.Brief._cache", "cortexfs.sync._push",
        "cortexfs.view.build._Shares", "cortexfs.ready._file_checks", "index._walk",
        "index._x"}


def test_no_test_reaches_a_private_name_of_cortexfs() -> None:
    """Tests go through the public API, so a module can change its insides freely."""
    tests = Path(__file__).parent
    reached: dict[str, list[str]] = {}
    for path in sorted(tests.rglob("*.py")):
        for name in private_names_reached(path.read_text()):
            reached.setdefault(name, []).append(str(path.relative_to(tests)))
    new = {name: where for name, where in reached.items() if name not in PRIVATE_PENDING}
    assert not new, f"tests reach private names (test the public API instead): {new}"
    assert not PRIVATE_PENDING - set(reached), (
        f"no longer reached, remove from PRIVATE_PENDING: {PRIVATE_PENDING - set(reached)}")


# Suites that test a promise across modules rather than one module: kept apart, named for it.
CROSS_CUTTING = {
    "test_access_log_integrity.py": "no access-log line lost under real faults",
    "test_bad_input.py": "every bad input is one line, exit 1, nothing half-written",
    "test_claude_code.py": "the README's Claude Code section, run as written",
    "test_conventions.py": "conventions every command and test keeps",
    "test_dependencies.py": "each declared package does real work",
    "test_edit_race.py": "a rewrite never loses a concurrent save",
    "test_fuzz.py": "fuzzed inputs never crash a command",
    "test_hook_concurrency.py": "concurrent hooks lose no line",
    "test_hostile_remote.py": "nothing from a sync remote is executed",
    "test_invariant.py": "the store holds together under random use",
    "test_lint.py": "ruff and mypy",
    "test_sync_recovery.py": "a sync killed at any moment is recovered",
    "test_view_browser.py": "the site in a real browser",
}

def test_the_tests_mirror_the_package() -> None:
    """tests/test_<m>.py for cortexfs/<m>.py, tests/<package>/test_<m>.py for
    cortexfs/<package>/<m>.py (tests/cli/ for the command-line modules), and the
    cross-cutting suites by name."""
    tests = Path(__file__).parent
    package = tests.parent / "cortexfs"
    strays = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        if rel.as_posix() in CROSS_CUTTING:
            continue
        if not (package / rel.parent / rel.name.removeprefix("test_")).is_file():
            strays.append(rel.as_posix())
    assert not strays, f"test files named after no module (rename, or add to CROSS_CUTTING): " \
                       f"{strays}"
    modules = {p.relative_to(package).with_suffix("").as_posix()
               for p in package.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")
               and p.parent.name != "cli"}
    untested = [m for m in sorted(modules)
                if not (tests / os.path.dirname(m) / f"test_{os.path.basename(m)}.py").is_file()]
    assert not untested, f"library modules without a test file of their own: {untested}"
