"""Filesystem primitives: atomic writes and advisory file locks."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from cortexfs import wall
from cortexfs.errors import LockTimeoutError


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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):
            # keep the mode of the file being replaced (mkstemp creates 0600)
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        if not path.exists():
            os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_if_changed(path: Path, data: str | bytes, *, root: Path | None = None) -> bool:
    """Atomically write `data` unless the file already holds exactly it; True when written.
    `root`: as for atomic_write (the old content is never read through a link)."""
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
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"another cortex process has held the lock on {what} for {timeout:.0f}s "
                        f"({path}); wait for it to finish and try again"
                    ) from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
