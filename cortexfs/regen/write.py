"""Writing one index.md: only when more than its "Last updated" line would change, so that
a second regeneration writes nothing."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

from cortexfs.errors import CortexError, OutsideStoreError, from_os_error
from cortexfs.regen.render import PLACEHOLDER

_UPDATED = re.compile(r"^> Last updated: (.+)$", re.MULTILINE)


def read_text(path: Path) -> str | None:
    """A generated file's text; None when missing, unreadable or a link (never read)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            return f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def unchanged(old: str | None, text: str) -> bool:
    """Whether `text` (rendered with PLACEHOLDER for the time) says what `old` says."""
    if old is None:
        return False
    kept = _UPDATED.search(old)
    return text.replace(PLACEHOLDER, kept[1] if kept else "") == old


def write_index(path: Path, text: str, now: dt.datetime, root: Path) -> None:
    """Write `text` to `path` (inside the store's `root`) with `now` as its "Last updated"
    time; a failure is a CortexError that says what to do."""
    from cortexfs.fsutil import write_if_changed

    try:
        write_if_changed(path, text.replace(PLACEHOLDER, now.strftime("%Y-%m-%dT%H:%M:%SZ")),
                         root=root)
    except OutsideStoreError:
        raise
    except OSError as e:
        if e.filename is None:
            e.filename = str(path)  # (a failed write(2) names no file)
        problem = from_os_error(e)  # a full disk says so, not "make it writable"
        if problem is not None:
            raise problem from None
        raise CortexError(f"cannot write {path}: {e.strerror}; make it a writable file "
                          "(or remove it) and run the regeneration again") from None
