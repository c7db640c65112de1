"""Filesystem primitives: atomic writes and advisory file locks.

Every file is synced before it is renamed into place, generated ones too (index.md,
OVERVIEW.md, CORTEX.md, HIPPOCAMPUS files), although the next regeneration could make any of
them again: a power loss can leave a file that was not synced at its full size with zeros
for content, under the mtime cortex recorded, and the stamp checks that let a regeneration
skip a file (its index state; cache.still once the file is no longer racy) would take it for
whole, and the commit after would keep it. So a generated file keeps its fsync; Writes
overlaps those of several files instead."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cortexfs import wall
from cortexfs.errors import LockTimeoutError

_watchers = threading.local()  # this thread's callbacks told of a file before it is replaced


@contextlib.contextmanager
def noting_writes(note: Callable[[Path], None]) -> Iterator[None]:
    """Within the block, `note(path)` is called before atomic_write replaces `path`, so a
    command can keep what it overwrites (cortexfs.commit puts it back if the command
    fails: a regenerated index is then byte for byte what it was, date stamp included)."""
    stack: list[Callable[[Path], None]] = _watchers.__dict__.setdefault("stack", [])
    stack.append(note)
    try:
        yield
    finally:
        stack.remove(note)


def temp_prefix(path: Path) -> str:
    """The name start of a temporary file for `path`: `.NAME.PID.` (cortex.commit tells an
    abandoned one, whose writer is gone, by that pid)."""
    return f".{path.name}.{os.getpid()}."


def atomic_write(path: Path, data: str | bytes, *, root: Path | None = None) -> None:
    """Write `data` to `path` through a temporary file in the same folder and a rename.

    A crash or kill at any point leaves either the old file or the new one, never a mix.
    With `root` (a store's context/), the folder must be part of the store (cortexfs.wall:
    OutsideStoreError before anything is written); a link at `path` itself is replaced by
    the file, never written through.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if root is not None:
        wall.check(root, path.parent)
    for note in getattr(_watchers, "stack", ()):
        note(path)
    tmp = write_temp(path, raw)
    with removed_on_error(tmp):
        os.replace(tmp, path)


class Writes:
    """atomic_write of several files in turn, their fsyncs overlapping: each file's starts
    on a thread of its own once its temporary file is written, and the file is renamed into
    place once its own fsync is done (in the order written; at most AT_ONCE wait), so that a
    crash leaves each file old or new, as atomic_write does. Fsyncs in turn each wait for a
    journal commit of their own; overlapping ones share it (HIPPOCAMPUS's 4 files on a
    `cortex new` of 10,000 atoms: 2-21 ms in turn on the shared machine). Leaving the `with`
    block renames what is left; an error removes the temporaries not renamed."""

    AT_ONCE = 8

    def __init__(self, root: Path | None = None) -> None:
        self.root = root  # as atomic_write's
        self._pending: list[tuple[str, Path, threading.Thread, list[OSError]]] = []

    def __enter__(self) -> Writes:
        return self

    def write(self, path: Path, data: str | bytes) -> None:
        raw = data.encode("utf-8") if isinstance(data, str) else data
        if self.root is not None:
            wall.check(self.root, path.parent)
        for note in getattr(_watchers, "stack", ()):
            note(path)
        tmp = write_temp(path, raw, durable=False)
        failed: list[OSError] = []
        sync = threading.Thread(target=_fsync_named, args=(tmp, failed), daemon=True)
        self._pending.append((tmp, path, sync, failed))
        with removed_on_error(tmp):
            sync.start()
        if len(self._pending) > self.AT_ONCE:
            self._rename_first()

    def _rename_first(self) -> None:
        tmp, path, sync, failed = self._pending.pop(0)
        with removed_on_error(tmp):
            sync.join()
            if failed:
                raise failed[0]
            os.replace(tmp, path)

    def __exit__(self, kind: object, error: object, tb: object) -> None:
        try:
            while self._pending and kind is None:
                self._rename_first()
        finally:
            for tmp, _, sync, _ in self._pending:
                if sync.ident is not None:  # (started)
                    sync.join()
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            self._pending = []


