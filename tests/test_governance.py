"""Governance checks (SPEC §6) as validation findings: each with a failing and a passing store."""

from __future__ import annotations

import json

import pytest

from cortexfs import governance, validate
from cortexfs.status import read_status
from cortexfs.store import Project, Store
from cortexfs.validate import Finding

STATUS = """\
# Status — flywheel

## Current phase

Phase 2 — building the loader.

## Recent progress

- EXP-001 measured the baseline.

## Open blockers

- None.

## Next steps

- Write the loader.
"""


COMPLETE = """\
# 0001: Store atoms as files

- **Date**: 2026-03-01
- **Status**: accepted

## Context

Agents need memory they can read.

## Alternatives

- Markdown files in git.
- SQLite.

## Decision

Markdown files in git.

## Consequences

Indexes must be generated.
"""


def _findings(store: Store, rule: str | None = None) -> list[Finding]:
    found = [*governance.check(store, store.projects()), *governance.store_check(store)]
    return [f for f in found if rule is None or f.rule == rule]


def _pad(text: str, lines: int) -> str:
    have = len(text.splitlines())
    return text + "".join(f"- line {i}\n" for i in range(lines - have))


def test_scaffolded_store_and_project_pass(project: Project) -> None:
    assert _findings(project.store) == []


def test_registered_with_validate() -> None:
    assert "cortexfs.governance:check" in validate.EXTRA_CHECKS


# --- STATUS.md ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lines, severity", [(80, None), (81, "warning"), (120, "warning"),
                                             (121, "error")])
def test_status_length(project: Project, lines: int, severity: str | None) -> None:
    (project.root / "STATUS.md").write_text(_pad(STATUS, lines))
    found = _findings(project.store, "status-md")
    if severity is None:
        assert found == []
    else:
        assert [f.severity for f in found] == [severity]
        assert f"STATUS.md has {lines} lines" in found[0].message
        assert found[0].path == "projects/flywheel/STATUS.md"


def test_status_sections_missing(project: Project) -> None:
    (project.root / "STATUS.md").write_text("# Status\n\n## Current phase\n\nOne.\n\n"
                                            "## Notes\n\n- next: none\n")
    found = _findings(project.store, "status-md")
    assert {f.message for f in found} == {
        "STATUS.md has no 'Recent progress' section: add `## Recent progress`",
        "STATUS.md has no 'Open blockers' section: add `## Open blockers`",
        "STATUS.md has no 'Next steps' section: add `## Next steps`",
    }
    assert all(f.severity == "error" for f in found)


def test_status_headings_match_loosely(project: Project) -> None:
    (project.root / "STATUS.md").write_text(
        "# Status\n\n## Current Phase: 3 — ship\n\n## PROGRESS this week\n\n"
        "### Blockers\n\n## What's next?\n")
    assert _findings(project.store, "status-md") == []
    info = read_status((project.root / "STATUS.md").read_text())
    assert info.phase == "3 — ship"


def test_status_phase_is_the_first_line_of_its_section() -> None:
    info = read_status(STATUS)
    assert info.phase == "Phase 2 — building the loader."
    assert info.missing == []


# --- ISSUES.md, USER.md, missing files ---------------------------------------------------------


def test_issues_length(project: Project) -> None:
    path = project.root / "ISSUES.md"
    path.write_text(_pad("# Issues\n", 80))
    assert _findings(project.store, "issues") == []
    path.write_text(_pad("# Issues\n", 81))
    [f] = _findings(project.store, "issues")
    assert f.severity == "error" and "81 lines, over the 80-line limit" in f.message


def test_user_md_size(store: Store) -> None:
    path = store.context / "user" / "USER.md"
    path.write_bytes(b"x" * 3071)
    assert _findings(store, "user") == []
    path.write_bytes(b"x" * 3072)
    [f] = _findings(store, "user")
    assert f.severity == "error" and f.path == "user/USER.md"
    assert "3,072 bytes, over the 3 KB limit" in f.message


def test_missing_governance_files(project: Project) -> None:
    (project.root / "mission.md").unlink()
    (project.root / "TASKS.yaml").unlink()
    found = _findings(project.store, "governance-file")
    assert [f.path for f in found] == ["projects/flywheel/mission.md",
                                       "projects/flywheel/TASKS.yaml"]
    assert all(f.severity == "warning" and "cortex project new flywheel" in f.message
               for f in found)


def test_a_governance_file_that_is_a_folder_is_an_error_not_missing(project: Project) -> None:
    (project.root / "TASKS.yaml").unlink()
    (project.root / "TASKS.yaml").mkdir()  # `project new` would keep it and add nothing
    [f] = _findings(project.store, "governance-file")
    assert f.severity == "error" and f.message.startswith("TASKS.yaml is a folder, not a file")


# --- TASKS.yaml and decisions --------------------------------------------------------------------


