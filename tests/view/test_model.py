"""cortexfs.view.model: what the site shows of a project, one spelling per atom id."""

from __future__ import annotations

from cortexfs import scaffold
from cortexfs.store import Project, Store
from cortexfs.view.model import canonical_id, select, status_class


def test_one_spelling_per_id() -> None:
    assert canonical_id("EXP-007") == canonical_id("EXP-7") == canonical_id("EXP-0007") \
        == "EXP-7"
    assert canonical_id("EXP-042b") == "EXP-42b" and canonical_id("K-010") == "K-10"
    assert canonical_id("PAT-001") == "PAT-1"
    assert canonical_id("README") == "README" and canonical_id("EXP-x") == "EXP-x"


def test_status_colours_are_their_group_with_challenged_apart() -> None:
    assert status_class("challenged", "active") == "challenged"
    assert status_class("valid", "active") == "active"
    assert status_class("refined", "superseded") == "superseded"


def test_select_names_the_projects_shown_and_why_others_are_not(store: Store,
                                                                project: Project) -> None:
    scaffold.new_project(store, "other")
    (store.projects_dir / "bad name").mkdir()
    shown, skipped = select(store, None)
    assert [p.name for p in shown] == ["flywheel", "other"]
    assert skipped == ["bad name: not a valid project name (rename the folder)"]
    assert [p.name for p in select(store, ["other"])[0]] == ["other"]
