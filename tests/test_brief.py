"""`cortex brief`: contents, ranking, packing into the budget, the truncation banner."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortexfs import accesslog, brief, scaffold
from cortexfs.store import Project, Store
from cortexfs.tokens import estimate

STATUS = """# Status — flywheel

<!-- The first file a new session reads. -->

## Current phase

Phase 2 — caching the registry lookups.

## Recent progress

- EXP-003 cut lookup latency by 40 % (K-001).

## Open blockers

- None.

## Next steps

- Roll the cache out to the ingest workers.
"""
TASKS = """tasks:
  - id: T-1
    text: Measure the baseline
    status: done
    completed-at: 2026-03-01
  - id: T-2
    text: Write the cache invalidation
    status: todo
    priority: P2
  - id: T-3
    text: Roll the cache out
    status: doing
    priority: P1
    done-when: every worker reads through the cache
    depends-on: [T-2]
  - id: T-4
    text: Wait for the new hosts
    status: blocked
"""
ISSUES = """# Issues — flywheel

<!-- Execution friction: append an entry. -->

## 2026-03-02 — flaky cache test
- Problem: test_cache times out under load
- When it occurs: on the shared runner
"""


@pytest.fixture
def rich(project: Project, write_atom: Callable[..., Path]) -> Project:
    """flywheel with a STATUS.md, tasks, an issue, knowledge, patterns and experiments."""
    root = project.root
    (root / "STATUS.md").write_text(STATUS)
    (root / "TASKS.yaml").write_text(TASKS)
    (root / "ISSUES.md").write_text(ISSUES)
    for n in range(1, 6):
        write_atom(f"EXP-{n:03d}", summary=f"Experiment {n}", date=f"2026-03-0{n}")
    write_atom("EXP-006", summary="Wrong result", date="2026-03-06",
               extra="status: invalidated:EXP-005\n")
    write_atom("K-001", summary="Cache keys need the locale", date="2026-03-05",
               extra="evidence: [EXP-003]\n")
    write_atom("K-002", summary="Old but critical", date="2020-01-01",
               extra="evidence: [EXP-001]\npriority: critical\n")
    write_atom("K-003", summary="Old and ordinary", date="2020-01-01",
               extra="evidence: [EXP-001]\n")
    write_atom("PAT-001", summary="Caches need owners", date="2026-03-04",
               extra="source-experiments: [EXP-002]\n")
    accesslog.append(project.access_log, [
        accesslog.format_line("K-001.md", "Read", "s", "2026-03-05T10:00:00.000Z")] * 3)
    return project


def test_project_brief_holds_every_section_in_order(store: Store, rich: Project) -> None:
    result = brief.build(store, "flywheel")
    text = result.text
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads == ["## STATUS.md", "## Open tasks", "## Issues",
                     "## Strongest knowledge and patterns", "## Recent experiments"]
    assert text.startswith("# Session brief — flywheel\n")
    assert "### Current phase\nPhase 2 — caching the registry lookups.\n" in text
    assert "<!--" not in text and "# Status — flywheel" not in text
    tasks = text.split("## Open tasks")[1].split("## Issues")[0]
    assert [line.split()[1] for line in tasks.splitlines() if line.startswith("- ")] == \
        ["T-3", "T-2", "T-4"]  # doing, todo, blocked; done left out
    assert "- T-3 [doing, P1] Roll the cache out — done when: every worker reads through " \
           "the cache (after T-2)" in tasks
    assert "### 2026-03-02 — flaky cache test\n- Problem: test_cache times out" in text
    minds = text.split("## Strongest knowledge and patterns")[1].split("## Recent")[0]
    order = [line.split()[1] if not line.startswith("- pattern") else line.split()[2]
             for line in minds.splitlines() if line.startswith("- ")]
    assert order[0] == "K-002"  # critical never decays
    # six years without a read: strength 0.08, below 0.1 — out of the context, and said so
    assert "K-003" not in order and "; 1 below strength 0.1 left out" in minds
    # the clock is the newest event, EXP-006's date: 14 h after K-001's last read
    assert f"- K-001 (str {(1 + 1.4) ** -0.3:.2f}, 3 reads): Cache keys need the locale" in minds
    exps = text.split("## Recent experiments")[1]
    ids = [line.split()[1] for line in exps.splitlines() if line.startswith("- ")]
    assert ids == ["EXP-005", "EXP-004", "EXP-003", "EXP-002", "EXP-001"]  # invalidated out
    assert "cortex brief: cut" not in text  # everything fit: no banner
    assert result.tokens <= brief.DEFAULT_BUDGET


def test_knowledge_on_retired_evidence_is_marked_and_ranked_last(
        store: Store, rich: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("K-004", summary="Rests on a wrong result", date="2026-03-06",
               extra="evidence: [EXP-006]\n")  # EXP-006 is invalidated
    write_atom("PAT-002", summary="Rests on one good and one wrong result", date="2026-03-06",
               extra="source-experiments: [EXP-005, EXP-006]\n")
    minds = brief.build(store, "flywheel").text.split("## Strongest knowledge")[1] \
        .split("## Recent")[0]
    lines = [line for line in minds.splitlines() if line.startswith("- ")]
    assert lines[-1].startswith("- K-004 (str 1.00, evidence retired): Rests on a wrong")
    assert any(line.startswith("- pattern PAT-002 (str 1.00): ") for line in lines)


def test_cut_brief_ends_with_a_banner_listing_what_was_cut(store: Store, rich: Project,
                                                          write_atom: Callable[..., Path]) -> None:
    for n in range(7, 80):
        write_atom(f"EXP-{n:03d}", summary=f"Another experiment about caching, number {n}",
                   date="2026-03-10")
    result = brief.build(store, "flywheel", budget=600)
    text = result.text
    assert estimate(text) <= 600
    assert "## STATUS.md" in text  # the most important section survives
    banner = text.rsplit("\n---\n", 1)[1]
    assert banner.startswith("[cortex brief: cut to fit the 600-token budget. Omitted: ")
    cut = {s.key: s for s in result.cut}
    assert "experiments" in cut
    exp = cut["experiments"]
    assert f"Recent experiments {exp.omitted:,} of {len(exp.items):,} atoms " \
           f"(~{exp.omitted_tokens:,} tokens)" in banner
    shown = [line for line in text.split("## Recent experiments")[1].splitlines()
             if line.startswith("- EXP")] if "## Recent experiments" in text else []
    assert len(shown) == exp.kept and exp.kept + exp.omitted == 78
    data = result.to_json()
    assert data["text"] == text and data["tokens"] <= 600


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=brief.MIN_BUDGET, max_value=3000))
def test_never_over_budget(store: Store, rich: Project, budget: int) -> None:
    for name in ("flywheel", None):
        result = brief.build(store, name, budget=budget)
        assert estimate(result.text) <= budget, (budget, name)


def test_never_over_budget_with_huge_lines_and_many_projects(
        store: Store, rich: Project, write_atom: Callable[..., Path]) -> None:
    (rich.root / "STATUS.md").write_text("## Current phase\n" + "x" * 20_000 + "\n"
                                         + "- line\n" * 500)
    other, _ = scaffold.new_project(store, "other")
    for n in range(1, 40):
        write_atom(f"EXP-{n:03d}", summary="s" * 190, target=other)
    for budget in (100, 101, 150, 333, 500, 1000, 2000, 4000, 8000, 16000):
        for name in ("flywheel", "other", None):
            result = brief.build(store, name, budget=budget)
            assert estimate(result.text) <= budget, (budget, name)
            assert ("cortex brief:" in result.text) == bool(result.cut)
    status = brief.build(store, "flywheel", budget=16000)
    assert "x" * 400 not in status.text and "x" * 399 + "…" in status.text  # shortened …
    assert "STATUS.md 0 of 502 lines, 1 shortened (~" in status.text  # … and says so


def test_store_level_brief_with_several_projects(store: Store, rich: Project,
                                                 write_atom: Callable[..., Path]) -> None:
    other, _ = scaffold.new_project(store, "other")
    write_atom("EXP-001", summary="Other project's experiment", date="2026-03-07", target=other)
    text = brief.build(store).text
    assert text.startswith("# Session brief — 2 projects\n")
    assert "- flywheel: Phase 2 — caching the registry lookups. (6 experiments, 3 knowledge, " \
           "1 pattern) → projects/flywheel/STATUS.md" in text
    assert "- flywheel/T-3 [doing, P1]" in text and "- flywheel: 2026-03-02 — flaky cache " \
                                                   "test" in text
    assert "- other/EXP-001 (2026-03-07): Other project's experiment" in text
    assert "flywheel/K-002 (str 1.00" in text


def test_brief_from_the_regeneration_caches_is_the_brief_from_the_atoms(
        store: Store, rich: Project, write_atom: Callable[..., Path]) -> None:
    import shutil

    from cortexfs import hippocampus
    from cortexfs.loader import load_project
    from cortexfs.regen import context, regenerate

    other, _ = scaffold.new_project(store, "other")
    write_atom("EXP-001", summary="Other project's experiment", date="2026-03-07", target=other)

    def from_atoms() -> hippocampus.MemoryIndex:  # no cache involved at all
        return hippocampus.build([load_project(p) for p in store.projects()],
                                 {p.name: accesslog.fold(p.access_log) for p in store.projects()})

    regenerate(store)  # caches every project's part and the folded logs
    accesslog.append(rich.access_log, [  # read since: folded from where the cache stopped
        accesslog.format_line("K-003.md", "Read", "s", "2026-03-09T10:00:00.000Z")])
    cached = [brief.build(store, name, 2_000).text for name in (None, "flywheel", "other")]
    assert "K-003 (str 1.00, 1 read)" in cached[1]
    shutil.rmtree(store.cache_dir)
    assert [brief.build(store, name, 2_000).text for name in (None, "flywheel", "other")] \
        == cached
    ranked = [(e.key, e.strength, e.hits) for e in from_atoms().entries]
    assert [(e.key, e.strength, e.hits) for e in hippocampus.assemble(hippocampus.parts(
        context(store), [p.name for p in store.projects()])).entries] == ranked


def test_cached_atom_sections_notice_every_change_to_the_atoms_and_logs(
        store: Store, rich: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The atom sections come from .cache/brief/ only while every atom file and access log
    keeps the stat data they were cached with: an edit in place (same size: no folder's
    mtime moves), a rename, a delete, a read and a file written just now are all seen."""
    import os
    import shutil
    import time

    from cortexfs import hippocampus

    ages = iter(range(600, 0, -10))

    def settle() -> None:  # files written since the last call: past the racy window
        when = time.time() - next(ages)
        for path in store.projects_dir.rglob("*"):
            if path.stat().st_mtime > time.time() - 30:
                os.utime(path, (when, when))

    def fresh() -> list[str]:  # what no cache at all gives
        shutil.rmtree(store.cache_dir, ignore_errors=True)
        return [brief.build(store, name).text for name in (None, "flywheel")]

    other, _ = scaffold.new_project(store, "other")
    write_atom("EXP-001", summary="Other project's experiment", date="2026-03-07", target=other)
    settle()
    want = fresh()
    assert [brief.build(store, name).text for name in (None, "flywheel")] == want
    assert {p.name for p in (store.cache_dir / "brief").iterdir()} == \
        {"store.bin", "project-flywheel.bin"}
    with monkeypatch.context() as m:  # nothing changed: nothing is ranked again
        m.setattr(hippocampus, "parts", lambda *_: pytest.fail("ranked again"))
        assert [brief.build(store, name).text for name in (None, "flywheel")] == want

    def check(change: Callable[[], object], seen: str | None, gone: str | None) -> None:
        change()
        settle()
        got = [brief.build(store, name).text for name in (None, "flywheel")]
        for text in got:
            assert seen is None or seen in text
            assert gone is None or gone not in text
        assert got == fresh()
        brief.build(store)  # (cache again for the next change)
        brief.build(store, "flywheel")

    k1 = rich.root / "knowledge" / "K-001.md"
    edited = k1.read_text().replace("need the locale", "need the LOCALE")
    check(lambda: k1.open("r+").write(edited), "need the LOCALE", "need the locale")
    check(lambda: (rich.root / "knowledge" / "K-002.md").unlink(), None, "Old but critical")
    check(lambda: accesslog.append(rich.access_log, [accesslog.format_line(
        "PAT-001.md", "Read", "s", "2026-03-06T10:00:00.000Z")] * 2), "2 reads", None)
    check(lambda: os.rename(rich.root / "patterns" / "PAT-001.md",
                            rich.root / "patterns" / "PAT-009.md"), None, "2 reads")
    # written just now, then again in the same mtime tick (a coarse clock): its stat data
    # vouched for nothing the first time, so nothing was cached from it
    now = time.time_ns()
    k1.open("r+").write(edited.replace("LOCALE", "LOCALs"))
    os.utime(k1, ns=(now, now))
    assert "need the LOCALs" in brief.build(store, "flywheel").text
    k1.open("r+").write(edited.replace("LOCALE", "LOCALz"))
    os.utime(k1, ns=(now, now))
    assert "need the LOCALz" in brief.build(store, "flywheel").text


