"""`cortex ready`: every gap on a store that has it, and the same store ready once it is fixed."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import stores
from stores import Templates, with_flywheel

from cortexfs import cache, ready, scaffold, validate
from cortexfs.regen import regenerate
from cortexfs.store import Project, Store

MISSION = "# Mission — flywheel\n\n## Goal\n\nMake the flywheel spin.\n"
ROADMAP = "# Roadmap — flywheel\n\n## Phase 1\n\n- [x] it turns\n- [ ] it spins\n"
STATUS = """\
# Status — flywheel

## Current phase

Phase 1 — spinning up (see EXP-001).

## Recent progress

- EXP-001 measured the baseline.

## Open blockers

- None.

## Next steps

- Spin faster.
"""


def _git(store: Store, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=store.home, capture_output=True, text=True,
                          check=True, env={**os.environ, **(env or {})}).stdout


def _commit_all(store: Store, message: str = "work", env: dict[str, str] | None = None) -> None:
    _git(store, "add", "-A")
    _git(store, "commit", "-qm", message, "--allow-empty", env=env)


def _regen_and_commit(store: Store) -> None:
    regenerate(store)
    _commit_all(store, "regen")


@pytest.fixture
def good(project: Project, templates: Templates) -> Project:
    """A project a fresh session could pick up: everything written, generated and committed
    (made once per test process, copied over `project`)."""
    return templates.copy("ready-good", _good, project.store.home).project("flywheel")


def _good(store: Store) -> None:
    with_flywheel(store)
    project = store.project("flywheel")
    today = dt.date.today().isoformat()
    stores.write_atom(project, "EXP-001", date=today)
    stores.write_atom(project, "K-001", date=today)
    (project.root / "mission.md").write_text(MISSION)
    (project.root / "roadmap.md").write_text(ROADMAP)
    (project.root / "STATUS.md").write_text(STATUS)
    _regen_and_commit(store)


def _gaps(store: Store, project: str | None = None) -> list[ready.Gap]:
    return ready.check(store, project).gaps


def _checks(store: Store, project: str | None = None) -> set[str]:
    return {g.check for g in _gaps(store, project)}


def test_a_good_store_is_ready(cli, good: Project) -> None:
    assert _gaps(good.store) == []
    r = cli("ready")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("ready: a fresh session can pick up the work")
    data = json.loads(cli("ready", "flywheel", "--format", "json").stdout)
    assert data == {"ready": True, "projects": ["flywheel"], "gaps": []}


def test_validation_errors(good: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-002", frontmatter="id: EXP-002\ndate: 2026-01-01\nproject: flywheel\n"
               "tags: [a]\n")
    _regen_and_commit(good.store)
    gaps = _gaps(good.store)
    assert [g.check for g in gaps] == ["validation:required"]
    assert gaps[0].path == "context/projects/flywheel/experiments/EXP-002.md"
    assert "needs `summary`" in gaps[0].message


def test_generated_files_out_of_date(good: Project) -> None:
    atom = good.root / "experiments" / "EXP-001.md"
    atom.write_text(atom.read_text().replace("A summary", "A new summary"))
    _commit_all(good.store)
    [gap] = _gaps(good.store)
    assert gap.check == "derived"
    assert "context/projects/flywheel/experiments/index.md" in gap.message
    assert "cortex index regen --all" in gap.fix
    _regen_and_commit(good.store)
    assert _gaps(good.store) == []


def test_uncommitted_changes(good: Project) -> None:
    (good.root / "ISSUES.md").write_text("# Issues — flywheel\n\nnew one\n")
    [gap] = _gaps(good.store)
    assert gap.check == "uncommitted"
    assert "context/projects/flywheel/ISSUES.md" in gap.message
    # another project's edits do not make this one unready
    other, _ = scaffold.new_project(good.store, "other")
    _commit_all(good.store)
    (other.root / "ISSUES.md").write_text("x\n")
    assert "uncommitted" in _checks(good.store)
    assert "uncommitted" not in _checks(good.store, "flywheel")


def test_unpushed_commits(good: Project, tmp_path: Path) -> None:
    store = good.store
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    _git(store, "remote", "add", "origin", str(remote))
    [gap] = _gaps(store)
    assert gap.check == "unpushed" and "no upstream" in gap.message
    _git(store, "push", "-q", "-u", "origin", "HEAD")
    assert _gaps(store) == []
    _commit_all(store, "local only")
    [gap] = _gaps(store)
    assert gap.check == "unpushed" and "1 commit not pushed to origin/" in gap.message
    _git(store, "push", "-q")
    assert _gaps(store) == []


def test_not_a_repository(good: Project) -> None:
    shutil.rmtree(good.store.home / ".git")
    gaps = _gaps(good.store)
    assert [g.check for g in gaps] == ["git"]
    assert "not a git repository" in gaps[0].message


def test_status_missing(good: Project) -> None:
    (good.root / "STATUS.md").unlink()
    _regen_and_commit(good.store)
    gaps = [g for g in _gaps(good.store) if g.check == "status"]
    assert len(gaps) == 1 and "STATUS.md is missing" in gaps[0].message


def test_status_over_limit_and_missing_section(good: Project) -> None:
    text = STATUS.replace("## Open blockers\n\n- None.\n\n", "") + "- more\n" * 120
    (good.root / "STATUS.md").write_text(text)
    _regen_and_commit(good.store)
    gaps = _gaps(good.store)
    assert {g.check for g in gaps} == {"validation:status-md"}
    messages = " ".join(g.message for g in gaps)
    assert "over the 120-line limit" in messages and "no 'Open blockers' section" in messages
    assert all("at most 120 lines" in g.fix for g in gaps)


def test_status_older_than_newest_atom(project: Project, write_atom: Callable[..., Path]) -> None:
    store = project.store
    today = dt.date.today()
    (project.root / "mission.md").write_text(MISSION)
    (project.root / "roadmap.md").write_text(ROADMAP)
    (project.root / "STATUS.md").write_text(STATUS)
    write_atom("EXP-001", date=(today - dt.timedelta(days=20)).isoformat())
    regenerate(store)
    old = f"{(today - dt.timedelta(days=10)).isoformat()}T12:00:00"
    _commit_all(store, "old status", env={"GIT_COMMITTER_DATE": old, "GIT_AUTHOR_DATE": old})
    # the working copy's mtime is new; the commit date is what counts
    assert _gaps(store) == []
    write_atom("EXP-002", date=(today + dt.timedelta(days=30)).isoformat())  # a typo: ignored
    _regen_and_commit(store)  # STATUS.md's last commit is still the old one
    assert _gaps(store) == []
    write_atom("K-001", date=(today - dt.timedelta(days=5)).isoformat())
    _regen_and_commit(store)
    [gap] = _gaps(store)
    assert gap.check == "status-stale"
    assert f"last updated {(today - dt.timedelta(days=10)).isoformat()}, before the newest " \
           f"atom K-001" in gap.message
    # an uncommitted rewrite counts by its modification time (and is uncommitted)
    status = project.root / "STATUS.md"
    status.write_text(STATUS + "\n")
    assert _checks(store) == {"uncommitted"}
    stamp = (dt.datetime.now() - dt.timedelta(days=8)).timestamp()
    os.utime(status, (stamp, stamp))
    assert _checks(store) == {"uncommitted", "status-stale"}
    os.utime(status, None)
    _commit_all(store, "status rewritten")
    assert _gaps(store) == []


def test_mission_and_roadmap(good: Project) -> None:
    (good.root / "mission.md").unlink()
    rendered = scaffold.templates.render(good.store, "project/roadmap.md.j2", project="flywheel",
                                         date="x", generated_block="")
    (good.root / "roadmap.md").write_text(rendered)
    _regen_and_commit(good.store)
    gaps = [g for g in _gaps(good.store) if g.check == "charter"]
    assert [g.message for g in gaps] == ["mission.md is missing",
                                         "roadmap.md is still the unfilled template"]


def test_a_linked_mission_is_a_missing_mission(good: Project, tmp_path: Path) -> None:
    """A link is not part of the store (a clone holds the link, not what it points at)."""
    outside = tmp_path / "elsewhere.md"
    outside.write_text((good.root / "mission.md").read_text() + "\nFilled in, elsewhere.\n")
    (good.root / "mission.md").unlink()
    (good.root / "mission.md").symlink_to(outside)
    _regen_and_commit(good.store)
    assert [g.message for g in _gaps(good.store) if g.check == "charter"] == [
        "mission.md is missing"]


def test_the_unfilled_template_follows_a_new_template(good: Project,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from cortexfs import templates

    rendered = templates.render(good.store, "project/roadmap.md.j2", project="flywheel",
                                date="", generated_block="")
    (good.root / "roadmap.md").write_text(rendered)
    _regen_and_commit(good.store)
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() + 10**10)  # stat data trusted
    for _ in range(2):  # rendered, then remembered
        assert [g.message for g in _gaps(good.store) if g.check == "charter"] == [
            "roadmap.md is still the unfilled template"]
    override = good.store.templates_dir / "project" / "roadmap.md.j2"
    override.parent.mkdir(parents=True)
    override.write_text("# Roadmap of {{ project }}\n\nA different starting text.\n")
    os.utime(override, (real() / 1e9 - 60, real() / 1e9 - 60))
    assert [g for g in _gaps(good.store) if g.check == "charter"] == []
    (good.root / "roadmap.md").write_text("# Roadmap of flywheel\n\nA different starting "
                                          "text.\n")
    _regen_and_commit(good.store)
    assert [g.message for g in _gaps(good.store) if g.check == "charter"] == [
        "roadmap.md is still the unfilled template"]


def test_knowledge_without_evidence(good: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("K-002", extra="evidence: []\n")
    write_atom("K-003", extra="")
    write_atom("K-004", extra="evidence: [EXP-404]\n")
    _regen_and_commit(good.store)
    gaps = _gaps(good.store)
    evidence = [g for g in gaps if g.check == "knowledge-evidence"]
    assert [g.message for g in evidence] == [
        "K-002 lists no evidence", "K-003 lists no evidence",
        "K-004 cites only experiments that do not exist (EXP-404)"]
    # the same problem is not listed a second time as a validation error
    assert not [g for g in gaps if g.check.startswith("validation")]


def test_broken_links(good: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-002", extra="links: [K-404]\n")
    (good.root / "STATUS.md").write_text(
        STATUS + "\nSee [the plan](roadmap.md), [gone](notes/plan.md), "
        "[web](https://example.com), and EXP-999. `EXP-998` is code.\n")
    (good.root / "CORTEX.md").write_text((good.root / "CORTEX.md").read_text()
                                         + "\n[missing](nowhere.md)\n")
    _regen_and_commit(good.store)
    gaps = [g for g in _gaps(good.store) if g.check == "broken-link"]
    messages = sorted(g.message for g in gaps)
    assert any("links to K-404" in m for m in messages), messages
    assert any("STATUS.md:19: the link to notes/plan.md leads nowhere" in m
               for m in messages), messages
    assert any("STATUS.md:19: cites EXP-999, which exists in no project" in m for m in messages)
    assert any("CORTEX.md" in m and "nowhere.md" in m for m in messages)


def test_dangling_hippocampus_pointer(good: Project) -> None:
    hippo = good.store.context / "HIPPOCAMPUS.md"
    assert hippo.is_file()
    hippo.write_text(hippo.read_text() + "\n### gone\nA lost entry\n→ projects/flywheel/"
                     "experiments/EXP-404.md\n")
    _commit_all(good.store)
    checks = _checks(good.store)
    assert "hippocampus" in checks
    [gap] = [g for g in _gaps(good.store) if g.check == "hippocampus"]
    assert "EXP-404.md" in gap.message


def test_unknown_project(cli, good: Project) -> None:
    r = cli("ready", "nope")
    assert r.exit_code == 1 and "no project named 'nope'" in r.stderr


# --- end to end: an agent builds a project, ready fails for each gap, then passes -------------


def test_end_to_end_like_an_agent(cli, store: Store) -> None:
    def gaps() -> set[str]:
        r = cli("ready", "--format", "json")
        data = json.loads(r.stdout)
        assert r.exit_code == (0 if data["ready"] else 1)
        return {g["check"] for g in data["gaps"]}

    assert cli("project", "new", "flywheel").exit_code == 0
    root = store.projects_dir / "flywheel"
    exp = cli("new", "exp", "-p", "flywheel", "-s", "Baseline throughput", "-t", "perf,baseline")
    assert exp.exit_code == 0, exp.output
    k = cli("new", "k", "-p", "flywheel", "-s", "Throughput is IO bound", "-t", "perf",
            "-e", "EXP-001")
    assert k.exit_code == 0, k.output
    # fresh scaffold: templates not filled in (every writing command regenerates)
    assert gaps() == {"charter"}
    assert cli("index", "regen", "--all").exit_code == 0
    assert gaps() == {"charter"}
    (root / "mission.md").write_text(MISSION)
    (root / "roadmap.md").write_text(ROADMAP)
    assert gaps() == {"uncommitted"}
    _commit_all(store, "charter")
    assert gaps() == set()
    # tasks: a cycle is a validation error
    assert cli("tasks", "add", "Profile the IO path", "--priority", "P1").exit_code == 0
    assert cli("tasks", "add", "Try async IO", "-d", "T-1").exit_code == 0
    tasks_file = root / "TASKS.yaml"
    tasks_file.write_text(tasks_file.read_text().replace(
        "    text: Profile the IO path\n",
        "    text: Profile the IO path\n    depends-on: [T-2]\n"))
    assert gaps() == {"validation:tasks", "uncommitted"}
    tasks_file.write_text(tasks_file.read_text().replace("    depends-on: [T-2]\n", ""))
    _commit_all(store, "tasks")
    assert gaps() == set()
    # STATUS.md loses a section
    status = root / "STATUS.md"
    status.write_text(status.read_text().split("## Next steps")[0])
    _commit_all(store, "status")
    assert gaps() == {"validation:status-md"}
    status.write_text(STATUS)
    # STATUS.md written days ago; then a new atom, not regenerated, with a broken link
    past = f"{(dt.date.today() - dt.timedelta(days=3)).isoformat()}T12:00:00"
    _commit_all(store, "status back", env={"GIT_COMMITTER_DATE": past})
    (root / "experiments" / "EXP-002.md").write_text(
        f"---\nid: EXP-002\ndate: {dt.date.today().isoformat()}\nproject: flywheel\n"
        "summary: \"Async IO\"\ntags: [perf]\nlinks: [EXP-404]\n---\n\nBody.\n")
    assert gaps() == {"uncommitted", "derived", "status-stale", "broken-link"}
    (root / "experiments" / "EXP-002.md").write_text(
        (root / "experiments" / "EXP-002.md").read_text().replace("EXP-404", "EXP-001"))
    assert cli("index", "regen", "--all").exit_code == 0
    _commit_all(store, "exp 2")
    assert gaps() == {"status-stale"}
    status.write_text(STATUS.replace("Spin faster.", "Try async IO (EXP-002)."))
    _commit_all(store, "status")
    assert gaps() == set()
    r = cli("ready")
    assert r.exit_code == 0 and r.stdout.startswith("ready:")


# --- the cache of file-derived gaps --------------------------------------------------------------


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count full runs of the file checks (each starts the atoms' validation once); trust
    stat data however recent (tests are fast)."""
    calls: list[int] = []
    real = validate.many_findings

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(validate, "many_findings", spy)
    monkeypatch.setattr(cache, "RACY_NS", -10_000_000_000)
    return calls


