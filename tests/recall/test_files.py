"""cortexfs.recall.files: which file is which doc — stat data checked folder by folder, a
settled folder not listed again until it changes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from cortexfs import recall as rc
from cortexfs.store import Project, Store
from recall.helpers import ids, lexical_index


def test_touched_files_keep_their_doc(store: Store, project: Project,
                                      atoms: Callable[..., Path]) -> None:
    rc.recall(store, "cache")
    rc.forget_open_indexes()
    path = project.root / "experiments" / "EXP-001.md"
    os.utime(path, ns=(time.time_ns(), time.time_ns() - 10**10))  # new mtime, same bytes
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"
    assert len(lexical_index(store).segments) == 1  # nothing re-indexed
    rc.forget_open_indexes()
    folder = lexical_index(store)
    folder.refresh()
    f = folder.files.folders["flywheel/experiments"]
    assert int(f.stamps[f.names.index("EXP-001.md")][0]) == path.stat().st_mtime_ns


def test_a_settled_folder_is_not_listed_again_until_it_changes(
        store: Store, project: Project, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="quokka census")
    folder = project.root / "experiments"
    past = time.time_ns() - 10**10
    for path in [folder, *folder.iterdir()]:
        os.utime(path, ns=(past, past))
    assert ids(rc.recall(store, "quokka")) == ["EXP-001"]
    f = lexical_index(store).files.folders["flywheel/experiments"]
    assert f.listed == (past, folder.stat().st_ino)  # settled: its names are trusted …
    write_atom("EXP-002", summary="quokka census two")  # … until an entry is added
    assert ids(rc.recall(store, "quokka", k=5)) == ["EXP-001", "EXP-002"]
    (folder / "EXP-001.md").unlink()
    assert ids(rc.recall(store, "quokka", k=5)) == ["EXP-002"]
