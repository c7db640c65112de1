"""The committer: one write path, commits that hold together, refusals before writing,
interrupted work finished by the next command (cortexfs.commit, cortexfs.interrupt)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import stores
from git_holders import hold_head_lock, hold_index_lock, kill_9, release
from stores import Templates, with_flywheel

from cortexfs import commit, git
from cortexfs.loader import atom_paths
from cortexfs.store import Project, Store


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def pending(store: Store) -> str:
    return sh(store.home, "status", "--porcelain", "--untracked-files=all", "--", "context/")


def index_matches_head(store: Store) -> bool:
    return subprocess.run(["git", "diff", "--cached", "--quiet"], cwd=store.home).returncode == 0


def cortex(home: Path, *args: str, env: dict[str, str] | None = None,
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cortexfs", "--home", str(home), *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=120)


def head_consistent(store: Store) -> None:
    """In HEAD, every atom an index.md lists exists with the summary its row shows."""
    from test_invariant import index_rows

    from cortexfs.escape import cell
    from cortexfs.frontmatter import parse

    files = set(sh(store.home, "ls-tree", "-r", "--name-only", "HEAD").splitlines())
    for rel in sorted(f for f in files if f.endswith("/index.md")):
        folder = rel.rsplit("/", 1)[0]
        for atom_id, target, summary in index_rows(sh(store.home, "show", f"HEAD:{rel}")):
            assert f"{folder}/{target}" in files, f"{rel} lists {atom_id}, missing in HEAD"
            meta = parse(sh(store.home, "show", f"HEAD:{folder}/{target}"), target).meta
            assert cell(meta["summary"]) == summary, (rel, atom_id)


def _committed(s: Store) -> None:
    with_flywheel(s)
    project = s.project("flywheel")
    stores.write_atom(project, "EXP-001", summary="Cache invalidation cut stale reads")
    stores.write_atom(project, "EXP-002", summary="Shard rebalancing doubled tail latency")
    from cortexfs.regen import regenerate

    result = regenerate(s)
    commit.commit_change(s, commit.Change(result.written, "setup"))
    assert pending(s) == ""


@pytest.fixture
def committed(project: Project, templates: Templates) -> Project:
    """The project with two atoms, regenerated and committed (built once per test process
    and copied in: tests/stores.py)."""
    return templates.copy("committed", _committed, project.store.home).project("flywheel")


# --- what a commit holds ---------------------------------------------------------------------

def test_regen_commits_the_atoms_its_index_lists(cli: Any, committed: Project,
                                                 write_atom: Callable[..., Path]) -> None:
    """Was: index.md rows for a hand-written atom that stayed untracked, and for an atom
    edit that stayed uncommitted — a clone of that commit disagreed with itself."""
    store = committed.store
    write_atom("EXP-003", summary="Written by hand")
    edited = committed.root / "experiments" / "EXP-001.md"
    edited.write_text(edited.read_text().replace("Cache invalidation", "Cache eviction"))
    result = cli("index", "regen", "flywheel")
    assert result.exit_code == 0, result.output
    assert pending(store) == "" and index_matches_head(store)
    shown = sh(store.home, "show", "--name-only", "--format=%B", "HEAD")
    assert "EXP-003.md" in shown and "EXP-001.md" in shown and "index.md" in shown
    head_consistent(store)


def test_a_command_commits_what_is_pending_and_says_so(cli: Any, committed: Project) -> None:
    store = committed.store
    atom = committed.root / "experiments" / "EXP-002.md"
    atom.write_text(atom.read_text().replace("Shard rebalancing", "Shard moves"))
    (committed.root / "experiments" / "EXP-001.md").unlink()
    (committed.root / "STATUS.md").write_text("# Status\n\nhand edit\n")
    result = cli("tasks", "add", "write the loader", "-p", "flywheel")
    assert result.exit_code == 0, result.output
    assert "also committed what was pending under context/" in result.stderr
    assert pending(store) == "" and index_matches_head(store)
    message = sh(store.home, "log", "-1", "--format=%B")
    assert message.startswith("tasks: add T-1 — write the loader\n\nAlso commits what was "
                              "pending under context/:")
    assert "EXP-001.md (deleted)" in message and "STATUS.md (edited)" in message
    # the edited summary and the deleted atom: the index went along, regenerated
    head_consistent(store)
    index = sh(store.home, "show", "HEAD:context/projects/flywheel/experiments/index.md")
    assert "EXP-001" not in index and "Shard moves" in index


def test_new_asks_git_early_and_again_only_about_what_it_wrote(
        cli: Any, committed: Project, write_atom: Callable[..., Path]) -> None:
    """`cortex new` runs git status while it works and asks again only about the files it
    wrote: hand edits made before it (an atom edited, one deleted, one new, a governance
    file) are committed with it, the index consistent with them."""
    store = committed.store
    atom = committed.root / "experiments" / "EXP-002.md"
    atom.write_text(atom.read_text().replace("Shard rebalancing", "Shard moves"))
    (committed.root / "experiments" / "EXP-001.md").unlink()
    write_atom("EXP-003", summary="Written by hand")
    (committed.root / "STATUS.md").write_text("# Status\n\nhand edit\n")
    result = cli("new", "exp", "-p", "flywheel", "-s", "Made by new", "-t", "x")
    assert result.exit_code == 0, result.output
    assert pending(store) == "" and index_matches_head(store)
    message = sh(store.home, "log", "-1", "--format=%B")
    for named in ("EXP-001.md (deleted)", "EXP-002.md (edited)", "EXP-003.md (added)",
                  "STATUS.md (edited)"):
        assert named in message
    assert "EXP-004.md" not in message  # the command's own file is not "also" committed
    head_consistent(store)


def test_a_file_the_committer_regenerates_goes_in_as_regenerated(committed: Project) -> None:
    """The commit's first step begins while git status is asked again (git.start_commit);
    a pending index.md that the committer then regenerates goes in as regenerated, not as
    that first step read it."""
    store = committed.store
    index = committed.root / "experiments" / "index.md"
    index.write_text(index.read_text() + "\nedited by hand\n")
    atom = committed.root / "experiments" / "EXP-002.md"
    atom.write_text(atom.read_text().replace("Shard rebalancing", "Shard moves"))
    with commit.transaction(store, ask_early=True) as txn:
        status = committed.root / "STATUS.md"
        status.write_text("# Status\n\nby the command\n")
        txn.add(commit.Change([status], "status"))
    assert txn.result is not None and "context/projects/flywheel/experiments/index.md" in \
        txn.result.regenerated
    assert pending(store) == "" and index_matches_head(store)
    assert "edited by hand" not in sh(store.home, "show",
                                      "HEAD:context/projects/flywheel/experiments/index.md")
    head_consistent(store)
    assert not list(git.git_dir_of(store.home).glob("cortex-index.*"))


def test_a_refused_new_leaves_no_git_of_its_own_running(cli: Any, committed: Project) -> None:
    """The early git status is waited for when the command fails too: none of its git
    processes outlives its hold of the store's git lock."""
    for _ in range(3):
        result = cli("new", "exp", "-p", "flywheel", "-s", "Cache invalidation cut stale reads",
                     "-t", "x", "--strict")
        assert result.exit_code == 1 and "nearly duplicates" in result.stderr
        assert git.git_processes(committed.store.home) == []
        assert not (git.git_dir_of(committed.store.home) / "index.lock").exists()
    assert pending(committed.store) == ""


