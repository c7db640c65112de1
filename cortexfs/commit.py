"""The committer: the one way cortex commits, and the rule for what a commit holds.

Library operations that write return a `Change` (the paths they wrote, a commit message,
the files they created); a command runs them inside `transaction()`, which checks first
what the commit will need (git.preflight: no merge under way, an identity, git's lock
files, a writable object store with room), writes, and then commits through
`commit_change()`.

What a commit holds (the README's "Which files cortex commits"):
- Only files under `context/` (plus `.gitignore` / `.gitattributes` at `cortex init`), never
  a change of yours outside it, staged or not.
- A command commits everything pending under `context/`, not only what it wrote: hand
  edits of atoms or governance files, files a killed or interrupted command left. One
  commit, named after the command, whose body lists what else it took along. So after any
  completed command `git status -- context/` is empty, and nothing waits for a person.
- A commit holds what its files rest on, so that every commit's tree is self-consistent
  (a clone of it has no index row pointing at a missing atom or disagreeing with one): an
  atom changed or deleted since its index was generated is committed together with that
  index regenerated — the committer regenerates those projects first when the command
  itself did not. `commit_paths` (sync's commits) applies the same rule to a given set
  of paths: an index, OVERVIEW.md or HIPPOCAMPUS.md brings every pending atom.
- The access-log committer (after the hook) commits the access logs alone: appended lines
  rest on nothing, and a background process must not sweep up a half-written hand edit.

A command that fails after writing undoes what it wrote where that is safe (a new atom,
decision or project is removed, a TASKS.yaml put back) and says so; what it cannot undo
(regenerated files) it names, with `cortex commit` to commit them. Interrupted work is
finished by the next command: it commits what was left, and `git.remove_stale_temporaries`
clears the temporary files of a killed writer.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cortexfs import accesslog, git, interrupt, layout
from cortexfs.atoms import atom_of
from cortexfs.errors import CortexError, EnvironmentProblem, GitError, from_os_error
from cortexfs.fsutil import atomic_write, noting_writes
from cortexfs.store import Store
from cortexfs.wording import some

INIT_FILES = (".gitignore", ".gitattributes")
# store-wide generated files that list atoms (with index.md files, `lists_atoms`), and the
# CORTEX.md files, whose generated block lists files and counts
_LISTING = re.compile(rf"^{layout.CONTEXT}/(?:{re.escape(layout.OVERVIEW_MD)}|"
                      rf"{re.escape(layout.HIPPOCAMPUS_MD)}|{re.escape(layout.HIPPOCAMPUS_DIR)}/.*)$")
_CORTEX_MD = re.compile(rf"^{layout.CONTEXT}/(?:.*/)?{re.escape(layout.CORTEX_MD)}$")
_LOG = re.compile(rf"^{layout.PROJECTS_PATH}/[^/]+/{layout.META}/{re.escape(layout.ACCESS_LOG)}$")
LISTED = 12  # pending paths named in a commit message's body before "… and N more"
ASKED_AGAIN = 200  # paths a command wrote that git status is asked about, not all context/


@dataclass
class Change:
    """What a writing operation changed, for the committer.

    `paths`: files (or folders) written or deleted; `message`: the commit message (None:
    named after what changed, as `cortex commit` does); `created`: files that did not exist
    before (a failed command removes them); `regenerated`: projects whose indexes the
    operation has just regenerated (their atoms need no second regeneration).
    """

    paths: list[Path] = field(default_factory=list)
    message: str | None = None
    created: list[Path] = field(default_factory=list)
    regenerated: set[str] = field(default_factory=set)

    def merge(self, other: Change) -> None:
        self.paths += other.paths
        self.created += other.created
        self.regenerated |= other.regenerated
        if other.message:
            self.message = other.message if not self.message else \
                f"{self.message}; {other.message}"


@dataclass
class Committed:
    """What `commit` did."""

    commit: str | None = None  # the new commit; None when there was nothing to commit
    message: str = ""
    paths: list[str] = field(default_factory=list)  # relative to the store, in the commit
    pending: list[str] = field(default_factory=list)  # of those: not the change's own
    regenerated: list[str] = field(default_factory=list)  # written by the committer's regen
    warning: str | None = None  # what had to stay uncommitted, and why

    @property
    def subject(self) -> str:
        return self.message.splitlines()[0] if self.message else ""


# --- what is what ----------------------------------------------------------------------------

def lists_atoms(rel: str) -> bool:
    """A generated file with a row per atom (id, summary…): an index.md, OVERVIEW.md,
    HIPPOCAMPUS.md or a `.hippocampus/` file. Committing one brings the atoms it lists."""
    return bool(_LISTING.match(rel)) or index_project(rel) is not None


def index_project(rel: str) -> str | None:
    """The project of the index.md `rel` (context/projects/P/<kind folder>/index.md), else
    None."""
    parts = rel.split("/")
    if (len(parts) == 5 and parts[:2] == [layout.CONTEXT, layout.PROJECTS]
            and parts[3] in layout.ATOM_FOLDERS and parts[4] == layout.INDEX):
        return parts[2]
    return None


def is_log(rel: str) -> bool:
    return bool(_LOG.match(rel))


# --- committing ------------------------------------------------------------------------------

def commit_change(store: Store, change: Change, *, everything: bool = True,
                  asked: list[tuple[str, str]] | None = None,
                  started: git.Started | None = None) -> Committed:
    """Commit `change` with what it rests on; with `everything`, with everything else pending
    under context/ too (what a command does). Nothing happens outside a git repository.
    `asked`: git's `changes` under context/, when the caller already has them (a command
    that wrote nothing, see `transaction`); `started`: the commit's first step, begun
    (git.start_commit), used by the commit or not (its maker drops it after)."""
    home = store.home
    if not git.is_repo(home):
        return Committed()
    own = _relative(store, change.paths)
    outside = sorted(r for r in own
                     if not r.startswith(layout.CONTEXT_PREFIX) and r != layout.CONTEXT)
    with git.git_lock(store), interrupt.shielded():
        git.check_idle(home)
        specs = ([layout.CONTEXT] if store.context.is_dir() else []) + outside
        status = {path: xy for xy, path in (
            asked if asked is not None and not outside else git.changes(home, specs))}
        folders = ["" if r == "." else f"{r}/" for r in own if r == "." or (home / r).is_dir()]
        mine = {p for p in status if p in own or any(p.startswith(f) for f in folders)}
        if everything:
            take = {p for p in status if p.startswith(layout.CONTEXT_PREFIX)} | mine
        else:
            take = set(mine)
            if any(lists_atoms(p) for p in take):
                take |= {p for p in status if atom_of(p)}
        created = _relative(store, change.created)
        regenerated, warning = _regenerate_what_needs_it(store, change, take, status, created,
                                                         mine)
        take |= set(regenerated)
        if started is not None:  # (rewritten since its git read them)
            started.paths -= set(regenerated)
        if warning is not None:
            take -= {p for p in take if atom_of(p) or lists_atoms(p)} - mine
        if not take:
            return Committed(warning=warning)
        others = sorted(p for p in take if p not in mine and p not in regenerated)
        message = _message(change.message, status, sorted(take), others)
        staged = [p for p in take if status.get(p, "  ")[0] not in " ?"]
        sha = git.commit_exactly(store, sorted(take), message, staged, started)
    return Committed(sha, message if sha else "", sorted(take) if sha else [], others,
                     regenerated, warning)


def commit_paths(store: Store, paths: Iterable[Path], message: str) -> Committed | None:
    """Commit `paths` and what they rest on (not everything pending); None when nothing was
    committed. For `cortex sync` and the access-log committer."""
    done = commit_change(store, Change(list(paths), message), everything=False)
    return done if done.commit else None


def _relative(store: Store, paths: Iterable[Path]) -> set[str]:
    out = set()
    for p in paths:
        rel = store.home_rel(p)
        if rel == ".." or rel.startswith("../"):
            raise GitError(f"cannot commit paths outside the store {store.home}: {rel}")
        out.add(rel)
    return out


def _regenerate_what_needs_it(store: Store, change: Change, take: set[str],
                              status: dict[str, str], created: set[str], mine: set[str],
                              ) -> tuple[list[str], str | None]:
    """Regenerate the projects whose pending atoms an index in this commit would disagree
    with: an atom changed or deleted in git's eyes (tracked), or a new one while a
    generated file goes in the same commit. (relative paths written, warning).

    A pending generated file this command did not write (left by `--no-commit` or an
    interrupted command) is regenerated too: it may list an atom that git never saw and
    that is gone since (deleted by hand, or removed by the interrupted command's undo), a
    change no `git status` shows. (store-wide files: every project.)"""
    generated = any(lists_atoms(p) for p in take)
    projects: set[str] = set()
    every = False
    for rel in take:
        if rel in mine or not lists_atoms(rel):
            continue
        project = index_project(rel)
        if project is not None:
            if project not in change.regenerated:
                projects.add(project)
        elif not change.regenerated:
            every = True
    for rel in take:
        atom = atom_of(rel)
        if atom is None or rel in created or atom[0] in change.regenerated:
            continue
        if status.get(rel) != "??" or generated:
            projects.add(atom[0])
    if not projects and not every:
        return [], None
    from cortexfs.regen import regenerate

    existing = [p for p in sorted(projects) if (store.projects_dir / p).is_dir()]
    try:
        result = regenerate(store, existing if len(existing) == len(projects) and not every
                            else None)
    except CortexError as e:
        return [], (f"the indexes of {', '.join(sorted(projects))} could not be regenerated "
                    f"({e}), so the atoms changed there stay uncommitted: fix that, then run "
                    "`cortex commit`")
    return sorted(_relative(store, result.written)), None


def _message(given: str | None, status: dict[str, str], take: list[str],
             others: list[str]) -> str:
    if given is None:
        return describe([(status.get(p, " M"), p) for p in take])
    if not others:
        return given
    listed = [f"- {p} ({_verb(status.get(p, ' M'))})" for p in others[:LISTED]]
    if len(others) > LISTED:
        listed.append(f"- … and {len(others) - LISTED} more")
    return f"{given}\n\nAlso commits what was pending under context/:\n" + "\n".join(listed)


def _verb(xy: str) -> str:
    if xy == "??" or "A" in xy:
        return "added"
    if "D" in xy:
        return "deleted"
    return "edited"


def describe(changes: list[tuple[str, str]]) -> str:
    """A commit message naming what changed: atoms by id, other files by name, generated
    files and access logs summed up; the body lists every path."""
    items: list[str] = []
    generated = logs = 0
    for xy, rel in changes:
        if lists_atoms(rel) or _CORTEX_MD.match(rel):  # regeneration writes it (or its block)
            generated += 1
        elif is_log(rel):
            logs += 1
        else:
            name = Path(rel).stem if atom_of(rel) else rel.removeprefix(layout.CONTEXT_PREFIX)
            name = name.removeprefix("projects/")
            items.append(f"{ {'added': 'add', 'deleted': 'remove'}.get(_verb(xy), 'edit')} "
                         f"{name}")
    if logs:
        items.append("access log" + ("s" if logs > 1 else ""))
    if generated:
        items.append(f"{generated} generated file{'s' if generated > 1 else ''}")
    subject = "commit: " + ", ".join(items)
    if len(subject) > 72:
        shown: list[str] = []
        for item in items:
            if len("commit: " + ", ".join([*shown, item])) > 56:
                break
            shown.append(item)
        shown = shown or items[:1]
        subject = f"commit: {', '.join(shown)} and {len(items) - len(shown)} more"
    body = [f"{'?' if xy == '??' else (xy.strip() or 'M')[0]} {rel}" for xy, rel in changes]
    if len(body) > 100:
        body = [*body[:100], f"… and {len(body) - 100} more"]
    return subject + "\n\n" + "\n".join(body)


# --- a writing command, from its pre-flight to its commit ------------------------------------

class Transaction:
    """One writing command: what it changed, and how to undo it if it cannot be committed."""

    def __init__(self, store: Store, commit: bool, command: str | None) -> None:
        self.store = store
        self.commit = commit
        self.command = command
        self.change = Change()
        self.result: Committed | None = None
        self._kept: dict[Path, bytes | None] = {}
        self._quiet: set[Path] = set()
        self._fresh: list[Path] = []
        self._after_undo: list[Callable[[], list[str]]] = []
        self._unlisted = False

    @property
    def committed(self) -> str | None:
        """The commit this command made; None when it made none."""
        return self.result.commit if self.result else None

    def add(self, change: Change) -> None:
        """Record what an operation changed."""
        self.change.merge(change)

    def keep(self, *paths: Path) -> None:
        """Remember these files as they are now, to put them back if the command fails (a
        link is not followed: it is left for the write to refuse or replace)."""
        for path in paths:
            if path not in self._kept:
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except FileNotFoundError:
                    self._kept[path] = None
                    continue
                except OSError:
                    continue
                with os.fdopen(fd, "rb") as f:
                    if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                        self._kept[path] = f.read()

    def wrote_unlisted(self) -> None:
        """The command also wrote under context/ what its Change does not list (lines
        appended to an access log): git is asked after the writes (see `ask_early`)."""
        self._unlisted = True

    def touched(self) -> set[str] | None:
        """The paths under context/ (relative to home) this command wrote, deleted, made or
        kept to put back; None for the store's folder itself (all of it)."""
        touched = set()
        for path in [*self.change.paths, *self.change.created, *self._kept, *self._fresh]:
            rel = self.store.home_rel(path)
            if rel == layout.CONTEXT or rel.startswith(layout.CONTEXT_PREFIX):
                touched.add(rel)
            elif rel == ".":
                return None
        return touched

    def asked_again(self, early: list[tuple[str, str]] | None,
                    started: Callable[[set[str]], object] | None = None,
                    ) -> list[tuple[str, str]] | None:
        """git's changes under context/ now, from `early` (git status asked before the
        writes): the paths this command wrote, deleted, made or kept to put back are asked
        again, and the rest of `early` stands. None (ask git about everything) without an
        early answer, after a write the command does not list (`wrote_unlisted`), or when it
        wrote more than ASKED_AGAIN paths (then one status of context/ is cheaper).
        `started` is called with the paths the commit will most likely hold (those of
        `early` and those asked again) just before git is asked again, to begin the commit
        meanwhile (see `transaction`)."""
        if early is None or self._unlisted:
            return None
        touched = self.touched()
        if touched is None:
            return None
        if not touched:
            return early
        if len(touched) > ASKED_AGAIN:
            return None

        def stands(rel: str) -> bool:  # neither a path asked again nor under one
            while rel not in touched:
                rel, _, name = rel.rpartition("/")
                if not name:
                    return True
            return False

        standing = [c for c in early if stands(c[1])]
        if started is not None:
            started({p for _, p in standing} | touched)
        return standing + git.changes(self.store.home, sorted(touched), few=True)

    def keep_quietly(self, path: Path) -> None:
        """keep(path), for a file a write is about to replace (a regenerated index): put
        back with the rest, not named among what the command undid."""
        if path not in self._kept:
            self._quiet.add(path)
            self.keep(path)

    def fresh(self, *paths: Path) -> None:
        """Files or folders about to be made: a failed command removes them whole (only
        those that do not exist yet are recorded)."""
        self._fresh += [p for p in paths if not os.path.lexists(p)]

    def after_undo(self, redo: Callable[[], list[str]]) -> None:
        """Run `redo` after an undo (e.g. regenerate the indexes, which cannot be put back
        file by file, from the files as they are again); it returns what it rewrote."""
        self._after_undo.append(redo)

    def undo(self, regenerated: bool = True) -> list[str]:
        """Remove what the command created and put back what it changed; what was undone.
        Without `regenerated`, the files regenerated along the way stay as they are (an
        interrupted regeneration keeps what it finished, for the next one to go on from)."""
        done = []
        for path in self.change.created:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                done.append(self._name(path))
        for path, data in self._kept.items():
            if path in self._quiet and not regenerated:
                continue
            with contextlib.suppress(OSError):
                if data is None:
                    if not os.path.lexists(path):
                        continue
                    path.unlink()
                elif path.exists() and path.read_bytes() == data:
                    continue
                else:
                    atomic_write(path, data)
                if path not in self._quiet:
                    done.append(self._name(path))
        for path in reversed(self._fresh):
            if os.path.lexists(path):
                with contextlib.suppress(OSError):
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path)
                    else:
                        path.unlink()
                    done.append(self._name(path))
        for redo in self._after_undo:
            with contextlib.suppress(Exception):  # a failure must not hide the first one
                done += redo()
        return done

    def written(self) -> list[str]:
        """What the command wrote so far (relative paths), for a message."""
        return sorted(_relative(self.store, self.change.paths))

    def _name(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.store.home))
        except ValueError:
            return str(path)