def test_nothing_changed_reuses_the_file_checks(good: Project, counted: list[int]) -> None:
    first = ready.check(good.store)
    second = ready.check(good.store)
    assert len(counted) == 1
    assert first.to_json() == second.to_json()
    assert ready.check(good.store, use_cache=False).to_json() == first.to_json()
    assert len(counted) == 2


def test_a_new_commit_runs_the_file_checks_again(good: Project, counted: list[int]) -> None:
    first = ready.check(good.store)
    _commit_all(good.store, "nothing changed but HEAD")  # (which STATUS.md dates are committed)
    assert ready.check(good.store).to_json() == first.to_json()
    assert len(counted) == 2


def test_cached_gaps_come_back_with_fresh_git_gaps(good: Project, counted: list[int]) -> None:
    (good.root / "mission.md").unlink()
    _commit_all(good.store)
    first = [g.check for g in _gaps(good.store)]
    assert "charter" in first
    (good.store.home / "scratch.txt").write_text("x")  # outside context/: only git sees it
    second = [g.check for g in _gaps(good.store)]
    assert len(counted) == 1
    assert sorted(second) == sorted([*first, "uncommitted"])


def test_any_change_runs_the_checks_again(good: Project, counted: list[int]) -> None:
    _gaps(good.store)
    atom = good.root / "experiments" / "EXP-001.md"
    atom.write_text(atom.read_text().replace("A summary", "B summary"))
    assert "derived" in _checks(good.store)
    assert len(counted) == 2
    _regen_and_commit(good.store)
    assert _gaps(good.store) == []
    assert len(counted) == 3
    _git(good.store, "commit", "-q", "--allow-empty", "-m", "empty")  # HEAD moved
    _gaps(good.store)
    assert len(counted) == 4
    assert _gaps(good.store, "flywheel") == []  # another scope, its own entry
    assert len(counted) == 5


def test_a_change_beside_the_atoms_runs_the_checks_again(good: Project,
                                                        counted: list[int]) -> None:
    """The atom folders enter the key as the loader scanned them; their other entries (and
    what is in a sub-folder of one) are stat-ed as every other file is."""
    _gaps(good.store)
    notes = good.root / "experiments" / "notes.txt"
    notes.write_text("x")
    _gaps(good.store)
    notes.write_text("xy")
    _gaps(good.store)
    (good.root / "experiments" / "old").mkdir()
    (good.root / "experiments" / "old" / "EXP-000.md").write_text("x")
    _gaps(good.store)
    assert len(counted) == 4
    _gaps(good.store)
    assert len(counted) == 4


def test_recent_files_are_not_trusted(good: Project, counted: list[int],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "RACY_NS", 3600_000_000_000)
    _gaps(good.store)
    _gaps(good.store)
    assert len(counted) == 2


def test_cli_no_cache(cli, good: Project, counted: list[int]) -> None:
    assert cli("ready").exit_code == 0
    assert cli("ready").exit_code == 0
    assert len(counted) == 1
    assert cli("ready", "--no-cache").exit_code == 0
    assert len(counted) == 2
