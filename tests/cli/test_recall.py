"""cortexfs.cli.recall: `cortex recall` — text and JSON output, snippets, filters, --open,
bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs.store import Project, Store

pytestmark = pytest.mark.usefixtures("no_model")  # lexical, heat and recency only


def test_text_and_json(store: Store, atoms: Callable[..., Path], cli: object) -> None:
    res = cli("recall", "stale reads cache", "--k", "2")  # type: ignore[operator]
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(" 1. EXP-001  flywheel  ")
    assert "lexical #1 (stale, reads, cache)" in lines[1]
    assert len([line for line in lines if line[:3].strip().endswith(".")]) == 2
    res = cli("recall", "stale reads", "--format", "json")  # type: ignore[operator]
    data = json.loads(res.stdout)
    hit = data["hits"][0]
    assert hit["id"] == "EXP-001" and data["dense_available"] is False
    assert hit["signals"]["lexical"]["rank"] == 1 and hit["retired"] is False
    assert hit["snippet"]["text"].startswith("Cache invalidation")  # matched by its summary


def test_text_shows_the_passage_and_marks(store: Store, write_atom: Callable[..., Path],
                                         cli: object) -> None:
    write_atom("EXP-001", summary="Notes", extra="status: invalidated\n",
               body="\n# EXP-001\n\nThe quokka census ran on Monday.\nIt found 40 quokkas.\n")
    write_atom("EXP-002", summary="More notes about the quokka census", extra="status: valid\n")
    res = cli("recall", "quokka census")  # type: ignore[operator]
    lines = res.stdout.splitlines()
    assert lines[0].startswith(" 1. EXP-002") and "[invalidated]" not in lines[0]
    first = next(i for i, line in enumerate(lines) if "EXP-001" in line and "." in line[:4])
    assert "[invalidated]" in lines[first]
    # the passage: the three body lines with words (lines 10-13 of the file; not the blank)
    assert lines[first + 2].endswith("10-13 │ # EXP-001")
    assert lines[first + 3].endswith("│ The quokka census ran on Monday.")
    assert lines[first + 4].endswith("│ It found 40 quokkas.")


def test_filters(store: Store, atoms: Callable[..., Path], cli: object) -> None:
    res = cli("recall", "cache", "--kind", "k", "--format", "json")  # type: ignore[operator]
    assert [h["id"] for h in json.loads(res.stdout)["hits"]] == ["K-001"]
    res = cli("recall", "cache", "--tag", "latency", "--status", "any", "-f", "json")  # type: ignore[operator]
    assert [h["id"] for h in json.loads(res.stdout)["hits"]] == ["EXP-001"]
    res = cli("recall", "cache", "--since", "2026-02-01", "-f", "json")  # type: ignore[operator]
    assert [h["id"] for h in json.loads(res.stdout)["hits"]] == ["K-001"]


def test_no_embed_note_once(store: Store, atoms: Callable[..., Path], cli: object) -> None:
    first = cli("recall", "cache")  # type: ignore[operator]
    second = cli("recall", "cache")  # type: ignore[operator]
    assert "install the `embed` extra" in first.stderr
    assert second.stderr == ""


def test_open_counts_a_read(store: Store, project: Project, atoms: Callable[..., Path],
                            cli: object) -> None:
    res = cli("recall", "stale reads", "--open", "1")  # type: ignore[operator]
    assert res.exit_code == 0
    assert res.stdout == (project.root / "experiments" / "EXP-001.md").read_text()
    entry = json.loads(project.access_log.read_text())
    assert entry["tool"] == "recall" and entry["file"] == "EXP-001.md"


@pytest.mark.parametrize("args, message", [
    (["   "], "the query is empty"),
    (["cache", "--k", "0"], "--k must be between 1 and 1000"),
    (["cache", "--project", "nope"], "no project named 'nope'"),
    (["cache", "--format", "xml"], "unknown --format 'xml'"),
    (["cache", "--open", "0"], "--open takes a hit number"),
    (["quokka", "--open", "1"], "there is no hit 1: the query matched 0 atoms"),
    (["cache", "--status", "gone"], "--status 'gone' is not a status"),
    (["cache", "--kind", "note"], "--kind 'note' is not known"),
    (["cache", "--since", "soon"], "--since 'soon' is not a date"),
    (["cache", "--since", "800000d"], "--since '800000d' reaches back before the year 1"),
    (["cache", "--since", "99999999999d"], "--since '99999999999d' is not a date"),
])
def test_bad_input(store: Store, atoms: Callable[..., Path], cli: object,
                   args: list[str], message: str) -> None:
    res = cli("recall", *args)  # type: ignore[operator]
    assert res.exit_code == 1
    assert message in res.stderr and "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if not line.startswith("note:")]
    assert len(errors) == 1


def test_without_store(cli: object) -> None:
    res = cli("recall", "cache")  # type: ignore[operator]
    assert res.exit_code == 1 and "cortex init" in res.stderr


def test_mcp_recall_tool_takes_the_filters(store: Store, atoms: Callable[..., Path]) -> None:
    """The MCP tool, called in-process (tests/test_mcp.py drives the server end to end)."""
    import anyio

    from cortexfs.mcp_server import build_server

    server = build_server(store)

    def call(**args: object) -> dict[str, object]:
        result = anyio.run(server.call_tool, "recall", args)
        data = result.structured_content
        assert data is not None, result
        return data

    out = call(query="cache", kind="k")
    hits = out["hits"]
    assert isinstance(hits, list) and [h["id"] for h in hits] == ["K-001"]
    assert hits[0]["path"] == "context/projects/flywheel/knowledge/K-001.md"
    assert hits[0]["snippet"]["text"] == "Invalidate caches on write, not on a timer"
    tagged = call(query="cache", tags=["latency"], status="any", since="2026-01-01")["hits"]
    assert [h["id"] for h in tagged] == ["EXP-001"]  # type: ignore[index]
    from mcp.server.mcpserver.exceptions import ToolError

    with pytest.raises(ToolError, match="`status` 'gone' is not a status"):
        anyio.run(server.call_tool, "recall", {"query": "cache", "status": "gone"})


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_cortex_process_prints_all_before_its_quick_exit(
        store: Store, atoms: Callable[..., Path], cli: object, fmt: str) -> None:
    """The console script ends a recall with os._exit once its output is flushed (no
    interpreter teardown): a whole process prints what the command prints, exit 0."""
    import subprocess
    import sys

    args = ["recall", "stale reads cache", "--format", fmt]
    expected = cli(*args).stdout  # type: ignore[operator]
    code = ("import atexit, sys; atexit.register(lambda: sys.stderr.write('torn down'));"
            "from cortexfs.__main__ import main; sys.argv[0] = 'cortex'; main()")
    proc = subprocess.run([sys.executable, "-c", code, "--home", str(store.home), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected and "EXP-001" in proc.stdout
    assert "torn down" not in proc.stderr  # the quick exit was taken
