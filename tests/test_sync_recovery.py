"""A `cortex sync` killed at the worst moments, then ordinary work, then the next sync.

Real processes, real git, real SIGKILLs: at a checkpoint of sync itself, at a chosen git
command (a `git` wrapper first on PATH), or while `git merge` writes files (a smudge
filter that kills the whole process group, git included, at the Nth file). The next
`cortex sync` alone must put everything right: nothing lost, nothing duplicated.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from stores import Templates
from test_sync import (
    PROJECT,
    Clone,
    _add_body,
    check_invariants,
    cluster,
    copied_cluster,
    cortex,
    cortex_process,
    make_cluster,
    settle,
    sh,
)

from cortexfs import accesslog, autocommit, git, layout, renumber
from cortexfs import sync as sync_lib
from cortexfs.store import Project, Store


def _kill_at_git(tmp_path: Path, pattern: str, after: bool) -> dict[str, str]:
    """Env for a sync that is SIGKILLed (its cortex process) just before the first git
    command whose arguments contain `pattern` runs, or (`after`) just before the git
    command that follows it."""
    real = shutil.which("git")
    assert real
    folder = tmp_path / "wrapper"
    folder.mkdir(exist_ok=True)
    wrapper = folder / "git"
    wrapper.write_text(f"""#!/bin/sh
kill_now() {{ : > "$KILL_MARK.done"; kill -9 $PPID; exit 137; }}
if [ ! -f "$KILL_MARK.done" ]; then
  case "$*" in
    *"$KILL_AT"*) if [ -z "$KILL_AFTER" ]; then kill_now; fi; : > "$KILL_MARK" ;;
    *) if [ -f "$KILL_MARK" ]; then kill_now; fi ;;
  esac
fi
exec {real} "$@"
""")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}", "KILL_AT": pattern,
            "KILL_AFTER": "1" if after else "", "KILL_MARK": str(tmp_path / "killed-at-git")}


def _sync_killed_while_git_writes(c: Clone, tmp_path: Path, nth: int,
                                  git_only: bool = False) -> int:
    """Run `cortex sync`; the nth file git writes into the work tree SIGKILLs that git and
    the cortex that runs it (with `git_only`, git alone). The sync's return code."""
    killer = tmp_path / "smudge-killer"
    mark = tmp_path / "smudged"
    # the filter's parent is git, whose parent is cortex (fields 4 of /proc/PID/stat)
    victims = '$PPID' if git_only else '$(cut -d" " -f4 /proc/$PPID/stat) $PPID'
    killer.write_text(f"""#!/bin/sh
n=$(( $(cat "{mark}" 2>/dev/null || echo 0) + 1 )); echo $n > "{mark}"
if [ -n "$KILL_SMUDGE_AT" ] && [ "$n" -ge "$KILL_SMUDGE_AT" ]; then kill -9 {victims}; fi
exec cat
""")
    killer.chmod(0o755)
    attributes = git.git_dir_of(c.home) / "info" / "attributes"
    attributes.parent.mkdir(exist_ok=True)
    sh(c.home, "config", "filter.smudge-killer.smudge", str(killer))
    attributes.write_text("* filter=smudge-killer\n")
    try:
        proc = subprocess.run([sys.executable, "-m", "cortexfs", "--home", str(c.home), "sync"],
                              env={**os.environ, "KILL_SMUDGE_AT": str(nth)},
                              capture_output=True, text=True)
    finally:
        attributes.unlink()
        sh(c.home, "config", "--unset", "filter.smudge-killer.smudge")
    return proc.returncode


def _resolve_keeping_both(c: Clone, *paths: Path) -> None:
    """What the user does after a reported conflict: merge, keep both sides' lines of the
    body (this side's of the frontmatter, where two values of a key cannot both stay),
    commit."""
    subprocess.run(["git", "merge", "-q", "origin/main"], cwd=c.home, capture_output=True)
    for path in paths:
        kept, fences, side = [], 0, ""
        for line in path.read_text().splitlines(keepends=True):
            if line.startswith(("<<<<<<<", "=======", ">>>>>>>")):
                side = {"<": "ours", "=": "theirs", ">": ""}[line[0]]
                continue
            fences += line == "---\n"
            if side == "theirs" and fences < 2:
                continue  # the frontmatter: this side's value
            kept.append(line)
        path.write_text("".join(kept))
    sh(c.home, "add", "-A", "context")
    sh(c.home, "commit", "-q", "--no-edit")


