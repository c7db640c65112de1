"""`cortex sync`, `cortex status` and the remote: sharing one store between machines.

A sync, under the store's git lock:

1. finishes or undoes what an interrupted earlier sync left (see `recover`);
2. commits what is pending under `context/` — access-log lines, generated files, and the
   atoms and governance files too: the knowledge root is cortex's domain (the watcher
   commits the same files), and a sync that refused whenever an agent had written an atom
   would never run. Files outside `context/` are the user's and are never committed;
3. fetches, and when the remote moved: renumbers the local atoms whose ids the remote also
   created since the merge base (`cortexfs.renumber`), then MERGES the remote branch.
   A merge rather than a rebase: local commits are never rewritten, a conflict is one
   state that `git merge --abort` undoes exactly, and an interrupted merge is recognisable
   (MERGE_HEAD) and abortable; a rebase would replay every small access-log commit and can
   stop half-way through a series. Access logs merge by union (.gitattributes). Generated
   files are never hand-merged: a conflict in one takes the remote's copy and
   regeneration rewrites it; CORTEX.md is merged with its generated block set aside;
   atoms whose only conflict is the tool-written `refs` / `last-ref` keys are merged with
   ours and refreshed by regeneration. Any other conflict aborts the merge (the repo is
   left as it was, local commits intact) and is reported with the files and what to do;
4. regenerates the indexes of the projects that changed and commits them;
5. pushes; a push the remote rejected because it moved meanwhile repeats 3–5 (bounded).

Each step that changes the repository first writes a journal to `.git/cortex-sync.json`;
a sync killed midway is recovered by the next `cortex sync` (`recover`), then the whole
cycle runs again. Recovery decides by ancestry, never by "HEAD moved" (anything may commit
after the kill): a merge whose upstream commit is an ancestor of HEAD landed, and only
needs regenerating; a merge under way of its own making is finished, or aborted when it
has a conflict (edits made since are set aside in git's object store, the merge aborted,
the edits written back); a merge killed while git wrote files has the files it wrote put
back (edits made since stay); a renumbering is finished, its paths' index entries brought
back to HEAD first. No access-log line appended meanwhile is lost, and a merge keeps
every line as often as either side has it, never twice.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cortexfs import accesslog, frontmatter, git, layout, renumber, wall
from cortexfs.atoms import KINDS, kind_of_filename
from cortexfs.commit import commit_paths, index_project, is_log, lists_atoms
from cortexfs.errors import AtomParseError, CortexError, GitError, InvalidInputError
from cortexfs.fsutil import atomic_write, file_lock, read_file
from cortexfs.loader import atom_paths
from cortexfs.store import Store
from cortexfs.wording import some

NETWORK_TIMEOUT = 300.0  # seconds a fetch or push may take
MAX_ATTEMPTS = 5  # fetch–merge–push cycles before giving up on a remote that keeps moving
_TOOL_KEYS = ("refs", "last-ref")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S+\Z")
_SCP = re.compile(r"^(?:[^@/\s:]+@)?[A-Za-z0-9][A-Za-z0-9.-]*:(?!//)\S+\Z")


class SyncConflictError(GitError):
    """Both sides changed the same lines of a file that is not cortex's to merge."""

    def __init__(self, message: str, files: list[str]) -> None:
        super().__init__(message)
        self.files = files


# --- the remote --------------------------------------------------------------------------------

def set_remote(store: Store, url: str, name: str = "origin") -> str:
    """Point remote `name` at `url` (a git URL or an existing repository path); the URL set."""
    home = _require_repo(store)
    value = check_url(store, url)
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", name):
        raise InvalidInputError(f"invalid remote name {name!r}: use letters, digits, . _ -")
    have = git.remotes(home).names
    git.git_run(home, "remote", "set-url" if name in have else "add", name, value)
    return value


def check_url(store: Store, url: str) -> str:
    """`url` as it will be configured; InvalidInputError unless a git URL or a repository."""
    url = url.strip()
    if not url:
        raise InvalidInputError("the remote URL is empty: pass a git URL "
                                "(https://…, ssh://…, user@host:path) or a repository path")
    if _URL.match(url) or (_SCP.match(url) and not os.path.exists(url)):
        return url
    path = Path(os.path.expanduser(url)).absolute()
    if not path.is_dir():
        raise InvalidInputError(f"{url!r} is neither a git URL nor an existing folder: pass "
                                "https://…, ssh://…, user@host:path, or the path of a repository")
    if path.resolve() == store.home.resolve():
        raise InvalidInputError("the remote cannot be the store itself: pass another repository")
    proc = git.git_run(path, "rev-parse", "--absolute-git-dir", check=False)
    gitdir = Path(proc.stdout.strip()).resolve() if proc.returncode == 0 else None
    if gitdir not in (path.resolve(), (path / ".git").resolve()):
        raise InvalidInputError(f"{path} is not a git repository: create one with "
                                f"`git init --bare {path}`")
    return str(path)


def _require_repo(store: Store) -> Path:
    store.require()
    if not git.is_repo(store.home):
        raise GitError(f"{store.home} is not a git repository: run `cortex init`")
    return store.home


@dataclass(frozen=True)
class Target:
    """Where a sync fetches from and pushes to."""

    remote: str
    branch: str  # the local branch
    remote_branch: str  # its name on the remote
    tracked: bool  # the local branch already has this upstream configured

    @property
    def display(self) -> str:
        return f"{self.remote}/{self.remote_branch}"


