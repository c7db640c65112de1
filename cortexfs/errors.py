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
