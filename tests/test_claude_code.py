"""The README's "Use with Claude Code", run as written against a fake home: the commands of
its shell block, then what Claude Code would do with the files they leave — run the
SessionStart hook, run the PostToolUse hook on a Read, and start the MCP server from
.mcp.json (expanding ${VAR:-default} as Claude Code does). Claude Code itself is not run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from cortexfs.autocommit import is_locked

README = Path(__file__).resolve().parent.parent / "README.md"
BIN = Path(sys.executable).parent  # where the console script `cortex` is


def readme_block() -> str:
    text = README.read_text()
    section = text[text.index("## Use with Claude Code"):]
    section = section[:section.index("\n## ", 4)]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the section lost its shell block"
    return block.group(1)


def expand(value: str, env: dict[str, str]) -> str:
    """Claude Code's expansion in .mcp.json: ${VAR} and ${VAR:-default}."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}",
                  lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, str]:
    """A user's environment: a fresh HOME, cortex on PATH, no CORTEX_HOME (~/.cortex)."""
    home = tmp_path / "home"
    env = {"HOME": str(home), "PATH": f"{BIN}:/usr/bin:/bin", "LANG": "C.UTF-8",
           "CORTEX_AUTOCOMMIT": "0", "CORTEX_EMBED_MODEL": "off",
           **{k: v for k, v in os.environ.items() if k.startswith("GIT_")}}
    return env


def test_the_readme_section_works_start_to_finish(machine: dict[str, str]) -> None:
    home = Path(machine["HOME"])
    script = "set -eu\n" + readme_block()
    done = subprocess.run(["bash", "-c", script], env=machine, capture_output=True, text=True,
                          cwd=home, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PostToolUse: current" in done.stdout and "SessionStart: current" in done.stdout
    assert "mcpServers: current" in done.stdout
    repo = home / "code" / "myproject"
    settings = json.loads((repo / ".claude" / "settings.local.json").read_text())
    [session] = [h for g in settings["hooks"]["SessionStart"] for h in g["hooks"]]
    [tracker] = [h for g in settings["hooks"]["PostToolUse"] for h in g["hooks"]]

    # SessionStart: what the agent is shown first, whole
    shown = subprocess.run(["/bin/sh", "-c", session["command"]], cwd=repo, text=True,
                           capture_output=True, env={"HOME": str(home)}, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("# Session brief — myproject\n")
    assert len(shown.stdout) <= 9000

    # PostToolUse: the agent reads an atom; the read is logged
    store = home / ".cortex"
    added = subprocess.run(["cortex", "new", "exp", "-s", "First finding", "-t", "setup"],
                           env=machine, capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    atom = Path(added.stdout.strip())
    payload = {"session_id": "s1", "cwd": str(repo), "tool_name": "Read",
               "tool_input": {"file_path": str(atom)}}
    # (the git identity a user has; a short quiet time for the access-log committer the
    # hook starts, which is waited for below rather than left running after the test)
    hook_env = {"HOME": str(home), "CORTEX_AUTOCOMMIT_DEBOUNCE": "0.1",
                **{k: v for k, v in machine.items() if k.startswith("GIT_")}}
    read = subprocess.run(["/bin/sh", "-c", tracker["command"]], input=json.dumps(payload),
                          text=True, capture_output=True, env=hook_env, cwd=repo, timeout=30)
    assert read.returncode == 0 and read.stdout == ""
    log = store / "context" / "projects" / "myproject" / "_meta" / "access-log.jsonl"
    assert json.loads(log.read_text().splitlines()[-1])["file"] == atom.name
    deadline = time.monotonic() + 30
    while is_locked(store / ".locks" / "autocommit.lock"):
        assert time.monotonic() < deadline, "the access-log committer never finished"
        time.sleep(0.05)
    last = subprocess.run(["git", "log", "-1", "--format=%s", "--", str(log)], cwd=store,
                          env=machine, capture_output=True, text=True, check=True)
    assert last.stdout.strip() == "chore: update access log"

    # MCP: the server .mcp.json names, started as Claude Code starts it
    entry = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["cortex"]
    env = {**machine, **{k: expand(v, machine) for k, v in entry["env"].items()}}
    assert env["CORTEX_HOME"] == "~/.cortex"  # no CORTEX_HOME set: the default

    async def session_tools() -> Any:
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env,
                                       cwd=str(repo))
        async with Client(params) as client:
            return await client.call_tool("list_projects", {})

    result = anyio.run(session_tools)
    assert not result.is_error
    assert '"myproject"' in "".join(getattr(b, "text", "") for b in result.content)