def target(store: Store, known: git.Remotes | None = None) -> Target:
    """The remote and branch to sync with: the branch's upstream, else origin (or the only one).

    `known`: the remotes as the caller read them (`remotes`), not read again."""
    home = store.home
    branch = git.current_branch(home)
    if not branch:
        raise GitError(f"{home} has no branch checked out (detached HEAD): "
                       "`git switch` to a branch, then run `cortex sync` again")
    known = known or git.remotes(home)
    names = known.names
    if not names:
        raise GitError("no remote to sync with: run `cortex remote set URL`")
    remote = known.get(f"branch.{branch}.remote")
    merge = known.get(f"branch.{branch}.merge")
    tracked = remote in names and merge is not None
    if remote not in names:
        if "origin" in names:
            remote = "origin"
        elif len(names) == 1:
            remote = names[0]
        else:
            raise GitError(f"several remotes ({', '.join(names)}) and none tracked by "
                           f"{branch}: run `git branch --set-upstream-to REMOTE/{branch}`")
    remote_branch = merge.removeprefix("refs/heads/") if tracked and merge else branch
    assert remote is not None
    return Target(remote, branch, remote_branch, tracked)


# --- status ------------------------------------------------------------------------------------

@dataclass
class Status:
    """`cortex status`: the worktree state plus the remote and what is not pushed."""

    state: git.WorktreeState
    remote: str | None = None
    remote_url: str | None = None
    unpushed: list[str] = field(default_factory=list)  # "<sha> <subject>", newest first
    unpushed_count: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**self.state.to_json(), "remote": self.remote, "remote_url": self.remote_url,
                "unpushed_count": self.unpushed_count, "unpushed": self.unpushed}


def status(store: Store, limit: int = 10) -> Status:
    """What is uncommitted, what is not pushed, and when the store last synced."""
    store.require()
    home = store.home
    known = git.remotes(home) if git.is_repo(home) else None
    state = git.worktree_state(store, remote=known or False)
    out = Status(state)
    if state.head is None:  # (not a repository, or no commit yet)
        return out
    if known is not None and state.has_remote:
        with contextlib.suppress(GitError):
            t = target(store, known)
            out.remote, out.remote_url = t.remote, known.get(f"remote.{t.remote}.url")
    if out.remote is None:
        return out
    upstream = git.head_commit(home, state.upstream and f"refs/remotes/{state.upstream}")
    span = f"{upstream}..HEAD" if upstream else "HEAD"
    out.unpushed_count = int(git.git_run(home, "rev-list", "--count", span).stdout.strip())
    log = git.git_run(home, "log", f"-n{limit}", "--format=%h %s", span).stdout
    out.unpushed = log.splitlines()
    return out


# --- sync --------------------------------------------------------------------------------------

@dataclass
class SyncResult:
    """What one `cortex sync` did."""

    remote: str
    upstream: str  # e.g. "origin/main"
    recovered: str | None = None  # what an interrupted earlier sync left, and what was done
    committed: list[str] = field(default_factory=list)  # commits of pending changes
    renumbered: list[renumber.Renumbering] = field(default_factory=list)
    received: int = 0  # commits merged in from the remote
    sent: int = 0  # commits pushed
    regenerated: list[str] = field(default_factory=list)
    regen_skipped: str | None = None  # why regeneration did not run, when it did not
    attempts: int = 0
    last_sync: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # (the fields in order; a Renumbering as its to_json)


def sync(store: Store, *, max_attempts: int = MAX_ATTEMPTS, timeout: float = NETWORK_TIMEOUT,
         on_recovered: Callable[[str], None] | None = None,
         known: git.Remotes | None = None) -> SyncResult:
    """Commit what cortex owns, fetch, renumber colliding ids, merge, regenerate, push.

    `on_recovered` hears at once what an interrupted earlier sync left and what was done
    about it, before anything that may fail. `known`: the remotes as the caller has just
    read them (`remotes`), not read again.
    """
    home = _require_repo(store)
    with git.git_lock(store):
        recovered = recover(store)
        if recovered and on_recovered:
            on_recovered(recovered)
        git.check_idle(home)
        tgt = target(store, known)
        result = SyncResult(tgt.remote, tgt.display, recovered=recovered)
        for attempt in range(1, max_attempts + 1):
            result.attempts = attempt
            # (the first one refuses the user's staged changes before it commits anything)
            result.committed += commit_pending(store, refuse_staged=attempt == 1)
            _network(home, timeout, "fetch", "--quiet", "--prune", tgt.remote)
            upstream = git.head_commit(home, f"refs/remotes/{tgt.display}")
            ahead = _integrate(store, tgt, upstream, result) if upstream else None
            head = git.head(home)  # (from git's files: HEAD is read again, not remembered)
            if head is None:
                raise GitError("nothing committed yet to sync: add something with `cortex new`")
            if head == upstream:
                break
            count = ahead[1] if ahead and ahead[0] == head else int(git.git_run(
                home, "rev-list", "--count", f"{upstream}..{head}" if upstream else head).stdout)
            _checkpoint("before-push")
            if push(home, tgt, timeout, set_upstream=not tgt.tracked or not upstream):
                result.sent += count
                break
        else:
            raise GitError(f"{tgt.display} kept changing while cortex pushed ({max_attempts} "
                           "attempts): run `cortex sync` again")
        result.last_sync = git.utc_now()
        git.write_sync_state(home, last_sync=result.last_sync)
        return result


