"""Fuzz the trust boundary for longer than the test suite does, with real processes.

    .venv/bin/python benchmarks/fuzz.py [--payloads 5000] [--files 200] [--seed 12]

First runs a fixed set of worst cases (a glob over the disk, 1 MB commands, 600k-name
Grep results, 400k output lines, a 60 MB payload, 1,000,000-level JSON), each timed. Then
draws hostile hook payloads from the strategies of tests/fuzz_inputs.py (the ones
tests/test_fuzz.py runs, derandomized, in-process) and feeds each to the hook exactly as
`cortex hooks install` runs it (`python -I -S hooks/memory-ref-tracker --home STORE`), one
process each, against a throw-away store holding atoms and links out of it. Prints

    N payloads, N exit 0, N classified as bugs, slowest N s (wall), N s (CPU)

where "classified as bugs" counts the hook.log lines that say "a bug". Then, with --files,
writes that many fuzzed atoms and TASKS.yaml files into the store and runs `validate`,
`index regen`, `brief` and `tasks list` on each, printing how many runs exited with
anything but 0 or 1 or said "internal error". Last, it checks that nothing outside the store
(reached through the planted links) was written. Needs the dev extra (hypothesis). The
machine is shared and busy: wall times vary with it; CPU times much less.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fuzz_inputs import frontmatter, payload, tasks_file  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def make_store(base: Path) -> tuple[Path, list[str], Path]:
    """A store with a project, atoms and links to files outside it: (home, paths, outside)."""
    from cortexfs import scaffold
    from cortexfs.store import Store

    store = Store(base / "cortex")
    scaffold.init_store(store)
    project, _ = scaffold.new_project(store, "flywheel")
    outside = base / "outside"
    (outside / "project").mkdir(parents=True)
    (outside / "passwd").write_text("root:x:0:0:SECRET:/root:/bin/sh\n")
    atoms = []
    for name in ("EXP-001", "EXP-002", "K-001"):
        kind = "experiments" if name.startswith("EXP") else "knowledge"
        path = project.root / kind / f"{name}.md"
        path.write_text(f"---\nid: {name}\ndate: 2026-03-09\nproject: flywheel\nsummary: s\n"
                        "tags: [a]\nevidence: [EXP-001]\n---\nbody\n")
        atoms.append(str(path))
    (project.root / "experiments" / "EXP-009.md").symlink_to(outside / "passwd")
    (store.projects_dir / "evil").symlink_to(outside / "project")
    paths = [*atoms, str(project.root / "experiments" / "EXP-009.md"),
             str(store.projects_dir / "evil"), str(outside / "passwd"), str(store.projects_dir)]
    return store.home, paths, outside


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def worst_cases(paths: list[str]) -> dict[str, bytes]:
    """Payloads built to cost the most (the issue's measurements, and each bound's edge)."""
    atom = paths[0]
    folder = os.path.dirname(atom)

    def call(tool: str, tool_input: dict[str, Any], response: Any) -> bytes:
        return json.dumps({"session_id": "s", "cwd": folder, "tool_name": tool,
                           "tool_input": tool_input, "tool_response": response}).encode()

    return {
        "glob over the disk": call("Bash", {"command": "cat /*/*/*/*/*/zz*"}, {}),
        "1 MB command, one word": call("Bash", {"command": "cat " + "a" * 1_000_000}, {}),
        "1 MB command, 250k words": call("Bash", {"command": "cat " + "a " * 500_000}, {}),
        "1 MB of pipes and globs": call("Bash", {"command": "cat */*.md | " * 80_000}, {}),
        "600k Grep names": call("Grep", {"pattern": "x", "path": "/"}, {
            "filenames": [f"/x/d{i % 1000}/EXP-{i}.md" for i in range(600_000)]}),
        "600k Grep names, one folder": call("Grep", {"pattern": "x", "path": folder}, {
            "filenames": [f"{folder}/EXP-{i}.md" for i in range(600_000)]}),
        "400k content lines": call("Grep", {"pattern": "x", "path": folder}, {
            "content": "\n".join(f"{folder}/EXP-{i}.md:1:x" for i in range(400_000))}),
        "60 MB string": call("Read", {"file_path": atom}, {"content": "x" * 60_000_000}),
        "deep JSON": b"[" * 1_000_000 + b"]" * 1_000_000,
    }


def run_worst(home: Path, paths: list[str]) -> None:
    hook = [sys.executable, "-I", "-S", str(ROOT / "hooks" / "memory-ref-tracker"),
            "--home", str(home)]
    env = dict(os.environ, CORTEX_AUTOCOMMIT="0")
    slowest = (0.0, 0.0, "")
    for name, raw in worst_cases(paths).items():
        proc, wall, cpu = run_hook(hook, raw, env)
        print(f"  worst case {name:<28} exit {proc.returncode}  {wall:5.2f} s wall  "
              f"{cpu:5.2f} s CPU  ({len(raw) / 1e6:.1f} MB)")
        slowest = max(slowest, (wall, cpu, name))
    print(f"{len(worst_cases(paths))} worst cases, slowest {slowest[0]:.2f} s (wall), "
          f"{slowest[1]:.2f} s (CPU): {slowest[2]}")


def run_hook(hook: list[str], raw: bytes, env: dict[str, str],
             ) -> tuple[subprocess.CompletedProcess[bytes], float, float]:
    """One hook process fed `raw`: its result, wall seconds and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(hook, input=raw, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def fuzz_hook(home: Path, paths: list[str], n: int, seed_value: int) -> None:
    hook = [sys.executable, "-I", "-S", str(ROOT / "hooks" / "memory-ref-tracker"),
            "--home", str(home)]
    env = dict(os.environ, CORTEX_AUTOCOMMIT="0")
    log = home / "logs" / "hook.log"
    stats: dict[str, Any] = {"runs": 0, "ok": 0, "bugs": 0, "wall": 0.0, "cpu": 0.0,
                             "slowest": b""}

    @seed(seed_value)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(data: Any) -> None:
        raw = data.draw(payload(paths))
        seen = log.stat().st_size if log.exists() else 0
        proc, wall, cpu = run_hook(hook, raw, env)
        stats["runs"] += 1
        stats["ok"] += proc.returncode == 0 and not proc.stdout and not proc.stderr
        if log.exists():
            with open(log, "rb") as f:
                f.seek(seen)
                stats["bugs"] += f.read().count(b"a bug")
        if wall > stats["wall"]:
            stats["wall"], stats["slowest"] = wall, raw[:120]
        stats["cpu"] = max(stats["cpu"], cpu)

    one()
    print(f"{stats['runs']} payloads, {stats['ok']} exit 0, {stats['bugs']} classified as bugs, "
          f"slowest {stats['wall']:.2f} s (wall), {stats['cpu']:.2f} s (CPU)")
    print(f"  slowest payload began: {stats['slowest']!r}")


def fuzz_files(home: Path, n: int, seed_value: int) -> None:
    commands = [["validate"], ["index", "regen", "--all", "--no-commit"], ["brief"],
                ["tasks", "list"]]
    project = home / "context" / "projects" / "flywheel"
    stats = {"files": 0, "runs": 0, "bad": 0}
    worst: list[str] = []

    @seed(seed_value)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(data: Any) -> None:
        atom = data.draw(frontmatter())
        (project / "experiments" / "EXP-003.md").write_bytes(
            atom.encode("utf-8", "surrogatepass"))
        (project / "TASKS.yaml").write_text(data.draw(tasks_file()))
        stats["files"] += 2
        for args in commands:
            proc = subprocess.run([sys.executable, "-m", "cortexfs", "--home", str(home), *args],
                                  capture_output=True, text=True, check=False)
            stats["runs"] += 1
            if proc.returncode not in (0, 1) or "internal error" in proc.stderr \
                    or "Traceback" in proc.stderr:
                stats["bad"] += 1
                worst.append(f"{' '.join(args)} → {proc.returncode}: {proc.stderr[-300:]}")

    one()
    print(f"{stats['files']} fuzzed files, {stats['runs']} command runs, {stats['bad']} crashed "
          "or reported an internal error")
    for line in worst[:5]:
        print(f"  {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payloads", type=int, default=5000)
    parser.add_argument("--files", type=int, default=0,
                        help="also run commands on this many fuzzed atom/TASKS.yaml pairs")
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="cortex-fuzz-"))
    try:
        home, paths, outside = make_store(base)
        before = snapshot(outside)
        run_worst(home, paths)
        if args.payloads:
            fuzz_hook(home, paths, args.payloads, args.seed)
        if args.files:
            fuzz_files(home, args.files, args.seed)
        changed = snapshot(outside) != before
        print(f"outside the store: {'CHANGED' if changed else 'untouched'}")
        return 1 if changed else 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
