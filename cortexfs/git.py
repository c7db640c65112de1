"""The one module that talks to git: the store's repository and cortex's own commits.

cortex commits only the paths it wrote, never a user's other staged or unstaged work: a
commit is built in a private index from HEAD plus those paths, HEAD is moved with a
compare-and-swap, and only those paths' entries of the user's index are brought up to date.

Git runs as plain subprocesses (not gitpython objects) on every path that must be fast:
`cortex ready` reads `worktree_state` at each session start.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortexfs.errors import GitError

if TYPE_CHECKING:
    import git

    from cortexfs.store import Store

GITIGNORE_LINES = (".cache/", "logs/", ".locks/", "*.tmp", ".watch.pid")
GITATTRIBUTES_LINES = ("**/_meta/access-log.jsonl merge=union",)
LOCK_WAIT_SECONDS = 10.0  # how long to wait out another git process's index.lock
GIT_LOCK_SECONDS = 120.0  # how long a commit waits for a running `cortex sync` to finish
SYNC_STATE_FILE = "cortex-sync.json"  # inside the git dir: never committed, never pushed

# Variables that would point git at another repository or index than the store's (set, for
# instance, when cortex runs from inside a git hook of some other repository).
_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                  "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
                  "GIT_PREFIX", "GIT_QUARANTINE_PATH")
_IN_PROGRESS = (("MERGE_HEAD", "merge"), ("rebase-merge", "rebase"), ("rebase-apply", "rebase"),
                ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert"))


# --- running git -----------------------------------------------------------------------------

def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a git subprocess: no inherited repository location, no prompts."""
    env = {k: v for k, v in os.environ.items() if k not in _LOCATION_VARS}
    # a fetch or push must fail, not hang, when credentials are missing
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    env["LC_ALL"] = "C"  # messages we look into are the English ones
    if extra:
        env.update(extra)
    return env


def _is_lock_busy(stderr: str) -> bool:
    """Another git process holds index.lock (or HEAD.lock, a ref's lock): worth waiting for."""
    return ".lock" in stderr and ("File exists" in stderr or "Unable to create" in stderr)


def git_run(home: Path, *args: str, check: bool = True, input: str | None = None,
            env: dict[str, str] | None = None, timeout: float | None = None,
            ) -> subprocess.CompletedProcess[str]:
    """Run `git args` in `home`, waiting out another process's index.lock.

    With `check`, a failure becomes a GitError whose one line says what git said.
    """
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    cmd = ["git", "--literal-pathspecs", *args]
    while True:
        try:
            proc = subprocess.run(cmd, cwd=home, input=input, capture_output=True, text=True,
                                  encoding="utf-8", errors="surrogateescape",
                                  env=git_env(env), timeout=timeout)
        except FileNotFoundError:
            raise GitError("git is not installed or not on PATH: install git") from None
        except subprocess.TimeoutExpired:
            raise GitError(f"git {args[0]} did not finish within {timeout:.0f}s: check the "
                           "network and the remote, then try again") from None
        if proc.returncode == 0 or not check:
            if proc.returncode != 0 and _is_lock_busy(proc.stderr) \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            return proc
        if _is_lock_busy(proc.stderr):
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            held = re.search(r"'([^']+\.lock)'", proc.stderr)
            lock = held.group(1) if held else f"{git_dir_of(home)}/index.lock"
            raise GitError(f"git is busy ({lock} has been held for {LOCK_WAIT_SECONDS:.0f}s): "
                           "wait for the other git process, or delete the lock file if none "
                           "is running")
        raise git_error(args, proc.stderr or proc.stdout)


def git_error(args: Sequence[str], output: str) -> GitError:
    text = output.strip()
    if "Please tell me who you are" in text or "empty ident" in text:
        return GitError("git has no identity for commits: run `git config --global "
                        "user.name NAME` and `git config --global user.email EMAIL`")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
    first = (fatal or lines or ["(no message)"])[0]
    return GitError(f"git {args[0]} failed: {first}")


