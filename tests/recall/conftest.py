"""Fixtures and helpers of the recall tests (one test module per module of cortexfs.recall)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tiny_model import make_tiny_model


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lexical, heat and recency only, unless a test installs a model."""
    monkeypatch.setenv("CORTEX_EMBED_MODEL", "off")


@pytest.fixture
def tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny random model; its similarities mean nothing, so abstention is off (the
    abstention test turns it on)."""
    from cortexfs.recall import query

    folder = make_tiny_model(tmp_path / "tiny-model")
    monkeypatch.setenv("CORTEX_EMBED_MODEL", str(folder))
    monkeypatch.setattr(query, "DENSE_FLOOR", -2.0)
    return folder


@pytest.fixture
def atoms(write_atom: Callable[..., Path]) -> Callable[..., Path]:
    write_atom("EXP-001", summary="Cache invalidation on write cut stale reads by 40 percent",
               tags="[cache, latency]", date="2026-01-10")
    write_atom("EXP-002", summary="Shard rebalancing doubled tail latency during backfill",
               tags="[shard, backfill]", date="2026-02-10",
               body="\n## Results\n\nThe rebalancer moved hot shards first.\n")
    write_atom("K-001", summary="Invalidate caches on write, not on a timer",
               tags="[cache]", extra="evidence: [EXP-001]\n", date="2026-03-01")
    return write_atom
