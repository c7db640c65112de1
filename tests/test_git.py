"""git.py: the store's repository, cortex's own commits, and the worktree state."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from git_holders import hold_head_lock, hold_index_lock, hold_packed_refs_lock, kill_9, release

from cortexfs import git, sync
from cortexfs.commit import commit_paths
from cortexfs.errors import GitError
from cortexfs.store import Project, Store


def sh(cwd: Path, *args: str, input: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True, input=input).stdout


def porcelain(cwd: Path) -> str:
    return sh(cwd, "status", "--porcelain=v1", "--untracked-files=all")


# --- worktree_state --------------------------------------------------------------------------

def test_state_of_a_folder_that_is_not_a_repo(tmp_path: Path) -> None:
    state = git.worktree_state(Store(tmp_path / "nowhere"))
    assert not state.is_repo
    assert state.dirty == [] and state.upstream is None


def test_state_of_a_clean_store(store: Store) -> None:
    state = git.worktree_state(store)
    assert state.is_repo and state.dirty == []
    assert not state.has_remote and state.upstream is None
    assert (state.ahead, state.behind) == (0, 0)
    assert state.in_progress is None and state.last_sync is None
    assert state.branch == "main"
    assert state.head == git.head_commit(store.home) and state.head is not None


def test_state_head_before_the_first_commit(tmp_path: Path) -> None:
    sh(tmp_path, "init", "-q", "-b", "main", str(tmp_path / "fresh"))
    state = git.worktree_state(Store(tmp_path / "fresh"))
    assert state.is_repo and state.head is None and state.branch == "main"


def test_state_lists_modified_staged_untracked_deleted_renamed_not_ignored(store: Store) -> None:
    home = store.home
    (home / "context/OVERVIEW.md").write_text("changed\n")
    (home / "new dir").mkdir()
    (home / "new dir/a file.md").write_text("x\n")
    (home / "context/user/USER.md").unlink()
    sh(home, "mv", "context/ideas/CORTEX.md", "context/ideas/MOVED.md")
    (home / ".cache").mkdir()
    (home / ".cache/ignored.bin").write_text("x")
    state = git.worktree_state(store)
    assert state.dirty == sorted(["context/OVERVIEW.md", "new dir/a file.md",
                                  "context/user/USER.md", "context/ideas/MOVED.md",
                                  "context/ideas/CORTEX.md"])


def test_state_lists_what_is_staged_as_git_diff_cached_names_it(store: Store) -> None:
    home = store.home
    (home / "context/OVERVIEW.md").write_text("changed, not staged\n")
    (home / "staged.md").write_text("x\n")
    (home / "context/user/USER.md").write_text("changed and staged\n")
    sh(home, "add", "staged.md", "context/user/USER.md")
    sh(home, "mv", "context/ideas/CORTEX.md", "context/ideas/MOVED.md")
    (home / "untracked.md").write_text("x\n")
    cached = [p for p in sh(home, "diff", "--cached", "--name-only", "-z").split("\0") if p]
    assert git.worktree_state(store, remote=False).staged == sorted(cached) == sorted(
        ["staged.md", "context/user/USER.md", "context/ideas/MOVED.md"])


@pytest.mark.parametrize("shape", ["branch", "detached", "linked worktree", "link", "odd"])
def test_the_current_branch_is_the_one_git_names(store: Store, tmp_path: Path, shape: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Read from .git/HEAD when it has the usual shape (no git run for it), else asked."""
    home = store.home
    calls: list[str] = []
    run = git.git_run
    monkeypatch.setattr(git, "git_run", lambda home, *args, **kw: calls.append(args[0])
                        or run(home, *args, **kw))
    if shape == "branch":
        sh(home, "switch", "-q", "-c", "feature/x")
    elif shape == "detached":
        sh(home, "checkout", "-q", "--detach")
    elif shape == "linked worktree":
        sh(home, "worktree", "add", "-q", "-b", "side", str(tmp_path / "linked"))
        home = tmp_path / "linked"
    elif shape == "link":  # git's old way: HEAD a symbolic link to the branch's ref
        head = home / ".git/HEAD"
        head.unlink()
        head.symlink_to("refs/heads/main")
    else:  # a HEAD naming a ref outside refs/heads/ (git says no branch)
        sh(home, "symbolic-ref", "HEAD", "refs/remotes/elsewhere")
    proc = subprocess.run(["git", "symbolic-ref", "--short", "-q", "HEAD"], cwd=home,
                          capture_output=True, text=True)
    assert git.current_branch(home) == (proc.stdout.strip() or None)
    asked = shape in ("link", "odd")
    assert ("symbolic-ref" in calls) == asked, calls


def test_state_lists_a_conflicted_file_and_the_merge(store: Store) -> None:
    home = store.home
    sh(home, "checkout", "-q", "-b", "side")
    (home / "context/OVERVIEW.md").write_text("side\n")
    commit_paths(store, [home / "context/OVERVIEW.md"], "side")
    sh(home, "checkout", "-q", "main")
    (home / "context/OVERVIEW.md").write_text("main\n")
    commit_paths(store, [home / "context/OVERVIEW.md"], "main")
    proc = subprocess.run(["git", "merge", "-q", "side"], cwd=home, capture_output=True)
    assert proc.returncode != 0  # a conflict: an unmerged ("u") record in git status
    state = git.worktree_state(store)
    assert state.dirty == ["context/OVERVIEW.md"] and state.in_progress == "merge"
    assert state.branch == "main"


