#!/usr/bin/env python3
"""`cortex view`, timed as whole `cortex` processes.

    python benchmarks/view.py --build [--atoms 10000] [--out DIR] [--reps 3] [--before DIR]
    python benchmarks/view.py STORE [--site DIR] [--reps 3] [--before DIR]

`--build` generates a store with scripts/gen_corpus.py (10 projects, ~2 KB bodies, access
logs) and regenerates its indexes (twice: the second run settles the caches); otherwise
STORE is used as it is (it is modified: one atom is edited, a log line appended). The site
goes to the default place ($CORTEX_HOME/.cache/site) unless --site is given (a tmpfs folder
tells the file system's share apart).

With --before CHECKOUT (a source checkout of an earlier cortexfs, e.g. made with `git
worktree add --detach DIR fc6deee`), that version's first builds are timed in the same run,
alternating with this one's, on a copy of the store whose caches it settled itself (every
cache is keyed by the code that wrote it); the two sites must be the same, byte for byte
(but for the store's path on the store page), or the benchmark fails.

Figures (median of --reps runs, min in brackets):
- full:      `cortex view` with no site and no view caches (the first build). The previous
             site is moved aside, not deleted, until the end: on ext4, creating files right
             after deleting as many costs up to 3-10x more (the inode allocator skips the
             recently deleted ones; measured here: 12,000 files in 0.3-1.6 s in a fresh
             folder, 5.4 s right after `rm -rf` of 12,000), which a user's first build does
             not meet
- no-op:     the same command again (nothing changed)
- 1 changed: after editing one atom's summary (the targets: full <= 10 s, 1 changed <= 1 s)
- 1 read:    after one access-log line (a read of one atom)
- the site: files and bytes (as `cortex view` reports them), and its biggest pages;
- create floor: creating as many files of the same sizes in a scratch folder on the same
  file system, in one process: what the first build cannot go below on this machine.
Each time is followed by the CPU seconds (user + system; the system share in brackets)
the process and its forked worker used: a first build spreads them over two cores, so on
an idle machine it takes about half.
The machine's load is printed: figures taken on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cortex_bin() -> list[str]:
    exe = shutil.which("cortex", path=os.path.dirname(sys.executable)) or shutil.which("cortex")
    return [exe] if exe else [sys.executable, "-m", "cortexfs"]


CPU: list[float] = []  # CPU seconds (user + system, its worker included) of each run
SYS: list[float] = []  # the system share of each


def run(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, dict]:
    """(wall seconds, the JSON it printed) of one whole `cortex view -f json` process; its
    CPU seconds go to CPU (on a loaded machine they tell more than the wall time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    SYS.append(after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def stats(values: list[float], cpu: list[float], system: list[float] | None = None) -> str:
    sys_part = f" (sys {statistics.median(system):.2f})" if system else ""
    return (f"{statistics.median(values):.2f} s ({min(values):.2f})   "
            f"CPU {statistics.median(cpu):.2f} s{sys_part}")


def edit_one_atom(store: Path, rep: int) -> None:
    path = sorted((store / "context" / "projects").glob("*/experiments/EXP-001.md"))[0]
    text = path.read_text(encoding="utf-8")
    new = re.sub(r"^summary: .*$", f'summary: "view benchmark edit {rep}"', text, count=1,
                 flags=re.MULTILINE)
    path.write_text(new, encoding="utf-8")


def read_one_atom(store: Path, rep: int) -> None:
    log = sorted((store / "context" / "projects").glob("*/_meta/access-log.jsonl"))[0]
    with open(log, "a", encoding="utf-8") as f:
        f.write(f'{{"file": "EXP-002.md", "tool": "Read", "ts": "2099-01-01T00:00:{rep:02d}'
                f'.000Z", "session": "bench"}}\n')


def create_floor(site: Path, scratch_parent: Path) -> tuple[float, int]:
    """Seconds to create files of the site's sizes, in as many folders, in one process."""
    sizes = [(p.parent.relative_to(site), p.stat().st_size) for p in site.rglob("*")
             if p.is_file() and ".cortex-view" not in p.parts]
    scratch = Path(tempfile.mkdtemp(prefix="view-floor-", dir=scratch_parent))
    try:
        t0 = time.perf_counter()
        made = set()
        for i, (folder, size) in enumerate(sizes):
            target = scratch / folder
            if folder not in made:
                target.mkdir(parents=True, exist_ok=True)
                made.add(folder)
            with open(target / f"{i}.html", "wb") as f:
                f.write(b"x" * size)
        return time.perf_counter() - t0, len(sizes)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


Side = tuple[str, list[str], dict[str, str], Path, Path, "Path | None"]


def settle(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
    """Regenerate a store's indexes twice: the second run, seconds later, settles the
    caches' racy stamps (as a store in use has them)."""
    for _ in range(2):
        subprocess.run([*cmd, "index", "regen", "--all"], check=True, env=env, cwd=cwd,
                       capture_output=True)
        time.sleep(2.1)


def move_aside(site_dir: Path, trash: Path) -> None:
    """Take the last build's site out of the way without deleting it (see the docstring)."""
    if site_dir.exists():
        site_dir.rename(trash / str(len(list(trash.iterdir()))))


def same_sites(a: Path, b: Path, a_home: Path, b_home: Path) -> str | None:
    """None when the sites in `a` and `b` hold the same files with the same bytes (a's
    store path read as b's); else what differs."""
    def files(root: Path) -> set[str]:
        return {p.relative_to(root).as_posix() for p in root.rglob("*")
                if p.is_file() and ".cortex-view" not in p.parts}

    names_a, names_b = files(a), files(b)
    if names_a != names_b:
        return f"files only in one: {sorted(names_a ^ names_b)[:5]}"
    for name in sorted(names_a):
        raw = (a / name).read_bytes().replace(str(a_home).encode(), str(b_home).encode())
        if raw != (b / name).read_bytes():
            return f"{name} differs"
    return None


def bench(store: Path, site: Path | None, reps: int, before: Path | None) -> None:
    env = {**os.environ, "CORTEX_HOME": str(store)}
    env.pop("CORTEX_DEBUG", None)
    env.pop("PYTHONPATH", None)
    cmd = [*cortex_bin(), "view", "-f", "json"]
    if site is not None:
        cmd += ["--out", str(site)]
    site_dir = site if site is not None else store / ".cache" / "site"
    # (label, command, environment, store, site folder, working folder) of each version
    sides: list[Side] = [("", cmd, env, store, site_dir, None)]
    scratch = Path(tempfile.mkdtemp(prefix="view-bench-", dir=store.parent))
    if before is not None:
        before = before.resolve()
        settle(cortex_bin(), env)  # both versions' caches settled alike
        old_store = scratch / "store-before"
        shutil.copytree(store, old_store, symlinks=True)
        shutil.rmtree(old_store / ".cache" / "site", ignore_errors=True)
        old_env = {**env, "CORTEX_HOME": str(old_store), "PYTHONPATH": str(before.resolve())}
        old_cortex = [sys.executable, "-m", "cortexfs"]
        settle(old_cortex, old_env, before)
        old_site = old_store / ".cache" / "site" if site is None else Path(f"{site}-before")
        old_cmd = [*old_cortex, "view", "-f", "json"]
        if site is not None:
            old_cmd += ["--out", str(old_site)]
        # (run in the checkout: `python -m` puts the working folder first on sys.path, so
        # a run from this repository would import this version)
        sides.insert(0, (" (before)", old_cmd, old_env, old_store, old_site, before))
    trash = {label: Path(tempfile.mkdtemp(prefix=".view-bench-old-", dir=sd.parent))
             for label, _, _, _, sd, _ in sides}
    try:
        _bench(sides, trash, reps)
    finally:
        for folder in [*trash.values(), scratch]:
            shutil.rmtree(folder, ignore_errors=True)


def _bench(sides: list[Side], trash: dict[str, Path], reps: int) -> None:
    full: dict[str, list[float]] = {label: [] for label, *_ in sides}
    full_cpu: dict[str, list[float]] = {label: [] for label, *_ in sides}
    full_sys: dict[str, list[float]] = {label: [] for label, *_ in sides}
    results: dict[str, dict] = {}
    for rep in range(reps):  # the versions take turns, in either order
        for label, command, environ, home, folder, cwd in (sides if rep % 2 == 0
                                                           else sides[::-1]):
            move_aside(folder, trash[label])
            shutil.rmtree(home / ".cache" / "view", ignore_errors=True)
            wall, results[label] = run(command, environ, cwd)
            full[label].append(wall)
            full_cpu[label].append(CPU[-1])
            full_sys[label].append(SYS[-1])
    _, cmd, env, store, site_dir, _ = sides[-1]
    result = results[""]
    if len(sides) > 1:
        _, _, _, old_store, old_site, _ = sides[0]
        problem = same_sites(old_site, site_dir, old_store, store)
        if problem:
            raise SystemExit(f"the sites of the two versions differ: {problem}")
    noop, changed, reads = [], [], []
    cpu: dict[str, list[float]] = {"noop": [], "changed": [], "reads": []}
    time.sleep(2.1)  # past the racy-mtime window of what the first build read
    for _ in range(reps):
        noop.append(run(cmd, env)[0])
        cpu["noop"].append(CPU[-1])
    for rep in range(reps):
        edit_one_atom(store, rep)
        time.sleep(2.1)  # an edit seconds old, as a person's would be
        wall, out = run(cmd, env)
        changed.append(wall)
        cpu["changed"].append(CPU[-1])
        changed_written = out["written"]
    for rep in range(reps):
        read_one_atom(store, rep)
        wall, out = run(cmd, env)
        reads.append(wall)
        cpu["reads"].append(CPU[-1])
        reads_written = out["written"]
    floor, files = create_floor(site_dir, site_dir.parent)
    pages = sorted(((p.stat().st_size, p.relative_to(site_dir)) for p in site_dir.rglob("*.html")),
                   reverse=True)[:3]
    print(f"\n{store}: {result['atoms']:,} atoms in {result['projects']} projects, "
          f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for label, *_ in sides:
        print(f"  {'full build' + label + ':':<23}"
              f"{stats(full[label], full_cpu[label], full_sys[label])}   "
              f"({results[label]['written']:,} files written)")
    if len(sides) > 1:
        print("  the two versions' sites: the same, byte for byte")
    print(f"  no-op:                 {stats(noop, cpu['noop'])}")
    print(f"  1 changed:             {stats(changed, cpu['changed'])}   "
          f"({changed_written} files written)")
    print(f"  1 read:                {stats(reads, cpu['reads'])}   "
          f"({reads_written} files written)")
    print(f"  site:                  {result['files']:,} files, {result['bytes'] / 1e6:.1f} MB "
          f"in {site_dir}")
    print("  biggest pages:         " + ", ".join(f"{p} {n / 1e3:.0f} KB" for n, p in pages))
    print(f"  create floor:          {floor:.2f} s to create {files:,} files of the same sizes "
          f"on the same file system")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", nargs="?", type=Path)
    parser.add_argument("--build", action="store_true", help="generate a store first")
    parser.add_argument("--atoms", type=int, default=10_000)
    parser.add_argument("--out", type=Path, help="where --build puts the store")
    parser.add_argument("--site", type=Path, help="build the site here (--out of cortex view)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--before", type=Path,
                        help="a checkout of an earlier cortexfs to time beside this one")
    args = parser.parse_args()
    if args.build == (args.store is not None):
        parser.error("pass either --build or a STORE")
    store = args.store
    if args.build:
        store = args.out or Path(tempfile.mkdtemp(prefix="cortex-view-bench-")) / "store"
        subprocess.run([sys.executable, str(HERE.parent / "scripts" / "gen_corpus.py"),
                        str(store), "--atoms", str(args.atoms)], check=True)
        settle(cortex_bin(), {**os.environ, "CORTEX_HOME": str(store)})
    bench(store.resolve(), args.site.resolve() if args.site else None, args.reps, args.before)


if __name__ == "__main__":
    main()