def _atom(c: Clone, atom_id: str) -> Path:
    return c.project_root / "experiments" / f"{atom_id}.md"


def _diverge(tmp_path: Path, templates: Templates) -> tuple[Clone, Clone, str, str]:
    """a and b share EXP-001 and EXP-002; a appended to both and pushed; b has a commit of
    its own and unpushed log lines (made once per test process, copied in)."""
    (a, b), (e1, e2) = copied_cluster(tmp_path, templates, "diverged", _diverged)
    return a, b, e1, e2


def _diverged(root: Path) -> tuple[list[Clone], list[str]]:
    a, b = make_cluster(root)
    e1, e2 = a.new("exp", "shared"), a.new("exp", "shared too")
    a.sync()
    b.sync()
    b.summaries.clear()
    _add_body(a, e1, "Alpha adds.\n")
    _add_body(a, e2, "Alpha on two.\n")
    a.read_atom(e1, 2)
    a.sync()
    b.new("k", "beta knows", "evidence", e1)
    b.read_atom(e1, 2)
    return [a, b], [e1, e2]


def test_a_merge_killed_then_an_edit_to_a_file_it_merged(tmp_path: Path,
                                                         templates: Templates) -> None:
    """(a) Killed right after `git merge`; then the user edits an atom the merge changed
    and the hook appends: the next sync finishes the merge, keeping the edit and the lines."""
    a, b, e1, _ = _diverge(tmp_path, templates)
    assert b.sync(check=False, env={"CORTEX_SYNC_FAULT": "merge-started"}).returncode == -9
    assert git.in_progress(b.home) == "merge"
    _atom(b, e1).write_text(_atom(b, e1).read_text() + "Beta's note.\n")
    b.read_atom(e1, 3, summary="shared")
    proc = b.sync()
    assert "recovered: finished the merge an interrupted sync had started" in proc.stderr
    b.read_atom(e1, 1)
    settle([a, b])
    check_invariants([a, b])
    for c in (a, b):
        assert _atom(c, e1).read_text().endswith("Alpha adds.\nBeta's note.\n")


def test_a_conflicted_merge_killed_then_edits_is_aborted_losing_nothing(
        tmp_path: Path, templates: Templates) -> None:
    """(a) The killed merge has a real conflict: recovery sets the edits made since aside,
    aborts, writes them back; the next sync reports the conflict with nothing lost."""
    a, b, e1, e2 = _diverge(tmp_path, templates)
    _add_body(b, e1, "Beta disagrees.\n")  # conflicts with "Alpha adds."
    assert b.sync(check=False, env={"CORTEX_SYNC_FAULT": "merge-started"}).returncode == -9
    assert git.in_progress(b.home) == "merge"
    # after the kill: an edit to a file the merge changed, log lines, and an edit to the
    # conflicted file itself (which `git merge --abort` alone would reset silently)
    _atom(b, e2).write_text(_atom(b, e2).read_text() + "Beta's own line.\n")
    b.read_atom(e2, 2, summary="shared too")  # (EXP-001 has conflict markers)
    _atom(b, e1).write_text(_atom(b, e1).read_text() + "Kept by hand.\n")
    proc = b.sync(check=False)
    assert proc.returncode == 1, proc.stderr
    assert "recovered: aborted the merge an interrupted sync had started" in proc.stderr
    # the edit on top of the merged EXP-002 holds the upstream's line too: at the next
    # merge it meets that line as a change of its own, next to it (reported, not lost)
    assert "EXP-001.md, context/projects/flywheel/experiments/EXP-002.md changed on both " \
        "sides" in proc.stderr
    assert git.in_progress(b.home) is None
    assert git.read_sync_state(b.home).get("aside") is None
    assert _atom(b, e2).read_text().endswith("Alpha on two.\nBeta's own line.\n")
    assert "Kept by hand.\n" in _atom(b, e1).read_text()
    _resolve_keeping_both(b, _atom(b, e1), _atom(b, e2))
    settle([a, b])
    check_invariants([a, b])
    text = _atom(a, e1).read_text()
    assert "Alpha adds." in text and "Beta disagrees." in text and "Kept by hand." in text


