"""`cortex hooks install|uninstall|status`: Claude Code settings.json, merged idempotently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cortexfs import claude_settings
from cortexfs.store import Project, Store

SCRIPT = Path(__file__).resolve().parent.parent / "hooks" / "memory-ref-tracker"

USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"], "deny": []},
    "env": {"FOO": "bar"},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier -w"}]},
            {"matcher": "Read|Grep|Bash", "hooks": [{"type": "command", "command": "my-audit"}]},
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def settings(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def ours(data: dict[str, Any], event: str = "PostToolUse") -> list[tuple[str | None, dict]]:
    return [(g.get("matcher"), h) for g in data.get("hooks", {}).get(event, [])
            for h in g["hooks"] if "memory-ref-tracker" in h["command"] or " brief" in h["command"]]


def test_install_into_a_fresh_project(cli: Any, store: Store, tmp_path: Path) -> None:
    proj = tmp_path / "work"
    proj.mkdir()
    result = cli("hooks", "install", "--project-dir", str(proj))
    assert result.exit_code == 0, result.output
    path = proj / ".claude" / "settings.local.json"  # the default: machine-specific paths
    assert "installed the cortex hook" in result.stdout and str(path) in result.stdout
    data = settings(path)
    [(matcher, entry)] = ours(data)
    assert matcher == "Read|Grep|Bash"
    assert entry["type"] == "command" and entry["timeout"] == claude_settings.HOOK_TIMEOUT
    assert entry["command"] == claude_settings.hook_command(store.home)
    assert str(SCRIPT) in entry["command"] and f"--home {store.home}" in entry["command"]
    assert entry["command"].startswith(sys.executable + " -I -S ")
    assert list(data) == ["hooks"] and list(data["hooks"]) == ["PostToolUse"]


def test_installed_command_works_from_anywhere_without_path(
        cli: Any, project: Project, tmp_path: Path) -> None:
    """What Claude Code does: `sh -c COMMAND` in the agent's cwd, whatever the environment."""
    atom = project.root / "experiments" / "EXP-007.md"
    atom.write_text("x")
    proj = tmp_path / "work"
    proj.mkdir()
    assert cli("hooks", "install", "--project-dir", str(proj)).exit_code == 0
    [(_, entry)] = ours(settings(proj / ".claude" / "settings.local.json"))
    payload = json.dumps({"session_id": "s1", "cwd": str(proj), "tool_name": "Read",
                          "tool_input": {"file_path": str(atom)}})
    env = {"HOME": os.environ["HOME"], "CORTEX_AUTOCOMMIT": "0",
           "CORTEX_HOME": str(tmp_path / "not-this-one")}  # no PATH; a misleading CORTEX_HOME
    proc = subprocess.run(["/bin/sh", "-c", entry["command"]], input=payload.encode(),
                          capture_output=True, env=env, cwd="/", timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    [line] = project.access_log.read_text().splitlines()
    assert json.loads(line)["file"] == "EXP-007.md" and json.loads(line)["session"] == "s1"


def test_install_twice_changes_nothing(cli: Any, store: Store, tmp_path: Path) -> None:
    proj = tmp_path / "work"
    proj.mkdir()
    assert cli("hooks", "install", "--project-dir", str(proj)).exit_code == 0
    path = proj / ".claude" / "settings.local.json"
    before = path.read_bytes()
    os.utime(path, (1, 1))
    again = cli("hooks", "install", "--project-dir", str(proj))
    assert again.exit_code == 0 and "already installed" in again.stdout
    assert path.read_bytes() == before and path.stat().st_mtime == 1


def test_merge_keeps_everything_else_and_uninstall_restores_it(
        cli: Any, store: Store, tmp_path: Path) -> None:
    proj = tmp_path / "work"
    (proj / ".claude").mkdir(parents=True)
    path = proj / ".claude" / "settings.json"
    original = json.dumps(USER_SETTINGS, indent=2) + "\n"
    path.write_text(original)
    assert cli("hooks", "install", "--project-dir", str(proj), "--session-start",
               "--shared").exit_code == 0
    data = settings(path)
    assert {k: v for k, v in data.items() if k != "hooks"} == \
        {k: v for k, v in USER_SETTINGS.items() if k != "hooks"}
    post = data["hooks"]["PostToolUse"]
    assert post[:2] == USER_SETTINGS["hooks"]["PostToolUse"]  # theirs, untouched, first
    assert len(ours(data)) == 1 and len(ours(data, "SessionStart")) == 1
    assert data["hooks"]["Stop"] == USER_SETTINGS["hooks"]["Stop"]
    [(_, brief)] = ours(data, "SessionStart")
    assert brief["command"] == (f"{sys.executable} -P -m cortexfs --home {store.home} brief "
                                "--max-chars 9000")
    result = cli("hooks", "uninstall", "--project-dir", str(proj))
    assert result.exit_code == 0 and "removed" in result.stdout
    assert path.read_text() == original
    again = cli("hooks", "uninstall", "--project-dir", str(proj))
    assert again.exit_code == 0 and "nothing to do" in again.stdout
    assert path.read_text() == original


def test_stale_entry_is_replaced_where_it_stands(cli: Any, store: Store, tmp_path: Path) -> None:
    path = tmp_path / "home" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    old = "/opt/old/bin/python /opt/old/hooks/memory-ref-tracker --home /old/store"
    path.write_text(json.dumps({"hooks": {"PostToolUse": [
        {"matcher": "Read|Grep|Bash", "hooks": [{"type": "command", "command": "first"},
                                                {"type": "command", "command": old},
                                                {"type": "command", "command": "last"}]},
        {"matcher": "Read", "hooks": [{"type": "command", "command": old + " --dup"}]},
    ]}}, indent=4))
    status = cli("hooks", "status")
    assert "stale" in status.stdout
    assert cli("hooks", "install", "--user").exit_code == 0
    data = settings(path)
    groups = data["hooks"]["PostToolUse"]
    assert len(groups) == 1  # the group holding only the duplicate is gone
    assert [h["command"] for h in groups[0]["hooks"]] == \
        ["first", claude_settings.hook_command(store.home), "last"]
    assert path.read_text().startswith('{\n    "hooks"')  # their 4-space indent is kept
    assert "current" in cli("hooks", "status").stdout


def test_dry_run_prints_the_diff_and_writes_nothing(cli: Any, store: Store,
                                                   tmp_path: Path) -> None:
    proj = tmp_path / "work"
    proj.mkdir()
    result = cli("hooks", "install", "--project-dir", str(proj), "--dry-run")
    assert result.exit_code == 0
    assert "+++ " in result.stdout and '+            "command": ' in result.stdout
    assert "dry run" in result.stdout
    assert not (proj / ".claude").exists()
    assert cli("hooks", "install", "--project-dir", str(proj)).exit_code == 0
    before = (proj / ".claude" / "settings.local.json").read_text()
    dry = cli("hooks", "uninstall", "--project-dir", str(proj), "--dry-run")
    assert dry.exit_code == 0 and '-            "command": ' in dry.stdout
    assert (proj / ".claude" / "settings.local.json").read_text() == before


def test_user_and_local_targets(cli: Any, store: Store, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli("hooks", "install", "--user").exit_code == 0
    assert ours(settings(tmp_path / "home" / ".claude" / "settings.json"))
    proj = tmp_path / "work"
    proj.mkdir()
    monkeypatch.chdir(proj)
    assert cli("hooks", "install").exit_code == 0  # default: the current folder, local
    assert ours(settings(proj / ".claude" / "settings.local.json"))
    assert not (proj / ".claude" / "settings.json").exists()
    assert cli("hooks", "install", "--shared").exit_code == 0
    assert ours(settings(proj / ".claude" / "settings.json"))
    listed = cli("hooks", "status", "--format", "json")
    assert {Path(h["settings"]).name for h in json.loads(listed.stdout)} == \
        {"settings.json", "settings.local.json"}


@pytest.mark.parametrize("text, message", [
    ('{"hooks": {', "is not valid JSON (line 1 column 12"),
    ("[1, 2]", "holds a JSON list, not an object"),
    ('{"hooks": []}', '"hooks" must be an object'),
    ('{"hooks": {"PostToolUse": {}}}', '"hooks.PostToolUse" must be a list'),
    ('{"hooks": {"PostToolUse": [3]}}', '"hooks.PostToolUse[0]" must be an object'),
    ('{"hooks": {"PostToolUse": [{"hooks": "x"}]}}', '"hooks.PostToolUse[0]" must be'),
])
def test_malformed_settings_are_refused_untouched(cli: Any, store: Store, tmp_path: Path,
                                                 text: str, message: str) -> None:
    path = tmp_path / "work" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    for command in ("install", "uninstall"):
        result = cli("hooks", command, "--project-dir", str(tmp_path / "work"), "--shared")
        assert result.exit_code == 1
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert "Traceback" not in result.output
        assert path.read_text() == text


def test_empty_settings_file_is_an_empty_object(cli: Any, store: Store, tmp_path: Path) -> None:
    path = tmp_path / "work" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text("")
    assert cli("hooks", "install", "--project-dir", str(tmp_path / "work"),
               "--shared").exit_code == 0
    assert ours(settings(path))


@pytest.mark.parametrize("args, message", [
    (["--user", "--project-dir", "."], "either --user or --project-dir"),
    (["--user", "--local"], "--local is for a project"),
    (["--local", "--shared"], "either --local or --shared"),
    (["--budget", "9000"], "--budget goes with --session-start"),
    (["--session-start", "--budget", "100"], "--budget 100 is too small for a brief"),
    (["--project-dir", "{missing}"], "no folder {missing}"),
])
def test_bad_arguments(cli: Any, store: Store, tmp_path: Path, args: list[str],
                       message: str) -> None:
    missing = tmp_path / "missing" / "x"  # (never a path outside the test's own folder)
    result = cli("hooks", "install", *(a.format(missing=missing) for a in args))
    assert result.exit_code == 1 and message.format(missing=missing) in result.stderr
    assert not missing.exists()


def test_install_needs_a_store(cli: Any, tmp_path: Path) -> None:
    result = cli("hooks", "install", "--project-dir", str(tmp_path))
    assert result.exit_code == 1 and "cortex init" in result.stderr
    assert not (tmp_path / ".claude").exists()


def test_interpreter_is_never_a_shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shim = tmp_path / "shims" / "python3"
    shim.parent.mkdir()
    shim.write_text('#!/usr/bin/env bash\nexec pyenv exec python3 "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(shim))
    real = claude_settings.interpreter()
    assert real != str(shim) and os.path.realpath(real) == os.path.realpath("/proc/self/exe")
    monkeypatch.setattr(sys, "executable", "/work/venv/bin/python")  # a venv link is kept
    assert claude_settings.interpreter() == "/work/venv/bin/python"


def test_paths_with_spaces_are_quoted(tmp_path: Path) -> None:
    home = tmp_path / "my store"
    home.mkdir()  # (the hook logs into a home that exists, and makes none)
    command = claude_settings.hook_command(home)
    assert f"'{home}'" in command
    proc = subprocess.run(["/bin/sh", "-c", command], input=b"", capture_output=True,
                          timeout=30)
    assert proc.returncode == 0
    assert "empty payload" in (home / "logs" / "hook.log").read_text()


def test_session_start_for_one_project(cli: Any, project: Project, tmp_path: Path) -> None:
    proj = tmp_path / "work"
    proj.mkdir()
    bad = cli("hooks", "install", "--project-dir", str(proj), "--brief-project", "flywheel")
    assert bad.exit_code == 1 and "goes with --session-start" in bad.stderr
    missing = cli("hooks", "install", "--project-dir", str(proj), "--session-start",
                  "--brief-project", "nope")
    assert missing.exit_code == 1 and "no project named 'nope'" in missing.stderr
    assert not (proj / ".claude").exists()
    ok = cli("hooks", "install", "--project-dir", str(proj), "--session-start",
             "--brief-project", "flywheel")
    assert ok.exit_code == 0
    [(matcher, entry)] = ours(settings(proj / ".claude" / "settings.local.json"),
                              "SessionStart")
    assert matcher is None and entry["command"].endswith(" brief flywheel --max-chars 9000")
    assert "SessionStart: current" in cli("hooks", "status", "--project-dir", str(proj)).stdout
    proc = subprocess.run(["/bin/sh", "-c", entry["command"]], capture_output=True, text=True,
                          cwd="/", timeout=60)
    assert proc.returncode == 0 and "flywheel" in proc.stdout


# --- the MCP server (issue 15) -----------------------------------------------------------------

CLAUDE_JSON: dict[str, Any] = {
    "numStartups": 12, "theme": "dark",
    "projects": {"/work/x": {"allowedTools": [], "mcpServers": {}}},
    "mcpServers": {"other": {"type": "stdio", "command": "other-server", "args": []}},
}


def test_mcp_in_the_project_is_portable_and_in_the_user_scope_absolute(
        cli: Any, store: Store, tmp_path: Path) -> None:
    proj = tmp_path / "work"
    proj.mkdir()
    result = cli("hooks", "install", "--project-dir", str(proj), "--mcp")
    assert result.exit_code == 0, result.output
    assert "installed the MCP server in" in result.stdout
    data = settings(proj / ".mcp.json")
    # store at $HOME/../cortex in the tests: not under HOME, so written whole
    assert data == {"mcpServers": {"cortex": {
        "type": "stdio", "command": "cortex", "args": ["mcp"],
        "env": {"CORTEX_HOME": f"${{CORTEX_HOME:-{store.home}}}"}}}}
    user_file = tmp_path / "home" / ".claude.json"
    user_file.write_text(json.dumps(CLAUDE_JSON, indent=2) + "\n")
    original = user_file.read_text()
    assert cli("hooks", "install", "--user", "--mcp").exit_code == 0
    data = settings(user_file)
    assert {k: v for k, v in data.items() if k != "mcpServers"} == \
        {k: v for k, v in CLAUDE_JSON.items() if k != "mcpServers"}
    assert data["mcpServers"]["other"] == CLAUDE_JSON["mcpServers"]["other"]
    assert data["mcpServers"]["cortex"] == {
        "type": "stdio", "command": sys.executable,
        "args": ["-P", "-m", "cortexfs", "--home", str(store.home), "mcp"], "env": {}}
    status = cli("hooks", "status", "--project-dir", str(proj))
    assert f"{proj / '.mcp.json'}: mcpServers: current" in status.stdout
    assert f"{user_file}: mcpServers: current" in status.stdout
    assert cli("hooks", "uninstall", "--user", "--mcp").exit_code == 0
    assert user_file.read_text() == original
    assert cli("hooks", "uninstall", "--project-dir", str(proj), "--mcp").exit_code == 0
    assert settings(proj / ".mcp.json") == {"mcpServers": {}}


def test_a_store_under_home_is_written_with_a_tilde(cli: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    home_store = tmp_path / "home" / ".cortex"
    monkeypatch.setenv("CORTEX_HOME", str(home_store))
    assert cli("init").exit_code == 0
    proj = tmp_path / "work"
    proj.mkdir()
    assert cli("hooks", "install", "--project-dir", str(proj), "--mcp").exit_code == 0
    entry = settings(proj / ".mcp.json")["mcpServers"]["cortex"]
    assert entry["env"] == {"CORTEX_HOME": "${CORTEX_HOME:-~/.cortex}"}


def test_a_malformed_mcp_file_is_refused_untouched(cli: Any, store: Store,
                                                   tmp_path: Path) -> None:
    proj = tmp_path / "work"
    proj.mkdir()
    (proj / ".mcp.json").write_text('{"mcpServers": []}')
    result = cli("hooks", "install", "--project-dir", str(proj), "--mcp")
    assert result.exit_code == 1 and '"mcpServers" must be an object' in result.stderr
    assert (proj / ".mcp.json").read_text() == '{"mcpServers": []}'


def test_status_says_what_is_not_set_up(cli: Any, store: Store, tmp_path: Path) -> None:
    proj = tmp_path / "work"
    proj.mkdir()
    assert cli("hooks", "install", "--project-dir", str(proj)).exit_code == 0
    out = cli("hooks", "status", "--project-dir", str(proj)).stdout
    assert "PostToolUse: current" in out
    assert "not set up: SessionStart (`cortex hooks install --session-start`)" in out
    assert "not set up: mcpServers (`cortex hooks install --mcp`)" in out


def test_an_old_session_start_entry_is_stale(cli: Any, store: Store, tmp_path: Path) -> None:
    path = tmp_path / "work" / ".claude" / "settings.local.json"
    path.parent.mkdir(parents=True)
    old = f"{sys.executable} -P -m cortexfs --home {store.home} brief"  # no size limit
    path.write_text(json.dumps({"hooks": {"SessionStart": [
        {"hooks": [{"type": "command", "command": old}]}]}}))
    out = cli("hooks", "status", "--project-dir", str(tmp_path / "work")).stdout
    assert "SessionStart: stale" in out


# --- the SessionStart brief arrives whole ------------------------------------------------------

@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2,000-atom store (scripts/gen_corpus.py), built once for this module. Its brief is
    many times the default budget, and the cut banner counts in thousands as at 10,000 atoms
    (which took 3.4 s to build and 1.2 s per brief, against 0.7 s and 0.4 s)."""
    out = tmp_path_factory.mktemp("corpus") / "store"
    script = Path(__file__).resolve().parent.parent / "scripts" / "gen_corpus.py"
    subprocess.run([sys.executable, str(script), str(out), "--atoms", "2000", "--no-git"],
                   check=True, capture_output=True, timeout=300)
    return out


@pytest.mark.parametrize("budget", [None, 5000])
def test_the_installed_session_start_prints_at_most_its_budget(
        cli: Any, big_store: Path, tmp_path: Path, budget: int | None) -> None:
    proj = tmp_path / "work"
    proj.mkdir()
    args = ["--budget", str(budget)] if budget else []
    assert cli("--home", str(big_store), "hooks", "install", "--project-dir", str(proj),
               "--session-start", *args).exit_code == 0
    [(_, entry)] = ours(settings(proj / ".claude" / "settings.local.json"), "SessionStart")
    proc = subprocess.run(["/bin/sh", "-c", entry["command"]], capture_output=True,
                          text=True, cwd="/", timeout=120,
                          env={"HOME": os.environ["HOME"], "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    limit = budget or claude_settings.BRIEF_CHARS
    from cortexfs.brief import utf16_len

    assert utf16_len(proc.stdout) <= limit  # as Claude Code counts it
    assert len(proc.stdout) > limit * 0.9  # the room is used, not wasted
    assert "[cortex brief: cut to fit" in proc.stdout.rstrip().splitlines()[-1]


def test_removing_the_mcp_server_changes_only_its_entry(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    for data in ({"mcpServers": {"other": {"command": "x"}}}, {"mcpServers": None}, {"a": 1}):
        path.write_text(json.dumps(data))
        change = claude_settings.plan_mcp_removal(path)
        assert not change.changed and change.after is None
    path.write_text(json.dumps({"a": 1, "mcpServers": {"cortex": {}, "other": {}}}))
    change = claude_settings.plan_mcp_removal(path)
    assert change.changed
    assert json.loads(change.after or "") == {"a": 1, "mcpServers": {"other": {}}}
    assert not claude_settings.plan_mcp_removal(tmp_path / "missing.json").changed
