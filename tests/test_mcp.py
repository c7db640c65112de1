"""`cortex mcp` end to end: the SDK's stdio client talks to `python -m cortexfs mcp`."""

from __future__ import annotations

import json
import os
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