def _same_id(root: Path) -> tuple[list[Clone], list[str]]:
    """a pushed its EXP-001; b made an EXP-001 of its own (made once per test process)."""
    a, b = make_cluster(root)
    a.new("exp", "alpha one")
    a.read_atom("EXP-001", 2)
    a.sync()
    b.new("exp", "beta one")
    b.read_atom("EXP-001", 2)
    return [a, b], []


@pytest.mark.parametrize("after", [True, False], ids=["after-update-ref", "before-update-ref"])
def test_a_renumbering_commit_killed_around_its_ref_update(tmp_path: Path, templates: Templates,
                                                           after: bool) -> None:
    """(b) The renumbering commit killed just after it moved HEAD (the old order: before the
    user's index was brought up to date — a staged rename every later sync tripped on), or
    just before (the new order: the user's index is updated first): the next sync goes
    through, and the user's index matches HEAD."""
    a, b = copied_cluster(tmp_path, templates, "same-id", _same_id)[0]
    env = _kill_at_git(tmp_path, "update-ref -m commit: sync: renumber", after)
    assert b.sync(check=False, env=env).returncode == -9
    assert (tmp_path / "killed-at-git.done").exists()
    journal = git.read_sync_state(b.home).get("journal") or {}
    b.read_atom("EXP-002", 1)
    proc = b.sync()
    if journal.get("op") == "renumber":
        assert "recovered: finished an interrupted renumbering (flywheel EXP-001 → EXP-002)" \
            in proc.stderr
    settle([a, b])
    check_invariants([a, b])
    assert sh(b.home, "diff", "--cached", "--name-only") == ""


@pytest.mark.parametrize(("nth", "then"), [(1, "atom"), (3, "atom"), (3, "logs"),
                                           (3, "cortex new")])
def test_a_merge_killed_while_git_wrote_files_then_a_commit(tmp_path: Path,
                                                            templates: Templates, nth: int,
                                                            then: str) -> None:
    """(c) git merge killed half-way through writing files, then a commit moves HEAD: the
    merge did not land (its upstream is no ancestor of HEAD), so the half-written files go
    back and none is committed as a local change by sync. The hook's auto-commit of the
    half-merged log (which holds the upstream's lines) cannot be undone: the merge then
    keeps each line once."""
    a, b, e, _ = _diverge(tmp_path, templates)
    assert _sync_killed_while_git_writes(b, tmp_path, nth) == -9
    assert git.read_sync_state(b.home)["journal"]["op"] == "merge"
    assert git.in_progress(b.home) is None  # killed before git wrote MERGE_HEAD
    assert sh(b.home, "status", "--porcelain", "--", "context") != ""  # half written
    # the killed git's index.lock is stale: removing it is git.py's business (issue 11 A)
    (git.git_dir_of(b.home) / "index.lock").unlink(missing_ok=True)
    b.read_atom("K-001", 1)  # (EXP-001 may be missing: git removes a file, then writes it)
    if then == "atom":
        b.new("exp", "after the kill")  # commits its atom alone
    elif then == "logs":
        assert autocommit.commit_logs(str(b.home))  # the logs alone
    else:  # commits everything pending under context/: the killed sync is recovered first
        cortex(b.home, "new", "exp", "-p", PROJECT, "-s", "after the kill", "-t", "t")
        b.summaries.append("after the kill")
    proc = b.sync()
    assert "commit local changes" not in proc.stdout
    settle([a, b])
    check_invariants([a, b])  # (every atom, and every log line exactly once)
    assert "sync: commit local changes" not in sh(b.home, "log", "--format=%s")
    assert _atom(b, e).read_text().endswith("Alpha adds.\n")