def commit_pending(store: Store, only_logs: bool = False,
                   refuse_staged: bool = False) -> list[str]:
    """Commit what is uncommitted under context/ in up to three commits; their messages.

    `refuse_staged`: first refuse (GitError) the user's staged changes outside context/,
    from the same `git status`: git merge will not start with staged changes; ours are
    committed, the user's are not."""
    accesslog.drain_all(store.home)  # (lines set aside while a sync replaced the logs)
    state = git.worktree_state(store, remote=False)
    staged = [p for p in state.staged if not p.startswith(layout.CONTEXT_PREFIX)]
    if refuse_staged and staged:
        raise GitError(f"staged changes outside context/ ({some(staged, 5)}): commit them or "
                       "unstage them (`git restore --staged FILE`), then run `cortex sync` again")
    paths = [p for p in state.dirty if p.startswith(layout.CONTEXT_PREFIX)]
    logs = [p for p in paths if is_log(p)]
    generated = [p for p in paths if lists_atoms(p)]  # whole files regeneration writes
    others = [p for p in paths if p not in logs and p not in generated]
    groups = [(logs, "chore: update access log")]
    if not only_logs:
        projects = sorted({name for p in generated if (name := index_project(p))})
        groups += [(generated, f"index: regenerate {', '.join(projects) or 'store files'}"),
                   (others, "sync: commit local changes to "
                            f"{some([p.rsplit('/', 1)[-1] for p in others], 5)}")]
    messages = []
    for rels, message in groups:
        if rels and commit_paths(store, [store.home / p for p in rels], message):
            messages.append(message)
    return messages


# git's compare-and-swap of a ref lost to another git that moved it meanwhile
_REF_MOVED = re.compile(r"cannot lock ref '[^']+': is at \S+ but expected \S+")


def _network(home: Path, timeout: float, *args: str) -> None:
    for _ in range(5):
        proc = git.git_run(home, *args, check=False, timeout=timeout)
        # a git that a killed sync left running (its fetch goes on without it) moved a
        # remote-tracking ref while this one fetched: once it is done, fetching again works
        if proc.returncode == 0 or not _REF_MOVED.search(proc.stderr):
            break
        time.sleep(0.1)
    if proc.returncode != 0:
        first = git.git_error(args, proc.stderr).args[0]
        raise GitError(f"{first} — check the remote (`git remote -v`, `cortex remote set URL`) "
                       "and the network, then run `cortex sync` again")


def push(home: Path, tgt: Target, timeout: float, set_upstream: bool) -> bool:
    """Push the store's branch to `tgt`; False when the push lost a race (the remote branch
    moved since the fetch, or another push held its ref): fetch, merge and push again.
    GitError for any other refusal."""
    args = ["push", "--porcelain", *(["--set-upstream"] if set_upstream else []),
            tgt.remote, f"refs/heads/{tgt.branch}:refs/heads/{tgt.remote_branch}"]
    proc = git.git_run(home, *args, check=False, timeout=timeout)
    if proc.returncode == 0:
        return True
    text = proc.stdout + proc.stderr
    if "[rejected]" in text or re.search(r"\[remote rejected\].*(lock|failed to update ref|"
                                         r"incorrect old value)", text):
        return False
    first = git.git_error(["push"], proc.stderr or proc.stdout).args[0]
    raise GitError(f"{first} — check that you may push to {tgt.display}, then run "
                   "`cortex sync` again")


