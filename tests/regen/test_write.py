"""cortexfs.regen.write: an index.md is written only when more than its "Last updated" line
would change, so that a second regeneration writes nothing."""

from __future__ import annotations

import datetime as dt
import errno
import os
from pathlib import Path

import pytest

from cortexfs.errors import CortexError, EnvironmentProblem, OutsideStoreError
from cortexfs.regen.render import PLACEHOLDER
from cortexfs.regen.write import read_text, unchanged, write_index

NOW = dt.datetime(2026, 5, 6, 20, 31, 10, tzinfo=dt.UTC)
TEXT = f"# Experiments\n\n> Last updated: {PLACEHOLDER}\n\n| id |\n"


def test_only_the_time_may_differ_for_a_file_to_be_unchanged() -> None:
    old = "# Experiments\n\n> Last updated: 2026-01-01T00:00:00Z\n\n| id |\n"
    assert unchanged(old, TEXT)
    assert not unchanged(old, TEXT + "| EXP-001 |\n")
    assert not unchanged(old + "| EXP-001 |\n", TEXT)  # a row less
    assert not unchanged(None, TEXT)
    assert not unchanged("# Experiments\n\n| id |\n", TEXT)  # no time line to keep


def test_write_index_stamps_the_time_inside_the_store(tmp_path: Path) -> None:
    path = tmp_path / "experiments" / "index.md"
    path.parent.mkdir()
    write_index(path, TEXT, NOW, tmp_path)
    assert read_text(path) == TEXT.replace(PLACEHOLDER, "2026-05-06T20:31:10Z")
    (tmp_path / "linked").symlink_to(tmp_path / "experiments")
    with pytest.raises(OutsideStoreError):
        write_index(tmp_path / "linked" / "index.md", TEXT, NOW, tmp_path)


def test_read_text_reads_no_link_and_no_garbage(tmp_path: Path) -> None:
    (tmp_path / "index.md").write_text("text")
    (tmp_path / "link.md").symlink_to(tmp_path / "index.md")
    (tmp_path / "binary.md").write_bytes(b"\xff\xfe")
    assert read_text(tmp_path / "index.md") == "text"
    assert [read_text(tmp_path / name) for name in ("link.md", "binary.md", "none.md")] == [
        None, None, None]


def test_a_failed_write_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "index.md"

    def fail(code: int) -> None:
        def write(*args: object, **kwargs: object) -> None:
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr("cortexfs.fsutil.write_if_changed", write)

    fail(errno.ENOSPC)
    with pytest.raises(EnvironmentProblem, match=f"^disk full: no space left on the device "
                                                 f"writing {path}"):
        write_index(path, TEXT, NOW, tmp_path)
    fail(errno.EIO)
    with pytest.raises(CortexError, match=f"^cannot write {path}: Input/output error; make it "
                                          "a writable file"):
        write_index(path, TEXT, NOW, tmp_path)