def _fsync_named(name: str, failed: list[OSError]) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        failed.append(e)


@contextlib.contextmanager
def removed_on_error(tmp: str) -> Iterator[None]:
    """Remove the temporary file `tmp` if the block fails (or is interrupted)."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_temp(path: Path, raw: bytes, durable: bool = True) -> str:
    """A temporary file beside `path` holding `raw`, with `path`'s mode (0644 & ~umask for a
    new file); fsynced unless `durable` is False (the caller syncs). Its name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path), suffix=".tmp")
    with removed_on_error(tmp):
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        try:
            # keep the mode of the file being replaced (mkstemp creates 0600)
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        except FileNotFoundError:
            os.chmod(tmp, 0o644 & ~_umask())
    return tmp


# --- rewriting a file someone else may be saving ----------------------------------------------
#
# cortex rewrites files people and agents edit (refs / last-ref after a regeneration, ids after
# a renumbering). Reading, changing and renaming over the file would lose a save that lands
# between the read and the rename, and checking "has it moved?" just before os.replace only
# narrows that window (an editor's save in the microseconds between the check and the rename
# is still lost for good). So the rename is an exchange (renameat2 RENAME_EXCHANGE): the new
# file takes the path and the file that was there moves to the temporary name, where it is
# compared with what was read. The same: done. Not the same — an edit landed meanwhile —: it
# is exchanged back into place at once, and the change is applied to it in turn. Nothing an
# editor saved is ever unlinked unseen.
#
# What is left, honestly: (1) for the microseconds between the two exchanges the path shows
# cortex's file, so a reader then sees the older text (and a save built on that read would
# drop the edit it did not see); (2) a writer that opened the file before the exchange and
# writes into it after the comparison (its open(2) resolving the path before the exchange and
# truncating after the comparison, or an O_APPEND / r+ writer that opened it earlier) writes
# into the displaced file; (3) a kill -9 between the two exchanges leaves the edit under the
# temporary name. Closing these needs a lock that editors honour, and they honour none.
# Where the filesystem cannot exchange (EINVAL: some FUSE and network filesystems), the file
# is compared just before a plain os.replace, and a save in between is lost.

# How each swap_in went, for benchmarks and tests: "replaced", "saved-before" (met a save at
# the comparison before the exchange), "put-back" (a save between that comparison and the
# exchange, put back), "newer-kept" (and another one between the two exchanges).
swap_counts: dict[str, int] = {}

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_exchange_unsupported = False


_renameat2: Any = None


def _exchange(a: bytes, b: bytes) -> None:
    """Atomically swap the names `a` and `b` (both must exist)."""
    import ctypes

    global _renameat2
    if _renameat2 is None:
        # the symbols of the running process, libc's among them (no ldconfig lookup)
        _renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", False)
    if not _renameat2:  # not Linux, or a libc older than glibc 2.28
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    if _renameat2(_AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), os.fsdecode(a), None, os.fsdecode(b))