def test_asked_again_keeps_the_early_answer_but_for_what_was_written(
        committed: Project) -> None:
    store = committed.store
    atom = committed.root / "experiments" / "EXP-002.md"
    rel = "context/projects/flywheel/experiments/EXP-002.md"
    elsewhere = ("??", "context/projects/flywheel/notes.md")  # (not there: git not asked)
    txn = commit.Transaction(store, True, None)
    assert txn.asked_again(None) is None
    assert txn.asked_again([elsewhere]) == [elsewhere]  # wrote nothing
    txn.add(commit.Change([atom]))
    early = [elsewhere, (" M", rel)]
    assert txn.asked_again(early) == [elsewhere]  # the write restored it to HEAD's content
    atom.write_text(atom.read_text() + "\nmore\n")
    assert txn.asked_again([elsewhere]) == [elsewhere, (" M", rel)]
    folder = commit.Transaction(store, True, None)
    folder.add(commit.Change([committed.root / "experiments"]))  # what is under it is asked
    assert folder.asked_again([elsewhere, ("??", f"{rel}x")]) == [elsewhere, (" M", rel)]
    many = commit.Transaction(store, True, None)
    many.add(commit.Change([committed.root / f"f{i}.md" for i in range(commit.ASKED_AGAIN + 1)]))
    assert many.asked_again([elsewhere]) is None
    unlisted = commit.Transaction(store, True, None)
    unlisted.wrote_unlisted()
    assert unlisted.asked_again([elsewhere]) is None
    whole = commit.Transaction(store, True, None)
    whole.add(commit.Change([store.home]))
    assert whole.asked_again([elsewhere]) is None


