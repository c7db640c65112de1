#!/usr/bin/env python3
"""`cortex view`, timed as whole `cortex` processes.

    python benchmarks/view.py --build [--atoms 10000] [--out DIR] [--reps 3]
    python benchmarks/view.py STORE [--site DIR] [--reps 3]

`--build` generates a store with scripts/gen_corpus.py (10 projects, ~2 KB bodies, access
logs) and regenerates its indexes (twice: the second run settles the caches); otherwise
STORE is used as it is (it is modified: one atom is edited, a log line appended). The site
goes to the default place ($CORTEX_HOME/.cache/site) unless --site is given (a tmpfs folder
tells the file system's share apart).

Figures (median of --reps runs, min in brackets):
- full:      `cortex view` with no site and no view caches (the first build)
- no-op:     the same command again (nothing changed)
- 1 changed: after editing one atom's summary (the targets: full <= 10 s, 1 changed <= 1 s)
- 1 read:    after one access-log line (a read of one atom)
- the site: files and bytes (as `cortex view` reports them), and its biggest pages;
- create floor: creating as many files of the same sizes in a scratch folder on the same
  file system, in one process: what the first build cannot go below on this machine.
Each time is followed by the CPU seconds (user + system) the process and its forked worker
used: a first build spreads them over two cores, so on an idle machine it takes about half.
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


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, dict]:
    """(wall seconds, the JSON it printed) of one whole `cortex view -f json` process; its
    CPU seconds go to CPU (on a loaded machine they tell more than the wall time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def stats(values: list[float], cpu: list[float]) -> str:
    return (f"{statistics.median(values):.2f} s ({min(values):.2f})   "
            f"CPU {statistics.median(cpu):.2f} s")


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


def bench(store: Path, site: Path | None, reps: int) -> None:
    env = {**os.environ, "CORTEX_HOME": str(store)}
    env.pop("CORTEX_DEBUG", None)
    cmd = [*cortex_bin(), "view", "-f", "json"]
    if site is not None:
        cmd += ["--out", str(site)]
    site_dir = site if site is not None else store / ".cache" / "site"
    full, noop, changed, reads = [], [], [], []
    cpu: dict[str, list[float]] = {"full": [], "noop": [], "changed": [], "reads": []}
    result: dict = {}
    for _ in range(reps):
        shutil.rmtree(site_dir, ignore_errors=True)
        shutil.rmtree(store / ".cache" / "view", ignore_errors=True)
        wall, result = run(cmd, env)
        full.append(wall)
        cpu["full"].append(CPU[-1])
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
    print(f"  full build:            {stats(full, cpu['full'])}   "
          f"({result['written']:,} files written)")
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
    args = parser.parse_args()
    if args.build == (args.store is not None):
        parser.error("pass either --build or a STORE")
    store = args.store
    if args.build:
        store = args.out or Path(tempfile.mkdtemp(prefix="cortex-view-bench-")) / "store"
        subprocess.run([sys.executable, str(HERE.parent / "scripts" / "gen_corpus.py"),
                        str(store), "--atoms", str(args.atoms)], check=True)
        for _ in range(2):  # the second, seconds later, settles the caches' racy stamps
            subprocess.run([*cortex_bin(), "index", "regen", "--all"], check=True,
                           env={**os.environ, "CORTEX_HOME": str(store)}, capture_output=True)
            time.sleep(2.1)
    bench(store.resolve(), args.site.resolve() if args.site else None, args.reps)


if __name__ == "__main__":
    main()
