"""cortexfs.recall.query: ranking by every signal, and the judgement of retired atoms."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import accesslog
from cortexfs import recall as rc
from cortexfs.errors import InvalidInputError, ProjectNotFoundError
from cortexfs.store import Project, Store
from recall.helpers import ids, lexical_only

# --- ranking -------------------------------------------------------------------------------------


def test_lexical_ranking_with_matched_words(store: Store,
                                            atoms: Callable[..., Path]) -> None:
    result = rc.recall(store, "stale reads after cache writes")
    assert ids(result)[:2] == ["EXP-001", "K-001"]
    top = result.hits[0]
    assert top.project == "flywheel" and top.path.name == "EXP-001.md"
    assert set(top.matched) >= {"stale", "reads", "cache", "writes"}
    assert top.signals["lexical"].rank == 1 and top.signals["lexical"].score > 0
    assert result.signals == ["lexical", "heat", "recency"] and not result.dense_available


def test_body_words_count_and_stemming(store: Store, atoms: Callable[..., Path]) -> None:
    assert ids(rc.recall(store, "rebalancers moving"))[0] == "EXP-002"


def test_no_match_returns_nothing(store: Store, atoms: Callable[..., Path]) -> None:
    assert rc.recall(store, "quantum chromodynamics").hits == []
    assert rc.recall(store, "the and of").hits == []  # stop words only


def test_atom_ids_are_terms(store: Store, atoms: Callable[..., Path]) -> None:
    # EXP-001 itself and K-001, which cites it as evidence
    assert set(ids(rc.recall(store, "EXP-001"))) == {"EXP-001", "K-001"}


def test_bad_arguments(store: Store, atoms: Callable[..., Path]) -> None:
    with pytest.raises(InvalidInputError, match="the query is empty"):
        rc.recall(store, "   ")
    with pytest.raises(InvalidInputError, match="--k must be between 1 and"):
        rc.recall(store, "cache", k=0)
    with pytest.raises(ProjectNotFoundError, match="no project named 'nope'"):
        rc.recall(store, "cache", project="nope")


def test_heat_reorders_matches_but_adds_none(store: Store, project: Project,
                                            write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2026-01-01")
    write_atom("EXP-002", summary="Cache tuning notes", date="2026-01-01")
    write_atom("EXP-003", summary="Unrelated deployment checklist", date="2026-01-01")
    assert ids(rc.recall(store, "cache tuning")) == ["EXP-001", "EXP-002"]  # a tie: by path
    lines = [accesslog.format_line(name, "Read", "s1")
             for name in ["EXP-002.md"] * 3 + ["EXP-003.md"] * 9]
    accesslog.append(project.access_log, lines)
    result = rc.recall(store, "cache tuning")
    assert ids(result) == ["EXP-002", "EXP-001"]  # EXP-003 is hot but does not match
    assert result.hits[0].signals["heat"].rank == 1
    assert "heat" not in result.hits[1].signals
    only_words = rc.recall(store, "cache tuning", weights=lexical_only())
    assert ids(only_words) == ["EXP-001", "EXP-002"] and only_words.signals == ["lexical"]


def test_recency_is_the_last_read_else_the_date(store: Store, project: Project,
                                               write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2025-01-01")
    write_atom("EXP-002", summary="Cache tuning notes", date="2026-06-01")
    no_heat = rc.Weights(heat=0)
    result = rc.recall(store, "cache tuning", weights=no_heat)
    assert ids(result) == ["EXP-002", "EXP-001"]  # the newer date
    assert result.hits[0].signals["recency"].rank == 1
    accesslog.append(project.access_log, [accesslog.format_line(
        "EXP-001.md", "Read", "s", ts="2026-07-01T10:00:00.000Z")])
    assert ids(rc.recall(store, "cache tuning", weights=no_heat)) == ["EXP-001", "EXP-002"]


def test_when_signal_reorders_matches_but_adds_none(store: Store,
                                                    write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2024-03-02")
    write_atom("EXP-002", summary="Cache tuning notes", date="2024-05-20")
    write_atom("EXP-003", summary="Shard notes", date="2024-03-05")
    plain = rc.recall(store, "cache tuning")
    assert ids(plain) == ["EXP-002", "EXP-001"] and "when" not in plain.signals
    dated = rc.recall(store, "cache tuning in March 2024")
    assert ids(dated) == ["EXP-001", "EXP-002"]  # EXP-003 did not match: not pulled in
    assert "when" in dated.signals and dated.hits[0].signals["when"].rank == 1
    assert dated.hits[1].signals["when"].score == -(dt.date(2024, 5, 20)
                                                    - dt.date(2024, 3, 31)).days
    off = rc.recall(store, "cache tuning in March 2024", weights=rc.Weights(when=0))
    assert ids(off) == ["EXP-002", "EXP-001"]


# --- judgement: statuses and evidence -----------------------------------------------------------


def test_retired_atoms_rank_below_active_ones_and_are_marked(
        store: Store, lifecycle: None) -> None:
    result = rc.recall(store, "cache throughput")
    order = ids(result)
    assert set(order[:2]) == {"EXP-007", "K-002"}  # the active ones first
    assert order.index("EXP-006") > order.index("EXP-008") > order.index("EXP-007")
    by_id = {h.id: h for h in result.hits}
    assert by_id["EXP-006"].retired and by_id["EXP-006"].marks == ["invalidated"]
    assert by_id["EXP-008"].marks == ["deprecated"] and not by_id["EXP-007"].marks
    # K-001 rests on EXP-006 alone (retired): marked, ranked down; K-002 has a valid one
    assert by_id["K-001"].evidence_retired and not by_id["K-002"].evidence_retired
    assert by_id["K-001"].marks == ["evidence retired"]
    assert order.index("K-001") > order.index("K-002")
    data = result.to_json()["hits"][order.index("EXP-006")]
    assert data["retired"] is True and data["status"] == "invalidated"


def test_status_any_searches_all_without_judgement(store: Store, lifecycle: None) -> None:
    judged = rc.recall(store, "cache throughput")
    plain = rc.recall(store, "cache throughput", filters=rc.parse_filters(status="any"))
    assert ids(plain)[0] == "EXP-006"  # the best words win again
    assert plain.hits[0].retired  # still marked
    assert judged.hits[0].score > 0 and set(ids(judged)) == set(ids(plain))
