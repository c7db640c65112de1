"""cortexfs.mcp_server through `cortex mcp` end to end: the SDK's stdio client talks to
`python -m cortexfs mcp`. Every tool an agent needs for an atom's life, a project's tasks
and a commit (issue 15's parity) — good calls and bad arguments, whose errors are one line
in the tool's own words."""

from __future__ import annotations

import importlib.util
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

# not importorskip: that imports the SDK (~0.5 s of CPU) in every worker that collects this
# file, where only the one that runs a test here needs it (each test imports it in _session)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mcp") is None,
                                reason="the mcp SDK is not installed")


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _data(result: Any) -> Any:
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(_text(result))


async def _session(store: Store, body: Callable[[Any], Any]) -> Any:
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "GIT_CONFIG_GLOBAL",
                                                       "GIT_CONFIG_NOSYSTEM", "SYSTEMROOT")}
    env.update({k: v for k, v in os.environ.items() if k.startswith("GIT_")})
    env["CORTEX_HOME"] = str(store.home)
    env["CORTEX_EMBED_MODEL"] = "off"  # lexical only: fast and hermetic
    params = StdioServerParameters(command=sys.executable, args=["-m", "cortexfs", "mcp"],
                                   env=env)
    async with Client(params) as client:
        return await body(client)


def run(store: Store, body: Callable[[Any], Any]) -> Any:
    return anyio.run(_session, store, body)


LIFECYCLE_TOOLS = {"show_atom", "list_atoms", "update_atom", "set_status", "supersede",
                   "invalidate", "move_atoms", "remove_atom", "list_projects", "list_tasks",
                   "add_task", "complete_task", "commit"}


def test_tools_end_to_end(store: Store, project: Project,
                          write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache invalidation on write cut stale reads by 40 percent",
               tags="[cache, latency]")
    write_atom("EXP-002", summary="Shard rebalancing doubled tail latency during backfill",
               tags="[shard, backfill]")

    async def body(client: Any) -> dict[str, Any]:
        tools = await client.list_tools()
        names = {t.name for t in tools.tools}
        recall = await client.call_tool("recall", {"query": "stale reads cache", "k": 5})
        read = await client.call_tool("read_atom", {"atom_id": "EXP-001"})
        added = await client.call_tool("add_atom", {
            "kind": "exp", "project": "flywheel", "tags": ["cache"],
            "summary": "Cache invalidation on write cut stale reads by 40 percent again",
            "body": "## Results\n\nSame finding, new hardware.\n"})
        recall2 = await client.call_tool("recall", {"query": "new hardware", "k": 3})
        validate = await client.call_tool("validate", {})
        regen = await client.call_tool("regenerate", {"projects": ["flywheel"]})
        ready = await client.call_tool("ready", {"project": "flywheel"})
        brief = await client.call_tool("brief", {"project": "flywheel", "budget": 2000})
        return {"names": names, "recall": recall, "read": read, "added": added,
                "recall2": recall2, "validate": validate, "regen": regen, "ready": ready,
                "brief": brief}

    out = run(store, body)
    assert out["names"] == {"recall", "read_atom", "add_atom", "validate", "regenerate",
                            "ready", "brief", *LIFECYCLE_TOOLS}
    for name in ("recall", "read", "added", "recall2", "validate", "regen", "ready", "brief"):
        assert not out[name].is_error, (name, _text(out[name]))

    hits = _data(out["recall"])["hits"]
    assert hits[0]["id"] == "EXP-001"
    assert hits[0]["path"] == "context/projects/flywheel/experiments/EXP-001.md"
    assert "lexical" in hits[0]["signals"]

    assert "Cache invalidation on write" in _text(out["read"])
    log = project.access_log.read_text().splitlines()
    assert [json.loads(line)["tool"] for line in log] == ["recall"]
    assert json.loads(log[0])["file"] == "EXP-001.md"

    added = _data(out["added"])
    assert added["id"] == "EXP-003" and added["committed"] is True
    assert [d["id"] for d in added["near_duplicates"]] == ["EXP-001"]
    text = (project.root / "experiments" / "EXP-003.md").read_text()
    assert text.startswith("---\nid: EXP-003\n") and text.endswith(
        "---\n\n## Results\n\nSame finding, new hardware.\n")
    # the server's warm index saw the new atom at once (the write invalidated it)
    assert _data(out["recall2"])["hits"][0]["id"] == "EXP-003"

    assert _data(out["validate"])["errors"] == 0
    # add_atom regenerated its project already: nothing left to write, the index lists it
    assert _data(out["regen"])["written"] == []
    assert "EXP-003" in (project.root / "experiments" / "index.md").read_text()
    assert "ready" in _data(out["ready"])
    assert "flywheel" in _text(out["brief"]).lower()