def read_file(path: str | bytes | Path) -> bytes | None:
    """The file's bytes; None when there is none, or a link is there (no file's content)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            return f.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None  # a link is no file's content
        raise


def swap_in(temp: str, path: Path, expected: bytes, new: bytes,
            remove: Callable[[bytes], object] = os.unlink) -> bool:
    """Rename the temporary file `temp` (holding `new`) over `path` if `path` still holds
    `expected`; otherwise leave `path` with the newer content it has. `temp` is gone after
    (or, when replaced, handed to `remove`: a batch may unlink the old files elsewhere).
    True when replaced."""
    global _exchange_unsupported
    t, p = os.fsencode(temp), os.fsencode(path)
    try:  # (never through a link: a link made meanwhile is not the file that was read)
        with open(os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            same = f.read() == expected
            ino = os.fstat(f.fileno()).st_ino
    except FileNotFoundError:
        same = False
    except OSError as e:
        if e.errno != errno.ELOOP:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(t)
            raise
        same = False
    if not same:  # the common way to meet a save: before the exchange
        os.unlink(t)
        _count("saved-before")
        return False
    ours = os.lstat(t).st_ino
    try:
        if _exchange_unsupported:
            raise OSError(errno.EINVAL, "no exchange")
        # from here to the last exchange every step is a syscall: these are the microseconds
        # in which the path can show cortex's file over a newer save
        if os.lstat(p).st_ino == ino:
            _exchange(t, p)
    except OSError as e:
        if e.errno == errno.ENOENT:  # the file was removed meanwhile: leave it removed
            os.unlink(t)
            return False
        if e.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(t)
            raise
        _exchange_unsupported = True
        os.replace(t, p)  # (compared just above: a save since then is lost)
        _count("replaced")
        return True
    moved = os.lstat(t).st_ino  # what now has the temporary name
    if moved == ours:  # the stat saw a save coming: no exchange was made
        os.unlink(t)
        _count("saved-before")
        return False
    if moved == ino and read_file(t) == expected:
        remove(t)  # the file that was there
        _count("replaced")
        return True
    # a save landed between the comparison and the exchange (a new file, or written into
    # this one): it goes back into place
    _exchange(t, p)
    _count("put-back")
    if os.lstat(t).st_ino != ours or read_file(t) != new:
        # a save landed between the two exchanges as well: newer still, so it is the one
        _exchange(t, p)
        _count("newer-kept")
    os.unlink(t)
    return False


def _count(what: str) -> None:
    swap_counts[what] = swap_counts.get(what, 0) + 1


def rewrite(path: Path, change: Callable[[bytes], bytes], attempts: int = 20) -> bool:
    """Atomically replace `path` with `change(its bytes)`, never over an edit saved meanwhile:
    such an edit is kept and `change` applied to it in turn. False when `change` leaves the
    file as it is. Raises FileNotFoundError when there is no file."""
    for _ in range(attempts):
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            seen = f.read()  # (a link: ELOOP, never rewritten through)
        new = change(seen)
        if new == seen:
            return False
        if swap_in(write_temp(path, new), path, seen, new):
            return True
    raise LockTimeoutError(f"{path} kept changing while cortex rewrote it ({attempts} "
                           "tries): let whatever keeps saving it finish, then run the command "
                           "again")


def write_if_changed(path: Path, data: str | bytes, *, root: Path | None = None,
                     writes: Writes | None = None) -> bool:
    """Atomically write `data` unless the file already holds exactly it; True when written.
    `root`: as for atomic_write (the old content is never read through a link); `writes`:
    write it there (renamed when that ends)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC) \
            if root is None or not wall.reason(root, path.parent) else -1
        if fd >= 0:
            with os.fdopen(fd, "rb") as f:
                if stat.S_ISREG(os.fstat(f.fileno()).st_mode) and f.read(len(raw) + 1) == raw:
                    return False
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        pass
    except OSError as e:
        if e.errno != errno.ELOOP:  # ELOOP: a link, which the write below replaces
            raise
    if writes is not None:
        writes.write(path, raw)
    else:
        atomic_write(path, raw, root=root)
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def file_lock(path: Path, timeout: float = 30.0, what: str = "the store") -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if needed) for the body of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        flock(fd, time.monotonic() + timeout,
              f"another cortex process has held the lock on {what} for {timeout:.0f}s "
              f"({path}); wait for it to finish and try again")
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextlib.contextmanager
def cache_lock(path: Path, timeout: float, what: str) -> Iterator[None]:
    """file_lock for a cache: where this process cannot take it (no permission, a read-only
    file system), the block runs unlocked and what it changes is for this process alone."""
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(file_lock(path, timeout, what))
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
        yield


def flock(fd: int, deadline: float, refusal: str) -> None:
    """Take an exclusive flock of the open file `fd`, waiting until `deadline`
    (time.monotonic); past it, LockTimeoutError(`refusal`)."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() >= deadline:
                raise LockTimeoutError(refusal) from None
            time.sleep(0.01)
