"""cortexfs.regen.records: what a regeneration hands over — its result, and the lazy context
the store-wide generators read."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from cortexfs.regen.records import Lazy, RegenContext, RegenResult
from cortexfs.store import Store


def test_a_path_is_listed_as_written_once() -> None:
    result = RegenResult()
    for name in ("a.md", "b.md", "a.md"):
        result.add(Path(name))
    assert result.written == [Path("a.md"), Path("b.md")]
    assert RegenResult() == RegenResult(written=[])


def test_lazy_values_are_made_on_first_use_and_once() -> None:
    made: list[str] = []

    def make(name: str) -> str:
        made.append(name)
        return name.upper()

    lazy = Lazy(["alpha", "beta"], make)
    assert list(lazy) == ["alpha", "beta"] and len(lazy) == 2
    assert "alpha" in lazy and "gamma" not in lazy and made == []
    assert lazy["beta"] == "BETA" and lazy["beta"] == "BETA" and made == ["beta"]
    with pytest.raises(KeyError):
        lazy["gamma"]
    assert dict(lazy.items()) == {"alpha": "ALPHA", "beta": "BETA"}
    assert made == ["beta", "alpha"]


def test_the_context_s_fingerprint_covers_every_project_by_default(tmp_path: Path) -> None:
    asked: list[Any] = []

    def fingerprint(names: list[str], dated: bool) -> str:
        asked.append((names, dated))
        return "-".join(names)

    projects: Lazy[Any] = Lazy(["a", "b"], lambda name: pytest.fail("loaded"))
    ctx = RegenContext(Store(tmp_path), dt.datetime(2026, 1, 1, tzinfo=dt.UTC), False, ["a"],
                       projects, projects, fingerprint)
    assert ctx.fingerprint() == "a-b" and ctx.fingerprint(["b"], dated=False) == "b"
    assert asked == [(["a", "b"], True), (["b"], False)]
