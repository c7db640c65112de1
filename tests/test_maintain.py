"""`cortex maintain`: cold and stale atoms, weak evidence, consolidation, validity."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

from cortexfs import accesslog
from cortexfs.maintain import ProjectMaintenance, maintain
from cortexfs.store import Project

TODAY = dt.date(2026, 5, 1)


def _report(project: Project) -> ProjectMaintenance:
    [report] = maintain(project.store, [project], today=TODAY).projects
    return report


def _days_ago(n: int) -> str:
    return (TODAY - dt.timedelta(days=n)).isoformat()


def test_cold_and_stale(project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", date=_days_ago(10))  # too young
    write_atom("EXP-002", date=_days_ago(15))  # cold
    write_atom("EXP-003", date=_days_ago(31))  # cold and stale
    write_atom("EXP-004", date=_days_ago(40), extra="refs: 2\n")  # read
    write_atom("EXP-005", date=_days_ago(40))  # read since the last regeneration
    write_atom("EXP-006", date=_days_ago(40), extra="status: superseded:EXP-002\n")  # retired
    accesslog.append(project.access_log, [accesslog.format_line("EXP-005.md", "Read", "s")])
    report = _report(project)
    assert [a.id for a in report.cold] == ["EXP-003", "EXP-002"]
    assert [a.id for a in report.stale_candidates] == ["EXP-003"]
    assert report.cold[0].age_days == 31
    assert report.cold[0].path == "projects/flywheel/experiments/EXP-003.md"


def test_nothing_to_report(project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", date=_days_ago(1))
    write_atom("K-001", date=_days_ago(1))
    report = _report(project)
    assert (report.cold, report.stale_candidates, report.weak_evidence,
            report.suggestions) == ([], [], [], [])


def test_weak_evidence_all_and_part(project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", date=_days_ago(1), extra="status: invalidated:EXP-003\n")
    write_atom("EXP-002", date=_days_ago(1), extra="status: superseded:EXP-003\n")
    write_atom("EXP-003", date=_days_ago(1))
    write_atom("K-001", date=_days_ago(1), extra="evidence: [EXP-001, EXP-002]\n")
    write_atom("K-002", date=_days_ago(1), extra="evidence: [EXP-001, EXP-003]\n")
    write_atom("K-003", date=_days_ago(1), extra="evidence: [EXP-003]\n")
    write_atom("PAT-001", date=_days_ago(1), extra="source-experiments: [EXP-002, EXP-003]\n")
    # already retired itself: not reported
    write_atom("K-004", date=_days_ago(1), extra="evidence: [EXP-001]\nstatus: invalidated\n")
    weak = {w.atom.id: w for w in _report(project).weak_evidence}
    assert set(weak) == {"K-001", "K-002", "PAT-001"}
    assert weak["K-001"].extent == "all"
    assert weak["K-002"].extent == "part" and weak["PAT-001"].extent == "part"
    assert weak["K-001"].retired == [{"id": "EXP-001", "status": "invalidated", "by": "EXP-003"},
                                     {"id": "EXP-002", "status": "superseded", "by": "EXP-003"}]


def test_tag_pair_suggestion(project: Project, write_atom: Callable[..., Path]) -> None:
    for n in (1, 2, 3):
        write_atom(f"EXP-00{n}", date=_days_ago(1), tags="[pipeline, diagnosis, x" + f"{n}]")
    write_atom("EXP-004", date=_days_ago(1), tags="[pipeline, other]")
    [s] = _report(project).suggestions
    assert s.kind == "tag-pair" and s.atoms == ["EXP-001", "EXP-002", "EXP-003"]
    assert s.tags == [["diagnosis", "pipeline"]]
    # a pattern citing one of them leaves only two uncited: no suggestion
    write_atom("PAT-001", date=_days_ago(1), extra="source-experiments: [EXP-001]\n")
    assert _report(project).suggestions == []


def test_link_cluster_suggestion(project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", date=_days_ago(1), tags="[a]", extra="links: [EXP-002]\n")
    write_atom("EXP-002", date=_days_ago(1), tags="[b]", extra="links: [K-001]\n")
    write_atom("K-001", date=_days_ago(1), tags="[c]")
    write_atom("EXP-003", date=_days_ago(1), tags="[d]", extra="links: [EXP-404]\n")
    [s] = _report(project).suggestions
    assert s.kind == "link-cluster" and s.atoms == ["EXP-001", "EXP-002", "K-001"]
    write_atom("PAT-001", date=_days_ago(1), tags="[e]",
               extra="source-experiments: [EXP-001, EXP-002]\n")
    assert _report(project).suggestions == []


def test_supersede_chain_suggestion(project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", date=_days_ago(1), tags="[a]", extra="status: superseded:EXP-002\n")
    write_atom("EXP-002", date=_days_ago(1), tags="[b]", extra="status: refined:EXP-003\n")
    write_atom("EXP-003", date=_days_ago(1), tags="[c]")
    write_atom("EXP-004", date=_days_ago(1), tags="[d]", extra="status: superseded:EXP-005\n")
    write_atom("EXP-005", date=_days_ago(1), tags="[e]")
    # a cycle must not loop forever
    write_atom("EXP-006", date=_days_ago(1), tags="[f]", extra="status: superseded:EXP-007\n")
    write_atom("EXP-007", date=_days_ago(1), tags="[g]", extra="status: superseded:EXP-006\n")
    [s] = _report(project).suggestions
    assert s.kind == "supersede-chain" and s.atoms == ["EXP-001", "EXP-002", "EXP-003"]
    assert "fold what still matters into EXP-003" in s.reason


def test_validity_summary(project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", extra="status: challenged:EXP-002\n")
    write_atom("EXP-002")
    write_atom("EXP-003", extra="status: stale\n")
    write_atom("EXP-004", extra="status: invalidated:EXP-002\n")
    write_atom("K-001")
    report = _report(project)
    assert report.validity["experiments"] == {"total": 4, "active": 2, "superseded": 1,
                                              "invalidated": 1, "challenged": 1}
    assert report.validity["knowledge"]["active"] == 1
    assert report.counts == {"experiments": 4, "knowledge": 1, "patterns": 0}


def test_json_rows_are_their_fields(project: Project, write_atom: Callable[..., Path]) -> None:
    for n in (1, 2, 3):
        write_atom(f"EXP-00{n}", date=_days_ago(20), tags="[pipeline, diagnosis]",
                   extra="links: [EXP-001]\n" if n > 1 else "")
    [proj] = maintain(project.store, [project], today=TODAY).to_json()["projects"]
    assert list(proj["cold"][0]) == ["id", "kind", "path", "summary", "date", "refs",
                                     "age_days"]
    assert (proj["cold"][0]["age_days"], proj["cold"][0]["refs"]) == (20, 0)
    by_kind = {s["kind"]: s for s in proj["consolidation"]}
    assert list(by_kind["tag-pair"]) == ["kind", "atoms", "reason", "tags"]
    assert by_kind["tag-pair"]["tags"] == [["diagnosis", "pipeline"]]
    assert list(by_kind["link-cluster"]) == ["kind", "atoms", "reason"]  # no tags: no key
    assert list(proj["validity"]["experiments"]) == ["total", "active", "superseded",
                                                     "invalidated", "challenged"]


def test_cli_text_and_json(cli, project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", date="2020-01-01")
    before = sorted((p, p.read_bytes()) for p in project.root.rglob("*") if p.is_file())
    r = cli("maintain")
    assert r.exit_code == 0, r.output
    assert "flywheel — 1 experiments" in r.stdout
    assert "cold (refs 0, older than 14 days): 1" in r.stdout
    assert "EXP-001" in r.stdout
    data = json.loads(cli("maintain", "flywheel", "--format", "json").stdout)
    [proj] = data["projects"]
    assert proj["cold"][0]["id"] == "EXP-001"
    assert proj["stale_candidates"][0]["id"] == "EXP-001"
    after = sorted((p, p.read_bytes()) for p in project.root.rglob("*") if p.is_file())
    assert before == after  # read-only
    r = cli("maintain", "nope")
    assert r.exit_code == 1 and "no project named 'nope'" in r.stderr
    r = cli("maintain", "--format", "xml")
    assert r.exit_code == 1 and "unknown --format" in r.stderr
