"""cortexfs.fsutil: whole-file writes (a temporary file, then a rename), rewrites that keep an
edit saved meanwhile, and locks that time out with a message."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cortexfs.errors import LockTimeoutError, OutsideStoreError
from cortexfs.fsutil import (
    Writes,
    atomic_write,
    file_lock,
    noting_writes,
    read_file,
    rewrite,
    swap_in,
    temp_prefix,
    write_if_changed,
    write_temp,
)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_atomic_write_replaces_whole_and_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "a" / "file.md"
    atomic_write(path, "first\n")
    assert path.read_text() == "first\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 & ~_umask()
    path.chmod(0o600)
    atomic_write(path, b"second\n")
    assert path.read_bytes() == b"second\n" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert leftovers(path.parent) == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "file.md"
    path.write_text("old\n")

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        atomic_write(path, "new\n")
    assert path.read_text() == "old\n" and leftovers(tmp_path) == []


def test_writes_sync_each_file_before_it_is_renamed_and_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes: each file is synced (on a thread) before its rename, the renames come in
    the order written, a root is a wall, and the old text is noted first."""
    events: list[tuple[str, int]] = []  # ("sync", inode) / ("rename <name>", inode)
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(
        ("sync", os.fstat(fd).st_ino)), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(
        (f"rename {Path(b).name}", os.stat(a).st_ino)), real_replace(a, b))[1])
    monkeypatch.setattr(Writes, "AT_ONCE", 2)
    noted: list[str] = []
    names = [f"f{i}.md" for i in range(5)]
    (tmp_path / "f0.md").write_text("old\n")

    def renamed() -> list[str]:
        return [e[0].split()[1] for e in events if e[0].startswith("rename")]

    with noting_writes(lambda p: noted.append(p.name)), Writes(root=tmp_path) as writes:
        for name in names:
            writes.write(tmp_path / name, f"{name}\n")
        assert renamed() == names[:3]  # (at most AT_ONCE wait)
        with pytest.raises(OutsideStoreError):
            writes.write(tmp_path.parent / "outside.md", "no")
    assert renamed() == names
    for i, (what, inode) in enumerate(events):
        if what.startswith("rename"):
            assert ("sync", inode) in events[:i]
            assert (tmp_path / what.split()[1]).stat().st_ino == inode
    for name in names:
        assert (tmp_path / name).read_text() == f"{name}\n"
    assert noted == names and leftovers(tmp_path) == []
    assert not (tmp_path.parent / "outside.md").exists()


@pytest.mark.parametrize("failure", ["fsync", "in the block"])
def test_writes_that_fail_leave_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str) -> None:
    """A failed fsync is raised (its file and those after it keep their old text); an
    error in the block renames nothing more; no temporary is left either way."""
    for name in ("a.md", "b.md"):
        (tmp_path / name).write_text("old\n")
    if failure == "fsync":
        def refuse(fd: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "fsync", refuse)
    with pytest.raises(OSError), Writes() as writes:
        writes.write(tmp_path / "a.md", "new\n")
        writes.write(tmp_path / "b.md", "new\n")
        if failure != "fsync":
            raise OSError(28, "No space left on device")
    assert (tmp_path / "a.md").read_text() == (tmp_path / "b.md").read_text() == "old\n"
    assert leftovers(tmp_path) == []


def test_a_link_is_replaced_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "target.md"
    target.write_text("theirs\n")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    atomic_write(link, "ours\n")
    assert not link.is_symlink() and link.read_text() == "ours\n"
    assert target.read_text() == "theirs\n"


def test_a_write_with_a_root_stays_inside_it(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "linked").symlink_to(outside)
    with pytest.raises(OutsideStoreError):
        atomic_write(root / "linked" / "x.md", "x", root=root)
    assert list(outside.iterdir()) == []
    atomic_write(root / "sub" / "x.md", "x", root=root)
    assert (root / "sub" / "x.md").read_text() == "x"


def test_noting_writes_tells_of_each_file_before_it_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "f.md"
    path.write_text("before\n")
    seen: list[tuple[Path, str]] = []
    with noting_writes(lambda p: seen.append((p, p.read_text()))):
        atomic_write(path, "after\n")
    atomic_write(path, "later\n")  # outside the block: not noted
    assert seen == [(path, "before\n")]


