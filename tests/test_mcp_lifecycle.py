"""MCP parity (issue 15): every tool an agent needs for an atom's life, a project's tasks and
a commit, driven through the SDK's stdio client against `python -m cortexfs mcp` — good
calls and bad arguments, whose errors are one line in the tool's own words."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from cortexfs.store import Project, Store

pytest.importorskip("mcp")


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _data(result: Any) -> Any:
    assert not result.is_error, _text(result)
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(_text(result))


def run(store: Store, errlog: Path, body: Callable[[Any], Any]) -> Any:
    """`body(client)` against a server whose stderr goes to `errlog`."""
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME") or k.startswith("GIT_")}
    env.update(CORTEX_HOME=str(store.home), CORTEX_EMBED_MODEL="off", CORTEX_AUTOCOMMIT="0")
    command = f"exec {shlex.quote(sys.executable)} -m cortexfs mcp 2>>{shlex.quote(str(errlog))}"
    params = StdioServerParameters(command="/bin/sh", args=["-c", command], env=env)

    async def session() -> Any:
        async with Client(params) as client:
            return await body(client)

    return anyio.run(session)


def git(store: Store, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=store.home, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def atoms(project: Project, write_atom: Callable[..., Path]) -> Project:
    write_atom("EXP-001", summary="Cache invalidation on write cut stale reads",
               tags="[cache]")
    write_atom("EXP-002", summary="Shard rebalancing doubled tail latency", tags="[shard]")
    write_atom("K-001", summary="Invalidate caches on write", tags="[cache]",
               extra="evidence: [EXP-001]\nlinks: [EXP-002]\n")
    from cortexfs import commit
    from cortexfs.regen import regenerate

    commit.commit_change(project.store, commit.Change(regenerate(project.store).written, "setup"))
    return project


def test_every_lifecycle_tool_end_to_end(atoms: Project, tmp_path: Path) -> None:
    store = atoms.store
    errlog = tmp_path / "server.err"

    async def body(client: Any) -> dict[str, Any]:
        call = client.call_tool
        out: dict[str, Any] = {}
        out["projects"] = await call("list_projects", {})
        out["show"] = await call("show_atom", {"atom_id": "EXP-001"})
        out["list"] = await call("list_atoms", {"kind": "exp", "limit": 10})
        out["add"] = await call("add_atom", {  # no project: the store has one
            "kind": "exp", "summary": "Write-through caching kept reads fresh",
            "tags": ["cache"], "body": "## Results\n\nFresh.\n"})
        out["update"] = await call("update_atom", {
            "atom_id": "EXP-003", "summary": "Write-through caching kept every read fresh",
            "tags": ["cache", "write-through"], "links": ["EXP-001"]})
        out["supersede"] = await call("supersede", {"atom_id": "EXP-001", "by": "EXP-003"})
        out["status"] = await call("set_status", {"atom_id": "EXP-002",
                                                  "status": "challenged:EXP-003"})
        out["invalidate"] = await call("invalidate", {"atom_id": "EXP-002",
                                                      "reason": "miswired load generator"})
        out["task_add"] = await call("add_task", {"text": "Measure write latency",
                                                  "priority": "P1"})
        out["task_list"] = await call("list_tasks", {})
        out["task_done"] = await call("complete_task", {"task_id": "T-1"})
        (atoms.root / "STATUS.md").write_text((atoms.root / "STATUS.md").read_text()
                                              + "\nEdited by hand.\n")
        out["commit"] = await call("commit", {"message": "status: by hand"})
        out["remove"] = await call("remove_atom", {"atom_id": "EXP-002", "force": True})
        out["validate"] = await call("validate", {"projects": ["flywheel"]})
        out["brief"] = await call("brief", {"budget": 100})  # the CLI's minimum, one rule
        return out

    out = run(store, errlog, body)
    [listed] = _data(out["projects"])
    assert listed["name"] == "flywheel" and listed["archived"] is False
    assert listed["atoms"] == {"experiments": 2, "knowledge": 1, "patterns": 0}
    assert listed["phase"].startswith("Phase 1") and listed["open_tasks"] == 0
    shown = _data(out["show"])
    assert shown["cited_by"][0]["atom"] == "K-001" and shown["frontmatter"]["id"] == "EXP-001"
    assert [a["id"] for a in _data(out["list"])["atoms"]] == ["EXP-001", "EXP-002"]
    assert _data(out["add"])["id"] == "EXP-003"
    updated = _data(out["update"])
    assert updated["changed"] and updated["commit"]
    text = (atoms.root / "experiments" / "EXP-003.md").read_text()
    assert "summary: Write-through caching kept every read fresh\n" in text
    assert "tags: [cache, write-through]\n" in text and "links: [EXP-001]\n" in text
    assert text.endswith("---\n\n## Results\n\nFresh.\n")  # the body untouched
    assert _data(out["supersede"])["status"] == "superseded:EXP-003"
    assert _data(out["status"])["was"] == "active"
    assert _data(out["invalidate"])["status"] == "invalidated"
    assert "invalidated-reason: miswired load generator" in git(
        store, "show", "HEAD~4:context/projects/flywheel/experiments/EXP-002.md")
    assert _data(out["task_add"])["id"] == "T-1"
    assert [t["id"] for t in _data(out["task_list"])["tasks"]] == ["T-1"]
    assert _data(out["task_done"])["status"] == "done"
    assert _data(out["commit"])["message"].startswith("status: by hand\n")
    removed = _data(out["remove"])
    assert removed["rewritten"] == ["K-001"]
    assert not (atoms.root / "experiments" / "EXP-002.md").exists()
    assert _data(out["validate"])["errors"] == 0
    assert "flywheel" in _text(out["brief"])
    # every change committed, the indexes current; the server said nothing on stderr
    assert git(store, "status", "--porcelain", "--", "context/") == ""
    subjects = git(store, "log", "--format=%s").splitlines()
    assert subjects[:9] == ["atom: remove EXP-002 — Shard rebalancing doubled tail latency",
                            "status: by hand", "tasks: done T-1 — Measure write latency",
                            "tasks: add T-1 — Measure write latency",
                            "atom: invalidate EXP-002 — miswired load generator",
                            "atom: EXP-002 status challenged:EXP-003",
                            "atom: supersede EXP-001 by EXP-003",
                            "atom: edit EXP-003 (summary, tags, links)",
                            "atom: add EXP-003 — Write-through caching kept reads fresh"]
    assert errlog.read_text() == ""


def test_move_atoms_between_projects(atoms: Project, tmp_path: Path) -> None:
    from cortexfs import scaffold

    scaffold.new_project(atoms.store, "beta")

    async def body(client: Any) -> list[Any]:
        return [await client.call_tool("move_atoms", {"atom_ids": ["K-001", "EXP-001",
                                                                   "EXP-002"],
                                                      "to_project": "beta"}),
                await client.call_tool("list_projects", {})]

    moved, projects = run(atoms.store, tmp_path / "err", body)
    assert _data(moved)["moved"] == {"EXP-001": "EXP-001", "EXP-002": "EXP-002",
                                     "K-001": "K-001"}
    counts = {p["name"]: p["atoms"] for p in _data(projects)}
    assert counts["beta"]["knowledge"] == 1 and counts["flywheel"]["experiments"] == 0


# every error: one line, in the tool's own words — no CLI flag, no `cortex …` command
BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("show_atom", {"atom_id": "EXP-999"}, "no atom EXP-999 in any project: `list_atoms`"),
    ("show_atom", {"atom_id": "EXP-001", "project": "flywhel"}, "did you mean 'flywheel'?"),
    ("show_atom", {}, "invalid arguments for show_atom: `atom_id` is missing"),
    ("list_atoms", {"status": "bogus"}, "unknown `status` 'bogus'"),
    ("list_atoms", {"since": "soon"}, "`since` 'soon' is not a date"),
    ("list_atoms", {"limit": 0}, "invalid arguments for list_atoms: `limit`"),
    ("list_atoms", {"kind": "x"}, "invalid arguments for list_atoms: `kind`"),
    ("add_atom", {"kind": "k", "summary": "A fact", "tags": ["x"]},
     "knowledge needs evidence: pass `evidence`"),
    ("add_atom", {"kind": "exp", "summary": "x", "tags": []},
     "invalid arguments for add_atom: `tags`"),
    ("add_atom", {"kind": "exp", "summary": "x", "tags": ["x"], "body": "  "},
     "the body is empty"),
    ("add_atom", {"kind": "exp", "summary": "x", "tags": ["x"], "project": "nope"},
     "no project named 'nope' (projects: flywheel)"),
    ("add_atom", {"kind": "k", "summary": "x", "tags": ["x"], "evidence": ["EXP-001"],
                  "executor": "bob"}, "`executor` is for experiments"),
    ("update_atom", {"atom_id": "EXP-001"}, "nothing to change"),
    ("update_atom", {"atom_id": "EXP-001", "summary": "two\nlines"},
     "the summary must be one line"),
    ("update_atom", {"atom_id": "EXP-001", "tags": ["bad tag"]}, "invalid tag 'bad tag'"),
    ("update_atom", {"atom_id": "EXP-001", "links": ["nope"]}, "'nope' is not an atom id"),
    ("update_atom", {"atom_id": "K-001", "body": "x", "tags": ["anti-pattern"]},
     "the tag anti-pattern goes with a summary"),
    ("set_status", {"atom_id": "EXP-001", "status": "bogus"}, "unknown status 'bogus'"),
    ("set_status", {"atom_id": "EXP-001", "status": "invalidated"},
     "say why EXP-001 is invalid: `invalidate`"),
    ("supersede", {"atom_id": "EXP-001", "by": "EXP-001"}, "cannot supersede itself"),
    ("invalidate", {"atom_id": "EXP-001", "reason": ""}, "the reason is empty"),
    ("remove_atom", {"atom_id": "EXP-001"}, "pass `force`"),
    ("move_atoms", {"atom_ids": [], "to_project": "flywheel"},
     "invalid arguments for move_atoms: `atom_ids`"),
    ("move_atoms", {"atom_ids": ["EXP-001"], "to_project": "nowhere"},
     "no project named 'nowhere'"),
    ("add_task", {"text": "   "}, "the task text is empty"),
    ("add_task", {"text": "x", "depends_on": ["T-9"]}, "no task T-9 in flywheel"),
    ("complete_task", {"task_id": "T-9"}, "no task T-9 in flywheel"),
    ("list_tasks", {"status": "someday"}, "invalid arguments for list_tasks: `status`"),
    ("commit", {"message": " "}, "the message is empty"),
    ("brief", {"budget": 10}, "invalid arguments for brief: `budget`"),
    ("read_atom", {"atom_id": 42}, "invalid arguments for read_atom: `atom_id`"),
]


def test_bad_arguments_get_one_line_in_the_tools_words(atoms: Project, tmp_path: Path) -> None:
    errlog = tmp_path / "server.err"
    before = git(atoms.store, "rev-parse", "HEAD")

    async def body(client: Any) -> list[Any]:
        return [await client.call_tool(name, args) for name, args, _ in BAD_CALLS]

    results = run(atoms.store, errlog, body)
    for (name, args, says), result in zip(BAD_CALLS, results, strict=True):
        message = _text(result)
        assert result.is_error, (name, args, message)
        assert says in message, (name, message)
        assert "\n" not in message.strip() and "http" not in message, (name, message)
        assert not re.search(r"--[a-z]|`cortex |cortex project new", message), (name, message)
    # nothing written, nothing logged on stderr (no DEBUG/INFO lines)
    assert git(atoms.store, "rev-parse", "HEAD") == before
    assert git(atoms.store, "status", "--porcelain") == ""
    assert errlog.read_text() == ""
