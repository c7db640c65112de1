"""cortexfs.cli.main: the command surface — every command documents itself, and --help
stays light."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from cli_commands import cli_commands

from cortexfs.cli.main import app

HEAVY = ("yaml", "frontmatter", "git", "jinja2", "watchdog", "bm25s", "mcp", "numpy")


def test_every_command_has_help(cli) -> None:
    commands = cli_commands()
    assert ("init",) in commands and ("new",) in commands
    import typer.main

    root = typer.main.get_command(app)
    for path in commands:
        result = cli(*path, "--help")
        assert result.exit_code == 0, (path, result.output)
        cmd = root
        for part in path:
            cmd = cmd.commands[part]  # type: ignore[attr-defined]
        assert (cmd.help or "").strip(), f"`cortex {' '.join(path)}` has no help text"


def test_help_imports_no_heavy_module() -> None:
    code = ("import sys, json\n"
            "from cortexfs.cli.main import app\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert not heavy, f"`cortex --help` imports {heavy}: import them inside the commands"


def test_version(cli) -> None:
    result = cli("--version")
    assert result.exit_code == 0 and result.stdout.startswith("cortex ")


def test_a_console_script_run_builds_only_the_command_named() -> None:
    import typer.main
    from typer.testing import CliRunner

    from cortexfs.cli.main import app_for

    runner = CliRunner()
    for args in (["new", "exp"], ["--home", "/x", "new"], ["--home=/x", "-f", "json", "new"],
                 ["-fjson", "tasks", "add"], ["--format=json", "new", "--help"]):
        built: Any = typer.main.get_command(app_for(args))
        assert list(built.commands) == [a for a in args if a in ("new", "tasks")]
    for args in ([], ["--help"], ["--version"], ["nosuch"], ["-x", "new"], ["--", "new"],
                 ["--home"]):
        assert app_for(args) is app
    # the same help, usage line and errors as with every command built
    for path in cli_commands():
        for args in ([*path, "--help"], [*path, "--no-such-option"]):
            whole = runner.invoke(app, args)
            slim = runner.invoke(app_for(args), args)
            assert (slim.exit_code, slim.output) == (whole.exit_code, whole.output), args


def test_the_cli_is_imported_without_the_collector_and_a_command_runs_with_it() -> None:
    code = ("import gc, sys\n"
            "import cortexfs.__main__\n"
            "import cortexfs.cli.main as main\n"
            "seen = [gc.isenabled()]\n"
            "main.app_for = lambda args: lambda: seen.append(gc.isenabled())\n"
            "main.run()\n"
            "print(seen)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[False, True]"