@contextlib.contextmanager
def transaction(store: Store, *, commit: bool = True, command: str | None = None,
                init: bool = False, refusal_hint: str = "",
                ask_early: bool = False) -> Iterator[Transaction]:
    """Run a writing command: pre-flight, the writes (the body of the block, which records
    its Change with `add`), then one commit of everything pending under context/.

    The store's git lock is held throughout; SIGINT / SIGTERM stop the command at a file
    boundary (cortexfs.interrupt). A failure — or an interruption before the commit —
    undoes what can be undone and says what was done; `command` is what to run again.
    With `init` (`cortex init`), the store may not exist yet: what the command makes of it
    (the folder, .git, context/) is removed again if it fails. `refusal_hint` ends the
    message of a pre-flight refusal (e.g. how to write without committing).
    With `ask_early` (a command that lists every file it writes in its Change or writes it
    with fsutil.atomic_write, such as a regeneration or `cortex new`), git status runs while
    the command works, and only what the command wrote is asked again after it
    (`Transaction.asked_again`): on a 100,000-atom store status is a third of a
    regeneration that finds nothing to do, and on 10,000 atoms a status of the ~10 files a
    new atom writes takes ~9 ms where one of context/ takes ~30 ms.
    """
    txn = Transaction(store, commit, command)
    repo = git.is_repo(store.home)
    if init:
        if commit and not repo:
            with _hinted(refusal_hint):
                git.preflight(store, init=True)  # before the lock: taking it writes .locks/
        txn.fresh(store.home, store.home / ".git", store.context)
        txn.keep(*(store.home / name for name in INIT_FILES))
    early: Callable[[], list[tuple[str, str]] | None] | None = None
    with git.git_lock(store), interrupt.deferred():
        try:
            if commit and repo:
                _finish_interrupted_sync(store)
                with _hinted(refusal_hint):
                    git.preflight(store)
            # reads a killed sync's merge left set aside: into their logs before anything
            # here reads, keeps or rewrites a log
            accesslog.drain_all(store.home)
            interrupt.check()  # a signal during the pre-flight: stop before writing
            early = git.changes_started(store.home, [layout.CONTEXT]) \
                if ask_early and commit and repo and store.context.is_dir() else None
            with noting_writes(txn.keep_quietly):  # what the command overwrites, to put back
                yield txn
                interrupt.check()  # a signal during the writes: stop before the commit
                asked = early() if early is not None else None  # (waited for in any case)
                if commit:
                    # the commit's first step begins while git status is asked again (~9 ms
                    # of a new atom on 10,000 atoms, on the other core)
                    begun: list[git.Started | None] = []
                    try:
                        again = txn.asked_again(asked, lambda paths: begun.append(
                            git.start_commit(store, paths)))
                        txn.result = commit_change(store, txn.change, asked=again,
                                                   started=begun[0] if begun else None)
                    finally:
                        for build in begun:
                            if build is not None:
                                build.drop()
        except interrupt.Interrupted as e:
            written = txn.written()
            # the indexes regenerated along the way stay for the next command to go on
            # from, unless the undo removes a file the command made (`cortex new`'s atom):
            # then they would list it, and are put back too (a regeneration after the undo
            # is cut at its first file by the same signal)
            undone = txn.undo(regenerated=bool(txn.change.created))
            e.rerun = e.rerun or command
            if undone:
                e.done = f"nothing was kept ({some(undone, 3)} removed or put back)"
            else:
                done = e.done or (f"{some(written, 3)} written" if written else "")
                e.done = f"{done}, not committed" if done and commit else done
            raise
        except (CortexError, OSError) as e:
            raise _explained(e, txn) from None
        except Exception:
            txn.undo()  # a bug: leave nothing half-done behind it either
            raise
        finally:
            if early is not None:  # no git of this command outlives its hold of the git lock
                early()
    if interrupt.received() and txn.result is not None:
        done = f"{txn.result.subject} was committed" if txn.result.commit else "all was done"
        raise interrupt.Interrupted(interrupt.received(), done=done)


