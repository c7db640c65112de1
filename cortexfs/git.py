"""The one module that runs git: the store's repository, its lock files, cortex's commits.

What a commit holds is decided by cortexfs.commit (the committer); this module makes one
exactly (`commit_exactly`): in a private index, so that a user's staged work is never
committed, with the user's index updated for those paths before HEAD moves (a
compare-and-swap), so that it is never left behind HEAD. `preflight` checks, before a
command writes, what that commit will need; `stale_lock` says when one of git's lock
files was left by a git that is gone, so that it can be removed.

Git runs as plain subprocesses through `git_run`, not through gitpython's `Git` wrapper.
A call costs the same either way: `git rev-parse HEAD` 1.89 ms with subprocess.run against
1.95 ms with `Git.execute`, and `git commit` 13.3 against 13.2 ms (medians of 40
interleaved calls). But `import git` (gitpython 3.2.1) costs 72 ms (`python -X importtime`,
min of 8 runs). Both were measured on a shared 2-core machine at load 7.9. That is more
than a quarter of the 0.25 s that `cortex new` may take as a whole process, and it would
come on every committing command. gitpython creates the repository at `cortex init`
(`ensure_repo`), where the import does not matter.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cortexfs import layout
from cortexfs.errors import EnvironmentProblem, GitError

if TYPE_CHECKING:
    from cortexfs.store import Store

GITIGNORE_LINES = (f"{layout.CACHE}/", f"{layout.LOGS}/", f"{layout.LOCKS}/", "*.tmp",
                   layout.WATCH_PID)
GITATTRIBUTES_LINES = (f"**/{layout.META}/{layout.ACCESS_LOG} merge=union",)
STALE_TEMP_AGE = 600.0  # seconds after which a temporary file without a pid is abandoned
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


def _lost_object_folder(stderr: str) -> bool:
    """A git that ran beside a gc lost the folder it was writing an object into: git makes
    `objects/XX` when it is missing and tries once more, and the gc's prune (which removes
    every empty `objects/XX`) can remove it in between. git died before changing anything
    (objects are written before any ref, index or file): worth running again."""
    return "unable to create temporary file: No such file or directory" in stderr


def git_run(home: Path, *args: str, check: bool = True, input: str | None = None,
            env: dict[str, str] | None = None, timeout: float | None = None,
            config: Sequence[str] = (), ) -> subprocess.CompletedProcess[str]:
    """Run `git args` in `home`, waiting out another process's lock file (index.lock,
    HEAD.lock, a ref's lock) and removing a stale one (see `stale_lock`), and running it
    again when a gc beside it removed the object folder it wrote into.

    With `check`, a failure becomes a GitError whose one line says what git said. git runs
    in its own process group: a Ctrl-C meant for cortex does not kill it half-way (cortex
    stops at a boundary of its own, see cortexfs.interrupt). `config`: `-c NAME=VALUE`
    settings for this call only.
    """
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    cmd = ["git", "--literal-pathspecs", *_configured(config), *args]
    while True:
        try:
            # bytes, decoded below: text mode would turn every CR into a LF (universal
            # newlines), so a path ending in CR in `git status -z` named another file
            raw = subprocess.run(cmd, cwd=home, capture_output=True, env=git_env(env),
                                 input=None if input is None else _encoded(input),
                                 timeout=timeout, process_group=0)
            proc = subprocess.CompletedProcess(raw.args, raw.returncode, _decoded(raw.stdout),
                                               _decoded(raw.stderr))
        except FileNotFoundError:
            raise GitError("git is not installed or not on PATH: install git") from None
        except subprocess.TimeoutExpired:
            raise GitError(f"git {args[0]} did not finish within {timeout:.0f}s: check the "
                           "network and the remote, then try again") from None
        if proc.returncode == 0:
            break
        if _lost_object_folder(proc.stderr) and time.monotonic() < deadline:
            time.sleep(0.05)
            continue
        if not _is_lock_busy(proc.stderr):
            break
        lock = _lock_named(home, proc.stderr)
        if _remove_if_stale(home, lock):
            continue
        if time.monotonic() >= deadline:
            if not check:
                return proc
            raise _busy(home, lock, LOCK_WAIT_SECONDS)
        time.sleep(0.05)
    if proc.returncode != 0 and check:
        raise git_error(args, proc.stderr or proc.stdout)
    return proc


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _decoded(data: bytes) -> str:
    """git's output as text: paths are bytes to git, so undecodable ones round-trip."""
    return data.decode("utf-8", "surrogateescape")


def _configured(config: Sequence[str]) -> list[str]:
    """`-c NAME=VALUE` arguments for git."""
    return [a for c in config for a in ("-c", c)]


def _lock_named(home: Path, stderr: str) -> Path:
    """The lock file a git error message says is held."""
    held = re.search(r"'([^']+\.lock)'", stderr)
    lock = Path(held.group(1)) if held else git_dir_of(home) / "index.lock"
    return lock if lock.is_absolute() else home / lock


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


def git_blobs(home: Path, specs: Iterable[str]) -> dict[str, bytes | None]:
    """`git_blob` of each spec (an object id, or REV:PATH), from one `git cat-file --batch`
    rather than a git each."""
    wanted = list(dict.fromkeys(specs))
    # (the batch reads lines, and drops a CR before a line's end: those are read one by one)
    batch = len(wanted) > 1 and not any("\n" in spec or spec.endswith("\r") for spec in wanted)
    proc = subprocess.run(["git", "cat-file", "--batch"], cwd=home, capture_output=True,
                          input=_encoded("".join(f"{spec}\n" for spec in wanted)),
                          env=git_env()) if batch else None
    if proc is None or proc.returncode != 0:
        return {spec: git_blob(home, spec) for spec in wanted}
    out, pos, found = proc.stdout, 0, {}
    for spec in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].split(b" ")
        pos = end + 1
        if len(header) == 3 and header[2].isdigit():  # "<id> <type> <size>", then the bytes
            size = int(header[2])
            found[spec] = out[pos:pos + size] if header[1] == b"blob" else None
            pos += size + 1
        else:  # "<spec> missing" (or ambiguous)
            found[spec] = None
    return found


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
    files = {store.home / ".gitignore": GITIGNORE_LINES,
             store.home / ".gitattributes": GITATTRIBUTES_LINES}
    return [path for path, lines in files.items() if _ensure_lines(path, lines)]