def test_write_if_changed_writes_only_a_change(tmp_path: Path) -> None:
    path = tmp_path / "f.md"
    assert write_if_changed(path, "x\n") is True
    before = path.stat().st_ino
    assert write_if_changed(path, "x\n") is False and path.stat().st_ino == before
    assert write_if_changed(path, "x\ny\n") is True and path.read_text() == "x\ny\n"
    assert write_if_changed(path, "x\n") is True and path.read_text() == "x\n"  # a prefix
    link = tmp_path / "link.md"
    link.symlink_to(path)
    assert write_if_changed(link, "x\n") is True  # a link holds no file's content
    assert not link.is_symlink() and path.read_text() == "x\n"
    with Writes(root=tmp_path) as writes:  # the write goes there, renamed at its end
        assert write_if_changed(path, "x\n", root=tmp_path, writes=writes) is False
        assert write_if_changed(path, "z\n", root=tmp_path, writes=writes) is True
    assert path.read_text() == "z\n" and leftovers(tmp_path) == []


def test_read_file_reads_no_link_and_no_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"data")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    assert read_file(tmp_path / "f") == b"data"
    assert read_file(tmp_path / "link") is None
    assert read_file(tmp_path / "missing") is None and read_file(tmp_path) is None


def test_rewrite_applies_a_change_and_says_when_there_was_none(tmp_path: Path) -> None:
    path = tmp_path / "f.md"
    path.write_text("refs: 1\n")
    assert rewrite(path, lambda raw: raw.replace(b"1", b"2")) is True
    assert path.read_text() == "refs: 2\n"
    assert rewrite(path, lambda raw: raw) is False
    with pytest.raises(FileNotFoundError):
        rewrite(tmp_path / "missing.md", lambda raw: raw)
    assert leftovers(tmp_path) == []


def test_rewrite_keeps_an_edit_saved_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "f.md"
    path.write_text("a\n")
    calls: list[bytes] = []

    def change(raw: bytes) -> bytes:
        calls.append(raw)
        if len(calls) == 1:
            path.write_text("a\nsaved by an editor\n")  # lands between the read and the swap
        return raw + b"tool line\n"

    assert rewrite(path, change) is True
    assert path.read_text() == "a\nsaved by an editor\ntool line\n"
    assert calls == [b"a\n", b"a\nsaved by an editor\n"]


def test_rewrite_of_a_file_that_keeps_changing_gives_up_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "f.md"
    path.write_text("0")

    def change(raw: bytes) -> bytes:
        path.write_text(str(int(path.read_text()) + 1))
        return raw + b"!"

    with pytest.raises(LockTimeoutError, match="kept changing while cortex rewrote it"):
        rewrite(path, change, attempts=3)
    assert path.read_text() == "3" and leftovers(tmp_path) == []


def test_swap_in_replaces_only_what_was_read(tmp_path: Path) -> None:
    path = tmp_path / "f.md"
    path.write_bytes(b"old")
    temp = write_temp(path, b"new")
    assert os.path.basename(temp).startswith(temp_prefix(path))
    assert swap_in(temp, path, b"old", b"new") is True and path.read_bytes() == b"new"
    temp = write_temp(path, b"newer")
    assert swap_in(temp, path, b"not what is there", b"newer") is False
    assert path.read_bytes() == b"new" and leftovers(tmp_path) == []
    temp = write_temp(path, b"gone")
    path.unlink()
    assert swap_in(temp, path, b"new", b"gone") is False and not path.exists()
    assert leftovers(tmp_path) == []


def test_a_lock_held_elsewhere_times_out_with_what_to_do(tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "x.lock"
    refusal = r"another cortex process has held the lock on the index for 0s .*wait for it"
    with file_lock(lock), pytest.raises(LockTimeoutError, match=refusal), \
            file_lock(lock, timeout=0.05, what="the index"):
        pass
    with file_lock(lock, timeout=0.05):  # released: taken at once
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_temp_prefix_names_the_writer() -> None:
    assert temp_prefix(Path("/s/EXP-001.md")) == f".EXP-001.md.{os.getpid()}."
