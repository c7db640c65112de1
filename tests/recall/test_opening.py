"""cortexfs.recall.opening: reading a hit, which counts as an access."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import recall as rc
from cortexfs.errors import InvalidInputError
from cortexfs.store import Project, Store


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
