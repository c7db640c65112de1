"""Debounced commits of the access logs: `chore: update access log`, batched, never lost.

The hook appends lines and calls `request(home)`: unless a committer already runs for the
store (it holds an flock on `.locks/autocommit.lock`), it spawns one, detached, handing it
the lock it just took so that there is no moment when lines can be appended with nobody due
to commit them. The committer waits for a few seconds of quiet (at most MAX_DELAY in all),
commits only the access logs through the committer (`cortexfs.commit.commit_paths`: the
logs rest on nothing, so nothing else comes with them), and repeats while lines keep
arriving. A failed commit (a held index.lock, a merge under way) is retried later; the
lines stay in the work tree, so nothing is lost whatever happens.

The top of this module is standard library only: the hook imports it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
import time

from cortexfs import layout

MESSAGE = "chore: update access log"
DEBOUNCE_ENV = "CORTEX_AUTOCOMMIT_DEBOUNCE"  # seconds of quiet before a commit
DEFAULT_DEBOUNCE = 5.0
MAX_DELAY = 60.0  # commit at least this often while reads keep coming
RETRY_FOR = 600.0  # a committer gives up (to be restarted by the next read) after this


def debounce_seconds(env: str = DEBOUNCE_ENV, default: float = DEFAULT_DEBOUNCE) -> float:
    """Seconds of quiet to wait, from the environment variable `env` (the watcher's too)."""
    try:
        return max(0.0, float(os.environ.get(env, default)))
    except ValueError:
        return default


def _lock_path(home: str) -> str:
    return os.path.join(home, layout.LOCKS, layout.AUTOCOMMIT_LOCK)


# The two lock primitives of cortex's background processes (this committer and the
# watcher, one of each per store). They live here rather than in fsutil because the hook
# imports this module and fsutil's imports (tempfile, contextlib) would slow every Read.


def try_lock(path: str | os.PathLike[str]) -> int | None:
    """An fd holding the exclusive flock on `path`, or None when another process has it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise
    return fd


def is_locked(path: str | os.PathLike[str]) -> bool:
    """Whether some process holds the flock on `path` (a cortex lock file); creates and
    writes nothing, so it also answers on a read-only store."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)  # also releases the shared lock we may have taken


def request(home: str) -> bool:
    """Make sure a committer will commit what was just appended; True if one was started.

    Costs one flock when a committer is already pending, else one posix_spawn.
    """
    if not os.path.exists(os.path.join(home, ".git")):
        return False
    fd = try_lock(_lock_path(home))
    if fd is None:
        return False  # a committer is pending; it commits everything there is when it runs
    try:
        os.set_inheritable(fd, True)
        spawn_committer(home, lock_fd=fd)
    finally:
        os.close(fd)  # the child holds the lock through its copy of the descriptor
    return True


def spawn_committer(home: str, lock_fd: int | None = None) -> int:
    """Start `python -m cortexfs.autocommit --home HOME` in its own session; its pid."""
    argv = [sys.executable, "-m", "cortexfs.autocommit", "--home", home,
            *(["--lock-fd", str(lock_fd)] if lock_fd is not None else [])]
    env = dict(os.environ)
    # the hook may run with -I -S and find cortexfs next to its script: tell the child
    import cortexfs

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(cortexfs.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    devnull = os.devnull
    actions = [(os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, devnull, os.O_WRONLY, 0)]
    return os.posix_spawn(sys.executable, argv, env, file_actions=actions, setsid=True)


# --- the committer process (may import the rest of cortexfs) ---------------------------------

def _signature(home: str) -> tuple[tuple[str, int, int], ...]:
    from cortexfs.accesslog import access_logs

    sig = []
    for path in access_logs(home):
        try:
            st = os.stat(path)
        except OSError:
            continue
        sig.append((path, st.st_size, st.st_mtime_ns))
    return tuple(sig)


def commit_logs(home: str) -> bool:
    """Commit the access logs that changed (nothing else); True when a commit was made."""
    from pathlib import Path

    from cortexfs.accesslog import access_logs, drain_all
    from cortexfs.commit import commit_paths
    from cortexfs.store import Store

    store = Store(Path(home))
    drain_all(home)  # (reads set aside while a sync replaced the logs)
    return commit_paths(store, [Path(p) for p in access_logs(home)], MESSAGE) is not None


def log(home: str, name: str, message: str) -> str:
    """Append `message`, stamped, to the background process log logs/`name`; the line."""
    import contextlib

    line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {message}"
    with contextlib.suppress(OSError):
        logs = os.path.join(home, layout.LOGS)
        os.makedirs(logs, exist_ok=True)
        with open(os.path.join(logs, name), "a", encoding="utf-8") as f:
            f.write(line + "\n")
    return line


def _log(home: str, message: str) -> None:
    log(home, layout.AUTOCOMMIT_LOG, message)


def _wait_quiet(home: str, debounce: float, max_delay: float) -> tuple[tuple[str, int, int], ...]:
    """Sleep until the logs have not changed for `debounce` s (or `max_delay` s passed)."""
    start = quiet_since = time.monotonic()
    sig = _signature(home)
    step = min(0.25, max(debounce / 4, 0.01))
    while True:
        now = time.monotonic()
        if now - quiet_since >= debounce or now - start >= max_delay:
            return sig
        time.sleep(step)
        new = _signature(home)
        if new != sig:
            sig, quiet_since = new, time.monotonic()


def run(home: str, lock_fd: int | None = None, debounce: float | None = None,
        max_delay: float = MAX_DELAY, retry_for: float = RETRY_FOR) -> int:
    """The committer: commit the logs once they are quiet, until nothing new arrives.

    Holds the store's autocommit lock throughout (taking it unless `lock_fd` already holds
    it); exits 0 when another committer has it. Returns the number of commits made.
    """
    debounce = debounce_seconds() if debounce is None else debounce
    fd = lock_fd if lock_fd is not None else try_lock(_lock_path(home))
    if fd is None:
        return 0
    commits = 0
    failing_since: float | None = None
    delay = debounce
    while True:
        snapshot = _wait_quiet(home, delay, max_delay)
        try:
            commits += commit_logs(home)
            failing_since, delay = None, debounce
        except Exception as e:  # a held index.lock, a merge under way…: retry later
            now = time.monotonic()
            failing_since = failing_since or now
            _log(home, f"commit of the access logs failed, will retry: {e}")
            if now - failing_since > retry_for:
                _log(home, "giving up for now; the next read starts a new committer")
                os.close(fd)
                return commits
            delay = min(max(delay * 2, 1.0), 60.0)
            continue
        if _signature(home) != snapshot:
            continue  # lines arrived while we committed
        os.close(fd)
        # A line appended after the check above found the lock still held and started no
        # committer: look once more now that the lock is free, and take over if needed.
        if _signature(home) == snapshot:
            return commits
        fd = try_lock(_lock_path(home))
        if fd is None:
            return commits  # a new committer took over
        delay = debounce


def main(argv: list[str] | None = None) -> int:
    """`python -m cortexfs.autocommit --home HOME [--lock-fd N]` (started by the hook)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cortexfs.autocommit")
    parser.add_argument("--home", required=True)
    parser.add_argument("--lock-fd", type=int, default=None)
    args = parser.parse_args(argv)
    home = os.path.abspath(args.home)
    try:
        run(home, lock_fd=args.lock_fd)
    except Exception as e:  # detached: nobody sees stderr, so log it
        _log(home, f"committer crashed: {type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
