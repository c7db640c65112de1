"""cortexfs.cli.core: `cortex init`, --home, `cortex project new`."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortexfs.errors import NotAStoreError
from cortexfs.store import Store


def test_no_store_says_run_init(cli) -> None:
    result = cli("new", "exp", "-p", "x", "-s", "s", "-t", "a")
    assert result.exit_code == 1
    assert "run `cortex init`" in result.stderr
    assert "Traceback" not in result.output
    with pytest.raises(NotAStoreError):
        Store.open()


def test_init_twice_is_safe(cli, tmp_path: Path) -> None:
    assert cli("init").exit_code == 0
    user = tmp_path / "cortex" / "context" / "user" / "USER.md"
    user.write_text("mine\n")
    again = cli("init")
    assert again.exit_code == 0, again.output
    assert "already initialised" in again.output
    assert user.read_text() == "mine\n"
    for rel in ("CORTEX.md", "OVERVIEW.md", "decisions", "ideas", "scans", "projects"):
        assert (tmp_path / "cortex" / "context" / rel).exists()


def test_home_option_wins(cli, tmp_path: Path) -> None:
    other = tmp_path / "other"
    assert cli("--home", str(other), "init").exit_code == 0
    assert (other / "context" / "CORTEX.md").is_file()
    assert not (tmp_path / "cortex").exists()


def test_project_new_and_bad_name(cli, store) -> None:
    assert cli("project", "new", "flywheel").exit_code == 0
    root = store.projects_dir / "flywheel"
    for rel in ("experiments", "knowledge", "patterns", "_meta", "STATUS.md", "TASKS.yaml"):
        assert (root / rel).exists(), rel
    bad = cli("project", "new", "../evil")
    assert bad.exit_code == 1
    assert "invalid project name" in bad.stderr
    assert not (store.context / "evil").exists()