def test_tool_errors_are_one_line_messages(store: Store, project: Project,
                                           write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache invalidation on write cut stale reads")

    async def body(client: Any) -> list[Any]:
        return [
            await client.call_tool("read_atom", {"atom_id": "EXP-999"}),
            await client.call_tool("read_atom", {"atom_id": "not-an-id"}),
            await client.call_tool("recall", {"query": "   "}),
            await client.call_tool("recall", {"query": "cache", "project": "nope"}),
            await client.call_tool("add_atom", {"kind": "k", "project": "flywheel",
                                                "summary": "A fact", "tags": ["x"]}),
            await client.call_tool("add_atom", {"kind": "exp", "project": "flywheel",
                                                "summary": "Cache invalidation on write cut "
                                                "stale reads", "tags": ["a", "b"],
                                                "strict": True}),
            await client.call_tool("recall", {"query": "cache", "k": 0}),
        ]

    results = run(store, body)
    assert all(r.is_error for r in results)
    messages = [_text(r) for r in results]
    assert "no atom EXP-999" in messages[0]
    assert "not an atom id" in messages[1]
    assert "the query is empty" in messages[2]
    assert "no project named 'nope'" in messages[3]
    assert "knowledge needs evidence" in messages[4]
    assert "nearly duplicates EXP-001" in messages[5]
    assert "invalid arguments for recall: `k`" in messages[6]  # the schema's, in one line
    assert all("\n" not in m.strip() for m in messages)
    # the refused duplicate was not written, and no read was logged
    assert not (project.root / "experiments" / "EXP-002.md").exists()
    assert not project.access_log.exists()


def test_mcp_command_fails_cleanly_without_a_store(tmp_path: Path) -> None:
    import subprocess

    env = dict(os.environ, CORTEX_HOME=str(tmp_path / "nothing"))
    proc = subprocess.run([sys.executable, "-m", "cortexfs", "mcp"], env=env, input="",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "no cortex store" in proc.stderr and "Traceback" not in proc.stderr


# --- the lifecycle tools (issue 15), the server's stderr kept -----------------------------


def _ok_data(result: Any) -> Any:
    """`_data` of a call that must have succeeded."""
    assert not result.is_error, _text(result)
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(_text(result))


def run_logged(store: Store, errlog: Path, body: Callable[[Any], Any]) -> Any:
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

    out = run_logged(store, errlog, body)
    [listed] = _ok_data(out["projects"])
    assert listed["name"] == "flywheel" and listed["archived"] is False
    assert listed["atoms"] == {"experiments": 2, "knowledge": 1, "patterns": 0}
    assert listed["phase"].startswith("Phase 1") and listed["open_tasks"] == 0
    shown = _ok_data(out["show"])
    assert shown["cited_by"][0]["atom"] == "K-001" and shown["frontmatter"]["id"] == "EXP-001"
    assert [a["id"] for a in _ok_data(out["list"])["atoms"]] == ["EXP-001", "EXP-002"]
    assert _ok_data(out["add"])["id"] == "EXP-003"
    updated = _ok_data(out["update"])
    assert updated["changed"] and updated["commit"]
    text = (atoms.root / "experiments" / "EXP-003.md").read_text()
    assert "summary: Write-through caching kept every read fresh\n" in text
    assert "tags: [cache, write-through]\n" in text and "links: [EXP-001]\n" in text
    assert text.endswith("---\n\n## Results\n\nFresh.\n")  # the body untouched
    assert _ok_data(out["supersede"])["status"] == "superseded:EXP-003"
    assert _ok_data(out["status"])["was"] == "active"
    assert _ok_data(out["invalidate"])["status"] == "invalidated"
    assert "invalidated-reason: miswired load generator" in git(
        store, "show", "HEAD~4:context/projects/flywheel/experiments/EXP-002.md")
    assert _ok_data(out["task_add"])["id"] == "T-1"
    assert [t["id"] for t in _ok_data(out["task_list"])["tasks"]] == ["T-1"]
    assert _ok_data(out["task_done"])["status"] == "done"
    assert _ok_data(out["commit"])["message"].startswith("status: by hand\n")
    removed = _ok_data(out["remove"])
    assert removed["rewritten"] == ["K-001"]
    assert not (atoms.root / "experiments" / "EXP-002.md").exists()
    assert _ok_data(out["validate"])["errors"] == 0
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

    moved, projects = run_logged(atoms.store, tmp_path / "err", body)
    assert _ok_data(moved)["moved"] == {"EXP-001": "EXP-001", "EXP-002": "EXP-002",
                                     "K-001": "K-001"}
    counts = {p["name"]: p["atoms"] for p in _ok_data(projects)}
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

    results = run_logged(atoms.store, errlog, body)
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
