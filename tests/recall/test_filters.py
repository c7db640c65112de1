"""cortexfs.recall.filters: --project --kind --status --tag --since."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import recall as rc
from cortexfs.errors import InvalidInputError
from cortexfs.store import Project, Store
from recall.helpers import ids


def test_filters(store: Store, project: Project, lifecycle: None,
                 write_atom: Callable[..., Path]) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    write_atom("PAT-001", summary="Cache throughput pattern", tags="[cache, perf]",
               date="2025-05-01", target=other)

    def found(**kw: object) -> set[str]:
        return set(ids(rc.recall(store, "cache throughput", k=50,
                                 filters=rc.parse_filters(**kw))))  # type: ignore[arg-type]

    assert found(status="retired") == {"EXP-006", "EXP-008"}
    assert found(status="invalidated") == {"EXP-006"}
    assert found(status="valid,deprecated") == {"EXP-007", "EXP-008"}
    assert found(status="active") == {"EXP-007", "K-001", "K-002", "PAT-001"}
    assert found(kind="k") == {"K-001", "K-002"}
    assert found(kind="exp,pat") == {"EXP-006", "EXP-007", "EXP-008", "PAT-001"}
    assert found(tag="throughput") == {"EXP-006"}
    assert found(tag=["cache", "PERF"]) == {"PAT-001"}
    assert found(project="other") == {"PAT-001"}
    assert found(since="2026-01-08") == {"EXP-008", "K-001", "K-002"}
    today = dt.date(2026, 1, 10)
    assert rc.parse_filters(since="3d", today=today).since == dt.date(2026, 1, 7)
    assert rc.parse_filters(since="2w", today=today).since == dt.date(2025, 12, 27)


@pytest.mark.parametrize("kw, message", [
    ({"status": "gone"}, "--status 'gone' is not a status"),
    ({"kind": "note"}, "--kind 'note' is not known: use exp, k or pat"),
    ({"since": "yesterday"}, "--since 'yesterday' is not a date"),
    ({"since": "2026-13-01"}, "--since '2026-13-01' is not a date"),
])
def test_bad_filters(kw: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        rc.parse_filters(**kw)  # type: ignore[arg-type]


def test_words_become_filters() -> None:
    from cortexfs.recall.docs import RETIRED
    from cortexfs.recall.filters import Filters, parse

    f = parse(project="p", kind="exp, K", status=["retired", "Valid"], tag="Cache,cache, X",
              since="2026-01-02")
    assert f == Filters("p", frozenset({"experiments", "knowledge"}), RETIRED | {"valid"},
                        False, ("cache", "x"), dt.date(2026, 1, 2))
    assert f.judged
    assert parse(kind=["pattern", "patterns"]).kinds == frozenset({"patterns"})
    anything = parse(status="any")
    assert anything.any_status and anything.statuses is None and not anything.judged
    assert parse() == Filters() and parse(since="1y", today=dt.date(2026, 1, 10)).since == \
        dt.date(2025, 1, 10)
