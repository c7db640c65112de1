"""cortexfs.regen.fold: the access log folded into refs / last-ref, incrementally, never
lowering them, never through a link, never over an edit."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cortexfs.errors import AtomParseError
from cortexfs.regen import (
    fold,
    regenerate,
)
from cortexfs.store import Project, Store
from regen.helpers import log_line, rows, write_log


def test_fold_writes_refs_and_last_ref_only(store: Store, project: Project,
                                            write_atom: Callable[..., Path]) -> None:
    path = write_atom("EXP-001", frontmatter=(
        "# keep this comment\nid: EXP-001\ndate: 2026-03-09\nproject: flywheel\n"
        "summary: \"s\"   # and this one\ntags: [a,   b]\nrefs: 1\n"), body="\nBody\n---\n")
    untouched = write_atom("EXP-002")
    before = untouched.read_bytes()
    write_log(project, log_line("EXP-001.md", "2026-04-16T03:12:21.074Z"),
              log_line("EXP-001.md", "2026-04-15T00:00:00.000Z"),
              log_line("_directory_search", "2026-04-17T00:00:00.000Z", "Grep"),
              "{\"broken\n")
    result = regenerate(store, ["flywheel"])
    assert result.folded == [path]
    assert path in result.written
    assert path.read_text() == (
        "---\n# keep this comment\nid: EXP-001\ndate: 2026-03-09\nproject: flywheel\n"
        "summary: \"s\"   # and this one\ntags: [a,   b]\nrefs: 2\n"
        "last-ref: \"2026-04-16T03:12:21.074Z\"\n---\n\nBody\n---\n")
    assert untouched.read_bytes() == before
    assert "| 2 |" in rows(project)[0]
    assert regenerate(store, ["flywheel"]).folded == []


def test_fold_is_incremental_and_survives_a_replaced_log(
        store: Store, project: Project, write_atom: Callable[..., Path]) -> None:
    path = write_atom("EXP-001")
    write_log(project, log_line("EXP-001.md", "2026-04-01T00:00:00.000Z"))
    regenerate(store, ["flywheel"])
    write_log(project, log_line("EXP-001.md", "2026-04-02T00:00:00.000Z"),
              '{"file": "EXP-001.md", "tool": "Read", "ts": "2026-04-03T00:0')  # mid-append
    regenerate(store, ["flywheel"])
    assert "refs: 2\n" in path.read_text()
    write_log(project, '0:00.000Z", "session": "s"}\n')
    regenerate(store, ["flywheel"])
    assert "refs: 3\n" in path.read_text()
    assert 'last-ref: "2026-04-03T00:00:00.000Z"' in path.read_text()
    # a log replaced by a longer one with other content (e.g. after a merge) is refolded
    lines = [log_line("EXP-001.md", f"2026-05-0{i}T00:00:00.000Z") for i in range(1, 6)]
    project.access_log.write_text("".join(lines))
    regenerate(store, ["flywheel"])
    assert "refs: 5\n" in path.read_text()
    assert 'last-ref: "2026-05-05T00:00:00.000Z"' in path.read_text()


def test_the_log_is_read_only_from_where_the_last_reader_left_it(
        store: Store, project: Project, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cortexfs import accesslog

    write_atom("EXP-001")
    write_log(project, log_line("EXP-001.md", "2026-03-01T00:00:00.000Z") * 3)
    assert accesslog.current(project)[0] == accesslog.fold(project.access_log)  # no cache yet
    regenerate(store)
    write_log(project, log_line("EXP-001.md", "2026-03-02T00:00:00.000Z"))
    offsets: list[int] = []
    real_fold = accesslog.fold

    def spy(path: Any, stats: Any = None) -> Any:
        offsets.append(stats.offset if stats is not None else 0)
        return real_fold(path, stats)

    monkeypatch.setattr(accesslog, "fold", spy)  # what resume() calls
    stats = accesslog.current(project)[0]
    assert stats == real_fold(project.access_log)
    assert stats.counts == {"EXP-001.md": 4} and offsets and offsets[0] > 0
    project.access_log.write_text(log_line("EXP-001.md", "2026-03-05T00:00:00.000Z"))
    assert accesslog.current(project)[0].counts == {"EXP-001.md": 1}  # replaced: from byte 0


def test_fold_never_lowers_imported_refs(store: Store, project: Project,
                                         write_atom: Callable[..., Path]) -> None:
    path = write_atom("EXP-001", extra='refs: 9\nlast-ref: "2026-04-30T00:00:00.000Z"\n')
    write_log(project, log_line("EXP-001.md", "2026-04-01T00:00:00.000Z"))
    text = path.read_text()
    assert regenerate(store, ["flywheel"]).folded == []
    assert path.read_text() == text
    assert "| 9 |" in rows(project)[0]


def test_fold_into_many_atoms_at_once(store: Store, project: Project,
                                     write_atom: Callable[..., Path],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [write_atom(f"EXP-{i:03d}") for i in range(1, fold.BATCH_SYNC_MIN + 3)]
    paths[0].chmod(0o600)
    write_log(project, *[log_line(p.name, "2026-04-01T00:00:00.000Z") for p in paths])
    real_sync = os.sync

    def sync_then_edit() -> None:  # someone saves EXP-002 while cortex syncs
        real_sync()
        paths[1].write_text(paths[1].read_text() + "edited\n")

    monkeypatch.setattr(os, "sync", sync_then_edit)
    result = regenerate(store, ["flywheel"])
    # the save is kept, and the refs are set on what it saved
    assert sorted(result.folded) == sorted(paths) and result.fold_errors == []
    assert paths[1].read_text().endswith("edited\n")
    assert all("refs: 1\n" in p.read_text() for p in paths)
    assert paths[0].stat().st_mode & 0o777 == 0o600
    assert not list(project.root.rglob("*.tmp"))
    monkeypatch.setattr(os, "sync", real_sync)
    assert regenerate(store, ["flywheel"]).folded == []


def test_fold_never_writes_through_a_symlinked_atom(store: Store, project: Project,
                                                   write_atom: Callable[..., Path],
                                                   tmp_path: Path) -> None:
    # a link is not part of the store (cortexfs.wall): it was followed and `refs:` written
    # into the file outside the store that it pointed at
    real = write_atom("EXP-001")
    moved = tmp_path / "elsewhere.md"
    real.rename(moved)
    real.symlink_to(moved)
    before = moved.read_bytes()
    write_log(project, log_line("EXP-001.md", "2026-04-01T00:00:00.000Z"))
    result = regenerate(store, ["flywheel"])
    assert result.folded == []
    assert [(e.path, "symbolic link" in e.reason) for e in result.skipped] == [(str(real), True)]
    assert real.is_symlink() and moved.read_bytes() == before


def test_fold_leaves_an_atom_edited_meanwhile(tmp_path: Path) -> None:
    atom = tmp_path / "EXP-001.md"
    atom.write_text("---\nid: EXP-001\n---\n")
    stamp = (0, atom.stat().st_size, 0, 12345)  # a CRC that is not the file's
    with pytest.raises(AtomParseError, match="changed while cortex"):
        fold.with_keys_if_unchanged(atom, stamp, {"refs": 1})
    assert atom.read_text() == "---\nid: EXP-001\n---\n"


def test_fold_error_is_reported_not_fatal(store: Store, project: Project,
                                          write_atom: Callable[..., Path]) -> None:
    # a shape set_keys cannot rewrite: a quoted key (a repeated key is now a parse error)
    path = write_atom("EXP-001", extra='"refs": 1\n')
    write_log(project, *[log_line("EXP-001.md", "2026-04-01T00:00:00.000Z")] * 3)
    result = regenerate(store, ["flywheel"])
    assert [Path(e.path) for e in result.fold_errors] == [path]
    assert "'refs'" in result.fold_errors[0].reason
    assert result.folded == [] and path not in result.written
    assert "| 3 |" in rows(project)[0]  # the index still shows the folded count
    assert [Path(e.path) for e in regenerate(store, ["flywheel"]).fold_errors] == [path]
