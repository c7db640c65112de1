"""Whatever `cortex sync` brings in from a remote is data: nothing of it runs, no link in it
is followed, no file of it crashes a command (issue 12, with real processes and real git).

An attacker with push access to the store's bare remote commits template overrides that
would run a shell command, links to files and folders outside the victim's store, and atoms
and a TASKS.yaml nested 30,000 levels deep. The victim runs its ordinary commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cortexfs import git, scaffold
from cortexfs import sync as sync_lib
from cortexfs.commit import commit_paths
from cortexfs.store import Store

DEEP = "[" * 30_000 + "]" * 30_000


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def cortex(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cortexfs", "--home", str(home), *args],
                          capture_output=True, text=True, input=stdin, timeout=120,
                          env={**os.environ, "CORTEX_AUTOCOMMIT": "0"})


def victim_and_attacker(tmp_path: Path) -> tuple[Store, Path]:
    remote = tmp_path / "remote.git"
    sh(tmp_path, "init", "-q", "--bare", str(remote))
    victim = Store(tmp_path / "victim")
    created = scaffold.init_store(victim)
    commit_paths(victim, [*created, *git.ensure_repo(victim)], "chore: initialise")
    project, created = scaffold.new_project(victim, "flywheel")
    atom = project.root / "experiments" / "EXP-001.md"
    atom.write_text("---\nid: EXP-001\ndate: 2026-03-09\nproject: flywheel\nsummary: mine\n"
                    "tags: [a]\n---\nbody\n")
    commit_paths(victim, [*created, atom], "project: add flywheel")
    sync_lib.set_remote(victim, str(remote))
    sync_lib.sync(victim)
    attacker = tmp_path / "attacker"
    sh(tmp_path, "clone", "-q", str(remote), str(attacker))
    return victim, attacker


def test_a_hostile_remote_runs_nothing_and_reaches_nothing(tmp_path: Path, outside: Any) -> None:
    victim, attacker = victim_and_attacker(tmp_path)
    pwned = tmp_path / "PWNED"
    payload = f"{{% set _ = cycler.__init__.__globals__.os.system('touch {pwned}') %}}\n"
    root = attacker / "context" / "projects" / "flywheel"
    o = outside.root
    for name in ("index/experiments.md.j2", "atoms/experiment.md.j2", "store/USER.md.j2"):
        path = attacker / "templates" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(payload)
    (root / "experiments" / "EXP-002.md").symlink_to(o / "atom.md")
    (root / "knowledge" / "K-001.md").symlink_to(o / "passwd")
    (root / "STATUS.md").unlink()
    (root / "STATUS.md").symlink_to(o / "passwd")
    (root / "_meta").mkdir(exist_ok=True)
    (root / "_meta" / "access-log.jsonl").symlink_to(o / "log.jsonl")
    (attacker / "context" / "projects" / "evil").symlink_to(o / "project")
    (attacker / "context" / ".hippocampus").symlink_to(o / "hippocampus")
    (root / "experiments" / "EXP-003.md").write_text(
        f"---\nid: EXP-003\ndate: 2026-03-09\nproject: flywheel\nsummary: deep\ntags: {DEEP}\n"
        "---\n")
    (root / "TASKS.yaml").write_text(f"tasks: {DEEP}\n")
    sh(attacker, "add", "-A")
    sh(attacker, "-c", "user.name=eve", "-c", "user.email=eve@invalid", "commit", "-qm", "hi")
    sh(attacker, "push", "-q", "origin", "HEAD")
    outside.reset_atimes()

    said = []
    for args in (["sync"], ["sync"], ["validate"], ["index", "regen", "--all"], ["brief"],
                 ["ready"], ["recall", "secret", "--no-dense"], ["maintain"], ["tasks", "list"],
                 ["new", "exp", "-p", "flywheel", "-s", "after the sync", "-t", "a"],
                 ["project", "new", "another"], ["sync"]):
        proc = cortex(victim.home, *args)
        assert proc.returncode in (0, 1), (args, proc.returncode, proc.stderr)  # not 139
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, args
        assert outside.MARKER not in proc.stdout, args
        assert not pwned.exists(), f"`cortex {' '.join(args)}` ran the remote's code"
        outside.assert_untouched(f"cortex {' '.join(args)}")
        said.append((args, proc))
    assert (victim.templates_dir / "index" / "experiments.md.j2").exists()  # it did arrive
    assert (victim.projects_dir / "flywheel" / "experiments" / "EXP-002.md").is_symlink()
    validate = next(p for a, p in said if a == ["validate"]).stdout
    for rel in ("projects/flywheel/experiments/EXP-002.md", "projects/evil", ".hippocampus",
                "projects/flywheel/STATUS.md", "projects/flywheel/_meta/access-log.jsonl"):
        assert f"  {rel}  " in validate, rel
    assert "EXP-003.md:6  [frontmatter] the YAML nests more than 64 levels deep" in validate
    new = next(p for a, p in said if a[0] == "new")
    assert new.returncode == 1 and "does what a template may not" in new.stderr

    # the agent's hook and the MCP tools on the synced store
    hook = [sys.executable, "-I", "-S", str(Path(__file__).parent.parent / "hooks"
                                             / "memory-ref-tracker"), "--home", str(victim.home)]
    for name in ("EXP-001.md", "EXP-002.md"):
        payload = json.dumps({"session_id": "s", "cwd": "/", "tool_name": "Read",
                              "tool_input": {"file_path": str(
                                  victim.projects_dir / "flywheel" / "experiments" / name)}})
        assert subprocess.run(hook, input=payload.encode(), capture_output=True,
                              env={**os.environ, "CORTEX_AUTOCOMMIT": "0"}).returncode == 0
    outside.assert_untouched("the hook")
    from cortexfs import recall

    try:
        recall.read_atom(victim, "EXP-002", "flywheel")
        raise AssertionError("read_atom returned a link's target")
    except FileNotFoundError as e:
        assert "symbolic link" in str(e)
    outside.assert_untouched("MCP read_atom")
    assert not pwned.exists()


def test_a_remote_that_tracks_files_in_the_stores_private_folders_is_refused(
        tmp_path: Path, outside: Any) -> None:
    # .cache/, .locks/ and logs/ are git-ignored, but a remote can force-add files there: a
    # crafted cache, a lock that is a link out, lines "set aside" for a log
    victim, attacker = victim_and_attacker(tmp_path)
    pending = attacker / "logs" / "pending-reads" / "flywheel"
    pending.mkdir(parents=True)
    (pending / "1-1.jsonl").symlink_to(outside.root / "passwd")
    (attacker / ".locks").mkdir()
    (attacker / ".locks" / "access-logs.lock").symlink_to(outside.root / "passwd")
    sh(attacker, "add", "-f", "logs", ".locks")
    sh(attacker, "-c", "user.name=eve", "-c", "user.email=eve@invalid", "commit", "-qm", "hi")
    sh(attacker, "push", "-q", "origin", "HEAD")
    head = git.head_commit(victim.home)
    proc = cortex(victim.home, "sync")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "cannot merge origin/main: it tracks .locks/access-logs.lock, " \
           "logs/pending-reads/flywheel/1-1.jsonl under .cache/, .locks/, logs/" in proc.stderr
    assert git.head_commit(victim.home) == head
    assert not (victim.home / "logs" / "pending-reads").exists()
    assert cortex(victim.home, "index", "regen", "--all").returncode == 0