def test_a_merge_whose_git_was_killed_alone_is_put_back_at_once(tmp_path: Path,
                                                                templates: Templates) -> None:
    """git merge killed (an OOM kill, say) while cortex lives on: the sync puts back what git
    had half written before it reports the failure, and the next sync goes through."""
    a, b, e, _ = _diverge(tmp_path, templates)
    assert _sync_killed_while_git_writes(b, tmp_path, 3, git_only=True) == 1
    (git.git_dir_of(b.home) / "index.lock").unlink(missing_ok=True)  # (see above)
    assert git.read_sync_state(b.home).get("journal") in (None, {})
    assert sh(b.home, "status", "--porcelain", "--", "context") == ""
    b.sync()
    settle([a, b])
    check_invariants([a, b])
    assert _atom(b, e).read_text().endswith("Alpha adds.\n")


def test_recovery_keeps_an_edit_made_on_top_of_a_half_written_file(tmp_path: Path,
                                                                   templates: Templates) -> None:
    """An atom git had already rewritten, edited by the user before the next sync: the edit
    is the user's and stays (a local change; since it holds the upstream's line too, the
    merge that follows may report it as changed on both sides — reported, never lost)."""
    a, b, e, _ = _diverge(tmp_path, templates)
    assert _sync_killed_while_git_writes(b, tmp_path, 4) == -9  # while writing EXP-002
    (git.git_dir_of(b.home) / "index.lock").unlink(missing_ok=True)
    path = _atom(b, e)
    assert path.read_text().endswith("Alpha adds.\n")  # git had written EXP-001
    path.write_text(path.read_text() + "Beta builds on it.\n")
    proc = b.sync(check=False)
    assert "recovered: undid the files an interrupted merge had half written" in proc.stderr
    if proc.returncode:
        assert "EXP-001.md changed on both sides" in proc.stderr
        assert path.read_text().endswith("Alpha adds.\nBeta builds on it.\n")
        _resolve_keeping_both(b, path)
    settle([a, b])
    check_invariants([a, b])
    assert _atom(a, e).read_text().endswith("Alpha adds.\nBeta builds on it.\n")


def _kill_after_merge_commit_moved_head(c: Clone) -> int:
    """Run `cortex sync`; the `git commit` of its merge is SIGKILLed (with the cortex that
    runs it) right after it moved HEAD, before it removed MERGE_HEAD: from git's
    reference-transaction hook. The sync's return code."""
    hook = git.git_dir_of(c.home) / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    # the hook's parent is git, whose parent is cortex (field 4 of /proc/PID/stat)
    hook.write_text("""#!/bin/sh
if [ "$1" = committed ] && tr '\\0' ' ' < /proc/$PPID/cmdline | grep -q ' commit .*sync: merge'
then kill -9 $(cut -d" " -f4 /proc/$PPID/stat) $PPID; fi
exit 0
""")
    hook.chmod(0o755)
    try:
        return cortex_process(c.home, "sync", check=False).returncode
    finally:
        hook.unlink()


@pytest.mark.parametrize("then", ["sync", "cortex new"])
def test_a_merge_commit_killed_after_it_moved_head(tmp_path: Path,
                                                   templates: Templates, then: str) -> None:
    """The merge's `git commit` killed between moving HEAD and removing MERGE_HEAD (and
    HEAD.lock: a kill between git's rename of the branch's lock and its unlocking of
    HEAD's): the merge is committed, so the next command finishes git's bookkeeping and
    removes the stale lock; it used to refuse, "in the middle of a merge", for ever."""
    a, b, e, _ = _diverge(tmp_path, templates)
    assert _kill_after_merge_commit_moved_head(b) == -9
    assert git.in_progress(b.home) == "merge"
    upstream = sh(b.home, "rev-parse", "origin/main").strip()
    assert sh(b.home, "merge-base", "--is-ancestor", upstream, "HEAD") == ""  # it landed
    lock = git.git_dir_of(b.home) / "HEAD.lock"
    lock.write_text(sh(b.home, "rev-parse", "HEAD"))
    os.utime(lock, (1, 1))  # as old as git left it, long before the next command
    b.read_atom(e, 2)
    if then == "sync":
        proc = b.sync()
        assert "recovered: regenerated the indexes an interrupted sync had not" in proc.stderr
    else:
        cortex(b.home, "new", "exp", "-p", PROJECT, "-s", "after the kill", "-t", "t")
        b.summaries.append("after the kill")
        assert git.in_progress(b.home) is None
        b.sync()
    assert not lock.exists()
    settle([a, b])
    check_invariants([a, b])


