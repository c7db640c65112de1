"""cortexfs.errors: one hierarchy, one-line messages that say what to do next."""

from __future__ import annotations

import errno

import pytest

from cortexfs.errors import (
    AtomParseError,
    CortexError,
    EnvironmentProblem,
    GitError,
    InvalidInputError,
    LockTimeoutError,
    NotAStoreError,
    OutsideStoreError,
    ProjectNotFoundError,
    from_os_error,
)


def test_every_expected_failure_is_a_cortex_error() -> None:
    for error in (NotAStoreError, ProjectNotFoundError, InvalidInputError, AtomParseError,
                  LockTimeoutError, GitError, OutsideStoreError, EnvironmentProblem):
        assert issubclass(error, CortexError)


def test_an_atom_parse_error_names_the_file_and_line() -> None:
    error = AtomParseError("p/experiments/EXP-001.md", "bad YAML", line=3)
    assert str(error) == "p/experiments/EXP-001.md:3: bad YAML"
    assert (error.path, error.line, error.reason) == ("p/experiments/EXP-001.md", 3, "bad YAML")
    assert str(AtomParseError("EXP-002.md", "no frontmatter")) == "EXP-002.md: no frontmatter"


def test_a_path_outside_the_store_is_also_a_missing_file() -> None:
    """A reader that skips missing files skips it too (and its message says how to fix it)."""
    error = OutsideStoreError("context/projects/p/EXP-001.md", "a symbolic link")
    assert isinstance(error, FileNotFoundError) and isinstance(error, InvalidInputError)
    assert str(error).startswith("context/projects/p/EXP-001.md is a symbolic link, not part "
                                 "of the store: ")
    assert "replace the link with the file or folder itself, or remove it" in str(error)
    assert "\n" not in str(error)
    with pytest.raises(FileNotFoundError):
        raise error


@pytest.mark.parametrize(("code", "words"), [
    (errno.EACCES, "permission denied on /s/x.md: give your user access"),
    (errno.EPERM, "operation not permitted on /s/x.md"),
    (errno.EROFS, "/s/x.md is on a read-only file system"),
    (errno.ENOSPC, "disk full: no space left on the device writing /s/x.md"),
    (errno.EDQUOT, "disk quota exceeded writing /s/x.md"),
    (errno.ENOTDIR, "/s/x.md: part of this path is a file, not a folder"),
    (errno.ENAMETOOLONG, "a path is too long for the file system: /s/x.md"),
    (errno.ELOOP, "too many levels of symbolic links at /s/x.md"),
])
def test_os_errors_a_user_can_fix_become_one_line(code: int, words: str) -> None:
    problem = from_os_error(OSError(code, "os words", "/s/x.md"))
    assert isinstance(problem, EnvironmentProblem)
    assert str(problem).startswith(words) and "\n" not in str(problem)


def test_os_errors_without_a_file_name_say_where_in_general() -> None:
    problem = from_os_error(OSError(errno.ENOSPC, "No space left on device"))
    assert str(problem).startswith("disk full: no space left on the device writing a file in "
                                   "the store: free some space")


def test_other_os_errors_are_bugs() -> None:
    assert from_os_error(OSError(errno.EIO, "Input/output error", "/s/x.md")) is None
    assert from_os_error(OSError("no errno at all")) is None
