"""The store's wall: which paths are part of the store, checked in one place.

A store's files come from agents and from whoever can push to its git remote, and git
checks symbolic links out as links. So a path is part of the store only when it lies under
the store's root and no component below that root is a symbolic link: a link there (an atom
to /etc/passwd, a project folder to ~/, an access log to ~/.bashrc, `_meta` to elsewhere)
is not part of the store. Readers skip it, writers refuse it (`OutsideStoreError`), and
`cortex validate` reports it once. The root itself (`context/`, or the templates folder)
may be reached through links: a store kept in a linked folder is fine.

The check is lexical plus one lstat(2) per component below the root, and the final open
adds O_NOFOLLOW. A local process racing to swap a checked folder for a link is outside
what this guards against (it could write there itself).

Standard library only (os, stat): the PostToolUse hook imports this.
"""

from __future__ import annotations

import os
import stat

from cortexfs.errors import InvalidInputError, OutsideStoreError

LINK = "a symbolic link"
MAX_TEXT = 1_000_000  # bytes of a governance file (STATUS.md, TASKS.yaml …) cortex reads


def reason(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> str | None:
    """Why `path` is not part of the store under `root`, or None when it is (a path that
    does not exist yet is part of the store if its existing folders are)."""
    base = os.path.abspath(root)
    raw = os.fspath(path)
    full = os.path.join(base, raw) if not os.path.isabs(raw) else raw
    if "\0" in full:
        return "a path with a NUL character"
    if full == base:
        return None
    if not full.startswith(base + os.sep) and base != os.sep:
        return "outside the store"
    parts = [p for p in full[len(base):].split(os.sep) if p and p != "."]
    if ".." in parts:
        return "outside the store (a '..' in the path)"
    current = base
    for i, part in enumerate(parts):
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None  # not there (yet): creating it does not leave the store
        except (OSError, ValueError):
            return None  # (no permission …) the open itself will say what is wrong
        if stat.S_ISLNK(mode):
            if i == len(parts) - 1:
                return LINK
            return f"inside {os.path.join(*parts[:i + 1])}, which is {LINK}"
    return None


def check(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Raise OutsideStoreError when `path` is not part of the store under `root`."""
    why = reason(root, path)
    if why is not None:
        raise OutsideStoreError(os.fspath(path), why)


def open_inside(root: str | os.PathLike[str], path: str | os.PathLike[str], flags: int,
                mode: int = 0o644) -> int:
    """os.open(path, flags) for a path that must be part of the store (else
    OutsideStoreError); the last component is never followed if it is a link."""
    check(root, path)
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as e:
        if os.path.islink(path):  # swapped for a link since the check: ELOOP
            raise OutsideStoreError(os.fspath(path), LINK) from None
        raise e


def makedirs(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """os.makedirs(path, exist_ok=True) for a folder that must be part of the store."""
    check(root, path)
    os.makedirs(path, exist_ok=True)


def read_bytes(root: str | os.PathLike[str], path: str | os.PathLike[str],
               limit: int) -> bytes:
    """At most `limit` + 1 bytes of a regular file of the store (a caller that gets more
    than `limit` knows the file is too big). OutsideStoreError for a link or a path outside;
    IsADirectoryError / OSError for what is not a regular file."""
    fd = open_inside(root, path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", os.fspath(path))
        if not stat.S_ISREG(st.st_mode):
            raise OSError(22, "Not a regular file", os.fspath(path))
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(root: str | os.PathLike[str], path: str | os.PathLike[str],
              limit: int = MAX_TEXT) -> str:
    """A text file of the store, decoded leniently (undecodable bytes replaced).
    InvalidInputError when it is over `limit` bytes (bounded time for whatever is found in a
    store); OutsideStoreError (a FileNotFoundError) for a link."""
    raw = read_bytes(root, path, limit)
    if len(raw) > limit:
        raise InvalidInputError(f"{path} is over the {limit:,}-byte limit for a file cortex "
                                "reads: trim it or split it")
    return raw.decode("utf-8", "replace")


def text_or_none(root: str | os.PathLike[str], path: str | os.PathLike[str],
                 limit: int = MAX_TEXT) -> str | None:
    """`read_text`, or None when the file is missing, not part of the store, not a regular
    file or over `limit`: for readers that show what is there (the brief, the view) and
    leave saying what is wrong to `cortex validate`."""
    try:
        return read_text(root, path, limit)
    except (OSError, InvalidInputError):
        return None


def links(root: str | os.PathLike[str]) -> list[str]:
    """Every symbolic link under `root` (not followed), sorted: what is not part of the
    store though it sits in it."""
    found: list[str] = []
    stack = [os.fspath(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    if entry.is_symlink():
                        found.append(entry.path)
                    elif entry.is_dir(follow_symlinks=False) and entry.name != ".git":
                        stack.append(entry.path)
        except OSError:
            continue
    return sorted(found)
