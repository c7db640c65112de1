"""Whole-process time of the PostToolUse hook, side by side with a bare interpreter.

    .venv/bin/python benchmarks/hook.py [--runs 100] [--home STORE] [--no-git]
    .venv/bin/python benchmarks/hook.py --commit-cycle 1000

Runs the command `cortex hooks install` writes (`<python> -I -S hooks/memory-ref-tracker
--home STORE`) on a Read payload of an existing atom, `<python> -c pass`, `<python> -I -S
-c pass` (the hook's own flags: the issue-12 target is hook p50 ≤ 2x this) and `python3 -c
pass` (whatever python3 PATH finds: often a version-manager shim), interleaved, and prints
p50 / p95 in milliseconds. Without --home it builds a throw-away store with one atom in a
git repository, so the timed runs include the auto-commit hand-off as installed.

--commit-cycle N instead runs N Read hooks back to back as Claude Code would (each its own
process, the default debounce), waits for the detached committer to finish, and prints how
many lines reached git and in how many `chore: update access log` commits.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortexfs.claude_settings import hook_command  # noqa: E402


def make_store(base: Path, git: bool) -> Path:
    home = base / "cortex"
    atom = home / "context" / "projects" / "bench" / "experiments" / "EXP-001.md"
    atom.parent.mkdir(parents=True)
    atom.write_text("---\nid: EXP-001\n---\nbody\n", encoding="utf-8")
    if git:
        subprocess.run(["git", "init", "-q", str(home)], check=True)
    return home


def timed(cmd: list[str] | str, payload: bytes, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, input=payload, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, shell=isinstance(cmd, str), check=False)
    return (time.perf_counter() - start) * 1000


def summary(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return f"{name:<44} p50 {statistics.median(xs):6.1f} ms   p95 {p95:6.1f} ms   (n={len(xs)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--home", help="an existing store (default: a throw-away one)")
    parser.add_argument("--no-git", action="store_true", help="throw-away store without git")
    parser.add_argument("--tool", choices=("Read", "Bash"), default="Read",
                        help="the payload: a Read of the atom, or `cat ATOM | head`")
    parser.add_argument("--commit-cycle", type=int, default=0, metavar="N",
                        help="measure auto-commit batching over N reads instead")
    args = parser.parse_args()
    if args.commit_cycle:
        return commit_cycle(args.commit_cycle)

    tmp = Path(tempfile.mkdtemp(prefix="cortex-hook-bench-"))
    try:
        home = Path(args.home).resolve() if args.home else make_store(tmp, not args.no_git)
        atoms = sorted((home / "context" / "projects").glob("*/experiments/EXP-*.md"))
        if not atoms:
            print(f"no experiment atom under {home}/context/projects", file=sys.stderr)
            return 1
        call: dict[str, object] = {
            "tool_name": "Read", "tool_input": {"file_path": str(atoms[0])},
            "tool_response": {"type": "text", "file": {"filePath": str(atoms[0])}},
        } if args.tool == "Read" else {
            "tool_name": "Bash", "tool_input": {"command": f"cat {atoms[0]} | head -20"},
            "tool_response": {"stdout": "---\nid: EXP-001\n", "stderr": ""},
        }
        payload = json.dumps({"session_id": "bench", "cwd": str(tmp),
                              "hook_event_name": "PostToolUse", **call}).encode()
        env = dict(os.environ, CORTEX_AUTOCOMMIT_DEBOUNCE="2")
        hook = hook_command(home)  # exactly what settings.json gets (a shell command line)
        # every command is exec'd directly: Claude Code's shell costs the same for any hook
        commands: dict[str, list[str] | str] = {
            f"hook (as installed), {args.tool}": shlex.split(hook),
            f"{sys.executable} -c pass": [sys.executable, "-c", "pass"],
            f"{sys.executable} -I -S -c pass": [sys.executable, "-I", "-S", "-c", "pass"],
        }
        python3 = shutil.which("python3")
        if python3:
            commands[f"python3 -c pass ({python3})"] = [python3, "-c", "pass"]
        for cmd in commands.values():  # warm the page cache and .pyc files
            timed(cmd, payload, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                times[name].append(timed(cmd, payload, env))
        print(f"hook command: {hook}")
        for name, xs in times.items():
            print(summary(name, xs))
        bare = statistics.median(times[f"{sys.executable} -c pass"])
        hook_p50 = statistics.median(times[f"hook (as installed), {args.tool}"])
        print(f"hook p50 / bare interpreter p50 = {hook_p50 / bare:.2f}x")
        isolated = statistics.median(times[f"{sys.executable} -I -S -c pass"])
        print(f"hook p50 / `-I -S -c pass` p50 = {hook_p50 / isolated:.2f}x (target: ≤ 2x)")
        log = next((home / "context" / "projects").glob("*/_meta/access-log.jsonl"), None)
        if log is not None and not args.home:
            print(f"lines logged: {sum(1 for _ in log.open())} "
                  f"(expected {args.runs + 1})")
        return 0
    finally:
        if not args.home:
            time.sleep(0.1)
            shutil.rmtree(tmp, ignore_errors=True)


def commit_cycle(reads: int) -> int:
    from cortexfs import autocommit, layout

    tmp = Path(tempfile.mkdtemp(prefix="cortex-commit-bench-"))
    try:
        home = make_store(tmp, git=True)
        env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@invalid",
                   GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@invalid")
        atom = next((home / "context" / "projects").glob("*/experiments/EXP-*.md"))
        payload = json.dumps({"session_id": "bench", "cwd": str(tmp), "tool_name": "Read",
                              "tool_input": {"file_path": str(atom)}}).encode()
        hook = hook_command(home)
        start = time.perf_counter()
        for _ in range(reads):
            subprocess.run(hook, input=payload, shell=True, env=env, check=True)
        spent = time.perf_counter() - start
        lock = home / ".locks" / layout.AUTOCOMMIT_LOCK
        import fcntl

        fd = os.open(lock, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the last committer is done
        os.close(fd)
        log = next((home / "context" / "projects").glob("*/_meta/access-log.jsonl"))
        rel = str(log.relative_to(home))
        in_git = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=home, capture_output=True,
                                text=True).stdout.count("\n")
        subjects = subprocess.run(["git", "log", "--format=%s"], cwd=home, capture_output=True,
                                  text=True).stdout.splitlines()
        print(f"{reads} Read hooks in {spent:.1f}s ({spent / reads * 1000:.1f} ms each, "
              f"debounce {autocommit.debounce_seconds():g}s)")
        print(f"lines in the log: {sum(1 for _ in log.open())}; lines in git HEAD: {in_git}")
        print(f"commits: {len(subjects)} ({subjects.count(autocommit.MESSAGE)} × "
              f"'{autocommit.MESSAGE}')")
        return 0 if in_git == reads else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
