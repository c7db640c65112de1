"""The one scan (cortexfs.loader.scan_many) walked by one process or shared with a forked one.

    .venv/bin/python benchmarks/scan.py STORE [--reps 7] [--commands]

STORE is a CORTEX_HOME whose atoms cache is warm (run `cortex index regen --all` once).
Prints, interleaved serial / forked, median (min) of wall and CPU seconds (CPU includes the
forked child's):
- in one process, `scan_many` of every project (nothing saved), with the threshold of the
  forked walk (loader.FORK_MIN_FILES) set out of reach or to 0;
- with --commands, whole `cortex index regen --all` (no-op) and `cortex ready` processes
  the same two ways (their git runs beside the walk, as it does for a user).
The forked walk gains only where the second core is free: print the load, and compare on a
quiet machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortexfs import loader  # noqa: E402
from cortexfs.store import Store  # noqa: E402

# a whole cortex process with the forked walk's threshold set by the first argument
_RUN = ("import sys\nfrom cortexfs import loader\nloader.FORK_MIN_FILES = int(sys.argv.pop(1))\n"
        "from cortexfs.cli.main import app\nsys.argv[0] = 'cortex'\napp()\n")
MODES = {"serial": 1 << 62, "forked": 0}


def cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def in_process(store: Store, reps: int) -> dict[str, list[tuple[float, float]]]:
    projects = store.projects()
    out: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for rep in range(reps):
        for mode in MODES if rep % 2 == 0 else reversed(MODES):
            loader.FORK_MIN_FILES = MODES[mode]
            c, t = cpu(), time.perf_counter()
            with loader.collector_paused():
                scans = loader.scan_many(projects, save=False)
            out[mode].append((time.perf_counter() - t, cpu() - c))
            if any(sc.parsed for sc in scans):
                sys.exit("the atoms cache is not warm: run `cortex index regen --all` first")
    return out


def whole(home: Path, args: list[str], reps: int) -> dict[str, list[tuple[float, float]]]:
    env = {**os.environ, "CORTEX_HOME": str(home)}
    out: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for rep in range(reps + 1):
        for mode in MODES if rep % 2 == 0 else reversed(MODES):
            t = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-c", _RUN, str(MODES[mode]), *args],
                                    env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            _, _, usage = os.wait4(proc.pid, 0)
            if rep:  # (the first round warms up)
                out[mode].append((time.perf_counter() - t, usage.ru_utime + usage.ru_stime))
    return out


def show(title: str, rows: dict[str, list[tuple[float, float]]], loads: list[float]) -> None:
    print(f"{title}  (load {min(loads):.2f}-{max(loads):.2f})")
    for mode, runs in rows.items():
        wall, used = [r[0] for r in runs], [r[1] for r in runs]
        print(f"  {mode:7s} wall {statistics.median(wall):.3f} ({min(wall):.3f})  "
              f"CPU {statistics.median(used):.3f} ({min(used):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--commands", action="store_true")
    opts = parser.parse_args()
    os.environ["CORTEX_HOME"] = str(opts.store)
    store = Store.open(opts.store)
    files = sum(1 for p in store.projects() for _ in loader.atom_paths(p))
    print(f"{opts.store}: {files:,} atom files, {os.cpu_count()} cores")
    load0 = os.getloadavg()[0]
    rows = in_process(store, opts.reps)
    show("scan_many, in one process", rows, [load0, os.getloadavg()[0]])
    if opts.commands:
        for args in (["index", "regen", "--all"], ["ready", "--format", "json"]):
            load0 = os.getloadavg()[0]
            rows = whole(opts.store, args, opts.reps)
            show(f"cortex {' '.join(args)}", rows, [load0, os.getloadavg()[0]])


if __name__ == "__main__":
    main()
