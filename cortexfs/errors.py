"""The one exception hierarchy: every expected failure is a CortexError.

Messages are shown to the user as a single red line, so each says what to do next.
Anything that is not a CortexError is a bug and surfaces as one.
"""

from __future__ import annotations


class CortexError(Exception):
    """An expected failure; str(error) is a one-line message that says what to do."""


class NotAStoreError(CortexError):
    """CORTEX_HOME does not hold a cortex store."""


class ProjectNotFoundError(CortexError):
    """A project named on the command line does not exist."""


class InvalidInputError(CortexError):
    """An argument or a file's content is not acceptable."""


class AtomParseError(CortexError):
    """An atom's frontmatter is missing or is not valid YAML."""

    def __init__(self, path: str, message: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class LockTimeoutError(CortexError):
    """Another cortex process holds a lock for too long."""


class GitError(CortexError):
    """A git operation failed in a way the user has to resolve."""


class OutsideStoreError(InvalidInputError, FileNotFoundError):
    """A path that is not part of the store (cortexfs.wall): a symbolic link, or outside.

    Also a FileNotFoundError: as far as the store goes there is no such file, so a reader
    that skips a missing file skips this one too (and `cortex validate` reports it).
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path} is {reason}, not part of the store: cortex does not read or "
                         "write through links; replace the link with the file or folder "
                         "itself, or remove it")


class EnvironmentProblem(CortexError):
    """The filesystem refused: no permission, a read-only or full disk, a file in the way."""


def from_os_error(e: OSError) -> EnvironmentProblem | None:
    """The one-line error for an OSError that the user, not the code, has to fix; None for
    any other OSError, which is then a bug like any unexpected exception."""
    import errno

    where = e.filename if e.filename is not None else "a file in the store"
    fixes = {
        errno.EACCES: f"permission denied on {where}: give your user access to it "
                      "(or use another CORTEX_HOME / --home)",
        errno.EPERM: f"operation not permitted on {where}: check its permissions and "
                     "attributes (chattr)",
        errno.EROFS: f"{where} is on a read-only file system: remount it read-write or use "
                     "another CORTEX_HOME / --home",
        errno.ENOSPC: f"disk full: no space left on the device writing {where}: free some "
                      "space, then run the command again (nothing was half-written)",
        errno.EDQUOT: f"disk quota exceeded writing {where}: free some space, then run the "
                      "command again (nothing was half-written)",
        errno.ENOTDIR: f"{where}: part of this path is a file, not a folder: move that file "
                       "away or use another CORTEX_HOME / --home",
        errno.ENAMETOOLONG: f"a path is too long for the file system: {where}",
        errno.ELOOP: f"too many levels of symbolic links at {where}: fix the link",
    }
    message = fixes.get(e.errno) if e.errno is not None else None
    return EnvironmentProblem(message) if message else None
