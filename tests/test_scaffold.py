"""cortexfs.scaffold: `cortex init` and `cortex project new` create the layout, and never
overwrite what is there."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortexfs import layout, scaffold
from cortexfs.atoms import KINDS
from cortexfs.errors import InvalidInputError, NotAStoreError, OutsideStoreError
from cortexfs.store import Store


def test_init_creates_the_store_s_folders_and_files_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    created = scaffold.init_store(store)
    ctx = store.context
    assert {ctx / layout.CORTEX_MD, ctx / layout.OVERVIEW_MD,
            ctx / layout.USER / layout.USER_MD} <= set(created)
    for name in layout.STORE_FOLDERS:
        assert (ctx / name / layout.CORTEX_MD) in created
    assert all(path.is_file() for path in created) and store.exists()
    (ctx / layout.USER / layout.USER_MD).write_text("mine\n")
    assert scaffold.init_store(store) == []  # idempotent: nothing created, nothing replaced
    assert (ctx / layout.USER / layout.USER_MD).read_text() == "mine\n"


def test_init_refuses_a_home_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInputError, match=r"is a file, not a folder: choose another "
                                                r"CORTEX_HOME or --home$"):
        scaffold.init_store(Store(tmp_path / "file"))
    assert (tmp_path / "file").read_text() == "x"


def test_a_new_project_has_every_file_and_folder(store: Store) -> None:
    project, created = scaffold.new_project(store, "flywheel")
    for name in layout.PROJECT_FILES:
        assert (project.root / name) in created
    for folder in layout.PROJECT_FOLDERS:
        assert (project.root / folder / layout.CORTEX_MD) in created
    assert {k.folder for k in KINDS} <= {p.parent.name for p in created}
    assert project.meta_dir.is_dir()
    assert "flywheel" in (project.root / layout.CORTEX_MD).read_text()
    (project.root / layout.STATUS_MD).write_text("kept\n")
    assert scaffold.new_project(store, "flywheel")[1] == []
    assert (project.root / layout.STATUS_MD).read_text() == "kept\n"


def test_a_new_project_needs_a_store_and_a_good_name(tmp_path: Path, store: Store) -> None:
    with pytest.raises(NotAStoreError):
        scaffold.new_project(Store(tmp_path / "none"), "flywheel")
    with pytest.raises(InvalidInputError):
        scaffold.new_project(store, "../escape")
    assert not (store.context / "escape").exists()


def test_a_link_in_the_way_is_left_alone_and_nothing_is_written_through_it(
        store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (store.projects_dir / "linked").symlink_to(outside)
    with pytest.raises(OutsideStoreError):
        scaffold.new_project(store, "linked")
    assert list(outside.iterdir()) == []
    project, _ = scaffold.new_project(store, "flywheel")
    (project.root / layout.ISSUES_MD).unlink()
    (project.root / layout.ISSUES_MD).symlink_to(outside / "issues.md")
    assert scaffold.new_project(store, "flywheel")[1] == []
    assert not (outside / "issues.md").exists()