def test_a_merge_git_refuses_over_a_log_line_loses_no_line(tmp_path: Path,
                                                           templates: Templates) -> None:
    """git merge that finds an access log changed stashes the change, refuses, resets the
    log and applies the stash again; a line appended between the reset and the apply made
    the apply fail, and the line the stash held was lost (crash.py sync, seed 11, a hook
    line lost with no kill at all). Here a line lands just before the merge (a `git`
    wrapper, at the `update-index --refresh` before it) and another as git writes the log
    (a smudge filter adds it to what git writes: after the reset, on the old code)."""
    a, b, e, _ = _diverge(tmp_path, templates)
    log = b.project_root / "_meta" / layout.ACCESS_LOG
    lines = {}
    for name in ("before-merge", "during-reset"):
        session = f"shared#{b.home.name}#{name}"
        lines[name] = accesslog.format_line(f"{e}.md", "Read", session).decode()
        b.log_lines.append(session)
    real = shutil.which("git")
    assert real
    wrapper = tmp_path / "wrapper" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f"""#!/bin/sh
case "$*" in *update-index*--refresh*)
  if [ ! -f "{tmp_path}/appended" ]; then : > "{tmp_path}/appended"
    printf '%s' '{lines["before-merge"]}' >> "{log}"; fi ;;
esac
exec {real} "$@"
""")
    wrapper.chmod(0o755)
    smudge = tmp_path / "smudge"
    smudge.write_text(f"""#!/bin/sh
cat
if [ ! -f "{tmp_path}/smudged" ]; then : > "{tmp_path}/smudged"
  printf '%s' '{lines["during-reset"]}'; fi
""")
    smudge.chmod(0o755)
    attributes = git.git_dir_of(b.home) / "info" / "attributes"
    attributes.parent.mkdir(exist_ok=True)
    attributes.write_text(f"{layout.ACCESS_LOG} filter=late-line\n")
    sh(b.home, "config", "filter.late-line.smudge", str(smudge))
    try:
        with pytest.MonkeyPatch.context() as env:  # (in-process: cortex's git sees PATH)
            env.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
            b.sync()
    finally:
        attributes.unlink()
        sh(b.home, "config", "--unset", "filter.late-line.smudge")
    assert (tmp_path / "appended").exists() and (tmp_path / "smudged").exists()
    settle([a, b])
    check_invariants([a, b])  # (every log line exactly once)


def test_a_line_in_a_log_git_wrote_is_never_hidden_from_git(tmp_path: Path,
                                                            templates: Templates) -> None:
    """git takes the stat data of a file it writes as it writes it, so a line that reaches
    the new log first (the smudge filter here) is clean to git, in no commit and no `git
    status`, once the index is newer than the file. The clones then counted different reads
    and sent HIPPOCAMPUS.md back and forth on every sync (test_a_merge_git_refuses_over_a_
    log_line_loses_no_line failed so, once in ~60 runs: when a second ticked between git's
    write of the log and of its index). Here the index is made newer at once."""
    b = cluster(tmp_path, templates)[1]
    e = b.new("exp", "read here")
    b.read_atom(e, 2)
    b.sync()
    log = b.project_root / "_meta" / layout.ACCESS_LOG
    rel = str(log.relative_to(b.home))
    smudge = tmp_path / "smudge"
    late = accesslog.format_line(f"{e}.md", "Read", f"shared#{b.home.name}#late").decode()
    smudge.write_text(f"#!/bin/sh\ncat\nprintf '%s' '{late}'\n")
    smudge.chmod(0o755)
    attributes = git.git_dir_of(b.home) / "info" / "attributes"
    attributes.parent.mkdir(exist_ok=True)
    attributes.write_text(f"{layout.ACCESS_LOG} filter=late-line\n")
    sh(b.home, "config", "filter.late-line.smudge", str(smudge))
    index = git.git_dir_of(b.home) / "index"
    with sync_lib.keep_log_appends(b.store):
        log.unlink()
        sh(b.home, "checkout", "--", rel)  # git writes the log, the late line in it
        os.utime(index, (index.stat().st_atime, index.stat().st_mtime + 5))
    attributes.unlink()
    assert log.read_text().endswith(late)
    assert sh(b.home, "status", "--porcelain", "--", rel) == f" M {rel}\n"


