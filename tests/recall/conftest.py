"""Fixtures and helpers of the recall tests (one test module per module of cortexfs.recall)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _no_model(no_model: None) -> None:
    """Every recall test starts without a model (tests/conftest.py's no_model)."""


@pytest.fixture
def tiny_model(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny random model; its similarities mean nothing, so abstention is off (the
    abstention test turns it on)."""
    from cortexfs.recall import query

    folder = tiny_model_dir
    monkeypatch.setenv("CORTEX_EMBED_MODEL", str(folder))
    monkeypatch.setattr(query, "DENSE_FLOOR", -2.0)
    return folder


@pytest.fixture
def lifecycle(write_atom: Callable[..., Path]) -> None:
    """The issue's example: an invalidated experiment, and the valid one that replaced it."""
    write_atom("EXP-006", summary="Cache throughput doubled with a write-back cache",
               tags="[cache, throughput]", date="2026-01-06",
               extra="status: invalidated:EXP-007\ninvalidated-reason: bad benchmark\n",
               body="\nCache throughput doubled (cache throughput, measured twice).\n")
    write_atom("EXP-007", summary="Cache throughput up 20 percent with write-back",
               tags="[cache]", date="2026-01-07", extra="status: valid\n")
    write_atom("EXP-008", summary="Deprecated cache throughput notes", tags="[cache]",
               date="2026-01-08", extra="status: deprecated\n")
    write_atom("K-001", summary="Write-back caches double cache throughput",
               tags="[cache]", extra="evidence: [EXP-006]\n", date="2026-01-09")
    write_atom("K-002", summary="Cache throughput gains need a warm cache", tags="[cache]",
               extra="evidence: [EXP-007, EXP-006]\n", date="2026-01-09")
