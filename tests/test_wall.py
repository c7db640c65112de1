"""The store's wall (cortexfs.wall): a symbolic link in the store is not part of it.

Links planted in a store point at files and folders outside it; every command runs; nothing
outside is read (its atime stays put), written or listed, no command crashes, and
`cortex validate` names each link once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cortexfs import wall
from cortexfs.errors import OutsideStoreError
from cortexfs.store import Project, Store


def plant(store: Store, project: Project, outside: Any) -> None:
    """Links of every kind the issue names, pointing out of the store."""
    from cortexfs import scaffold

    root = project.root
    o = outside.root
    (root / "experiments" / "EXP-002.md").symlink_to(o / "atom.md")
    (root / "knowledge").mkdir(exist_ok=True)
    (root / "knowledge" / "K-001.md").symlink_to(o / "passwd")
    (root / "STATUS.md").unlink()
    (root / "STATUS.md").symlink_to(o / "passwd")
    (root / "ISSUES.md").unlink()
    (root / "ISSUES.md").symlink_to(o / "passwd")
    project.access_log.unlink(missing_ok=True)
    project.access_log.symlink_to(o / "log.jsonl")
    (store.projects_dir / "evil").symlink_to(o / "project")  # a project folder
    other, _ = scaffold.new_project(store, "other")
    for p in other.meta_dir.iterdir():
        p.unlink()
    other.meta_dir.rmdir()
    other.meta_dir.symlink_to(o / "meta")  # _meta
    for p in (other.root / "patterns").iterdir():
        p.unlink()
    (other.root / "patterns").rmdir()
    (other.root / "patterns").symlink_to(o / "folder")  # an atom folder
    (store.context / ".hippocampus").symlink_to(o / "hippocampus")
    (store.templates_dir / "index").mkdir(parents=True)
    (store.templates_dir / "index" / "experiments.md.j2").symlink_to(o / "passwd")
    outside.reset_atimes()


COMMANDS = [
    ["validate"], ["index", "regen", "--all"], ["recall", "secret outside", "--no-dense"],
    ["brief"], ["brief", "-p", "flywheel"], ["ready"], ["maintain"], ["tasks", "list"],
    ["project", "list"], ["status"], ["tasks", "add", "a task", "-p", "flywheel"],
    ["new", "exp", "-p", "flywheel", "-s", "inside", "-t", "a"],
    ["new", "pat", "-p", "other", "-s", "a pattern", "-t", "a", "--sources", "EXP-001"],
    ["new", "exp", "-p", "evil", "-s", "into a linked project", "-t", "a"],
    ["new", "exp", "-p", "other", "-s", "beside a linked _meta", "-t", "a"],
    ["decision", "new", "A decision", "-p", "flywheel"], ["index", "regen", "--all"],
    ["memory", "lint"],
]


def _run_everything(cli: Any, store: Store, project: Project, outside: Any) -> list[str]:
    from cortexfs import hook, mcp_server, recall

    said = []
    for args in COMMANDS:
        result = cli(*args)
        assert result.exit_code in (0, 1), (args, result.output)
        assert "internal error" not in result.stderr and "Traceback" not in result.output
        assert outside.MARKER not in result.stdout, args
        said.append(result.stdout + result.stderr)
        outside.assert_untouched(" ".join(args))
    # MCP: read_atom returns only atoms of the store; add_atom never writes through a link
    with pytest.raises(OutsideStoreError, match="symbolic link"):
        recall.read_atom(store, "EXP-002", "flywheel")
    with pytest.raises(OutsideStoreError):
        recall.read_atom(store, "K-001")
    assert "EXP-001" in recall.read_atom(store, "EXP-001", "flywheel").text
    with pytest.raises(OutsideStoreError):
        mcp_server.add_atom(store, "exp", "evil", "via mcp", ["a"])
    mcp_server.add_atom(store, "exp", "other", "via mcp", ["a"], commit=False)
    outside.assert_untouched("mcp")
    # the hook: a read of an atom appends to no linked log, and a read through a link
    # to a file outside counts nothing
    for path in (project.root / "experiments" / "EXP-001.md",
                 project.root / "experiments" / "EXP-002.md",
                 store.projects_dir / "other" / "experiments" / "EXP-001.md"):
        payload = {"session_id": "s", "cwd": str(store.home), "tool_name": "Read",
                   "tool_input": {"file_path": str(path)}, "tool_response": {}}
        assert hook.main(["--home", str(store.home)], json.dumps(payload).encode()) == 0
    outside.assert_untouched("the hook")
    return said


def test_links_out_of_the_store_are_never_followed(
        cli: Any, store: Store, project: Project, write_atom: Any, outside: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_AUTOCOMMIT", "0")
    write_atom("EXP-001")
    write_atom("EXP-001", target=_other(store))
    plant(store, project, outside)
    said = _run_everything(cli, store, project, outside)
    validate = said[0]
    for rel in ("projects/flywheel/experiments/EXP-002.md", "projects/flywheel/knowledge/K-001.md",
                "projects/flywheel/STATUS.md", "projects/flywheel/ISSUES.md",
                "projects/flywheel/_meta/access-log.jsonl", "projects/evil",
                "projects/other/_meta", "projects/other/patterns", ".hippocampus",
                "../templates/index/experiments.md.j2"):
        assert validate.count(f"  {rel}  ") == 1, (rel, validate)  # once each
    assert "symbolic link" in validate
    assert not (outside.root / "project" / "experiments").exists()


def _other(store: Store) -> Project:
    from cortexfs import scaffold

    return scaffold.new_project(store, "other")[0]


def test_reason_names_the_link(tmp_path: Path) -> None:
    root = tmp_path / "context"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f").write_text("x")
    (root / "link").symlink_to(tmp_path)
    (root / "a" / "flink").symlink_to(root / "a" / "f")  # even to a file inside
    assert wall.reason(root, root / "a" / "f") is None
    assert wall.reason(root, root / "a" / "new" / "deeper") is None  # not there yet
    assert wall.reason(root, root / "a" / "flink") == "a symbolic link"
    assert wall.reason(root, root / "link" / "x") == "inside link, which is a symbolic link"
    assert wall.reason(root, tmp_path / "elsewhere") == "outside the store"
    assert "'..'" in (wall.reason(root, root / "a" / ".." / ".." / "x") or "")
    assert wall.reason(root, str(root / "a") + "\0x") == "a path with a NUL character"
    linked_root = tmp_path / "via-link"
    linked_root.symlink_to(root)  # the root itself may be reached through a link
    assert wall.reason(linked_root, linked_root / "a" / "f") is None
    with pytest.raises(OutsideStoreError):
        wall.open_inside(root, root / "a" / "flink", os.O_RDONLY)
    with pytest.raises(FileNotFoundError):  # a reader skipping missing files skips links
        wall.read_bytes(root, root / "link" / "x", 10)
    assert wall.links(root) == [str(root / "a" / "flink"), str(root / "link")]


def test_text_or_none_reads_only_what_is_a_text_file_of_the_store(tmp_path: Path) -> None:
    root = tmp_path / "context"
    root.mkdir()
    (root / "STATUS.md").write_bytes(b"phase: \xff\n")
    (root / "big.md").write_text("x" * 11)
    (root / "link.md").symlink_to(root / "STATUS.md")
    (root / "folder.md").mkdir()
    os.mkfifo(root / "fifo.md")  # must not block
    assert wall.text_or_none(root, root / "STATUS.md") == "phase: \ufffd\n"
    assert wall.text_or_none(root, root / "big.md", limit=10) is None
    for name in ("link.md", "folder.md", "fifo.md", "missing.md"):
        assert wall.text_or_none(root, root / name) is None, name
    assert wall.text_or_none(root, tmp_path / "outside.md") is None


def test_a_linked_knowledge_root_is_not_a_store(cli: Any, store: Store, tmp_path: Path) -> None:
    # context/ arriving as a link (a synced tree can hold one) would move the wall itself
    real = tmp_path / "elsewhere"
    store.context.rename(real)
    store.context.symlink_to(real)
    result = cli("validate")
    assert result.exit_code == 1 and "context is a symbolic link" in result.stderr
    from cortexfs import hook

    payload = json.dumps({"tool_name": "Read", "tool_input": {
        "file_path": str(store.context / "projects" / "x" / "experiments" / "EXP-1.md")}})
    assert hook.main(["--home", str(store.home)], payload.encode()) == 0
    assert "context is a symbolic link" in (store.logs_dir / "hook.log").read_text()


def test_read_atom_returns_only_files_that_parse_as_atoms(store: Store, project: Project,
                                                         write_atom: Any) -> None:
    from cortexfs import recall
    from cortexfs.errors import InvalidInputError

    write_atom("EXP-001", frontmatter="id: EXP-001\nsummary: [unclosed\n")
    with pytest.raises(InvalidInputError, match="not returned until it is fixed"):
        recall.read_atom(store, "EXP-001", "flywheel")
    (project.root / "experiments" / "EXP-002.md").mkdir()
    with pytest.raises(InvalidInputError, match="not an atom file"):
        recall.read_atom(store, "EXP-002", "flywheel")