def test_an_append_while_a_log_git_wrote_gets_its_new_inode_is_kept(
        store: Store, project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new inode (above) is a read of the log and a rename over it: an append that goes
    ahead between them (Replacing not held: here its lock file cannot be opened) wrote into
    the file about to be replaced, and was lost. It is a renumber.replace_log now, which
    takes what reached the old file before the rename (under its flock) into the new one."""
    log = project.root / "_meta" / layout.ACCESS_LOG
    log.write_bytes(b'{"old": 1}\n')
    guard = store.home / layout.LOCKS / layout.ACCESS_LOGS_LOCK
    guard.parent.mkdir(exist_ok=True)
    guard.unlink(missing_ok=True)
    guard.mkdir()  # (EISDIR: Replacing is not held, appends go ahead)
    real = renumber.write_temp
    children: list[multiprocessing.process.BaseProcess] = []

    def racing(path: Path, data: bytes, **kw: Any) -> Any:
        if path == log:  # a hook's append comes between the read and the rename
            child = multiprocessing.get_context("spawn").Process(
                target=accesslog.append, args=(str(log), [b'{"late": 1}\n']))
            child.start()
            children.append(child)
            fds = Path(f"/proc/{child.pid}/fd")
            while child.is_alive():  # until the child has the log open
                with contextlib.suppress(OSError):
                    if any(os.readlink(f) == str(log) for f in fds.iterdir()):
                        break
            time.sleep(0.02)
        return real(path, data, **kw)

    monkeypatch.setattr(renumber, "write_temp", racing)
    with sync_lib.keep_log_appends(store):
        new = log.with_name("new-copy")
        new.write_bytes(log.read_bytes())
        os.replace(new, log)  # as git writes it: a new file
    for child in children:
        child.join()
    assert children and log.read_bytes() == b'{"old": 1}\n{"late": 1}\n'


def test_a_fetch_that_lost_its_ref_to_a_git_a_killed_sync_left_is_run_again(
        tmp_path: Path, templates: Templates, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync killed alone leaves its `git fetch` running (git runs in a process group of
    its own); the next sync's fetch can then find the remote-tracking ref moved under it
    (git's compare-and-swap of the ref fails): it fetches again. The first fetch here
    fails the way git's does then (a wrapper first on PATH); the sync still lands."""
    a, b = cluster(tmp_path, templates)
    a.new("exp", "made on a")
    sync_lib.sync(a.store)
    real = shutil.which("git")
    folder = tmp_path / "wrapper"
    folder.mkdir()
    mark = tmp_path / "failed-once"
    (folder / "git").write_text(f"""#!/bin/sh
case "$*" in
  *" fetch "*) if [ ! -f "{mark}" ]; then : > "{mark}"
    echo "error: cannot lock ref 'refs/remotes/origin/main': is at $({real} rev-parse HEAD) \\
but expected 0000000000000000000000000000000000000001" >&2; exit 1; fi ;;
esac
exec {real} "$@"
""")
    (folder / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    assert sync_lib.sync(b.store).received == 1 and mark.exists()
    monkeypatch.undo()
    settle([a, b])
    check_invariants([a, b])