def test_cortex_commit_names_what_changed(cli: Any, committed: Project,
                                          write_atom: Callable[..., Path]) -> None:
    store = committed.store
    write_atom("EXP-003", summary="A third one")
    (committed.root / "experiments" / "EXP-002.md").unlink()
    (store.context / "ideas" / "graph.md").write_text("an idea\n")
    result = cli("commit")
    assert result.exit_code == 0, result.output
    subject = sh(store.home, "log", "-1", "--format=%s").strip()
    assert subject.startswith("commit: ")
    for part in ("add EXP-003", "remove EXP-002", "add ideas/graph.md"):
        assert part in subject, subject
    assert pending(store) == "" and index_matches_head(store)
    head_consistent(store)
    again = cli("commit", "-m", "nothing")
    assert again.exit_code == 0 and "nothing to commit under context/" in again.stdout
    (store.context / "ideas" / "graph.md").write_text("changed\n")
    named = cli("commit", "-m", "ideas: graph")
    assert named.exit_code == 0 and sh(store.home, "log", "-1", "--format=%s") == \
        "ideas: graph\n"
    empty = cli("commit", "-m", " ")
    assert empty.exit_code == 1 and "the commit message is empty" in empty.stderr


def test_never_commits_outside_context_nor_your_staged_work(cli: Any, committed: Project,
                                                            ) -> None:
    store = committed.store
    (store.home / "notes.txt").write_text("mine\n")
    sh(store.home, "add", "notes.txt")
    (store.home / "draft.txt").write_text("not staged\n")
    result = cli("new", "exp", "-p", "flywheel", "-s", "Something new", "-t", "x")
    assert result.exit_code == 0, result.output
    shown = sh(store.home, "show", "--name-only", "--format=", "HEAD").split()
    # the atom, and the generated files that list it (`new` regenerates its project)
    assert "context/projects/flywheel/experiments/EXP-003.md" in shown
    assert "context/projects/flywheel/experiments/index.md" in shown
    assert all(p.startswith("context/") for p in shown)
    status = sh(store.home, "status", "--porcelain", "--untracked-files=all")
    assert "A  notes.txt" in status and "?? draft.txt" in status
    assert pending(store) == ""


def test_an_index_commit_brings_pending_atoms_and_the_log_commit_only_logs(
        committed: Project, write_atom: Callable[..., Path]) -> None:
    """commit_paths (sync, the access-log committer) applies the rule to given paths."""
    store = committed.store
    write_atom("EXP-003", summary="Untracked")
    log = committed.access_log
    log.parent.mkdir(exist_ok=True)
    log.write_text('{"file": "EXP-001.md", "tool": "Read", "ts": "2026-03-09T10:00:00Z"}\n')
    assert commit.commit_paths(store, [log], "chore: update access log")
    assert sh(store.home, "show", "--name-only", "--format=", "HEAD").split() == [
        str(log.relative_to(store.home))]
    index = committed.root / "experiments" / "index.md"
    index.write_text(index.read_text() + "\n")
    done = commit.commit_paths(store, [index], "index: regenerate flywheel")
    assert done is not None and "context/projects/flywheel/experiments/EXP-003.md" in done.paths
    head_consistent(store)


def test_a_failing_commit_undoes_a_new_atom_and_says_so(cli: Any, committed: Project,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from cortexfs.errors import GitError

    def broken(*args: Any, **kwargs: Any) -> None:
        raise GitError("git commit-tree failed: fatal: simulated")

    monkeypatch.setattr(git, "commit_exactly", broken)
    # the regenerated files' "Last updated" second is not HEAD's: put back, they must be
    # HEAD's byte for byte (that second included)
    store, then = committed.store, "> Last updated: 2000-01-01T00:00:00Z"
    for rel in sh(store.home, "grep", "-l", "^> Last updated: ", "--", "context").split():
        path = store.home / rel
        path.write_text(re.sub(r"(?m)^> Last updated: .*$", then, path.read_text()))
    sh(store.home, "commit", "-qam", "an old regeneration")
    result = cli("new", "exp", "-p", "flywheel", "-s", "Never kept", "-t", "x")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: git commit-tree failed: fatal: simulated; cortex "
                                    "undid what it had written (context/projects/flywheel/"
                                    "experiments/EXP-003.md), so nothing is half-done")
    assert not (committed.root / "experiments" / "EXP-003.md").exists()
    tasks_file = committed.root / "TASKS.yaml"
    before = tasks_file.read_bytes()
    result = cli("tasks", "add", "never kept", "-p", "flywheel")
    assert result.exit_code == 1 and "TASKS.yaml" in result.stderr
    assert tasks_file.read_bytes() == before
    assert pending(committed.store) == ""