def test_tasks_findings_carry_file_and_line(project: Project) -> None:
    (project.root / "TASKS.yaml").write_text(
        "tasks:\n  - {id: T-1, text: a, status: todo, depends-on: [T-2]}\n"
        "  - {id: T-2, text: b, status: todo, depends-on: [T-1]}\n")
    [f] = _findings(project.store, "tasks")
    assert (f.severity, f.path, f.line) == ("error", "projects/flywheel/TASKS.yaml", 2)
    assert "dependency cycle T-1 → T-2 → T-1" in f.message
    (project.root / "TASKS.yaml").write_text("tasks:\n  - id: T-1\n   text: x\n")
    [f] = _findings(project.store, "tasks")
    assert f.line == 3 and "invalid YAML" in f.message


def test_decision_findings(project: Project) -> None:
    folder = project.root / "decisions"
    (folder / "0001-good.md").write_text(COMPLETE)
    assert _findings(project.store, "decision") == []
    (folder / "0002-thin.md").write_text("# 0002: Thin\n\n- **Date**: 2026-03-01\n")
    (folder / "Some Decision.md").write_text(COMPLETE)
    (folder / "0001-again.md").write_text(COMPLETE)
    found = _findings(project.store, "decision")
    by_path: dict[str, list[str]] = {}
    for f in found:
        by_path.setdefault(f.path, []).append(f.message)
    thin = by_path["projects/flywheel/decisions/0002-thin.md"]
    assert any("no Status" in m for m in thin) and any("no Alternatives" in m for m in thin)
    assert any("not named NNNN-title.md" in m
               for m in by_path["projects/flywheel/decisions/Some Decision.md"])
    assert any("0001 is also used by 0001-again.md" in m
               for m in by_path["projects/flywheel/decisions/0001-good.md"])


def test_system_decisions_are_checked(store: Store) -> None:
    (store.context / "decisions" / "0001-x.md").write_text("# x\n")
    found = _findings(store, "decision")
    assert found and all(f.path == "decisions/0001-x.md" for f in found)


# --- CORTEX.md in every folder -------------------------------------------------------------------


def test_every_folder_needs_a_cortex_md(project: Project) -> None:
    store = project.store
    (store.context / "ideas" / "graph-memory").mkdir()
    (store.context / "ideas" / "graph-memory" / "notes.md").write_text("# Notes\n")
    (store.context / "ideas" / "empty").mkdir()  # git would not keep it: no finding
    (store.context / ".obsidian").mkdir()
    (store.context / ".obsidian" / "app.json").write_text("{}")
    (project.root / "_drafts").mkdir()
    (project.root / "_drafts" / "x.md").write_text("x")
    [f] = _findings(store, "cortex-md")
    assert (f.severity, f.path) == ("warning", "ideas/graph-memory/CORTEX.md")
    assert "run `cortex index regen --all`" in f.message
    (store.context / "ideas" / "graph-memory" / "CORTEX.md").write_text("# Graph memory\n")
    assert _findings(store, "cortex-md") == []


def test_broken_markers_are_reported(project: Project) -> None:
    from cortexfs.layout import GENERATED_END

    path = project.root / "CORTEX.md"
    path.write_text(path.read_text().replace(GENERATED_END, ""))
    [f] = _findings(project.store, "cortex-md")
    assert f.path == "projects/flywheel/CORTEX.md" and "markers are broken" in f.message


# --- through `cortex validate` -------------------------------------------------------------------


def test_cortex_validate_reports_governance(cli, project: Project) -> None:
    (project.root / "STATUS.md").write_text("# Status\n")
    r = cli("validate", "--format", "json")
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    rules = {(f["rule"], f["path"]) for f in data["findings"]}
    assert ("status-md", "projects/flywheel/STATUS.md") in rules
    (project.root / "STATUS.md").write_text(STATUS)
    r = cli("validate")
    assert r.exit_code == 0, r.output


# --- the scaffold ------------------------------------------------------------------------------


def test_project_new_writes_the_governance_files(project: Project) -> None:
    from cortexfs import tasks

    for name in ("CORTEX.md", "mission.md", "roadmap.md", "STATUS.md", "ISSUES.md",
                 "TASKS.yaml", "tasks-archive.md", "decisions/CORTEX.md"):
        assert (project.root / name).is_file(), name
    assert read_status((project.root / "STATUS.md").read_text()).missing == []
    tf = tasks.load(project)
    assert tf.problems == [] and tf.tasks == []


def test_store_templates_override_the_packaged_ones(store: Store) -> None:
    from cortexfs import scaffold

    override = store.templates_dir / "project" / "STATUS.md.j2"
    override.parent.mkdir(parents=True)
    override.write_text("# Our status for {{ project }}\n\n## Current phase\n\n## Recent "
                        "progress\n\n## Open blockers\n\n## Next steps\n")
    p, _ = scaffold.new_project(store, "custom")
    assert (p.root / "STATUS.md").read_text().startswith("# Our status for custom\n")
    assert (p.root / "mission.md").read_text().startswith("# Mission — custom")


def test_unreadable_tasks_file_is_a_finding_not_a_crash(project: Project) -> None:
    path = project.root / "TASKS.yaml"
    path.write_bytes(b"tasks:\n  - id: T-1\n    text: \xff\xfe\n")
    [f] = _findings(project.store, "tasks")
    assert f.severity == "error" and "not UTF-8" in f.message
    path.write_text("# x\n" * 300_000)
    [f] = _findings(project.store, "tasks")
    assert "over the 1,000,000-byte limit" in f.message