def in_progress(home: Path) -> str | None:
    """'merge', 'rebase', 'cherry-pick' or 'revert' when one is under way in `home`."""
    gitdir = git_dir_of(home)
    for marker, what in _IN_PROGRESS:
        if (gitdir / marker).exists():
            return what
    return None


def check_idle(home: Path) -> None:
    """Refuse to touch a repository in the middle of a merge, rebase or cherry-pick."""
    what = in_progress(home)
    if what:
        raise GitError(f"{home} is in the middle of a {what}: finish or abort it (`git status` "
                       "says how), then run the command again")


def head_commit(home: Path, ref: str | None = "HEAD") -> str | None:
    """The commit HEAD (or `ref`) points at; None on a branch with no commits yet (or for
    no ref, or one that names no commit)."""
    if not ref:
        return None
    proc = git_run(home, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


# --- remotes ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Remotes:
    """The remotes git knows (as `git remote` lists them) and the `remote.*` and `branch.*`
    settings, from one read of git's config (every scope, as git reads it)."""

    names: list[str]
    settings: dict[str, str]  # "branch.main.remote" → "origin" (the last value of a key)

    def get(self, key: str) -> str | None:
        return self.settings.get(key) or None

    @property
    def has_remote(self) -> bool:
        """A remote to sync with: one git lists that has a URL."""
        return any(self.get(f"remote.{name}.url") for name in self.names)


def remotes(home: Path) -> Remotes:
    """One `git config --get-regexp` instead of `git remote` and a `git config --get` per key.

    A remote is a `remote.NAME.KEY` setting (git's own rule, remote.c), in any scope; the
    list is sorted as `git remote` sorts it."""
    proc = git_run(home, "config", "-z", "--get-regexp", r"^(remote|branch)\.", check=False)
    settings: dict[str, str] = {}
    names: dict[str, None] = {}
    for rec in proc.stdout.split("\0") if proc.returncode == 0 else []:
        key, _, value = rec.partition("\n")
        section, _, rest = key.partition(".")
        name, dot, _ = rest.rpartition(".")
        if not dot or not name:
            continue  # (remote.pushDefault: no remote's)
        settings[key] = value.strip()
        if section == "remote" and not name.startswith("/"):  # (git skips these: remote.c)
            names[name] = None
    return Remotes(sorted(names), settings)


# --- worktree state (the fast path of `cortex ready` and `cortex status`) --------------------

@dataclass
class WorktreeState:
    """What git says about the store, read without touching the network."""

    is_repo: bool
    branch: str | None = None  # None when HEAD is detached
    dirty: list[str] = field(default_factory=list)  # relative to home, untracked included
    has_remote: bool = False
    upstream: str | None = None  # e.g. "origin/main"
    ahead: int = 0  # commits on HEAD not on the upstream (as of the last fetch)
    behind: int = 0
    in_progress: str | None = None  # merge | rebase | cherry-pick | revert
    last_sync: str | None = None  # ISO-8601 UTC of the last successful `cortex sync`
    head: str | None = None  # the commit HEAD points at; None before the first commit
    # paths whose index entry differs from HEAD (of a rename, its new path: as `git diff
    # --cached --name-only` names them)
    staged: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        # (in the fields' order)
        return {k: v for k, v in vars(self).items() if k not in ("head", "staged")}


def worktree_state(store: Store, remote: Remotes | bool = True) -> WorktreeState:
    """Uncommitted paths, remote, ahead/behind, operation in progress and last sync.

    Two git processes (status with branch info, and the remotes from config), no fetch;
    one without `remote` (has_remote is then left False). `remote`: the remotes as the
    caller has read them (`remotes`), or True to read them here.
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
    if remote:
        state.has_remote = (remotes(home) if remote is True else remote).has_remote
    return state


# status --porcelain=v2 records naming a path: the fields before the path
_PATH_AFTER = {"1 ": 8, "2 ": 9, "u ": 10, "? ": 1}


def _parse_status_v2(out: str, state: WorktreeState) -> None:
    records = iter(out.split("\0"))
    dirty: list[str] = []
    staged: list[str] = []
    for rec in records:
        if rec.startswith("# branch."):
            key, _, value = rec[len("# branch."):].partition(" ")
            if key == "oid":
                state.head = None if value == "(initial)" else value
            elif key == "head":
                state.branch = None if value == "(detached)" else value
            elif key == "upstream":
                state.upstream = value
            elif key == "ab":
                ahead, behind = value.split()
                state.ahead, state.behind = int(ahead), abs(int(behind))
        elif rec[:2] in _PATH_AFTER:
            fields = _PATH_AFTER[rec[:2]]
            path = rec.split(" ", fields)[fields]
            dirty.append(path)
            # (XY after the record's type: X is the index against HEAD, "." unchanged)
            if rec[0] in "12u" and rec[2] != ".":
                staged.append(path)
            if rec.startswith("2 "):  # the original path of a rename follows
                dirty.extend(itertools.islice(records, 1))
    state.dirty = sorted(dict.fromkeys(dirty))
    state.staged = sorted(dict.fromkeys(staged))


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

    merged = {**read_sync_state(home), **values}
    data = {key: value for key, value in merged.items() if value is not None}
    atomic_write(git_dir_of(home) / SYNC_STATE_FILE, json.dumps(data, indent=1) + "\n")


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# --- the store's git lock --------------------------------------------------------------------

# homes whose git lock this process holds (re-entrant use) → when it took it (time.time())
_held_since: dict[Path, float] = {}


@contextlib.contextmanager
def git_lock(store: Store, timeout: float = GIT_LOCK_SECONDS) -> Iterator[None]:
    """Serialise cortex's own work on one store's git repository (every writing command from
    its pre-flight to its commit, a whole sync, the watcher's and the access-log
    committer's commits) across processes.

    Re-entrant within a process, so `sync` can commit through `commit_paths` while it holds
    it. Whoever holds it is the only cortex process running git in the repository: a git
    lock file older than this holding is therefore not a live cortex's (see `stale_lock`).
    The holder's pid is written into the lock file and cleared on release: a pid found
    there means the last holder was killed, and the temporary files it may have left are
    removed first (remove_stale_temporaries).
    """
    from cortexfs.fsutil import file_lock

    home = store.home.absolute()
    if home in _held_since:
        yield
        return
    path = store.locks_dir / layout.GIT_LOCK  # (`.locks/` is git-ignored)
    # `cortex watch` looks at this lock to tell cortex's own reads of atoms from others'
    with file_lock(path, timeout=timeout,
                   what=f"git in {store.home} (a `cortex sync` or commit is running)"):
        abandoned, _held_since[home] = _mark_held(path)
        try:
            if abandoned:
                with contextlib.suppress(OSError):
                    remove_stale_temporaries(store)
            yield
        finally:
            _held_since.pop(home, None)
            with contextlib.suppress(OSError):
                os.truncate(path, 0)


# --- what a killed cortex process left ----------------------------------------------------------

def remove_stale_temporaries(store: Store) -> list[Path]:
    """Remove the temporary files (`.NAME.PID.XXXXXXXX.tmp`) that a killed cortex process
    left under context/ and in the git dir, and git's own temporary split-index file
    (`sharedindex_XXXXXX`, ~1.2 MB on 10,000 atoms, which git never removes) of a git killed
    while it rewrote the private index's shared part; the paths removed.

    A temporary is abandoned when the process named by the pid in its name is gone (a live
    writer, another cortex, renames or removes its own within milliseconds). One without a
    pid (an older cortex's) is abandoned once older than STALE_TEMP_AGE; git's by the stale
    rule of git's lock files (`stale_lock`).
    """
    removed: list[Path] = []
    now = time.time()
    places: list[tuple[Path, bool]] = [(store.context, True)]
    if is_repo(store.home):
        places.append((git_dir_of(store.home), False))
    for top, recurse in places:
        for folder, dirs, names in os.walk(top) if recurse else [(str(top), [], _names(top))]:
            if ".git" in dirs:
                dirs.remove(".git")
            for name in names:
                path = Path(folder, name)
                if name.startswith("sharedindex_") and not recurse:
                    abandoned = stale_lock(store.home, path)
                elif _temporary(name):
                    abandoned = _abandoned(path, name, now)
                else:
                    continue
                if abandoned:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                        removed.append(path)
    return removed


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _temporary(name: str) -> bool:
    return (name.startswith(".") and name.endswith(".tmp")) or \
        name.startswith(("cortex-index.", "cortex-merge-"))


def _abandoned(path: Path, name: str, now: float) -> bool:
    parts = name.removesuffix(".tmp").removesuffix(".lock").split(".")
    pid = parts[-2] if len(parts) >= 3 else ""
    if name.startswith("cortex-merge-"):  # cortex-merge-PID-LABEL (merge_file)
        pid = name.split("-")[2]
    if pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # alive, another user's
        return False
    try:
        return now - path.lstat().st_mtime > STALE_TEMP_AGE
    except OSError:
        return False


def _mark_held(path: Path) -> tuple[bool, float]:
    """Write our pid into the lock file: (whether a killed holder's pid was there, now as
    the file system stamps files — its clock is coarser than time.time(): a file made a
    moment after time.time() was read can carry an earlier mtime)."""
    try:
        with open(path, "r+b") as f:
            abandoned = bool(f.read(32).strip())
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n".encode())
            f.flush()
            return abandoned, os.fstat(f.fileno()).st_mtime
    except OSError:
        return False, time.time()


# --- git's own lock files: waiting them out, or removing stale ones --------------------------

def git_lock_files(home: Path) -> list[Path]:
    """The lock files a cortex commit needs free: the index's, HEAD's and its branch's."""
    gitdir = git_dir_of(home)
    out = [gitdir / "index.lock", gitdir / "HEAD.lock"]
    with contextlib.suppress(OSError, UnicodeDecodeError):
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref: refs/"):
            out.append(gitdir / f"{head[5:]}.lock")
    return out


def git_processes(home: Path) -> list[str] | None:
    """The live git processes working in the repository at `home`, each as "pid N (command)";
    None when this system cannot tell.

    On Linux, from /proc: a process whose command name is git (or git-*) and whose current
    folder, command line or GIT_DIR / GIT_WORK_TREE / GIT_INDEX_FILE lies in the work tree or
    the git dir. One whose details we may not read (another user's) counts as working here:
    a lock is only ever removed when no process could be holding it. Elsewhere (no /proc),
    every running git process counts, as `ps` lists them; without `ps`, None.
    """
    if not os.path.isdir("/proc/self/fd"):
        return _git_processes_ps()
    places = {str(home.resolve()), str(git_dir_of(home).resolve())}
    found = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/comm", encoding="utf-8", errors="replace") as f:
                comm = f.read().strip()
        except OSError:
            continue  # gone meanwhile
        if comm != "git" and not comm.startswith("git-"):
            continue
        where = _works_in(entry.name, places)
        if where is not False:
            found.append(f"pid {entry.name} ({where or comm})")
    return found


def _inside(path: str, places: set[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in places)


def _works_in(pid: str, places: set[str]) -> str | bool:
    """False when git process `pid` works elsewhere (or is a zombie), else its command line
    ('' when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        args = []
    command = " ".join(args)[:120]
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except PermissionError:
        return command  # another user's git: it may be working here
    except OSError:
        return False  # gone, or a zombie (which holds no lock)
    if _inside(cwd, places) or any(_inside(a.split("=", 1)[-1], places) for a in args):
        return command
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except PermissionError:
        return command
    except OSError:
        return False
    for item in env:
        name, _, value = item.decode("utf-8", "replace").partition("=")
        if name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE") and _inside(value, places):
            return command
    return False


def _git_processes_ps() -> list[str] | None:
    try:
        proc = subprocess.run(["ps", "-A", "-o", "pid=,comm="], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    out = []
    for line in proc.stdout.splitlines():
        pid, _, comm = line.strip().partition(" ")
        name = os.path.basename(comm.strip())
        if (name == "git" or name.startswith("git-")) and pid != str(os.getpid()):
            out.append(f"pid {pid} ({name})")
    return out


def stale_lock(home: Path, lock: Path) -> bool:
    """Whether git lock file `lock` is stale, so that cortex may remove it.

    Decided only while this process holds the store's git lock (`git_lock`): every cortex
    process runs git under that lock, so a lock file made before we took it was made by a
    git that a cortex (or a person) started earlier. It is stale when, besides, no live git
    process works in this repository (`git_processes`): its maker was killed (kill -9, a
    crash, a power cut) and nothing will ever remove it. A lock file made after we took the
    store's lock, or any while a git process works here, belongs to a running git: wait.
    """
    since = _held_since.get(home.absolute())
    if since is None:
        return False
    try:
        made = lock.stat().st_mtime
    except OSError:
        return False
    if made >= since:
        return False
    return git_processes(home) == []


def clear_git_locks(home: Path) -> None:
    """Make sure no git lock file stands in the way of a commit: remove stale ones (a one-line
    note on stderr), wait out held ones for up to LOCK_WAIT_SECONDS, then raise a GitError
    that says what to do."""
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        held = [lock for lock in git_lock_files(home) if lock.exists()]
        held = [lock for lock in held if not _remove_if_stale(home, lock)]
        if not held:
            return
        if time.monotonic() >= deadline:
            raise _busy(home, held[0], LOCK_WAIT_SECONDS)
        time.sleep(0.05)


def _remove_if_stale(home: Path, lock: Path) -> bool:
    """Remove `lock` if it is stale (with a one-line note on stderr); True when it is gone."""
    if stale_lock(home, lock):
        lock.unlink(missing_ok=True)
        sys.stderr.write(f"cortex: removed the stale git lock {lock} (the git process that "
                         "made it is gone)\n")
    return not lock.exists()


def _busy(home: Path, lock: Path, waited: float) -> GitError:
    holders = git_processes(home)
    if holders:
        return GitError(f"git is busy: {lock} has been held for {waited:.0f}s by "
                        f"{', '.join(holders[:2])} working in {home}; wait for it to finish "
                        "(or stop it), then run the command again")
    return GitError(f"git is busy: {lock} has been held for {waited:.0f}s; if no git process "
                    f"is running in {home}, delete that file, then run the command again")


# --- pre-flight: what a commit needs, checked before a command writes ----------------------------

MIN_FREE_BYTES = 1 << 20  # besides two copies of the index: git's objects, temporary files


def check_identity(home: Path) -> None:
    """Refuse when git has no identity for commits (a name and an email)."""
    env = os.environ
    for role in ("AUTHOR", "COMMITTER"):
        if env.get(f"GIT_{role}_NAME", "").strip() and env.get(f"GIT_{role}_EMAIL", "").strip():
            continue  # given by the environment: nothing in the config can take it away
        where = home if home.is_dir() else _existing_parent(home)
        proc = git_run(where, "var", f"GIT_{role}_IDENT", check=False)
        if proc.returncode != 0:
            raise git_error(["var"], proc.stderr)


def _existing_parent(path: Path) -> Path:
    path = path.absolute()
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


def check_room(folder: Path, need: int, what: str) -> None:
    """Refuse when `folder` (or, while it does not exist, where it would be made) is not
    writable or has less than `need` bytes free."""
    folder = _existing_parent(folder)
    if not os.access(folder, os.W_OK):
        try:
            read_only = os.statvfs(folder).f_flag & os.ST_RDONLY
        except OSError:
            read_only = False
        why = "is on a read-only file system" if read_only else "is not writable"
        raise EnvironmentProblem(f"{folder} {why}, and {what} must be written there: "
                                 "remount it read-write or fix its permissions (nothing was "
                                 "written)")
    try:
        st = os.statvfs(folder)
    except OSError:
        return
    free = st.f_bavail * st.f_frsize
    if free < need:
        raise EnvironmentProblem(f"only {free // 1024:,} KiB free on the disk holding {folder}; "
                                 f"{what} needs about {need // 1024:,} KiB: free some space, "
                                 "then run the command again (nothing was written)")


def preflight(store: Store, *, init: bool = False) -> None:
    """Refuse now what a commit would fail on after the command had written its files: a
    merge (rebase, cherry-pick) under way, no identity for commits, git's lock files held by
    a live git (stale ones are removed), a read-only or full disk for git's objects.

    Call it holding `git_lock` (the stale-lock rule needs it). With `init`, the repository
    may not exist yet: what `cortex init` is about to create is checked instead.
    """
    home = store.home
    if not is_repo(home):
        if init:
            check_identity(home)
            check_room(home, MIN_FREE_BYTES, "the new git repository")
        return
    check_idle(home)
    check_identity(home)
    gitdir = git_dir_of(home)
    try:
        index_size = (gitdir / "index").stat().st_size
    except OSError:
        index_size = 0
    # git writes a new index beside the old one (twice: cortex's private one and yours)
    check_room(gitdir / "objects", 2 * index_size + MIN_FREE_BYTES, "git's commit")
    check_room(gitdir, 0, "git's index")
    check_room(store.context, 0, "the store's files")
    clear_git_locks(home)


# --- committing ------------------------------------------------------------------------------

def changes(home: Path, pathspecs: Sequence[str], *, few: bool = False,
            ) -> list[tuple[str, str]]:
    """(XY status, path relative to home) of every path under `pathspecs` that differs from
    HEAD in the index or the work tree, untracked included, ignored files not.

    One `git status`; it may refresh the stat data of your index (as `git status` does).
    `few`: the pathspecs are the few paths a command wrote, so git's index preload (up to
    20 threads over every entry, to stat them in parallel) is left out: it would find only
    the few that match (the status of a new atom's ~10 files on 10,000 atoms: median 14.9
    -> 10.1 ms, 15 runs each, load 3.7).
    """
    if not pathspecs:
        return []
    proc = git_run(home, *_CHANGES, *pathspecs, config=_ONE_THREAD if few else ())
    return [(rec[:2], rec[3:]) for rec in proc.stdout.split("\0") if len(rec) > 3]


_CHANGES = ("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
            "--ignore-submodules", "--")
_ONE_THREAD = ("core.preloadIndex=false",)


def changes_started(home: Path, pathspecs: Sequence[str],
                    ) -> Callable[[], list[tuple[str, str]] | None]:
    """`changes`, asked now in a process of its own and read later (the caller works
    meanwhile): the returned function waits for its answer; None when git failed (a busy
    index lock…): then ask `changes` itself."""
    if not pathspecs:
        return lambda: []
    # one thread (git's index preload starts up to 20): the caller works on the other core
    output = _started(home, [*_configured(_ONE_THREAD), *_CHANGES, *pathspecs])

    def answer() -> list[tuple[str, str]] | None:
        text = output()
        if text is None:
            return None
        return [(rec[:2], rec[3:]) for rec in text.split("\0") if len(rec) > 3]
    return answer


def _started(home: Path, args: Sequence[str], env: dict[str, str] | None = None,
             input: str | None = None) -> Callable[[], str | None]:
    """`git args`, started now in a process of its own (`input` written to its stdin): the
    returned function waits for its output (and gives it again when called again); None
    when git failed (the caller then runs it with `git_run`, which says why)."""
    try:
        proc = subprocess.Popen(["git", "--literal-pathspecs", *args], cwd=home,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
                                env=git_env(env), process_group=0)
        if proc.stdin is not None:
            # (a broken pipe: git failed, and output() says None)
            with contextlib.suppress(BrokenPipeError), proc.stdin:
                proc.stdin.write(_encoded(input) if input else b"")
            proc.stdin = None  # (closed: communicate() must not flush it)
    except OSError:
        return lambda: None

    done: list[str | None] = []

    def output() -> str | None:
        if not done:  # (the answer is kept: it may be asked for again)
            out, _ = proc.communicate()
            done.append(_decoded(out) if proc.returncode == 0 else None)
        return done[0]
    return output


def head(home: Path, ask: bool = False) -> str | None:
    """The commit HEAD points at; None on a branch with no commits yet.

    Read from git's files when they have the usual shape (HEAD names a branch whose ref is
    a loose file or a line of packed-refs, or holds an id), saving a `git rev-parse`
    (~2 ms); else, or with `ask`, git is asked. A wrong answer could not make a wrong
    commit: HEAD moves by compare-and-swap from it (`commit_exactly` then asks git).
    """
    if not ask:
        found = _head_from_files(home)
        if found is not None:
            return found
    return head_commit(home)


_OBJECT_ID = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})")


def current_branch(home: Path) -> str | None:
    """The branch HEAD names, as `git symbolic-ref --short HEAD` says it; None when HEAD is
    detached. Read from `.git/HEAD` when it has the usual shape (as `head` does), saving a
    git; else git is asked."""
    text = _head_file(home)
    if text is not None and text.startswith(_BRANCH_REF):
        return text.removeprefix(_BRANCH_REF)
    if text is not None and _OBJECT_ID.fullmatch(text):
        return None
    proc = git_run(home, "symbolic-ref", "--short", "-q", "HEAD", check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


_BRANCH_REF = "ref: refs/heads/"


def _head_file(home: Path) -> str | None:
    """What `.git/HEAD` holds (a branch's ref line or an id), when it is a plain file of a
    repository that keeps its refs in files; None otherwise (a link, reftable, unreadable:
    git is asked)."""
    try:
        path = git_dir_of(home) / "HEAD"
        if path.is_symlink() or (_common_dir(home) / "reftable").exists():
            return None
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _head_from_files(home: Path) -> str | None:
    """HEAD's commit as git's files say it; None when they do not say it plainly."""
    head = _head_file(home)
    if head is None or _OBJECT_ID.fullmatch(head):
        return head
    if not head.startswith(_BRANCH_REF):
        return None
    ref = head.removeprefix("ref: ")
    try:
        common = _common_dir(home)
        try:
            value = (common / ref).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            value = ""
            with open(common / "packed-refs", encoding="ascii") as packed:
                for line in packed:
                    sha, _, name = line.rstrip("\n").partition(" ")
                    if name == ref:
                        value = sha
                        break
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return value if _OBJECT_ID.fullmatch(value) else None


PRIVATE_INDEX = "cortex-index"  # in the git dir: the index of cortex's last commit, reused
# The objects of a commit are written loose, zlib level 1 instead of git's default 6: a new
# atom's commit hashes ~2 MB of generated files on 10,000 atoms (HIPPOCAMPUS's), 61 -> 25 ms
# (`git hash-object -w` of that commit's 9 files); the loose files are ~20 % larger until
# `git gc` packs them (at pack.compression). An object's id and content do not change.
FAST_LOOSE_OBJECTS = ("core.looseCompression=1",)
# cortex's private index is kept split (git's split index): its ~10,000 entries in a shared
# file written once per ~20 % of them changed (`sharedindex.<id>` in the git dir, expired
# by git itself), each commit writing only the few entries it changed. On the 10k store
# update-index 23.6 -> 7.5 ms and write-tree 22.5 -> 8.3 ms (medians of 10, load 4.3): the
# whole 1.2 MB index was written (and checksummed) twice per commit. Your index is never
# split by cortex. A shared file gone makes the build fail, and it is done again from HEAD.
SPLIT_INDEX = ("core.splitIndex=true",)


class Started:
    """A commit's first step begun early (`start_commit`): cortex's private index taken and
    the work tree's content of some paths being added to it, in a process of its own, while
    the caller asks git status what the commit will hold. `commit_exactly` goes on from it
    when HEAD has not moved (else it is let go); `drop` lets it go unused."""

    def __init__(self, home: Path, parent: str, index: str, paths: set[str],
                 output: Callable[[], str | None]) -> None:
        self.home, self.parent, self.index, self.paths = home, parent, index, paths
        self._output: Callable[[], str | None] | None = output

    def take(self, parent: str | None) -> tuple[str, set[str]] | None:
        """(the private index, the paths now in it as the work tree has them) when the
        build rests on `parent` and its git succeeded; None otherwise (the index let go)."""
        ok = self._wait()
        if ok and parent == self.parent:
            index, self.index = self.index, ""  # (the caller's now)
            return index, self.paths
        self.drop()
        return None

    def drop(self) -> None:
        """Let the private index go for the next commit (it holds `parent` plus whatever
        the work tree had: the next build puts back what it does not commit)."""
        self._wait()
        index, self.index = self.index, ""
        if index:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(index + ".lock")
            if os.path.exists(index):
                _keep(index, git_dir_of(self.home))

    def _wait(self) -> bool:
        output, self._output = self._output, None
        return output is not None and output() is not None


def start_commit(store: Store, paths: Iterable[str]) -> Started | None:
    """Begin a commit's first step for `paths` (relative to home; the files the commit will
    most likely hold: folders are left out): cortex's private index taken and the paths'
    content added to it in a process of its own (~8-11 ms on 10,000 atoms), while the
    caller asks git status what the commit will hold (~9 ms). None without a HEAD to build
    on. Hold `git_lock`; pass the result to `commit_exactly`, or `drop` it."""
    home = store.home
    files = sorted(p for p in set(paths) if not os.path.isdir(home / p))
    parent = head(home)
    if parent is None or not files:
        return None
    index = _private_index(home, git_dir_of(home), parent)
    output = _started(home, [*_configured(FAST_LOOSE_OBJECTS + SPLIT_INDEX), *_UPDATE],
                      {"GIT_INDEX_FILE": index}, input="".join(f"{p}\0" for p in files))
    return Started(home, parent, index, set(files), output)


# (paths on stdin; --remove: a path gone from the work tree leaves the index, a deletion)
_UPDATE = ("update-index", "--add", "--remove", "-z", "--stdin")


def commit_exactly(store: Store, rel: Sequence[str], message: str,
                   staged: Iterable[str] = (), started: Started | None = None) -> str | None:
    """Commit the current content of `rel` (paths relative to home: changes, additions,
    deletions) on top of HEAD with `message`; the new commit, or None when they already
    match HEAD. `staged`: those of them whose entry in your index differs from HEAD (git
    status's first column). Hold `git_lock`.

    The commit is built in a private index holding HEAD plus these paths, so that nothing
    you staged is committed. Then your index's entries for these paths (only) are set to
    what the commit holds, and only then is HEAD moved, with a compare-and-swap: a kill at
    any point leaves your index equal to HEAD or ahead of it (staged changes already in
    the work tree), never behind it — a `git commit` of yours never undoes cortex's. A
    moved HEAD (another committer) is retried; a failure after the index was updated puts
    those entries back as HEAD has them.

    Git calls: update-index, diff-index beside write-tree, commit-tree beside update-index,
    update-ref, whatever the number of paths (paths go through stdin); HEAD is read from
    git's files when they have the usual shape (else rev-parse, see `head`). `started`:
    the update-index already begun (`start_commit`), gone on from when HEAD is still what
    it was built on; it is let go in any case.
    """
    home = store.home
    paths = sorted(set(rel))
    gitdir = git_dir_of(home)
    for attempt in range(5):
        parent = head(home, ask=attempt > 0)
        taken = started.take(parent) if started is not None and attempt == 0 else None
        index, done = taken if taken is not None else \
            (_private_index(home, gitdir, parent), set())
        try:
            try:
                tree, entries = _build_tree(home, parent, paths, index, done)
            except GitError:
                if parent is None:
                    raise
                # The reused index may name a blob git has pruned: gc keeps what refs,
                # reflogs and your index name, not this index, and git does not hash a file
                # again whose stat data matches its entry (a commit undone by `git reset
                # HEAD~1`, its reflog expired, then gc). A fresh index from HEAD has no stat
                # data, so every path is hashed (and its object written) again.
                _read_afresh(home, index, parent)
                tree, entries = _build_tree(home, parent, paths, index)
            behind = sorted(set(staged) - {e.split("\t", 1)[1] for e in entries})
            if behind:  # your index differs from HEAD where the commit changes nothing
                _restore_index_entries(home, behind)
            if tree is None:
                _keep(index, gitdir)
                return None
            args = ["commit-tree", tree, "-F", "-", *(["-p", parent] if parent else [])]
            text = message.rstrip("\n") + "\n"
            # commit-tree beside your index's update (~3 ms): HEAD moves only after both
            made = _started(home, args, input=text)
            try:
                _set_index_entries(home, entries)
            finally:
                made_commit = made()  # (waited for in any case)
            if made_commit is None:  # git failed: ask again, for its message
                _restore_index_entries(home, paths)
                made_commit = git_run(home, *args, input=text).stdout
                _set_index_entries(home, entries)
            commit = made_commit.strip()
            old = parent or "0" * len(commit)
            proc = git_run(home, "update-ref", "-m", f"commit: {message.splitlines()[0]}",
                           "HEAD", commit, old, check=False)
            if proc.returncode == 0:
                _keep(index, gitdir)
                pack_when_due(home)
                return commit
        finally:
            for leftover in (index, index + ".lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)
        if head(home, ask=True) != parent:
            continue  # another process committed meanwhile: build again on top of it
        _restore_index_entries(home, paths)
        if _is_lock_busy(proc.stderr):
            raise _busy(home, _lock_named(home, proc.stderr), LOCK_WAIT_SECONDS)
        raise git_error(["update-ref"], proc.stderr)
    _restore_index_entries(home, paths)
    raise GitError("another process kept moving HEAD while cortex committed: run the "
                   "command again")


def _private_index(home: Path, gitdir: Path, parent: str | None) -> str:
    """A private index file to build a commit on `parent` in: the one of cortex's last
    commit if it is there (it holds that commit's tree with git's stat data and cached
    trees, so that git's work is proportional to the change, not to the store), else a
    copy of yours, else `parent` read afresh. Whatever it holds beyond `parent` is put
    back by `_build_tree`."""
    fd, index = tempfile.mkstemp(dir=gitdir, prefix=f"cortex-index.{os.getpid()}.")
    os.close(fd)
    if parent is not None:
        with contextlib.suppress(FileNotFoundError):
            os.replace(gitdir / PRIVATE_INDEX, index)
            return index
        with contextlib.suppress(FileNotFoundError):
            import shutil

            shutil.copyfile(gitdir / "index", index)
            return index
    os.unlink(index)  # git wants to create the index file itself
    if parent is not None:
        _read_afresh(home, index, parent)
    return index


def _read_afresh(home: Path, index: str, parent: str) -> None:
    """Make the private `index` hold `parent`'s tree, read afresh (no stat data)."""
    for leftover in (index, index + ".lock"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(leftover)
    git_run(home, "read-tree", parent, env={"GIT_INDEX_FILE": index}, config=SPLIT_INDEX)


def _keep(index: str, gitdir: Path) -> None:
    """Keep the private index for the next commit (it holds HEAD's tree now)."""
    with contextlib.suppress(OSError):
        os.replace(index, gitdir / PRIVATE_INDEX)


def _build_tree(home: Path, parent: str | None, paths: Sequence[str], index: str,
                done: AbstractSet[str] = frozenset()) -> tuple[str | None, list[str]]:
    """In the private `index`: `parent`'s tree with `paths` as the work tree has them.

    (the tree, or None when it is `parent`'s own; the index entries of the paths that
    differ from `parent`, as `update-index --index-info` reads them: "mode sha\\tpath",
    mode 0 for a removal). Anything else the index held differently from `parent` (your
    staged work, in a copy of your index; paths `start_commit` added that the commit does
    not hold) is put back as `parent` has it first. `done`: paths the index already has as
    the work tree has them (`start_commit`'s).
    """
    env = {"GIT_INDEX_FILE": index}
    wanted = set(paths)
    todo = [p for p in paths if p not in done]
    if todo:
        git_run(home, *_UPDATE, input="".join(f"{p}\0" for p in todo), env=env,
                config=FAST_LOOSE_OBJECTS + SPLIT_INDEX)
    if parent is None:  # the first commit: nothing to compare with
        tree = git_run(home, "write-tree", env=env,
                       config=FAST_LOOSE_OBJECTS + SPLIT_INDEX).stdout.strip()
        listed = git_run(home, "ls-files", "-s", "-z", env=env).stdout
        zero = "0" * len(tree)
        found = {}
        for rec in listed.split("\0"):
            info, _, path = rec.partition("\t")
            if path in wanted:
                mode, sha, _stage = info.split(" ")
                found[path] = f"{mode} {sha}\t{path}"
        return tree, [found.get(p, f"0 {zero}\t{p}") for p in paths]
    # write-tree beside diff-index (~4 ms on 10,000 atoms): neither changes an entry, and the
    # tree is written again below when the index had to change
    written = _started(home, [*_configured(FAST_LOOSE_OBJECTS + SPLIT_INDEX), "write-tree"],
                       env)
    try:
        diff = _diff_index(home, parent, env)
    finally:
        built = written()  # (waited for in any case: the index is removed after a failure)
    if any(d.status == "U" for d in diff):  # a copy of an index in conflict: start afresh
        _read_afresh(home, index, parent)
        return _build_tree(home, parent, paths, index)
    foreign = [d for d in diff if d.path not in wanted]
    if foreign:
        git_run(home, "update-index", "-z", "--index-info", env=env, config=SPLIT_INDEX,
                input="".join(f"{d.old}\0" for d in foreign))
        built = None
    ours = [d.new for d in diff if d.path in wanted]
    if not ours:
        return None, []
    if built is None:
        built = git_run(home, "write-tree", env=env,
                        config=FAST_LOOSE_OBJECTS + SPLIT_INDEX).stdout
    return built.strip(), ours


class _Diff(NamedTuple):
    """One path of `git diff-index --raw`: (HEAD's entry, the index's entry — each as
    `update-index --index-info` reads it, mode 0 for no entry —, status letter, path)."""

    old: str
    new: str
    status: str
    path: str


def _diff_index(home: Path, parent: str, env: dict[str, str]) -> list[_Diff]:
    """Where the index `env` names differs from commit `parent` (one `git diff-index`)."""
    out = git_run(home, "diff-index", "--cached", "--raw", "-z", "--no-renames", parent,
                  env=env).stdout.split("\0")
    found = []
    for head, path in zip(out[0::2], out[1::2], strict=False):
        if not head.startswith(":"):
            continue
        old_mode, new_mode, old_sha, new_sha, status = head[1:].split(" ")
        old = f"0 {old_sha}" if old_mode == "000000" else f"{old_mode} {old_sha}"
        new = f"0 {new_sha}" if new_mode == "000000" else f"{new_mode} {new_sha}"
        found.append(_Diff(f"{old}\t{path}", f"{new}\t{path}", status[:1], path))
    return found


def _set_index_entries(home: Path, entries: Sequence[str]) -> None:
    """Set your index's entries of these paths (only) to `entries`, in one `update-index`."""
    if entries:
        git_run(home, "update-index", "-z", "--index-info",
                input="".join(f"{e}\0" for e in entries))


def _restore_index_entries(home: Path, paths: Sequence[str]) -> None:
    """Put your index's entries of `paths` back as HEAD has them (after a failed commit)."""
    with contextlib.suppress(GitError):
        git_run(home, "reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul", "HEAD",
                input="".join(f"{p}\0" for p in paths))


# --- packing the repository ----------------------------------------------------------------

GC_STATE = "cortex-gc"  # in the git dir: the loose-object sample at which cortex last asked
GC_ASK_AGAIN = 3600.0  # seconds after which the same sample is asked about again
# git's own leftovers of a killed `git gc`, besides a commit's (`git_lock_files`): its pid
# file and the locks of pack-refs, reflog expire (a ref's and its reflog's) and the
# commit-graph; `gc_leftovers` also looks under refs/ and logs/
GC_LOCKS = ("gc.pid", "gc.pid.lock", "packed-refs.lock", "HEAD.lock", "logs/HEAD.lock",
            "objects/info/commit-graph.lock")
_packing: list[subprocess.Popen[bytes]] = []


def _common_dir(home: Path) -> Path:
    """Where the objects, packed-refs and gc.pid are: the git dir, or the main repository's
    of a linked worktree (named by its `commondir` file)."""
    gitdir = git_dir_of(home)
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return gitdir
    return gitdir / common if common else gitdir


def loose_sample(home: Path) -> int:
    """The loose objects in `.git/objects/17`: git's own estimate of all of them (×256)."""
    try:
        names = os.listdir(_common_dir(home) / "objects" / "17")
    except OSError:
        return 0
    return sum(1 for name in names if len(name) in (38, 62))  # (not tmp_obj_*: SHA-1, SHA-256)


def pack_when_due(home: Path) -> None:
    """After a commit: start `git gc --auto --quiet` in the background when it may be due,
    so that the loose objects of cortex's commits get packed. Hold `git_lock`.

    cortex commits with plumbing (commit-tree, update-ref), so git never runs the `gc
    --auto` that a porcelain `git commit` runs, and a store would collect tens of thousands
    of loose files. git's rule (builtin/gc.c, too_many_loose_objects) packs when
    `.git/objects/17` holds more than gc.auto/256 loose objects (default 6700 → 27; 0
    disables it). That takes 2 or more whatever gc.auto is, so below that it is one
    listdir. Otherwise git is asked once per count seen (recorded in GC_STATE), and again
    after GC_ASK_AGAIN: git reads the user's gc.* config and decides, and a count that
    stays put (after a gc that could not pack, or below the threshold) does not start a
    git each command; a changed gc.auto counts from the next count or within the hour.

    gc runs detached, niced, in a session of its own, its output discarded, and nothing
    waits for it: a live gc is a live git in the repository (`git_processes`), whose locks
    cortex waits out as any other's. What a killed gc left is removed first under the
    stale rule (`stale_lock`), or a stale packed-refs.lock would stop every later gc,
    silently.
    """
    sample = loose_sample(home)
    if sample < 2:
        return
    state = _common_dir(home) / GC_STATE
    with contextlib.suppress(OSError), open(state, "rb") as f:
        if f.read(32) == str(sample).encode() \
                and time.time() - os.fstat(f.fileno()).st_mtime < GC_ASK_AGAIN:
            return
    try:
        state.write_text(str(sample), encoding="ascii")
    except OSError:
        return  # (a full disk: not now)
    for lock in gc_leftovers(home):
        _remove_if_stale(home, lock)
    # a killed repack's partial pack (as big as the repository): git's own prune would
    # leave it for two weeks (gc.pruneExpire); by the same rule it is nobody's
    pack_dir = _common_dir(home) / "objects" / "pack"
    for name in _names(pack_dir):
        if name.startswith("tmp_") and stale_lock(home, pack_dir / name):
            with contextlib.suppress(OSError):
                os.unlink(pack_dir / name)
    _packing[:] = [p for p in _packing if p.poll() is None]  # (reaped: no zombies)
    import shutil

    nice = ["nice", "-n", "10"] if shutil.which("nice") else []
    with contextlib.suppress(OSError):
        _packing.append(subprocess.Popen(
            [*nice, "git", "gc", "--auto", "--quiet"], cwd=home, env=git_env(),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True))


def gc_leftovers(home: Path) -> list[Path]:
    """The lock files (and gc.pid) that a git gc killed in the middle leaves, if any: see
    GC_LOCKS."""
    gitdir = _common_dir(home)
    found = [gitdir / name for name in GC_LOCKS]
    for top in ("refs", "logs/refs", "objects/info/commit-graphs"):
        for folder, _dirs, names in os.walk(gitdir / top):
            found += [Path(folder, n) for n in names if n.endswith(".lock")]
    return [p for p in found if os.path.lexists(p)]


# --- for `cortex ready` and `cortex sync` ------------------------------------------------------

def last_commit_days(home: Path, rels: Sequence[str]) -> dict[str, dt.date]:
    """Day of the last commit of each path, from one `git log` read only as far as needed
    (stopped once every path was seen: a long history is not read to its end)."""
    wanted = set(rels)
    found: dict[str, dt.date] = {}
    if not wanted:
        return found
    proc = subprocess.Popen(
        ["git", "-c", "core.quotepath=off", "log", "--format=%x00%ct", "--name-only",
         "--no-renames", "--", *sorted(wanted)],
        cwd=home, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=git_env())
    assert proc.stdout is not None
    day: dt.date | None = None
    try:
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.startswith("\0"):
                day = dt.date.fromtimestamp(int(line[1:]))
            elif line in wanted and line not in found and day is not None:
                found[line] = day
                if len(found) == len(wanted):
                    break
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            proc.terminate()
        proc.wait()
    return found


def merge_file(home: Path, base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """A clean three-way merge of the texts (`git merge-file`), or None when lines conflict."""
    gitdir = git_dir_of(home)
    names: list[str] = []
    try:
        for label, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            tmp = gitdir / f"cortex-merge-{os.getpid()}-{label}"
            tmp.write_bytes(data)
            names.append(str(tmp))
        proc = subprocess.run(["git", "merge-file", "-p", *names], cwd=home,
                              capture_output=True, env=git_env())
    finally:
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
    return proc.stdout if proc.returncode == 0 else None
