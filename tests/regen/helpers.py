"""Helpers of the regeneration tests (tests/regen/, tests/cli/test_index.py)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import derived
from cortexfs.regen import run
from cortexfs.store import Project, Store

NOW = dt.datetime(2026, 5, 6, 20, 31, 10, tzinfo=dt.UTC)  # every regeneration's clock


def isolate(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixed clock, and no store-wide generators (those are other modules' business;
    one test checks that generators are called)."""
    monkeypatch.setattr(run, "utc_now", lambda: NOW)
    monkeypatch.setattr(derived, "GENERATORS", [])


def log_line(file: str, ts: str, tool: str = "Read") -> str:
    return json.dumps({"file": file, "tool": tool, "ts": ts, "session": "s1"},
                      separators=(", ", ": ")) + "\n"


def write_log(project: Project, *lines: str) -> None:
    project.access_log.parent.mkdir(parents=True, exist_ok=True)
    with open(project.access_log, "a", encoding="utf-8") as f:
        f.write("".join(lines))


def git(store: Store, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=store.home, capture_output=True, text=True,
                          check=True).stdout


def realistic(project: Project, write_atom: Callable[..., Path]) -> None:
    """A small, lived-in project: every status group, links, evidence, an access log."""
    write_atom("EXP-001", "Initial object registry extraction from 573 artifacts",
               tags="[registry, data-analysis]", date="2026-03-09",
               extra="status: valid\nexecutor: Cortex-lab2\nlinks: [PAT-001]\n")
    write_atom("EXP-002", "Retry storm | with a pipe and `code`", date="2026-03-20",
               extra="status: challenged:EXP-004\n")
    write_atom("EXP-003", "Baseline on the wrong split", date="2026-02-01",
               extra="status: invalidated:EXP-004\ninvalidated-date: 2026-03-01\n"
                     "invalidated-reason: wrong split\n")
    write_atom("EXP-004", "Re-run on the right split", date="2026-03-25",
               extra="status: superseded:EXP-005\n")
    write_atom("EXP-005", "Old unread experiment", date="2025-12-01", extra="")
    write_atom("K-001", "ANTI-PATTERN: smoke tests without checking upstream",
               tags="[anti-pattern, smoke-test]", date="2026-04-01",
               extra="evidence: [EXP-001, EXP-002]\n")
    write_atom("K-002", "Deprecated heuristic", date="2026-04-02",
               extra="evidence: [EXP-003]\nstatus: deprecated\n")
    write_atom("PAT-001", "Per-stage pass rates find the bottleneck", date="2026-04-03",
               extra="source-experiments: [EXP-001, EXP-004]\n")
    write_log(project,
              *[log_line("EXP-001.md", f"2026-04-1{i}T03:12:21.074Z") for i in range(6)],
              log_line("EXP-002.md", "2026-04-16T03:12:21.074Z", "Grep"),
              log_line("_directory_search", "2026-04-16T03:12:22.000Z", "Grep"),
              log_line("K-001.md", "2026-04-10T20:42:00.826Z"),
              "not json\n")


def rows(project: Project, folder: str = "experiments") -> list[str]:
    text = (project.root / folder / "index.md").read_text(encoding="utf-8")
    active = text.split("## Active")[1].split("\n## ")[0]
    return [line for line in active.splitlines() if line.startswith("| [")]