def _checkpoint(name: str) -> None:
    """Fault injection for the interrupted-sync tests: die here when asked to."""
    if os.environ.get("CORTEX_SYNC_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


# --- integrating the remote branch -------------------------------------------------------------

def _journal(home: Path, **entry: Any) -> None:
    git.write_sync_state(home, journal=entry or None)


def _integrate(store: Store, tgt: Target, upstream: str,
               result: SyncResult) -> tuple[str, int] | None:
    """Merge `upstream` into HEAD (renumbering first, regenerating after) unless it is an
    ancestor of HEAD; then (HEAD, the number of commits it has that upstream lacks)."""
    home = store.home
    head = git.head(home)
    assert head is not None
    if head == upstream:
        return head, 0
    # the commits only upstream has, and only HEAD has: none only upstream's, and upstream
    # is an ancestor of HEAD (one git for `merge-base --is-ancestor` and `rev-list --count`)
    received, ahead = map(int, git.git_run(home, "rev-list", "--left-right", "--count",
                                          f"{upstream}...{head}").stdout.split())
    if not received:
        return head, ahead
    proc = git.git_run(home, "merge-base", head, upstream, check=False)
    base = proc.stdout.strip() or None
    if base is None and git.git_blob(home, upstream, "context/CORTEX.md") is None:
        # joining a store started elsewhere is fine; merging some other repository is not
        raise GitError(f"{tgt.display} shares no history with this store and holds no cortex "
                       "store: check the URL (`git remote -v`; `cortex remote set URL`)")
    theirs = _refuse_private_files(home, base, upstream, tgt, projects=base != head)
    with _id_locks(store):
        if base != head:
            collisions = renumber.find_collisions(home, base, head, upstream, theirs)
            if collisions:
                taken = [path.stem for project in store.projects()
                         for _, path in atom_paths(project)]
                mapping = renumber.allocate(home, collisions, head, upstream, taken)
                _journal(home, op="renumber", head=head, base=base, upstream=upstream,
                         display=tgt.display, mapping=[r.to_json() for r in mapping])
                _renumber(store, mapping, base, head, tgt.display)
                result.renumbered += mapping
                head = git.head(home)
                assert head is not None
        # (the renumbering commit is HEAD's alone: what only upstream has is as it was)
        result.received += received
        _merge(store, tgt, head, upstream, unrelated=base is None)
    _regenerate(store, _projects_changed(home, head, "HEAD"), result)
    return None


def _refuse_private_files(home: Path, base: str | None, upstream: str, tgt: Target,
                          projects: bool) -> dict[str, str]:
    """Refuse a remote whose commits bring files where cortex keeps what is never committed
    (.cache/, .locks/, logs/): git would check them out there, and cortex reads them as its
    own (a crafted cache, a lock that is a link, lines set aside for a log).

    With `projects`, the same `git diff` lists the atoms the remote added (returned, as
    `renumber.added_atoms` says them): one git for both."""
    private = (layout.CACHE, layout.LOCKS, layout.LOGS)
    raw = git.git_run(home, "diff", "--raw", "-z", "--no-renames", base or renumber.EMPTY_TREE,
                      upstream, "--", *private,
                      *([layout.PROJECTS_PATH] if projects else [])).stdout
    fields = raw.split("\0")
    brought = [path for meta, path in zip(fields[0::2], fields[1::2], strict=False)
               if meta.startswith(":") and path.split("/", 1)[0] in private]
    if brought:
        raise GitError(f"cannot merge {tgt.display}: it tracks {some(brought, 5)} under "
                       f"{', '.join(p + '/' for p in private)}, which cortex keeps out of git; "
                       "remove them from that remote (`git rm -r --cached`, commit, push), then "
                       "run `cortex sync` again")
    return renumber.added_atoms(raw)


def _projects_changed(home: Path, old: str, new: str) -> list[str]:
    proc = git.git_run(home, "diff", "--name-only", "-z", old, new, "--", "context/projects/",
                       check=False)
    return sorted({p.split("/")[2] for p in proc.stdout.split("\0") if p.count("/") >= 3})


def _is_ancestor(home: Path, a: str, b: str) -> bool:
    return git.git_run(home, "merge-base", "--is-ancestor", a, b, check=False).returncode == 0


@contextlib.contextmanager
def _id_locks(store: Store) -> Iterator[None]:
    """Hold every project's id locks: no `cortex new` allocates an id while ids move."""
    with contextlib.ExitStack() as stack:
        for project in store.project_names():
            for kind in KINDS:
                stack.enter_context(file_lock(
                    store.locks_dir / layout.ids_lock(project, kind.prefix),
                    what=f"{kind.folder} ids of {project}"))
        yield


def _renumber(store: Store, mapping: list[renumber.Renumbering], base: str | None, head: str,
              display: str) -> None:
    paths = renumber.apply(store, mapping, base, head)
    _checkpoint("renumber-written")
    commit_paths(store, paths, f"sync: renumber {renumber.describe(mapping)} "
                                   f"(ids also created on {display})")
    _journal(store.home)


def _merge(store: Store, tgt: Target, head: str, upstream: str, unrelated: bool) -> None:
    home = store.home
    # --ff: a user's `merge.ff = only` or `false` must not change what sync does
    args = ["merge", "--ff", "--no-commit", "--no-edit", "--no-verify", "-m",
            f"sync: merge {tgt.display}", *(["--allow-unrelated-histories"] if unrelated else [])]
    for _ in range(20):
        _journal(home, op="merge", head=head, upstream=upstream, display=tgt.display)
        # stat data that `git reset` left unset would make git call clean files "not uptodate"
        git.git_run(home, "update-index", "-q", "--refresh", check=False)
        with keep_log_appends(store, since_head=True):
            # git merge must find the logs committed: one it finds changed makes it stash
            # the changes, refuse, reset --hard and apply the stash again, and a line
            # appended meanwhile makes that apply fail (the changes then stay in a
            # dangling stash). Appends wait from here; what came before is committed now.
            commit_pending(store, only_logs=True)
            proc = git.git_run(home, *args, upstream, check=False)
        if proc.returncode == 0 or git.in_progress(home) == "merge":
            break
        blocked = _overwritten(proc.stdout + proc.stderr)
        if not blocked:
            # git failed on its own (killed, out of memory, a full disk): it may have written
            # part of the merge, which goes back before the journal is cleared (if that
            # fails, the journal stays and the next sync's recovery does it)
            failure = git.git_error(["merge"], proc.stderr or proc.stdout)
            _undo_partial_checkout(store, head, upstream)
            _journal(home)
            raise failure
        _journal(home)
        if blocked and all(is_log(p) for p in blocked):
            # an access-log line arrived since the last commit: commit it and merge again
            commit_pending(store, only_logs=True)
            continue
        raise GitError(f"cannot merge {tgt.display}: it would overwrite your uncommitted "
                       f"{some(blocked, 5)}; commit or move them, then run `cortex sync` again")
    else:
        raise GitError("access logs kept changing while cortex merged: run `cortex sync` again")
    _checkpoint("merge-started")
    if git.in_progress(home) == "merge":
        unresolved = _resolve(store)
        if unresolved:
            _abort_merge(store, head, upstream)
            _journal(home)
            raise SyncConflictError(
                f"sync stopped: {some(unresolved, 5)} changed on both sides (here and on "
                f"{tgt.display}); nothing was lost and the repo is as before the sync. To "
                f"resolve: `git merge {tgt.display}`, edit the files, `git add` them, "
                "`git commit`, then `cortex sync`", unresolved)
        _commit_merge(store, upstream, tgt.display)
        _checkpoint("merge-committed")
    _journal(home)


def _overwritten(text: str) -> list[str]:
    """The files git lists under 'would be overwritten by merge'."""
    files = re.findall(r"^error: Entry '(.+)' not uptodate\. Cannot merge\.$", text, re.M)
    listing = False
    for line in text.splitlines():
        if "would be overwritten by merge" in line or "would be removed by merge" in line:
            listing = True
        elif listing and line.startswith(("\t", "  ")):
            files.append(line.strip())
        else:
            listing = False
    return files


def _stages(home: Path) -> dict[str, dict[int, str]]:
    out = git.git_run(home, "ls-files", "-u", "-z").stdout
    stages: dict[str, dict[int, str]] = {}
    for rec in _z(out):
        info, path = rec.split("\t", 1)
        _mode, sha, stage = info.split()
        stages.setdefault(path, {})[int(stage)] = sha
    return stages


def _resolve(store: Store) -> list[str]:
    """Resolve the conflicts that are cortex's to resolve; the paths left unresolved."""
    home = store.home
    unresolved = []
    conflicts = _stages(home)
    read = git.git_blobs(home, (sha for stages in conflicts.values() for sha in stages.values()))
    for rel, stages in sorted(conflicts.items()):
        base, ours, theirs = (read[stages[i]] if i in stages else None for i in (1, 2, 3))
        merged: bytes | None = None  # (None: left unresolved)
        if is_log(rel):
            with accesslog.Replacing(home):  # no append between its read and the rename
                atomic_write(home / rel, _union(ours or b"", theirs or b"", home / rel),
                             root=_wall_root(home, rel))
            accesslog.drain(home / rel)
            git.git_run(home, "add", "--", rel)
            continue
        if lists_atoms(rel):  # (CORTEX.md has only a generated block: below)
            merged = theirs if theirs is not None else ours  # regeneration rewrites it
        elif rel.endswith("/CORTEX.md") and ours is not None and theirs is not None:
            merged = _merge_cortex_md(home, base, ours, theirs)
        elif kind_of_filename(rel.rsplit("/", 1)[-1]) and ours is not None \
                and theirs is not None:
            merged = _merge_atom(home, rel, base, ours, theirs)
        if merged is None:
            unresolved.append(rel)
            continue
        atomic_write(home / rel, merged, root=_wall_root(home, rel))
        git.git_run(home, "add", "--", rel)
    return unresolved


def _union(ours: bytes, theirs: bytes, path: Path) -> bytes:
    """Every line of both sides, and any line appended to the work-tree file meanwhile."""
    merged = ours + accesslog.missing_lines(ours, theirs)
    current = accesslog.read(path)  # (never through a link: cortexfs.wall)
    return merged + accesslog.missing_lines(merged, current)


def _merge_cortex_md(home: Path, base: bytes | None, ours: bytes,
                     theirs: bytes) -> bytes | None:
    """Merge the hand-written text of a CORTEX.md; its generated block is regenerated."""
    block = re.compile(re.escape(layout.GENERATED_START).encode() + rb".*?" +
                       re.escape(layout.GENERATED_END).encode(), re.S)
    empty = layout.EMPTY_BLOCK.encode()

    def blank(data: bytes) -> bytes:
        return block.sub(lambda _m: empty, data)

    return git.merge_file(home, blank(base or b""), blank(ours), blank(theirs))


def _merge_atom(home: Path, rel: str, base: bytes | None, ours: bytes,
                theirs: bytes) -> bytes | None:
    """Merge an atom whose tool-written keys (refs, last-ref) differ: ours win, regen refreshes."""

    try:
        ours_meta = frontmatter.parse(ours.decode("utf-8"), rel).meta
        keys = {k: ours_meta.get(k) for k in _TOOL_KEYS}

        def align(data: bytes | None) -> bytes:
            if data is None:
                return b""
            return frontmatter.set_keys(data.decode("utf-8"), keys, rel).encode("utf-8")

        return git.merge_file(home, align(base), ours, align(theirs))
    except (AtomParseError, UnicodeDecodeError):
        return None


@contextlib.contextmanager
def keep_log_appends(store: Store, since_head: bool = False) -> Iterator[None]:
    """Keep access-log lines appended while git replaces the log files (a merge, an abort).

    The hook appends with O_APPEND by path; git replaces a file it updates with a new one,
    so a line appended to the old file during the operation would vanish. The old files
    stay open and flocked here: an append waits, and then goes to the file that is the
    log by then (accesslog.append); whatever reached an old file all the same (an append
    that waited past its bound) is appended again. With `since_head` (a merge, which
    brings no line of ours), every line of an old file that HEAD's copy lacks counts as
    appended: git merge that refuses resets the logs and applies its stash of their
    changes again, which fails when a line arrived in between.
    """
    with accesslog.Replacing(store.home):
        held: list[tuple[Path, int, int, int]] = []
        for path in map(Path, accesslog.access_logs(str(store.home))):
            try:
                fd = accesslog.open_log(path, os.O_RDONLY)
            except OSError:
                continue
            accesslog.lock(fd, renumber.LOG_LOCK_WAIT)
            st = os.fstat(fd)
            held.append((path, fd, st.st_ino, st.st_size))
        try:
            yield
        finally:
            for path, fd, ino, size in held:
                try:
                    with contextlib.suppress(FileNotFoundError):
                        if os.stat(path).st_ino != ino:
                            late = renumber.read_from(fd, size)
                            if since_head:
                                late = accesslog.missing_lines(
                                    git.git_blob(store.home, "HEAD", store.home_rel(path))
                                    or b"",
                                    renumber.read_from(fd, 0))
                            current = accesslog.read(path)
                            extra = accesslog.missing_lines(current, late)
                            if extra:
                                accesslog.append(path, [extra])
                            elif current:
                                # git took the stat data of the file it wrote as it wrote
                                # it: a line that reached the file before that (an append
                                # past its wait) would be clean to git, in no commit and no
                                # `git status`, until the log changed again, while every
                                # reader counts it (two clones' generated files then differ
                                # and each sync sends its own). A new inode makes git read
                                # the file. (A full disk: the line stays where it is; only
                                # git may not see it until the log changes again.)
                                with contextlib.suppress(OSError):
                                    renumber.replace_log(path, _same, _same, again=True)
                finally:
                    os.close(fd)
            accesslog.drain_all(store.home)


def _same(data: bytes) -> bytes:
    return data


def _regenerate(store: Store, projects: list[str], result: SyncResult) -> None:
    """Regenerate what the merge made stale and commit it."""
    from cortexfs.regen import regenerate

    _journal(store.home, op="regenerate", projects=projects)
    try:
        regen = regenerate(store, projects or None)
    except CortexError as e:
        # the merge is committed and can be pushed; the journal makes the next sync retry
        result.regen_skipped = f"indexes not regenerated ({e}): run `cortex index regen --all`"
        return
    written = [Path(p) for p in regen.written]
    _checkpoint("regenerated")
    commit_paths(store, written, f"index: regenerate after sync "
                                     f"({', '.join(projects) or 'store files'})")
    result.regenerated += [store.home_rel(p) for p in written]
    _journal(store.home)


# --- recovering from an interrupted sync -------------------------------------------------------

def recover(store: Store) -> str | None:
    """Finish or undo what a killed `cortex sync` left; a sentence saying what, or None.

    Every decision rests on what git can prove rather than on what moved: HEAD also moves
    when anything else commits after the kill (`cortex new`, the hook's auto-commit), so
    "the merge landed" means "the upstream commit the journal names is an ancestor of HEAD".
    """
    home = store.home
    # a git killed with the sync may have left its lock files (HEAD.lock after it moved
    # HEAD, index.lock…): stale ones go now, not only when a later git trips on them
    git.clear_git_locks(home)
    state = git.read_sync_state(home)
    done: list[str] = []
    entry = state.get("journal")
    if isinstance(entry, dict):
        what = _recover_entry(store, entry)
        if what:
            done.append(what)
        _journal(home)
    if _aside(home):  # an abort killed before it wrote back the edits it had set aside
        _restore_aside(store)
        done.append("wrote back the edits an interrupted sync had set aside")
    accesslog.drain_all(home)  # what appends set aside while the killed sync merged
    return "; ".join(done) or None


def _recover_entry(store: Store, entry: dict[str, Any]) -> str | None:
    op = entry.get("op")
    if op == "regenerate":
        _regenerate(store, list(entry.get("projects") or []), SyncResult("", ""))
        return "finished the regeneration an interrupted sync had started"
    head0, head = str(entry.get("head")), git.head_commit(store.home)
    if head is None or not _is_ancestor(store.home, head0, head):
        return None  # the history was rewritten since: nothing of the killed sync's to finish
    display = str(entry.get("display") or "the remote")
    if op == "renumber":
        return _recover_renumber(store, entry, head0, display)
    if op == "merge":
        return _recover_merge(store, head0, head, str(entry.get("upstream")), display)
    return None


def _recover_renumber(store: Store, entry: dict[str, Any], head0: str, display: str) -> str:
    home = store.home
    mapping = [renumber.Renumbering(**r) for r in entry.get("mapping", [])]
    # a renumbering commit killed after it moved HEAD but before it brought the user's
    # index up to date leaves a staged reverse rename, and every later commit of those
    # paths fails ("pathspec … did not match"): their index entries go back to HEAD's
    rels = [store.home_rel(p) for r in mapping for p in renumber.renamed(store, r)]
    git.git_run(home, "reset", "-q", "HEAD", "--", *rels)
    # renumbering is idempotent: this commits whatever the killed one had not
    _renumber(store, mapping, entry.get("base"), head0, display)
    return f"finished an interrupted renumbering ({renumber.describe(mapping)})"


def _recover_merge(store: Store, head0: str, head: str, upstream: str,
                   display: str) -> str | None:
    home = store.home
    if _is_ancestor(home, upstream, head):
        if git.in_progress(home) == "merge" and _merge_head(home) == upstream:
            # `git commit` of the merge killed after it moved HEAD, before it removed
            # MERGE_HEAD: the merge is committed, only git's own bookkeeping is left
            git.git_run(home, "merge", "--quit")
        # the merge landed but the sync died before regenerating: regenerate now
        _regenerate(store, _projects_changed(home, head0, head), SyncResult("", ""))
        return "regenerated the indexes an interrupted sync had not"
    if git.in_progress(home) == "merge":
        if _merge_head(home) != upstream:
            return None  # someone else's merge: check_idle says what to do
        return _finish_merge(store, head0, upstream, display)
    if git.in_progress(home) is None and _undo_partial_checkout(store, head0, upstream):
        return "undid the files an interrupted merge had half written"
    return None


def _merge_head(home: Path) -> str | None:
    try:
        return (git.git_dir_of(home) / "MERGE_HEAD").read_text().split()[0]
    except (OSError, IndexError):
        return None


def _finish_merge(store: Store, head: str, upstream: str, display: str) -> str:
    """A merge of the killed sync's own making is under way: finish it, or abort it when it
    has a conflict cortex does not resolve (the sync that follows merges again and reports
    it). Finishing is preferred: edits made since sit on top of the merged files, and
    commit as they are once the merge is committed."""
    home = store.home
    if not _aside(home) and not _edited_conflicts(home) and not _resolve(store):
        _commit_merge(store, upstream, display)
        _regenerate(store, _projects_changed(home, head, "HEAD"), SyncResult("", ""))
        return "finished the merge an interrupted sync had started"
    _abort_merge(store, head, upstream)
    return "aborted the merge an interrupted sync had started"


def _edited_conflicts(home: Path) -> list[str]:
    """Conflicted files changed after git wrote them (git writes MERGE_HEAD last):
    resolving them from their stages would drop that edit."""
    try:
        written = (git.git_dir_of(home) / "MERGE_HEAD").stat().st_mtime_ns
    except OSError:
        return []
    return [rel for rel in _stages(home) if not is_log(rel) and _mtime(home / rel) > written]


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _commit_merge(store: Store, upstream: str, display: str) -> None:
    _dedup_logs(store, upstream)
    git.git_run(store.home, "commit", "--quiet", "--no-verify", "-m", f"sync: merge {display}")


def _dedup_logs(store: Store, upstream: str) -> None:
    """A union merge keeps each line as often as either side has it, no more.

    git's union driver keeps both sides' versions of a hunk, so a line both sides have but
    at different places (a log that was committed half-merged once) comes out twice.
    Lines in neither side (appended while the merge ran) are kept as they are.
    """
    home = store.home
    out = git.git_run(home, "diff", "--cached", "--name-only", "-z", "HEAD", "--",
                      "context/projects/").stdout
    logs = [p for p in out.split("\0") if p and is_log(p)]
    sides = git.git_blobs(home, (f"{rev}:{rel}" for rel in logs for rev in ("HEAD", upstream)))
    for rel in logs:
        limit = Counter((sides[f"HEAD:{rel}"] or b"").splitlines(keepends=True)) | \
            Counter((sides[f"{upstream}:{rel}"] or b"").splitlines(keepends=True))

        def once(data: bytes, limit: Counter[bytes] = limit) -> bytes:
            seen: Counter[bytes] = Counter()
            kept = []
            for line in data.splitlines(keepends=True):
                seen[line] += 1
                if line not in limit or seen[line] <= limit[line]:
                    kept.append(line)
            return b"".join(kept)

        if renumber.replace_log(home / rel, once, _same):
            git.git_run(home, "add", "--", rel)


# Setting edits aside: `git merge --abort` refuses to run over a file the merge changed that
# has been edited since ("Entry … not uptodate"), and silently resets a conflicted file that
# has been edited. So every such edit is first hashed into git's object store and recorded
# in the sync state (both durable before anything changes), then staged, the merge aborted,
# and the edits written back. A kill at any point leaves the record; the next recovery
# finishes the abort and writes them back.

def _aside(home: Path) -> dict[str, Any] | None:
    rec = git.read_sync_state(home).get("aside")
    return rec if isinstance(rec, dict) and isinstance(rec.get("files"), dict) else None


def _set_aside(store: Store, head: str, upstream: str) -> list[str]:
    """Record and stage the edits that stand in the way of the abort; their paths."""
    home = store.home
    staged = set(_z(git.git_run(home, "diff", "--cached", "--name-only", "-z", "HEAD").stdout))
    unmerged = set(_stages(home))
    edited = set(_edited_conflicts(home))
    paths = [p for p in _z(git.git_run(home, "diff", "--name-only", "-z").stdout)
             if (p in staged and p not in unmerged) or p in edited
             or (p in unmerged and is_log(p))]
    if not paths:
        return []
    rec = _aside(home) or {"head": head, "upstream": upstream, "files": {}}
    present = [p for p in paths if (home / p).is_file()]
    blobs = [blob for chunk in _chunks(present) for blob in git.git_run(
        home, "hash-object", "-w", "--no-filters", "--", *chunk).stdout.split()]
    rec["files"].update({p: None for p in paths})
    rec["files"].update(dict(zip(present, blobs, strict=True)))
    git.write_sync_state(home, aside=rec)
    for chunk in _chunks(paths):
        git.git_run(home, "add", "--all", "--", *chunk)
    return paths


def _abort_merge(store: Store, head: str, upstream: str) -> None:
    """`git merge --abort` that loses no edit and no access-log line made meanwhile."""
    home = store.home
    for _ in range(5):
        _set_aside(store, head, upstream)
        with keep_log_appends(store):
            proc = git.git_run(home, "merge", "--abort", check=False)
        if proc.returncode == 0:
            _restore_aside(store)
            return
        if "not uptodate" not in proc.stderr:
            # the record stays: the next sync aborts again and then writes the edits back
            raise git.git_error(["merge"], proc.stderr)
    raise GitError("files kept changing while cortex undid an interrupted merge: run "
                   "`cortex sync` again")


def _restore_aside(store: Store) -> None:
    """Write back the edits `_set_aside` recorded, now that the merge is aborted."""
    home = store.home
    rec = _aside(home)
    if rec is None:
        return
    upstream = str(rec.get("upstream"))
    for rel, blob in sorted(rec["files"].items()):
        path = home / rel
        if wall.reason(_wall_root(home, rel), path):
            continue  # a link now: not part of the store, never written through
        data = git.git_blob(home, blob) if isinstance(blob, str) else None
        current = read_file(path)
        if is_log(rel):
            # only the lines that neither side has: the merge's own lines are not the user's
            sides = (git.git_blob(home, "HEAD", rel) or b"") + \
                (git.git_blob(home, upstream, rel) or b"")
            extra = accesslog.missing_lines(current or b"",
                                           accesslog.missing_lines(sides, data or b""))
            if extra:
                accesslog.append(path, [extra])
        elif current != data and current == git.git_blob(home, "HEAD", rel):
            _put_back(home, rel, data)  # (a file edited again since the abort keeps that edit)
    git.write_sync_state(home, aside=None)


def _z(out: str) -> list[str]:
    return [p for p in out.split("\0") if p]


def _chunks(paths: list[str], size: int = 500) -> list[list[str]]:
    """Paths in groups small enough for one command line."""
    return [paths[i:i + size] for i in range(0, len(paths), size)]


def _undo_partial_checkout(store: Store, head: str, upstream: str) -> bool:
    """Put back the files a merge killed while it wrote them had changed.

    A file the merge changes holds, after the kill, this side's copy (not reached yet),
    nothing (git removes a file before writing its new copy), or what the merge writes:
    the upstream's copy, a clean three-way merge of both, or both with conflict markers.
    Those go back to HEAD's copy, in the work tree and the user's index; anything else is
    an edit made since the kill and stays. An access log keeps the lines neither side has.
    """
    home = store.home
    now = git.head_commit(home) or head  # HEAD moves when anything commits after the kill
    proc = git.git_run(home, "merge-base", head, upstream, check=False)
    base = proc.stdout.strip() or None
    changed = _z(git.git_run(home, "diff", "--name-only", "-z", "--no-renames", head,
                             upstream).stdout)
    undone = False
    for rel in changed:
        path = home / rel
        if wall.reason(_wall_root(home, rel), path):
            continue  # a link: not part of the store, never written through
        current = read_file(path)
        mine = git.git_blob(home, now, rel)
        if current == mine:
            continue
        theirs = git.git_blob(home, upstream, rel)
        if is_log(rel):
            _undo_log(path, mine or b"", (mine or b"") + (theirs or b""))
            undone = True
        elif current is None or current == theirs or _merge_output(
                home, current, upstream, base and git.git_blob(home, base, rel),
                git.git_blob(home, head, rel), theirs):
            _put_back(home, rel, mine)
            undone = True
    lagging = git.git_run(home, "diff", "--cached", "--quiet", now, "--", *changed,
                          check=False).returncode if changed else 0
    if lagging:  # git got as far as writing the index
        for chunk in _chunks(changed):
            git.git_run(home, "reset", "-q", now, "--", *chunk)
        undone = True
    return undone


def _undo_log(path: Path, mine: bytes, sides: bytes) -> None:
    """The log as `mine`, plus the lines of it that `sides` lack (appended since)."""
    def keep(data: bytes) -> bytes:
        return mine + accesslog.missing_lines(sides, data)

    if path.exists():
        renumber.replace_log(path, keep, _same)
    else:
        atomic_write(path, mine, root=path.parents[3])  # (context/, four folders up)


def _merge_output(home: Path, current: bytes, upstream: str, base: bytes | None,
                  ours: bytes | None, theirs: bytes | None) -> bool:
    """Whether `current` is what `git merge` writes for a file both sides changed."""
    if f"\n>>>>>>> {upstream}\n".encode() in current:
        return True  # conflict markers git labelled with the upstream commit
    if ours is None or theirs is None:
        return False
    return git.merge_file(home, base or b"", ours, theirs) == current


def _put_back(home: Path, rel: str, data: bytes | None) -> None:
    """Make the file at `rel` hold `data` again (None: no file)."""
    if data is None:
        (home / rel).unlink(missing_ok=True)
    else:
        atomic_write(home / rel, data, root=_wall_root(home, rel))


def _wall_root(home: Path, rel: str) -> Path:
    """The root whose wall a write of `rel` must not cross: context/, else the store."""
    return home / layout.CONTEXT if rel.startswith(layout.CONTEXT_PREFIX) else home