def test_a_refused_ref_update_leaves_your_index_as_head(committed: Project,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Your index is updated before HEAD moves; when HEAD cannot move, it is put back."""
    from cortexfs.errors import GitError

    store = committed.store
    monkeypatch.setattr(git, "LOCK_WAIT_SECONDS", 0.1)
    head = git.head_commit(store.home)
    atom = committed.root / "experiments" / "EXP-001.md"
    atom.write_text(atom.read_text() + "\nmore\n")
    holder = hold_head_lock(store.home)
    try:
        with pytest.raises(GitError, match="git is busy: .*HEAD.lock has been held"):
            git.commit_exactly(store, ["context/projects/flywheel/experiments/EXP-001.md"], "x")
    finally:
        release(holder)
    assert git.head_commit(store.home) == head and index_matches_head(store)


# --- git's lock files ------------------------------------------------------------------------

@pytest.mark.parametrize("hold", [hold_index_lock, hold_head_lock])
def test_cortex_new_after_a_killed_git_commits_and_notes_the_stale_lock(
        committed: Project, hold: Callable[[Path], subprocess.Popen[str]]) -> None:
    """Was: `git is busy` after 10 s, exit 1 — with the atom in HEAD while your index staged
    its deletion (index.lock), or the atom written and not committed (HEAD.lock)."""
    store = committed.store
    kill_9(hold(store.home))
    proc = cortex(store.home, "new", "exp", "-p", "flywheel", "-s", "After a crash", "-t", "x")
    assert proc.returncode == 0, proc.stderr
    assert "cortex: removed the stale git lock" in proc.stderr
    assert "After a crash" in sh(store.home, "log", "-1", "--format=%s")
    assert pending(store) == "" and index_matches_head(store)


def test_a_live_git_is_waited_for_then_refused_before_writing(
        cli: Any, committed: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    store = committed.store
    monkeypatch.setattr(git, "LOCK_WAIT_SECONDS", 0.1)
    holder = hold_index_lock(store.home)
    try:
        result = cli("new", "exp", "-p", "flywheel", "-s", "Waits", "-t", "x")
    finally:
        release(holder)
    assert result.exit_code == 1
    assert re.match(rf"error: git is busy: \S+index.lock has been held for 0s by pid "
                    rf"{holder.pid} \(git update-index --stdin\) working in \S+; wait for it "
                    r"to finish \(or stop it\), then run the command again", result.stderr)
    assert not (committed.root / "experiments" / "EXP-003.md").exists()
    assert pending(store) == ""


def test_kill_9_of_cortex_is_finished_by_the_next_command(committed: Project) -> None:
    store = committed.store
    args = [sys.executable, "-m", "cortexfs", "--home", str(store.home), "new", "exp", "-p",
            "flywheel", "-t", "x", "-s"]
    # kill -9 at points inside a run, placed by how long a whole one takes here (fixed
    # delays of 0.25-0.6 s mostly fell after a run had ended)
    start = time.monotonic()
    assert subprocess.run([*args, "whole"], capture_output=True).returncode == 0
    took = time.monotonic() - start
    for i, part in enumerate((0.4, 0.6, 0.8, 0.95)):
        proc = subprocess.Popen([*args, f"killed {i}"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(part * took)
        proc.kill()
        proc.wait()
    done = cortex(store.home, "new", "exp", "-p", "flywheel", "-s", "the next one", "-t", "x")
    assert done.returncode == 0, done.stderr
    assert pending(store) == "" and index_matches_head(store)
    summaries = [p.read_text().split("summary: ")[1].split("\n")[0]
                 for _, p in atom_paths(committed)]
    assert len(summaries) == len(set(summaries))  # nothing written twice
    head_consistent(store)


# --- interrupted work --------------------------------------------------------------------------

def test_sigint_during_regen_stops_at_a_file_boundary_and_the_next_regen_finishes(
        cli: Any, store: Store, write_atom: Callable[..., Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cortexfs import forked, interrupt, scaffold
    from cortexfs.regen.run import Run

    for name in ("alpha", "beta", "gamma"):
        proj, _ = scaffold.new_project(store, name)
        for n in (1, 2):
            write_atom(f"EXP-00{n}", summary=f"{name} {n}", target=proj)
    assert cli("commit").exit_code == 0
    real = Run.regenerate_project
    calls: list[str] = []

    def then_ctrl_c(self: Any, project: Project, result: Any) -> None:
        real(self, project, result)
        calls.append(project.name)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the first project is done

    monkeypatch.setattr(Run, "regenerate_project", then_ctrl_c)
    monkeypatch.setattr(forked, "can_fork", lambda: False)
    result = cli("index", "regen", "--all")
    assert result.exit_code == interrupt.EXIT_CODE, result.output
    assert result.stderr == ("interrupted: 1 of 4 projects regenerated (3 file(s) written), "
                             "not committed, run `cortex index regen --all` again\n")
    assert calls == ["alpha"] and pending(store) != ""
    monkeypatch.setattr(Run, "regenerate_project", real)
    again = cli("index", "regen", "--all")
    assert again.exit_code == 0, again.output
    assert pending(store) == "" and index_matches_head(store)
    head_consistent(store)


def test_the_next_regen_commits_what_is_up_to_date_but_uncommitted(cli: Any,
                                                                   committed: Project) -> None:
    """Was: "indexes are up to date", the files a killed regen wrote left uncommitted."""
    store = committed.store
    atom = committed.root / "experiments" / "EXP-001.md"
    atom.write_text(atom.read_text().replace("Cache invalidation", "Cache warming"))
    assert cli("index", "regen", "--all", "--no-commit").exit_code == 0
    assert pending(store) != ""
    result = cli("index", "regen", "--all")
    assert result.exit_code == 0
    assert re.search(r"indexes are up to date \(1 project\); committed \d+ pending files",
                     result.stdout), result.stdout
    assert pending(store) == "" and index_matches_head(store)


def test_abandoned_temporaries_are_removed_after_a_killed_cortex(cli: Any,
                                                                 committed: Project) -> None:
    """The store's git lock records its holder: the next holder after a kill -9 removes the
    temporary files whose writer is gone (was: 5,137 .tmp files after 29 killed regens)."""
    store = committed.store
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from cortexfs import git; "
        "from cortexfs.store import Store\n"
        "with git.git_lock(Store(Path(sys.argv[1]))):\n"
        "    print('held', flush=True); time.sleep(60)"), str(store.home)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    holder.kill()  # kill -9 while it holds the store's lock
    holder.wait()
    folder = committed.root / "experiments"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    abandoned = folder / f".EXP-001.md.{dead.pid}.k3j4h5g6.tmp"
    live = folder / f".EXP-002.md.{os.getpid()}.a1b2c3d4.tmp"
    old = folder / ".index.md.zz9yy8xx.tmp"  # an older cortex's, without a pid
    young = folder / ".index.md.aa1bb2cc.tmp"
    merged = store.home / ".git" / f"cortex-merge-{dead.pid}-ours"  # (git.merge_file's)
    merging = store.home / ".git" / f"cortex-merge-{os.getpid()}-base"
    split = store.home / ".git" / "sharedindex_k3J4h5"  # (git's, killed in the split index)
    for path in (abandoned, live, old, young, merged, merging, split):
        path.write_text("partial")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    # the killed git's file predates the next lock holder; written a moment before it, its
    # stamp could equal the lock's (the file system's clock is coarse; on tmpfs, with no fsync
    # in between, it did)
    os.utime(split, (time.time() - 60, time.time() - 60))
    result = cli("new", "exp", "-p", "flywheel", "-s", "The next command", "-t", "x")
    assert result.exit_code == 0, result.output
    assert not abandoned.exists() and not old.exists() and not merged.exists()
    assert not split.exists()
    assert live.exists() and young.exists() and merging.exists()
    abandoned.write_text("again, but no holder was killed: nothing is scanned")
    assert cli("new", "exp", "-p", "flywheel", "-s", "Another", "-t", "x").exit_code == 0
    assert abandoned.exists()
    assert cli("commit").exit_code == 0  # `cortex commit` always looks
    assert not abandoned.exists()


def test_sigterm_during_new_before_the_write_leaves_nothing(committed: Project) -> None:
    """A signal arriving in the pre-flight: the command stops before it writes."""
    store = committed.store
    proc = subprocess.Popen([sys.executable, "-c", _SELF_SIGNAL, str(store.home)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == (
        f"interrupted: nothing was written, run `cortex --home {store.home} new exp -p "
        "flywheel -s 'Not now' -t x` again")
    assert not (committed.root / "experiments" / "EXP-003.md").exists()
    assert pending(store) == ""


def test_sigint_after_new_wrote_its_index_puts_the_index_back(committed: Project) -> None:
    """Was (benchmarks/invariant.py under load): a Ctrl-C between `cortex new`'s index write
    and its commit removed the atom but kept the index listing it (the regeneration meant to
    follow the undo was cut by the same signal), and the next command committed that index:
    HEAD listed an atom HEAD did not hold."""
    store = committed.store
    proc = subprocess.Popen([sys.executable, "-c", _SIGNAL_AFTER_REGEN, str(store.home)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("interrupted: nothing was kept"), err
    assert not (committed.root / "experiments" / "EXP-003.md").exists()
    assert pending(store) == ""  # was: index.md, OVERVIEW.md… listing EXP-003
    result = cortex(store.home, "tasks", "add", "the next command", "-p", "flywheel")
    assert result.returncode == 0, result.stderr
    assert pending(store) == "" and index_matches_head(store)
    head_consistent(store)


_SIGNAL_AFTER_REGEN = """
import os, signal, sys
from cortexfs import interrupt, lifecycle
real = lifecycle.regenerate
def regenerate(*args, **kw):
    change = real(*args, **kw)
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C once the index lists the new atom
    return change
lifecycle.regenerate = regenerate
interrupt.install()
sys.argv = ["cortex", "--home", sys.argv[1], "new", "exp", "-p", "flywheel", "-s", "Cut",
            "-t", "x"]
from cortexfs.cli.main import run
run()
"""


def test_a_pending_index_listing_a_deleted_untracked_atom_is_regenerated(
        cli: Any, committed: Project) -> None:
    """Was: `new --no-commit`, the new atom deleted by hand, `cortex commit`: git status
    shows no atom change (the atom was never tracked), so the index listing it was
    committed as it was."""
    store = committed.store
    result = cli("new", "exp", "-p", "flywheel", "-s", "Not kept", "-t", "x", "--no-commit")
    assert result.exit_code == 0, result.output
    (committed.root / "experiments" / "EXP-003.md").unlink()
    assert cli("commit").exit_code == 0
    head_consistent(store)
    assert pending(store) == "" and index_matches_head(store)


_SELF_SIGNAL = """
import os, signal, sys
from cortexfs import git, interrupt
real = git.preflight
def preflight(store, **kw):
    real(store, **kw)
    os.kill(os.getpid(), signal.SIGTERM)
git.preflight = preflight
interrupt.install()
sys.argv = ["cortex", "--home", sys.argv[1], "new", "exp", "-p", "flywheel", "-s", "Not now",
            "-t", "x"]
from cortexfs.cli.main import run
run()
"""


# --- refusals before writing -------------------------------------------------------------------

@pytest.fixture
def no_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.delenv(f"GIT_{role}_NAME")
        monkeypatch.delenv(f"GIT_{role}_EMAIL")
    monkeypatch.delenv("EMAIL", raising=False)
    # without useConfigOnly git guesses an identity from the host name on some machines
    (tmp_path / "home" / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[user]\n\tuseConfigOnly = true\n")


def test_init_without_identity_writes_nothing(cli: Any, tmp_path: Path,
                                             no_identity: None) -> None:
    result = cli("init")
    assert result.exit_code == 1 and "git has no identity for commits" in result.stderr
    assert not (tmp_path / "cortex").exists()  # was: .git, .gitignore, .gitattributes


@pytest.mark.parametrize("args", [
    ["new", "exp", "-p", "flywheel", "-s", "no identity", "-t", "a"],
    ["tasks", "add", "no identity", "-p", "flywheel"],
    ["decision", "new", "No identity"],
    ["project", "new", "other"],
])
def test_no_identity_refuses_before_writing(cli: Any, committed: Project, no_identity: None,
                                            args: list[str]) -> None:
    result = cli(*args)
    assert result.exit_code == 1 and "git has no identity for commits" in result.stderr
    assert "--no-commit" in result.stderr
    assert pending(committed.store) == ""


def test_mcp_add_atom_refuses_before_writing(committed: Project, no_identity: None) -> None:
    from cortexfs import mcp_server
    from cortexfs.errors import GitError

    with pytest.raises(GitError, match="no identity"):
        mcp_server.add_atom(committed.store, "exp", "flywheel", "From an agent", ["x"])
    assert pending(committed.store) == ""


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A tmpfs of its own (root only: elsewhere the test is skipped)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
            capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(disk: Path, leave: int) -> None:
    filler = disk / "filler"
    filler.unlink(missing_ok=True)
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave))


def test_a_full_disk_refuses_or_commits_never_half(small_disk: Path) -> None:
    """Was: on a nearly full disk `cortex new` wrote the atom, then failed in git."""
    home = small_disk / "store"
    _fill(small_disk, 16 << 10)
    refused = cortex(home, "init")
    assert refused.returncode == 1 and "free some space" in refused.stderr, refused.stderr
    assert not home.exists()  # nothing written: not even .git
    (small_disk / "filler").unlink()
    for args in (["init"], ["project", "new", "flywheel"]):
        assert cortex(home, *args).returncode == 0
    store = Store(home)
    outcomes = []
    for leave in (0, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20):
        _fill(small_disk, leave)
        before = sorted(p.name for p in (store.projects_dir / "flywheel" / "experiments")
                        .glob("EXP-*.md"))
        head = git.head_commit(home)
        proc = cortex(home, "new", "exp", "-p", "flywheel", "-s", f"left {leave}", "-t", "x")
        after = sorted(p.name for p in (store.projects_dir / "flywheel" / "experiments")
                       .glob("EXP-*.md"))
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
        if proc.returncode == 0:
            outcomes.append("committed")
            assert len(after) == len(before) + 1 and git.head_commit(home) != head
        else:
            outcomes.append("refused")
            assert proc.returncode == 1 and "space" in proc.stderr, proc.stderr
            assert after == before and git.head_commit(home) == head
        (small_disk / "filler").unlink()
        assert pending(store) == "" and index_matches_head(store)
    assert "refused" in outcomes and "committed" in outcomes, outcomes


def test_a_read_only_disk_refuses_before_writing(small_disk: Path) -> None:
    home = small_disk / "store"
    for args in (["init"], ["project", "new", "flywheel"]):
        assert cortex(home, *args).returncode == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    try:
        for args in (["new", "exp", "-p", "flywheel", "-s", "ro", "-t", "x"],
                     ["tasks", "add", "ro", "-p", "flywheel"], ["commit"]):
            proc = cortex(home, *args)
            assert proc.returncode == 1, proc.stderr
            assert "read-only file system" in proc.stderr and "Traceback" not in proc.stderr
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    assert pending(Store(home)) == ""


# --- every fix names a command that works ------------------------------------------------------

def test_every_fix_of_ready_validate_and_status_names_a_command_that_works(
        committed: Project, write_atom: Callable[..., Path]) -> None:
    store = committed.store
    write_atom("EXP-003", summary="Pending by hand")  # uncommitted, and indexes out of date
    (store.context / "ideas" / "CORTEX.md").unlink()  # a folder without its CORTEX.md
    outputs = []
    for args in (["ready", "--format", "json"], ["validate", "--format", "json"], ["status"],
                 ["ready"]):
        outputs.append(cortex(store.home, *args).stdout)
    fixes = set(re.findall(r"run `(cortex [^`]+)`", "\n".join(outputs)))
    assert {"cortex commit", "cortex index regen --all"} <= fixes, fixes
    assert not any("sync" in f for f in fixes), fixes  # no remote: sync would only commit
    for fix in sorted(fixes):
        proc = cortex(store.home, *fix.split()[1:])
        assert proc.returncode == 0, (fix, proc.stderr)
    assert cortex(store.home, "ready").returncode in (0, 1)
    report = json.loads(cortex(store.home, "ready", "--format", "json").stdout)
    assert not [g for g in report["gaps"] if g["check"] in ("uncommitted", "derived")]
