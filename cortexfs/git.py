"""The one module that talks to git: the store's repository and cortex's own commits.

cortex commits only the paths it wrote, never a user's other staged or unstaged work.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from cortexfs.errors import GitError

if TYPE_CHECKING:
    import git

    from cortexfs.store import Store

GITIGNORE_LINES = (".cache/", "logs/", ".locks/", "*.tmp", ".watch.pid")
GITATTRIBUTES_LINES = ("**/_meta/access-log.jsonl merge=union",)
LOCK_WAIT_SECONDS = 10.0


def is_repo(home: Path) -> bool:
    return (home / ".git").exists()


def open_repo(home: Path) -> git.Repo:
    import git

    try:
        return git.Repo(home)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GitError(f"{home} is not a git repository: run `cortex init`") from None


def _ensure_lines(path: Path, lines: Iterable[str]) -> bool:
    """Append the lines `path` lacks (keeping what is there); True when it changed."""
    from cortexfs.fsutil import atomic_write

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    have = {line.strip() for line in text.splitlines()}
    missing = [line for line in lines if line not in have]
    if not missing:
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    atomic_write(path, text + "".join(f"{line}\n" for line in missing))
    return True


def ensure_repo(store: Store) -> list[Path]:
    """Make CORTEX_HOME a git repository, or adopt the one there; returns files written."""
    import git

    if not is_repo(store.home):
        git.Repo.init(store.home)
    written = []
    for name, lines in ((".gitignore", GITIGNORE_LINES),
                        (".gitattributes", GITATTRIBUTES_LINES)):
        path = store.home / name
        if _ensure_lines(path, lines):
            written.append(path)
    return written


def check_idle(repo: git.Repo) -> None:
    """Refuse to touch a repository in the middle of a merge, rebase or cherry-pick."""
    gitdir = Path(repo.git_dir)
    for marker, what in (("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"),
                         ("rebase-apply", "a rebase"), ("CHERRY_PICK_HEAD", "a cherry-pick")):
        if (gitdir / marker).exists():
            raise GitError(f"{repo.working_tree_dir} is in the middle of {what}: finish or "
                           "abort it (git status says how), then run the command again")


def run_git(repo: git.Repo, *args: str) -> str:
    """Run a git command, waiting out another process's index.lock."""
    import git

    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            return str(repo.git.execute(["git", *args]))
        except git.GitCommandError as e:
            stderr = str(e.stderr or "")
            if "index.lock" in stderr and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            if "index.lock" in stderr:
                raise GitError(f"git is busy ({repo.git_dir}/index.lock is held): wait for the "
                               "other git process, or delete the lock if none runs") from None
            if "Please tell me who you are" in stderr or "user.email" in stderr:
                raise GitError("git has no identity for commits: run `git config --global "
                               "user.name NAME` and `git config --global user.email EMAIL`") \
                    from None
            first = stderr.strip().splitlines()[-1] if stderr.strip() else str(e)
            raise GitError(f"git {args[0]} failed: {first}") from None


def commit_paths(store: Store, paths: Iterable[Path], message: str) -> bool:
    """Commit exactly `paths` (additions, changes, deletions) with `message`.

    Other staged or unstaged changes in the repository stay as they were. Returns False
    when there was nothing to commit or the store is not a git repository.
    """
    if not is_repo(store.home):
        return False
    repo = open_repo(store.home)
    check_idle(repo)
    rel = sorted({os.path.relpath(p, store.home) for p in paths})
    if not rel:
        return False
    if not run_git(repo, "status", "--porcelain", "--untracked-files=all", "--", *rel).strip():
        return False
    run_git(repo, "add", "--all", "--", *rel)
    if repo.head.is_valid():
        # --only commits these paths as they are in the work tree, whatever else is staged
        run_git(repo, "commit", "--quiet", "--no-verify", "--only", "-m", message, "--", *rel)
    else:
        # first commit: --only needs a HEAD, and nothing else can be staged yet but ours
        run_git(repo, "commit", "--quiet", "--no-verify", "-m", message, "--", *rel)
    return True