def _finish_interrupted_sync(store: Store) -> None:
    """Before anything is committed: what a killed `cortex sync` left (a merge under way,
    files a killed `git merge` half wrote, a renumbering) is finished or undone first, or
    committing "everything pending" would commit the half-merged files as this side's own
    changes (a file git had removed before rewriting it: its deletion). One read of the sync
    state when there is nothing to do."""
    state = git.read_sync_state(store.home)
    if state.get("journal") or state.get("aside"):
        from cortexfs import sync

        sync.recover(store)


@contextlib.contextmanager
def _hinted(hint: str) -> Iterator[None]:
    try:
        yield
    except CortexError as e:
        if not hint:
            raise
        raise type(e)(f"{e}{hint}") if type(e) in (GitError, EnvironmentProblem) \
            else CortexError(f"{e}{hint}") from None


def _explained(e: CortexError | OSError, txn: Transaction) -> CortexError:
    """`e` as a CortexError that also says what the command had written and what became of
    it; an OSError that is not the environment's (a bug) is raised again as it is."""
    problem: CortexError | None = e if isinstance(e, CortexError) else from_os_error(e)
    written = txn.written()
    undone = txn.undo()
    if problem is None:
        raise e
    if undone:
        note = f"cortex undid what it had written ({some(undone, 3)}), so nothing is half-done"
    elif written:
        note = (f"{some(written, 3)} written but not committed: fix that, then run "
                "`cortex commit`")
    else:
        return problem
    text = str(problem).replace(" (nothing was written)", "").replace(
        " (nothing was half-written)", "")
    kind = type(problem) if type(problem) in (GitError, EnvironmentProblem) else CortexError
    return kind(f"{text}; {note}")
