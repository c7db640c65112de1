"""Real git processes that hold git's lock files, for tests of waiting and of stale locks.

`git update-index --stdin` holds index.lock while it reads its input; `git update-ref
--stdin` holds HEAD.lock and the branch's lock once told `start`, `update HEAD …`,
`prepare`. Killing one with SIGKILL leaves its lock files behind, as a crash would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def _git(home: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=home, check=True, capture_output=True,
                          text=True).stdout


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 10
    while not path.exists():
        assert proc.poll() is None, "the git process ended before taking its lock"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def hold_index_lock(home: Path) -> subprocess.Popen[str]:
    """A live git process holding `.git/index.lock` until it is killed or its stdin closes."""
    proc = subprocess.Popen(["git", "update-index", "--stdin"], cwd=home, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _wait_for(home / ".git" / "index.lock", proc)
    return proc


def hold_head_lock(home: Path) -> subprocess.Popen[str]:
    """A live git process holding `.git/HEAD.lock` (and the branch's ref lock)."""
    head = _git(home, "rev-parse", "HEAD").strip()
    return _holding(home, f"update HEAD {head}", "HEAD.lock")


def hold_packed_refs_lock(home: Path, branch: str) -> subprocess.Popen[str]:
    """A live git process holding `.git/packed-refs.lock` and `branch`'s ref lock, as
    `git pack-refs` (run by `git gc`) holds them while it prunes the loose refs."""
    return _holding(home, f"delete refs/heads/{branch}", "packed-refs.lock")


def _holding(home: Path, update: str, lock: str) -> subprocess.Popen[str]:
    """`git update-ref --stdin` told `start`, `update`, `prepare`: it holds the locks of that
    update (`lock` among them) until it is killed or its stdin closes."""
    proc = subprocess.Popen(["git", "update-ref", "--stdin"], cwd=home, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"start\n{update}\nprepare\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "start: ok"
    assert proc.stdout.readline().strip() == "prepare: ok"
    _wait_for(home / ".git" / lock, proc)
    return proc


def kill_9(proc: subprocess.Popen[str]) -> None:
    """SIGKILL: the process dies at once and its lock files stay."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def release(proc: subprocess.Popen[str]) -> None:
    """End the process normally (it removes its locks)."""
    if proc.poll() is None:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