def git_blob(home: Path, rev: str, rel: str | None = None) -> bytes | None:
    """The bytes of `rel` at commit `rev` (or of the blob `rev`); None when there is none."""
    spec = rev if rel is None else f"{rev}:{rel}"
    proc = subprocess.run(["git", "cat-file", "blob", spec], cwd=home,
                          capture_output=True, env=git_env())
    return proc.stdout if proc.returncode == 0 else None


def run_git(repo: git.Repo | Path, *args: str) -> str:
    """Run a git command in `repo` (a gitpython Repo or a work-tree path); its stdout."""
    home = repo if isinstance(repo, Path) else Path(str(repo.working_tree_dir))
    return git_run(home, *args).stdout


# --- the repository --------------------------------------------------------------------------

def is_repo(home: Path) -> bool:
    return (home / ".git").exists()


def git_dir_of(home: Path) -> Path:
    """The git dir of the work tree `home` (`.git`, or where a `.git` file points)."""
    dotgit = home / ".git"
    if dotgit.is_file():
        # a linked worktree or submodule: ".git" holds "gitdir: <path>"
        text = dotgit.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            target = Path(text.split(":", 1)[1].strip())
            return target if target.is_absolute() else (home / target).resolve()
    return dotgit


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
    """Make CORTEX_HOME a git repository, or adopt the one there; returns files written.

    An existing repository's history, branches, remotes and config are left as they are.
    """
    import git

    if not is_repo(store.home):
        store.home.mkdir(parents=True, exist_ok=True)
        git.Repo.init(store.home)
    written = []
    for name, lines in ((".gitignore", GITIGNORE_LINES),
                        (".gitattributes", GITATTRIBUTES_LINES)):
        path = store.home / name
        if _ensure_lines(path, lines):
            written.append(path)
    return written


def in_progress(home: Path) -> str | None:
    """'merge', 'rebase', 'cherry-pick' or 'revert' when one is under way in `home`."""
    gitdir = git_dir_of(home)
    for marker, what in _IN_PROGRESS:
        if (gitdir / marker).exists():
            return what
    return None


def check_idle(repo: git.Repo | Path) -> None:
    """Refuse to touch a repository in the middle of a merge, rebase or cherry-pick."""
    home = repo if isinstance(repo, Path) else Path(str(repo.working_tree_dir))
    what = in_progress(home)
    if what:
        raise GitError(f"{home} is in the middle of a {what}: finish or abort it (`git status` "
                       "says how), then run the command again")


def check_can_commit(store: Store) -> None:
    """Raise now what `commit_paths` would raise only after a command wrote its files: a
    merge (rebase, cherry-pick) under way, or no identity for commits. A command that
    writes and then commits calls this first, so that a refusal writes nothing (a rerun
    would otherwise write the atom again, under the next id)."""
    if not is_repo(store.home):
        return  # commit_paths commits nothing outside a repository, and does not fail
    check_idle(store.home)
    for who in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        proc = git_run(store.home, "var", who, check=False)
        if proc.returncode != 0:
            raise git_error(["var"], proc.stderr)


