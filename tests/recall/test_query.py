"""cortexfs.recall.query (+ fuse, filters, snippets, opening): ranking, judgement, filters,
snippets, and reading a hit."""

from __future__ import annotations

import datetime as dt
import json
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


def test_weights_and_tuning_live_in_one_place() -> None:
    w, t = rc.DEFAULT_WEIGHTS, rc.DEFAULT_TUNING
    assert (w.lexical, w.dense, w.heat, w.recency, w.when) == (1.0, 0.25, 0.3, 0.05, 0.5)
    assert t.rrf_k == 60 and t.passage_lines == 3
    assert rc.Weights(dense=0, recency=0, when=0).active() == ["lexical", "heat"]


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


def test_rrf_arithmetic(store: Store, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2026-01-01")
    hit = rc.recall(store, "cache").hits[0]
    assert hit.score == pytest.approx(1.0 / (60 + 1) + 0.05 / (60 + 1))


# --- judgement: statuses and evidence -----------------------------------------------------------


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


# --- snippets ----------------------------------------------------------------------------------


def test_hits_carry_the_passage_they_were_ranked_by(store: Store,
                                                    write_atom: Callable[..., Path]) -> None:
    filler = [f"Line {n} is about the weather number{n}." for n in range(8)]
    body = "\n# EXP-001: Session\n\n" + "\n".join(
        filler[:4] + ["Ana: the pottery class made a blue plate.", "Ben: nice!"] + filler[4:])
    path = write_atom("EXP-001", summary="Session one", body=body + "\n")
    write_atom("EXP-002", summary="Pottery plans", body="\n")
    result = rc.recall(store, "pottery class plate")
    top = result.hits[0]
    assert top.id == "EXP-001" and top.snippet is not None
    lines = path.read_text().split("\n")
    first, last = top.snippet.first, top.snippet.last
    assert "pottery class made a blue plate" in "\n".join(lines[first - 1:last])
    assert lines[first - 1:last] == top.snippet.text.split("\n")
    marked = [top.snippet.text[a:b] for a, b in top.snippet.spans]
    assert marked == ["pottery", "class", "plate"]
    summary_only = result.hits[1].snippet
    assert summary_only is not None and summary_only.first == 0
    assert summary_only.text == "Pottery plans"
    data = result.to_json()["hits"][0]["snippet"]
    assert data["lines"] == [first, last] and data["highlights"][0] == list(top.snippet.spans[0])


# --- opening a hit ---------------------------------------------------------------------------


def test_read_atom_logs_a_recall_access(store: Store, project: Project,
                                        atoms: Callable[..., Path]) -> None:
    rc.recall(store, "cache")
    assert not project.access_log.exists()  # listing is not a read
    opened = rc.read_atom(store, "EXP-001", session="s9")
    assert opened.text.startswith("---\nid: EXP-001")
    entry = json.loads(project.access_log.read_text())
    assert (entry["file"], entry["tool"], entry["session"]) == ("EXP-001.md", "recall", "s9")
    with pytest.raises(InvalidInputError, match="no atom EXP-404 in any project"):
        rc.read_atom(store, "EXP-404")
    with pytest.raises(InvalidInputError, match="is not an atom id"):
        rc.read_atom(store, "../../etc/passwd")


def test_read_atom_ambiguous_id(store: Store, project: Project,
                                write_atom: Callable[..., Path]) -> None:
    from cortexfs import scaffold

    other, _ = scaffold.new_project(store, "other")
    write_atom("EXP-001", target=project)
    write_atom("EXP-001", target=other)
    with pytest.raises(InvalidInputError, match="several projects"):
        rc.read_atom(store, "EXP-001")
    assert rc.read_atom(store, "EXP-001", "other").project == "other"