def test_state_json_is_its_fields_in_order_but_head(store: Store) -> None:
    data = git.worktree_state(store).to_json()
    assert list(data) == ["is_repo", "branch", "dirty", "has_remote", "upstream", "ahead",
                          "behind", "in_progress", "last_sync"]
    assert data["branch"] == "main" and data["dirty"] == [] and data["is_repo"] is True


def test_state_ahead_behind_against_the_upstream(store: Store, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    sh(tmp_path, "init", "-q", "--bare", str(remote))
    sh(store.home, "remote", "add", "origin", str(remote))
    sh(store.home, "push", "-q", "-u", "origin", "main")
    other = tmp_path / "other"
    sh(tmp_path, "clone", "-q", str(remote), str(other))
    for name in ("a", "b"):
        (other / name).write_text(name)
        sh(other, "add", name)
        sh(other, "commit", "-q", "-m", name)
    sh(other, "push", "-q")
    (store.home / "mine").write_text("m")
    commit_paths(store, [store.home / "mine"], "mine")
    state = git.worktree_state(store)
    assert state.has_remote and state.upstream == "origin/main"
    assert (state.ahead, state.behind) == (1, 0)  # no fetch yet: no network in the state
    sh(store.home, "fetch", "-q")
    state = git.worktree_state(store)
    assert (state.ahead, state.behind) == (1, 2)


def test_state_reports_a_merge_in_progress(store: Store) -> None:
    (git.git_dir_of(store.home) / "MERGE_HEAD").write_text(git.head_commit(store.home) or "")
    assert git.worktree_state(store).in_progress == "merge"


def test_state_reads_the_last_sync_record(store: Store) -> None:
    git.write_sync_state(store.home, last_sync="2026-03-09T10:00:00Z")
    assert git.worktree_state(store).last_sync == "2026-03-09T10:00:00Z"
    assert "cortex-sync.json" not in porcelain(store.home)


# --- commit_paths ----------------------------------------------------------------------------

def test_commit_leaves_the_users_staged_and_unstaged_changes_alone(project: Project) -> None:
    store = project.store
    home = store.home
    (home / "notes.txt").write_text("v1\n")
    commit_paths(store, [home / "notes.txt"], "notes")
    # the user: one staged unrelated file, one unstaged edit to a tracked file
    (home / "staged.txt").write_text("staged\n")
    sh(home, "add", "staged.txt")
    (home / "notes.txt").write_text("v2 unstaged\n")
    before = porcelain(home)
    diff_cached = sh(home, "diff", "--cached")
    diff = sh(home, "diff")
    ours = project.root / "experiments" / "EXP-001.md"
    ours.parent.mkdir(exist_ok=True)
    ours.write_text("---\nid: EXP-001\n---\n")
    assert commit_paths(store, [ours], "atom: add EXP-001 — x")
    assert sh(home, "show", "--name-only", "--format=%s", "HEAD").split() == [
        "atom:", "add", "EXP-001", "—", "x", "context/projects/flywheel/experiments/EXP-001.md"]
    assert porcelain(home) == before.replace(
        "?? context/projects/flywheel/experiments/EXP-001.md\n", "")
    assert sh(home, "diff", "--cached") == diff_cached
    assert sh(home, "diff") == diff
    assert (home / "notes.txt").read_text() == "v2 unstaged\n"


@pytest.mark.parametrize("unmerged", [False, True])
def test_a_commit_built_from_a_copy_of_your_index_leaves_out_what_you_staged(
        project: Project, unmerged: bool) -> None:
    """Without cortex's own index (deleted) the commit is built in a copy of yours: what
    you staged there is put back as HEAD has it first (and the tree written again), and a
    copy with unmerged entries is started afresh from HEAD."""
    home = project.store.home
    (home / "notes.txt").write_text("v1\n")
    commit_paths(project.store, [home / "notes.txt"], "notes")
    (home / "staged.txt").write_text("staged\n")
    sh(home, "add", "staged.txt")
    if unmerged:  # stages 1-3 of a path, as a conflicted merge leaves them
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=home, input="x\n",
                              capture_output=True, text=True, check=True).stdout.strip()
        subprocess.run(["git", "update-index", "--index-info"], cwd=home, check=True, text=True,
                       input="".join(f"100644 {blob} {n}\tclash.txt\n" for n in (1, 2, 3)))
    (git.git_dir_of(home) / git.PRIVATE_INDEX).unlink()
    ours = project.root / "experiments" / "EXP-001.md"
    ours.parent.mkdir(exist_ok=True)
    ours.write_text("---\nid: EXP-001\n---\n")
    assert commit_paths(project.store, [ours], "atom: add EXP-001 — x")
    tree = sh(home, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert "notes.txt" in tree and "staged.txt" not in tree and "clash.txt" not in tree
    assert sh(home, "show", "--name-only", "--format=", "HEAD").split() == [
        "context/projects/flywheel/experiments/EXP-001.md"]
    assert "A  staged.txt" in porcelain(home)  # still staged, in your index


def test_first_commit_with_a_user_file_already_staged(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    sh(tmp_path, "init", "-q", str(home))
    (home / "mine.txt").write_text("mine\n")
    sh(home, "add", "mine.txt")
    store = Store(home)
    (home / "a.md").write_text("a\n")
    assert commit_paths(store, [home / "a.md"], "first")
    assert sh(home, "show", "--name-only", "--format=", "HEAD").split() == ["a.md"]
    # (a store's .gitignore hides .locks/; this bare repository has none)
    assert porcelain(home) == "A  mine.txt\n?? .locks/git.lock\n"


def test_commit_a_deletion_and_nothing_to_commit(store: Store) -> None:
    path = store.context / "OVERVIEW.md"
    path.unlink()
    assert commit_paths(store, [path], "chore: drop overview")
    assert porcelain(store.home) == ""
    assert not commit_paths(store, [path], "again")
    assert not commit_paths(store, [], "nothing")


def test_commit_skips_ignored_paths(store: Store) -> None:
    (store.cache_dir).mkdir()
    junk = store.cache_dir / "x.bin"
    junk.write_text("x")
    assert not commit_paths(store, [junk], "cache")


def test_commit_outside_the_store_is_refused(store: Store, tmp_path: Path) -> None:
    with pytest.raises(GitError, match="outside the store"):
        commit_paths(store, [tmp_path / "elsewhere.md"], "x")


def test_commit_in_a_folder_that_is_not_a_repo(tmp_path: Path) -> None:
    assert not commit_paths(Store(tmp_path / "plain"), [tmp_path / "plain/a"], "x")


def test_commit_waits_for_a_held_index_lock(store: Store) -> None:
    holder = hold_index_lock(store.home)  # a live git process: wait for it
    start = time.monotonic()
    threading.Timer(0.3, release, [holder]).start()
    path = store.context / "OVERVIEW.md"
    path.write_text("new\n")
    assert commit_paths(store, [path], "chore: overview")
    assert time.monotonic() - start >= 0.3
    assert porcelain(store.home) == ""


def test_commit_waits_for_a_held_head_lock(store: Store) -> None:
    holder = hold_head_lock(store.home)
    threading.Timer(0.3, release, [holder]).start()
    path = store.context / "OVERVIEW.md"
    path.write_text("new\n")
    assert commit_paths(store, [path], "chore: overview")
    assert porcelain(store.home) == ""


def test_many_paths_take_as_many_git_processes_as_one(store: Store,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = git.git_run

    def counting(home: Path, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(args[0])
        return real(home, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(git, "git_run", counting)
    one = store.context / "ideas" / "one.md"
    one.write_text("1\n")
    assert commit_paths(store, [one], "one")
    single = list(calls)
    calls.clear()
    paths = []
    for i in range(1200):
        path = store.context / "ideas" / f"idea-{i:04d}.md"
        path.write_text(f"{i}\n")
        paths.append(path)
    paths[3].unlink()
    assert commit_paths(store, paths, "ideas")
    assert calls == single, (single, calls)
    assert len(single) <= 9, single
    assert len(sh(store.home, "show", "--name-only", "--format=", "HEAD").split()) == 1199
    assert porcelain(store.home) == ""
    assert sh(store.home, "diff", "--cached", "--stat") == ""


def test_a_lock_that_is_never_released_is_a_clear_error(store: Store,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(git, "LOCK_WAIT_SECONDS", 0.1)
    holder = hold_index_lock(store.home)
    try:
        path = store.context / "OVERVIEW.md"
        path.write_text("new\n")
        with pytest.raises(GitError, match=rf"index.lock has been held for 0s by pid "
                                           rf"{holder.pid} \(git update-index --stdin\) working"):
            commit_paths(store, [path], "x")
    finally:
        release(holder)


@pytest.mark.parametrize("hold", [hold_index_lock, hold_head_lock])
def test_a_lock_left_by_a_killed_git_is_removed_with_a_note(
        store: Store, hold: Callable[[Path], subprocess.Popen[str]],
        capsys: pytest.CaptureFixture[str]) -> None:
    kill_9(hold(store.home))  # kill -9 of git: its lock files stay behind
    left = [p.name for p in git.git_lock_files(store.home) if p.exists()]
    assert left
    path = store.context / "OVERVIEW.md"
    path.write_text("new\n")
    assert commit_paths(store, [path], "chore: overview")
    assert porcelain(store.home) == ""
    assert sh(store.home, "diff", "--cached", "--stat") == ""
    assert not any(p.exists() for p in git.git_lock_files(store.home))
    err = capsys.readouterr().err
    assert err.count("cortex: removed the stale git lock") == len(left)
    assert "the git process that made it is gone" in err


def test_a_lock_newer_than_the_store_lock_is_not_stale(store: Store) -> None:
    lock = git.git_dir_of(store.home) / "index.lock"
    with git.git_lock(store):
        lock.write_text("")  # made while we hold the store's lock: some git is running
        assert not git.stale_lock(store.home, lock)
    os.utime(lock, (time.time() - 60, time.time() - 60))
    assert not git.stale_lock(store.home, lock)  # we do not hold the store's lock
    with git.git_lock(store):
        assert git.stale_lock(store.home, lock)
        holder = hold_head_lock(store.home)  # a live git in this repository
        try:
            assert not git.stale_lock(store.home, lock)
            assert any(f"pid {holder.pid}" in p for p in git.git_processes(store.home) or [])
        finally:
            release(holder)


@pytest.mark.parametrize(("marker", "what"), [("MERGE_HEAD", "merge"),
                                               ("rebase-merge", "rebase"),
                                               ("rebase-apply", "rebase"),
                                               ("CHERRY_PICK_HEAD", "cherry-pick")])
def test_commit_refuses_a_repo_in_the_middle_of_a_merge(store: Store, marker: str,
                                                        what: str) -> None:
    where = git.git_dir_of(store.home) / marker
    if marker.startswith("rebase"):
        where.mkdir()
    else:
        where.write_text(git.head_commit(store.home) or "")
    path = store.context / "OVERVIEW.md"
    path.write_text("new\n")
    head = git.head_commit(store.home)
    with pytest.raises(GitError, match=f"in the middle of a {what}: finish or abort it"):
        commit_paths(store, [path], "x")
    assert "OVERVIEW.md" in porcelain(store.home) and git.head_commit(store.home) == head


def test_concurrent_commits_from_many_processes_all_land(store: Store) -> None:
    script = ("import sys; from pathlib import Path; from cortexfs.commit import commit_paths; "
              "from cortexfs.store import Store; s = Store(Path(sys.argv[1])); "
              "p = s.home / sys.argv[2]; p.write_text(sys.argv[2]); "
              "assert commit_paths(s, [p], 'add ' + sys.argv[2])")
    import sys
    procs = [subprocess.Popen([sys.executable, "-c", script, str(store.home), f"f{i}.txt"])
             for i in range(6)]
    assert [p.wait() for p in procs] == [0] * 6
    assert porcelain(store.home) == ""
    assert len(sh(store.home, "log", "--format=%s").splitlines()) == 7


# --- ensure_repo -----------------------------------------------------------------------------

def test_adopting_an_existing_repo_keeps_its_history_and_files(tmp_path: Path) -> None:
    home = tmp_path / "existing"
    sh(tmp_path, "init", "-q", str(home))
    (home / ".gitignore").write_text("secret.txt")  # no trailing newline
    (home / "old.txt").write_text("old\n")
    sh(home, "add", ".gitignore", "old.txt")
    sh(home, "commit", "-q", "-m", "history")
    head = git.head_commit(home)
    written = git.ensure_repo(Store(home))
    assert git.head_commit(home) == head
    assert (home / ".gitignore").read_text().splitlines()[:2] == ["secret.txt", ".cache/"]
    assert (home / ".gitattributes").read_text() == "**/_meta/access-log.jsonl merge=union\n"
    assert sorted(p.name for p in written) == [".gitattributes", ".gitignore"]
    assert git.ensure_repo(Store(home)) == []


def test_a_commit_killed_before_the_index_update_is_finished_by_the_next(store: Store) -> None:
    path = store.context / "OVERVIEW.md"
    path.write_text("new\n")
    # what a kill between `update-ref` and the index update leaves: HEAD has the change,
    # the index still the old entry
    tree = sh(store.home, "write-tree").strip()  # the old tree (index not updated)
    sh(store.home, "add", "context/OVERVIEW.md")
    new_tree = sh(store.home, "write-tree").strip()
    sh(store.home, "read-tree", tree)
    commit = subprocess.run(["git", "commit-tree", new_tree, "-p", "HEAD", "-m", "x"],
                            cwd=store.home, capture_output=True, text=True).stdout.strip()
    sh(store.home, "update-ref", "HEAD", commit)
    assert porcelain(store.home) != ""
    assert not commit_paths(store, [path], "again")  # nothing new: the index catches up
    assert porcelain(store.home) == ""
    assert git.head_commit(store.home) == commit


def test_cortex_init_adopts_a_repository_with_history_and_staged_work(tmp_path: Path,
                                                                      cli: object) -> None:
    home = tmp_path / "cortex"  # CORTEX_HOME of the hermetic fixture
    sh(tmp_path, "init", "-q", str(home))
    (home / "old.txt").write_text("old\n")
    sh(home, "add", "old.txt")
    sh(home, "commit", "-q", "-m", "history")
    head = git.head_commit(home)
    (home / "staged.txt").write_text("staged\n")
    sh(home, "add", "staged.txt")
    result = cli("init")  # type: ignore[operator]
    assert result.exit_code == 0, result.stderr
    assert sh(home, "log", "--format=%s").splitlines() == ["chore: initialise cortex store",
                                                           "history"]
    assert sh(home, "rev-parse", "HEAD~1").strip() == head
    assert porcelain(home) == "A  staged.txt\n"
    committed = sh(home, "show", "--name-only", "--format=", "HEAD").split()
    assert ".gitattributes" in committed and ".gitignore" in committed
    assert "staged.txt" not in committed


def test_git_runs_only_in_this_module() -> None:
    """git.py is the one module that runs git: no other builds a `["git", …]` command."""
    import ast

    package = Path(git.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "git.py" and path.parent == package:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.List, ast.Tuple)) and node.elts \
                    and isinstance(node.elts[0], ast.Constant) and node.elts[0].value == "git":
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    assert found == []


def test_a_private_index_naming_objects_gc_pruned_is_rebuilt_from_head(store: Store) -> None:
    """git gc keeps what refs, reflogs and your index name, not cortex's private index: a
    commit undone by `git reset HEAD~1` leaves a work file whose blob only that index names,
    with matching stat data (so git does not hash it again). Once the reflog expired and gc
    pruned the blob, the next commit rebuilds the index from HEAD instead of failing."""
    home = store.home
    path = store.context / "OVERVIEW.md"
    path.write_text("kept in the work tree, undone in git\n")
    assert commit_paths(store, [path], "overview")
    blob = sh(home, "rev-parse", "HEAD:context/OVERVIEW.md").strip()
    sh(home, "reset", "-q", "HEAD~1")  # "undo the last commit", keeping the file
    sh(home, "reflog", "expire", "--expire-unreachable=now", "--all")
    sh(home, "gc", "-q", "--prune=now")
    gone = subprocess.run(["git", "cat-file", "-e", blob], cwd=home, capture_output=True)
    assert gone.returncode != 0  # pruned: only cortex's private index still named it
    assert commit_paths(store, [path], "overview again")
    assert sh(home, "rev-parse", "HEAD:context/OVERVIEW.md").strip() == blob
    assert porcelain(home) == ""
    sh(home, "fsck", "--no-progress")


# --- packing the repository (git gc --auto) --------------------------------------------------

def packed(home: Path, timeout: float = 60.0) -> None:
    """Wait until the repository is packed (fewer than 60 loose objects, a pack) and no git
    process works in it (the detached gc cortex started has finished)."""
    deadline = time.monotonic() + timeout
    while objects(home)[0] >= 60 or objects(home)[1] == 0 or git.git_processes(home) \
            or (git.git_dir_of(home) / "gc.pid").exists():
        assert time.monotonic() < deadline, "git gc did not pack the repository"
        time.sleep(0.05)


def objects(home: Path) -> tuple[int, int]:
    """(loose objects, packs), as `git count-objects` counts them."""
    counted = dict(line.split(": ") for line in sh(home, "count-objects", "-v").splitlines())
    return int(counted["count"]), int(counted["packs"])


def notes(store: Store, n: int = 600) -> list[Path]:
    """n hand-written files under context/: a few hundred loose objects once committed."""
    folder = store.context / "notes"
    folder.mkdir(exist_ok=True)
    paths = [folder / f"n{i}.md" for i in range(n)]
    for i, path in enumerate(paths):
        path.write_text(f"note {i}\n")
    return paths


def test_a_store_packs_itself_by_its_gc_auto_and_says_nothing_more(tmp_path: Path,
                                                                    cli: object) -> None:
    """gc.auto 30: a few commands in, git gc packs the store in the background; the
    commands print and commit what they do with gc.auto 0 (packing off)."""
    import re

    seen = {}
    for auto in ("0", "30"):
        home = tmp_path / f"gc.auto-{auto}"
        run = lambda *args, home=home: cli("--home", str(home), *args)  # type: ignore[operator] # noqa: E731
        assert run("init").exit_code == 0
        sh(home, "config", "gc.auto", auto)
        assert run("project", "new", "flywheel").exit_code == 0
        notes(Store(home))
        results = [run("commit", "-m", "notes")]
        results += [run("new", "exp", "-p", "flywheel", "-s", summary, "-t", "a")
                    for summary in ("Registry extraction", "Cache warmup order",
                                    "Tokenizer drift on logs")]
        if auto != "0":
            packed(home)
        printed = [(r.exit_code, re.sub(r"\b[0-9a-f]{10}\b", "<sha>",
                                        r.stdout.replace(str(home), "~")), r.stderr)
                   for r in results]
        seen[auto] = (printed, sh(home, "log", "--format=%s%n%b", "--name-status"),
                      sh(home, "ls-tree", "-r", "--name-only", "HEAD"), porcelain(home),
                      objects(home))
        sh(home, "fsck", "--no-progress")
    *same, unpacked = seen["0"]
    *same_30, packs = seen["30"]
    assert same_30 == same and same[3] == ""
    assert all(code == 0 and err == "" for code, _, err in same[0]), same[0]
    assert unpacked[0] > 600 and unpacked[1] == 0
    assert packs[1] >= 1, packs


def test_what_a_killed_gc_left_is_removed_so_that_the_next_gc_packs(
        store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    """A stale packed-refs.lock (pack-refs killed mid-way) would make every later gc fail
    before it packs, silently: it is removed under the stale rule, with the note."""
    home = store.home
    sh(home, "branch", "old")
    kill_9(hold_packed_refs_lock(home, "old"))
    gitdir = git.git_dir_of(home)
    assert (gitdir / "packed-refs.lock").exists() and (gitdir / "refs/heads/old.lock").exists()
    # (core.packedRefsTimeout: not git's 1 s of waiting for a lock that nobody will let go)
    failed = subprocess.run(["git", "-c", "gc.autoDetach=false", "-c", "core.packedRefsTimeout=0",
                             "gc", "--quiet"], cwd=home, capture_output=True, text=True)
    assert failed.returncode != 0 and "packed-refs.lock" in failed.stderr
    sh(home, "config", "gc.auto", "30")
    assert commit_paths(store, notes(store), "notes")
    packed(home)
    err = capsys.readouterr().err
    assert err.count("cortex: removed the stale git lock") == 2, err
    assert not git.gc_leftovers(home)
    sh(home, "fsck", "--no-progress")


def test_packing_is_asked_for_once_per_loose_count(store: Store,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Below 2 loose objects in objects/17 no gc.auto makes gc due: nothing is started;
    above, git is asked once per count seen, and again after an hour (it decides, by the
    user's config)."""
    started: list[list[str]] = []
    popen = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen",
                        lambda args, **kw: started.append(args) or popen(["true"]))
    folder = git.git_dir_of(store.home) / "objects" / "17"
    folder.mkdir(exist_ok=True)
    before = len(os.listdir(folder))
    with git.git_lock(store):
        for name in [f"{i:038x}" for i in range(2 - min(before, 2))]:
            (folder / name).write_text("")
        git.pack_when_due(store.home)
        git.pack_when_due(store.home)  # the same count: git was asked already
        assert len(started) == 1 and started[0][-3:] == ["gc", "--auto", "--quiet"]
        (folder / ("f" * 38)).write_text("")
        git.pack_when_due(store.home)
        assert len(started) == 2
        git.pack_when_due(store.home)
        assert len(started) == 2
        # the same count an hour later: asked again (a gc.auto changed meanwhile counts)
        state = git.git_dir_of(store.home) / git.GC_STATE
        an_hour_ago = time.time() - git.GC_ASK_AGAIN - 1
        os.utime(state, (an_hour_ago, an_hour_ago))
        git.pack_when_due(store.home)
    assert len(started) == 3


def test_a_gc_killed_at_any_point_is_got_past_by_the_next_commands(
        project: Project, cli: object) -> None:
    """kill -9 of `git gc` and everything it started, at random points: each next command
    (`cortex new`, `index regen`) succeeds, fsck is clean, every atom is in HEAD; then the
    store, set to gc.auto 30, packs itself again (what the kills left does not stop it)."""
    import random
    import signal

    store = project.store
    home = store.home
    run = lambda *args: cli("--home", str(home), *args)  # type: ignore[operator] # noqa: E731
    rng = random.Random(5)
    assert commit_paths(store, notes(store, 300), "notes")
    start = time.monotonic()
    sh(home, "gc", "-q")
    took = time.monotonic() - start
    summaries = []
    for k in range(6):
        (store.context / "notes" / f"m{k}.md").write_text(f"more {k}\n")  # (for gc to pack)
        assert run("commit").exit_code == 0
        gc = subprocess.Popen(["git", "gc", "--quiet"], cwd=home, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0, took))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(gc.pid, signal.SIGKILL)
        gc.wait()
        summaries.append(f"Probe number {k} of the killed collector")
        done = run("new", "exp", "-p", "flywheel", "-s", summaries[-1], "-t", "a") \
            if k % 2 else run("index", "regen", "--all")
        assert done.exit_code == 0, done.stderr
        assert porcelain(home) == "" and sh(home, "diff", "--cached", "--stat") == ""
        sh(home, "fsck", "--no-progress")
    listed = sh(home, "grep", "-h", "^summary:", "HEAD", "--", "context/projects")
    assert all(listed.count(f"summary: {s}\n") == 1 for s in summaries[1::2])
    sh(home, "config", "gc.auto", "30")
    for i, path in enumerate(notes(store, 800)):  # (git's rule: 2+ loose in objects/17)
        path.write_text(f"note {i} again\n")
    assert run("commit").exit_code == 0
    packed(home)
    assert not git.gc_leftovers(home)
    sh(home, "fsck", "--no-progress")


@pytest.mark.parametrize("shape", ["loose", "packed", "detached", "linked worktree"])
def test_a_commit_builds_on_head_however_git_stores_it(
        store: Store, tmp_path: Path, shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """HEAD read from git's files (a loose ref, packed-refs after gc, a detached HEAD, the
    main repository's refs from a linked worktree) is the parent git itself names, and no
    `git rev-parse` is run for it."""
    calls: list[str] = []
    run = git.git_run
    monkeypatch.setattr(git, "git_run", lambda home, *args, **kw: calls.append(args[0])
                        or run(home, *args, **kw))
    home = store.home
    if shape == "packed":
        sh(home, "pack-refs", "--all")
        assert not (home / ".git/refs/heads/main").exists()
    elif shape == "detached":
        sh(home, "checkout", "-q", "--detach")
    elif shape == "linked worktree":
        sh(home, "worktree", "add", "-q", "-b", "side", str(tmp_path / "linked"))
        sh(home, "pack-refs", "--all")
        store = Store(tmp_path / "linked")
        home = store.home
    before = sh(home, "rev-parse", "HEAD").strip()
    path = store.context / "OVERVIEW.md"
    path.write_text(f"on a {shape} HEAD\n")
    made = commit_paths(store, [path], "overview")
    assert made and made.commit == sh(home, "rev-parse", "HEAD").strip()
    assert sh(home, "rev-parse", "HEAD~1").strip() == before
    assert porcelain(home) == ""
    assert "update-ref" in calls and "rev-parse" not in calls, calls


def test_the_private_index_is_split_and_a_lost_shared_file_is_rebuilt(store: Store) -> None:
    """cortex's own index is kept in git's split form (your index is not); when its shared
    file is gone, the next commit builds from HEAD instead of failing."""
    home = store.home
    gitdir = git.git_dir_of(home)
    path = store.context / "OVERVIEW.md"
    path.write_text("first\n")
    assert commit_paths(store, [path], "overview")
    shared = list(gitdir.glob("sharedindex.*"))
    assert shared  # the "link" extension names the shared file; your index has none
    assert b"link" in (gitdir / git.PRIVATE_INDEX).read_bytes()
    assert b"link" not in (gitdir / "index").read_bytes()
    for f in shared:
        f.unlink()
    path.write_text("second\n")
    assert commit_paths(store, [path], "overview again")
    assert sh(home, "show", "HEAD:context/OVERVIEW.md") == "second\n"
    assert porcelain(home) == ""
    sh(home, "fsck", "--no-progress")


def _object_without_folder(store: Store, words: str) -> tuple[str, str, Path]:
    """A text whose object's folder `objects/XX` does not exist yet, its id, that folder."""
    for n in range(1000):
        text = f"{words} {n}\n"
        oid = sh(store.home, "hash-object", "--stdin", input=text).strip()
        folder = store.home / ".git" / "objects" / oid[:2]
        if not folder.exists():
            return text, oid, folder
    raise AssertionError("every object folder exists")


def test_a_git_that_lost_its_object_folder_to_a_gc_runs_again(store: Store) -> None:
    """git makes a missing `objects/XX` and tries once; a gc's prune removing that empty
    folder in between made a sync's merge fail in CI. Here the folder is unusable (a
    dangling symlink, so git's mkdir finds it "existing") until a timer frees it."""
    text, oid, folder = _object_without_folder(store, "an atom written while git gc prunes")
    folder.symlink_to(store.home / "no-such-folder")
    threading.Timer(0.3, folder.unlink).start()
    start = time.monotonic()
    written = git.git_run(store.home, "hash-object", "-w", "--stdin", input=text)
    assert written.stdout.strip() == oid and time.monotonic() - start >= 0.25
    assert sh(store.home, "cat-file", "-p", oid) == text


def test_an_object_folder_that_stays_lost_is_a_one_line_error(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(git, "LOCK_WAIT_SECONDS", 0.1)
    text, _, folder = _object_without_folder(store, "never written")
    folder.symlink_to(store.home / "no-such-folder")
    with pytest.raises(GitError, match="unable to create temporary file") as raised:
        git.git_run(store.home, "hash-object", "-w", "--stdin", input=text)
    assert "\n" not in str(raised.value)


def test_a_commit_goes_on_from_its_first_step_begun_early(store: Store) -> None:
    """`start_commit` adds the likely paths to the private index while the caller asks git
    status: the commit holds what it is asked to, as the work tree has it when it is made;
    a path begun but not committed, or ignored, is left out."""
    ideas = store.context / "ideas" / "early"
    ideas.mkdir()
    one, two, three = (ideas / f"{n}.md" for n in ("one", "two", "three"))
    for path in (one, two, three):
        path.write_text(f"{path.stem}\n")
    (ideas / "x.tmp").write_text("ignored\n")  # (the store's .gitignore: *.tmp)
    rel = [f"context/ideas/early/{p.name}" for p in (one, two, three)]
    started = git.start_commit(store, [*rel, "context/ideas/early/x.tmp", "context/ideas"])
    assert started is not None and "context/ideas" not in started.paths  # (a folder)
    two.write_text("two, rewritten after the start\n")
    started.paths.discard(rel[1])  # (what the committer does for what it rewrites)
    sha = git.commit_exactly(store, rel[:2], "ideas", started=started)
    assert sha is not None
    assert sh(store.home, "show", "--name-only", "--format=", "HEAD").split() == sorted(rel[:2])
    assert sh(store.home, "show", f"HEAD:{rel[1]}") == "two, rewritten after the start\n"
    assert porcelain(store.home) == "?? context/ideas/early/three.md\n"
    assert sh(store.home, "diff", "--cached", "--stat") == ""
    started.drop()  # (used: nothing left to let go)
    assert not list(git.git_dir_of(store.home).glob("cortex-index.*"))


def test_a_first_step_begun_before_head_moved_is_let_go(store: Store) -> None:
    ideas = store.context / "ideas"
    (ideas / "one.md").write_text("one\n")
    started = git.start_commit(store, ["context/ideas/one.md"])
    assert started is not None
    (store.home / "README.txt").write_text("yours\n")
    sh(store.home, "add", "README.txt")
    sh(store.home, "commit", "-qm", "yours")  # HEAD moves meanwhile
    assert git.commit_exactly(store, ["context/ideas/one.md"], "one", started=started)
    assert sh(store.home, "show", "--name-only", "--format=", "HEAD").split() == \
        ["context/ideas/one.md"]
    assert sh(store.home, "log", "--format=%s", "-2").split("\n")[:2] == ["one", "yours"]
    assert porcelain(store.home) == ""
    # a first step never used is let go for the next commit, which commits what it is asked
    (ideas / "two.md").write_text("two\n")
    (ideas / "three.md").write_text("three\n")
    unused = git.start_commit(store, ["context/ideas/two.md", "context/ideas/three.md"])
    assert unused is not None
    unused.drop()
    assert not list(git.git_dir_of(store.home).glob("cortex-index.*"))
    assert git.commit_exactly(store, ["context/ideas/three.md"], "three")
    assert sh(store.home, "show", "--name-only", "--format=", "HEAD").split() == \
        ["context/ideas/three.md"]
    assert porcelain(store.home) == "?? context/ideas/two.md\n"


def test_blobs_read_in_one_git_are_the_ones_read_one_by_one(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    home = store.home
    (home / "context/ideas/a name with spaces.md").write_bytes(b"no newline at the end")
    (home / "context/ideas/empty.md").write_bytes(b"")
    commit_paths(store, [home / "context/ideas"], "ideas")
    specs = ["HEAD:context/ideas/a name with spaces.md", "HEAD:context/ideas/empty.md",
             "HEAD:context/OVERVIEW.md", sh(home, "rev-parse", "HEAD:context/OVERVIEW.md").strip(),
             "HEAD:context/ideas", "HEAD:missing.md", "0" * 40, "HEAD:context/OVERVIEW.md"]
    one_by_one = {spec: git.git_blob(home, spec) for spec in specs}
    started: list[list[str]] = []
    run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: started.append(args)
                        or run(args, **kw))
    assert git.git_blobs(home, specs) == one_by_one
    assert len(started) == 1
    assert one_by_one["HEAD:context/ideas/empty.md"] == b""
    assert one_by_one["HEAD:context/ideas"] is None and one_by_one["HEAD:missing.md"] is None


def test_a_spec_ending_in_a_carriage_return_reads_its_own_blob(store: Store) -> None:
    """`git cat-file --batch` reads its input with strbuf_getline, which drops a CR before
    the LF: "HEAD:x\\r" in the batch would name HEAD:x, another file."""
    home = store.home
    (home / "context/ideas/x").write_bytes(b"plain")
    (home / "context/ideas/x\r").write_bytes(b"with a carriage return")
    sh(home, "add", "context/ideas")
    sh(home, "commit", "-q", "-m", "ideas")
    specs = ["HEAD:context/ideas/x\r", "HEAD:context/ideas/x"]
    assert git.git_blobs(home, specs) == {spec: git.git_blob(home, spec) for spec in specs} \
        == {specs[0]: b"with a carriage return", specs[1]: b"plain"}


def test_a_remote_is_one_git_lists_with_a_url_for_ready_and_status_alike(store: Store) -> None:
    """`cortex ready` (worktree_state) took any `remote.*.url` setting for a remote, while
    sync and status took the remotes git lists: a `remote./x.url` (a name git skips) was a
    remote to ready and none to sync."""
    home = store.home
    sh(home, "config", "remote./x.url", "/srv/x.git")
    sh(home, "config", "remote.only-fetch.fetch", "+refs/heads/*:refs/remotes/x/*")
    assert not git.worktree_state(store).has_remote
    assert not sync.status(store).state.has_remote
    sh(home, "remote", "add", "zed", "/srv/zed.git")
    assert git.worktree_state(store).has_remote
    assert sync.status(store).state.has_remote


def test_a_file_whose_name_ends_in_a_carriage_return_is_committed(store: Store) -> None:
    """git's output was read in text mode, whose universal newlines turn a CR into a LF:
    `git status -z` then named "x\n", a file that is not there, and cortex committed
    nothing of "x\r" and said it had (its status said "uncommitted: 1" for ever)."""
    home = store.home
    (home / "context/ideas/x\r").write_bytes(b"with a carriage return")
    assert git.changes(home, ["context/ideas"]) == [("??", "context/ideas/x\r")]
    commit_paths(store, [home / "context/ideas/x\r"], "ideas")
    listed = subprocess.run(["git", "ls-files", "-z", "context/ideas"], cwd=home,
                            capture_output=True, check=True).stdout  # (bytes: see above)
    assert b"context/ideas/x\r" in listed.split(b"\0")
    assert git.changes(home, ["context/ideas"]) == []