def head_commit(home: Path) -> str | None:
    """The commit HEAD points at; None on a branch with no commits yet."""
    proc = git_run(home, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


# --- worktree state (the fast path of `cortex ready` and `cortex status`) --------------------

@dataclass
class WorktreeState:
    """What git says about the store, read without touching the network."""

    is_repo: bool
    dirty: list[str] = field(default_factory=list)  # relative to home, untracked included
    has_remote: bool = False
    upstream: str | None = None  # e.g. "origin/main"
    ahead: int = 0  # commits on HEAD not on the upstream (as of the last fetch)
    behind: int = 0
    in_progress: str | None = None  # merge | rebase | cherry-pick | revert
    last_sync: str | None = None  # ISO-8601 UTC of the last successful `cortex sync`
    branch: str | None = None  # None when HEAD is detached

    def to_json(self) -> dict[str, object]:
        return {"is_repo": self.is_repo, "branch": self.branch, "dirty": self.dirty,
                "has_remote": self.has_remote, "upstream": self.upstream,
                "ahead": self.ahead, "behind": self.behind,
                "in_progress": self.in_progress, "last_sync": self.last_sync}


def worktree_state(store: Store) -> WorktreeState:
    """Uncommitted paths, remote, ahead/behind, operation in progress and last sync.

    Two git processes (status with branch info, and the remotes from config), no fetch.
    """
    home = store.home
    if not is_repo(home):
        return WorktreeState(is_repo=False)
    proc = git_run(home, "--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z",
                   "--untracked-files=all", check=False)
    if proc.returncode != 0:
        raise git_error(["status"], proc.stderr)
    last = read_sync_state(home).get("last_sync")
    state = WorktreeState(is_repo=True, in_progress=in_progress(home),
                          last_sync=last if isinstance(last, str) else None)
    _parse_status_v2(proc.stdout, state)
    remotes = git_run(home, "config", "--get-regexp", r"^remote\..*\.url$", check=False)
    state.has_remote = bool(remotes.stdout.strip())
    return state


def _parse_status_v2(out: str, state: WorktreeState) -> None:
    records = out.split("\0")
    i = 0
    dirty: list[str] = []
    while i < len(records):
        rec = records[i]
        i += 1
        if not rec:
            continue
        if rec.startswith("# branch.head "):
            head = rec[len("# branch.head "):]
            state.branch = None if head == "(detached)" else head
        elif rec.startswith("# branch.upstream "):
            state.upstream = rec[len("# branch.upstream "):]
        elif rec.startswith("# branch.ab "):
            ahead, behind = rec[len("# branch.ab "):].split()
            state.ahead, state.behind = int(ahead), abs(int(behind))
        elif rec.startswith("1 "):
            dirty.append(rec.split(" ", 8)[8])
        elif rec.startswith("2 "):
            dirty.append(rec.split(" ", 9)[9])
            if i < len(records):  # the original path of a rename follows
                dirty.append(records[i])
                i += 1
        elif rec.startswith("u "):
            dirty.append(rec.split(" ", 10)[10])
        elif rec.startswith("? "):
            dirty.append(rec[2:])
    state.dirty = sorted(dict.fromkeys(dirty))


def read_sync_state(home: Path) -> dict[str, Any]:
    """What `cortex sync` recorded in the git dir: last_sync, and a journal while it runs."""
    try:
        data = json.loads((git_dir_of(home) / SYNC_STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_sync_state(home: Path, **values: Any) -> None:
    """Update the sync record in the git dir (a None value removes that key)."""
    from cortexfs.fsutil import atomic_write

    data = read_sync_state(home)
    for key, value in values.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    atomic_write(git_dir_of(home) / SYNC_STATE_FILE, json.dumps(data, indent=1) + "\n")


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# --- the store's git lock --------------------------------------------------------------------

def git_lock_path(store: Store) -> Path:
    """The flock that cortex's commits and syncs hold (`.locks/` is git-ignored)."""
    return store.locks_dir / "git.lock"


_held_locks: set[Path] = set()  # homes whose git lock this process holds (re-entrant use)


@contextlib.contextmanager
def git_lock(store: Store, timeout: float = GIT_LOCK_SECONDS) -> Iterator[None]:
    """Serialise cortex's own git work on one store (commits, a whole sync) across processes.

    Re-entrant within a process, so `sync` can commit through `commit_paths` while it holds it.
    """
    from cortexfs.fsutil import file_lock

    home = store.home.absolute()
    if home in _held_locks:
        yield
        return
    # `cortex watch` looks at this lock to tell cortex's own reads of atoms from others'
    with file_lock(git_lock_path(store), timeout=timeout,
                   what=f"git in {store.home} (a `cortex sync` or commit is running)"):
        _held_locks.add(home)
        try:
            yield
        finally:
            _held_locks.discard(home)


# --- committing ------------------------------------------------------------------------------

PATHS_PER_CALL = 500  # keeps every command line far below the system's limit


def _chunks(items: Sequence[str]) -> list[Sequence[str]]:
    return [items[i:i + PATHS_PER_CALL] for i in range(0, len(items), PATHS_PER_CALL)]


def changed_paths(home: Path, rel: Sequence[str]) -> list[str]:
    """Which of `rel` (files or folders, relative to home) differ from HEAD, ignored excluded."""
    out: list[str] = []
    for chunk in _chunks(rel):
        proc = git_run(home, "status", "--porcelain=v1", "-z", "--untracked-files=all",
                       "--no-renames", "--", *chunk)
        out += [rec[3:] for rec in proc.stdout.split("\0") if len(rec) > 3]
    return sorted(dict.fromkeys(out))


def commit_paths(store: Store, paths: Iterable[Path], message: str) -> bool:
    """Commit exactly `paths` (additions, changes, deletions) with `message`.

    Other staged or unstaged changes in the repository stay as they were. Works on a
    branch with no commits yet. Returns False when there was nothing to commit or the
    store is not a git repository (True: the paths' changes are in HEAD now).
    """
    if not is_repo(store.home):
        return False
    home = store.home
    check_idle(home)
    rel = sorted({os.path.relpath(os.path.abspath(p), home) for p in paths})
    if any(r == ".." or r.startswith("../") for r in rel):
        raise GitError(f"cannot commit paths outside the store {home}: {rel}")
    with git_lock(store):
        for _attempt in range(5):
            changed = changed_paths(home, rel)
            if not changed:
                return False
            if _commit_once(home, changed, message):
                return True
    raise GitError("another process kept moving HEAD while cortex committed: run the "
                   "command again")


def _commit_once(home: Path, rel: Sequence[str], message: str) -> bool:
    """One attempt; False when HEAD moved under us (the caller retries)."""
    parent = head_commit(home)
    gitdir = git_dir_of(home)
    fd, tmp_index = tempfile.mkstemp(dir=gitdir, prefix="cortex-index.")
    os.close(fd)
    os.unlink(tmp_index)  # git wants to create the index file itself
    env = {"GIT_INDEX_FILE": tmp_index}
    try:
        if parent:
            git_run(home, "read-tree", parent, env=env)
        for chunk in _chunks(rel):
            git_run(home, "add", "--all", "--", *chunk, env=env)
        tree = git_run(home, "write-tree", env=env).stdout.strip()
    finally:
        for leftover in (tmp_index, tmp_index + ".lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
    if parent and tree == git_run(home, "rev-parse", f"{parent}^{{tree}}").stdout.strip():
        # the files already match HEAD: only their index entries lag (a commit killed
        # between moving HEAD and updating the index); bring those up to date
        for chunk in _chunks(rel):
            git_run(home, "reset", "-q", "HEAD", "--", *chunk)
        return True
    args = ["commit-tree", tree, "-F", "-"]
    if parent:
        args += ["-p", parent]
    commit = git_run(home, *args, input=message.rstrip("\n") + "\n").stdout.strip()
    # compare-and-swap: fails if another process moved HEAD since we read it
    old = parent or "0" * 40
    proc = git_run(home, "update-ref", "-m", f"commit: {message.splitlines()[0]}", "HEAD",
                   commit, old, check=False)
    if proc.returncode != 0:
        if head_commit(home) != parent:
            return False
        raise git_error(["update-ref"], proc.stderr)
    # bring the user's index entries for these paths (only) to what HEAD now holds
    for chunk in _chunks(rel):
        git_run(home, "reset", "-q", "HEAD", "--", *chunk)
    return True