def test_one_project_store_briefs_that_project(store: Store, rich: Project) -> None:
    assert brief.build(store).text == brief.build(store, "flywheel").text


def test_broken_or_missing_governance_files_do_not_stop_the_brief(store: Store,
                                                                  rich: Project) -> None:
    (rich.root / "TASKS.yaml").write_text("tasks: [unclosed\n")
    (rich.root / "STATUS.md").unlink()
    (rich.root / "ISSUES.md").write_bytes(b"\xff\xfe garbage")
    text = brief.build(store, "flywheel").text
    assert "_STATUS.md is missing or empty._" in text
    assert "TASKS.yaml could not be read: invalid YAML" in text
    assert "## Strongest knowledge and patterns" in text


def test_cli_text_json_and_bad_input(store: Store, rich: Project, cli) -> None:
    result = cli("brief", "flywheel", "--budget", "300")
    assert result.exit_code == 0, result.output
    assert estimate(result.stdout) <= 300 and result.stdout.endswith("]\n")
    data = json.loads(cli("brief", "--format", "json").stdout)
    assert data["project"] == "flywheel" and data["budget"] == 4000
    assert [s["key"] for s in data["sections"]] == ["status", "tasks", "issues", "knowledge",
                                                    "experiments"]
    bad = cli("brief", "nope")
    assert bad.exit_code == 1 and "no project named 'nope'" in bad.stderr
    small = cli("brief", "--budget", "10")
    assert small.exit_code == 1 and "--budget 10 is too small" in small.stderr
    assert "Traceback" not in small.output


def test_empty_store(store: Store, cli) -> None:
    result = cli("brief")
    assert result.exit_code == 0
    assert "No projects yet" in result.stdout


def test_no_store(cli) -> None:
    result = cli("brief")
    assert result.exit_code == 1 and "run `cortex init`" in result.stderr


def test_a_banner_too_long_for_the_budget_is_said_in_one_compact_line() -> None:
    slots = [brief.Slot(f"s{n}", f"A rather long section title, number {n}",
                        [f"- item {i} of section {n}, written out at some length\n"
                         for i in range(30)], 1 / 12) for n in range(12)]
    text = brief.pack("# head\n", slots, 150)
    assert len(text) <= 600
    items = sum(s.omitted for s in slots)
    tokens = sum(s.omitted_tokens for s in slots)
    assert 0 < items < 360
    assert text.endswith(f"\n[cortex brief: {items:,} items (~{tokens:,} tokens) cut to fit "
                         "150 tokens; rerun with a larger --budget]\n")
    assert "Omitted:" not in text
