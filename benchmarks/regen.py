#!/usr/bin/env python3
"""Index regeneration, timed as whole `cortex` processes.

    python benchmarks/regen.py --build [--sizes 1000,10000] [--out DIR] [--reps 5]
    python benchmarks/regen.py STORE [STORE ...] [--reps 5]
    python benchmarks/regen.py --paired OTHER_CORTEX --sizes 10000 [--reps 7] [--from DIR]
    python benchmarks/regen.py --scale [--sizes 1000,10000,50000,100000] [--reps 3]
                               [--out DIR] [--from DIR]

`--build` generates stores with scripts/gen_corpus.py (10 projects, realistic frontmatter,
~2 KB bodies, access logs; in a temporary folder unless --out is given); otherwise the
given stores are used as they are (they are modified: indexes regenerated, one atom edited).

For each store, after one regeneration that folds the access logs into the atoms:
- cold:     `cortex index regen --all` with $CORTEX_HOME/.cache deleted (logs already folded)
- no-op:    the same command again (nothing changed)
- 1 change: after editing one atom's summary (index re-rendered and committed), and the same
            with --no-commit
- new atom: `cortex new exp -p PROJECT …` (duplicate gate, the file, its commit)
- 1 read:   after one new access-log line newer than anything in the store (--no-commit):
            the atom's refs are folded and its index re-rendered, and the store clock moves,
            so every HIPPOCAMPUS.md strength is recomputed and every topic file rewritten
- floor:    reading and YAML-parsing (CSafeLoader) every atom file in one Python process,
            also timed as a whole process (interpreter start and `import yaml` included)
- --help:   `cortex --help`
Each figure is the median of --reps runs (min in brackets); peak RSS is the largest
`ru_maxrss` of the regeneration processes.

`--scale` times how regeneration grows with the store: for each size, the first regeneration
(it folds the access logs of a fresh gen_corpus store — at 100,000 atoms they name some
60,000 — into the atoms and commits them all), a cold run and a no-op run, as wall and CPU
seconds (user + system of the process and what it waited for) and peak RSS; then the growth
factor from one size to the next and the exponent it implies (1.0: linear). `--from DIR`
copies the stores from DIR/store-N (made by `scripts/gen_corpus.py DIR/store-N --atoms N`,
and left untouched) instead of generating them: generation is not what is timed, and a
100,000-atom store takes minutes.

`--paired OTHER_CORTEX` compares this checkout's `cortex` with another one's (for instance
the `.venv/bin/cortex` of a checkout of the previous release) on two copies of the same
store, their runs interleaved so that both sides meet the same load: cold, no-op, one atom
changed and one access-log line added (both --no-commit), --help, then (the tree committed
clean first) one atom changed with its commit and `cortex new` with its commit, as median
wall and CPU seconds, and the ratio of this side's to the other's.

The machine's load is printed: figures taken on a shared machine are noisy, so run it more
than once.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))

# `cortex index regen` without the store-wide generators of cortexfs.derived (HIPPOCAMPUS.md,
# OVERVIEW.md …): the same whole process, to tell the indexes' share from theirs
INDEXES_ONLY = r"""
import sys
from cortexfs import derived
derived.GENERATORS[:] = []
from cortexfs.cli.main import app
sys.argv = ["cortex", *sys.argv[1:]]
app()
"""

FLOOR = r"""
import os, sys, time, yaml
t0 = time.perf_counter()
root = os.path.join(sys.argv[1], "context", "projects")
n = 0
for project in sorted(os.listdir(root)):
    for folder in ("experiments", "knowledge", "patterns"):
        d = os.path.join(root, project, folder)
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name.endswith(".md") and name[:2] in ("EX", "K-", "PA"):
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    text = f.read()
                end = text.find("\n---", 3)
                yaml.load(text[4:end], Loader=yaml.CSafeLoader)
                n += 1
print(n, time.perf_counter() - t0)
"""


def cortex_bin() -> list[str]:
    exe = shutil.which("cortex", path=os.path.dirname(sys.executable)) or shutil.which("cortex")
    return [exe] if exe else [sys.executable, "-m", "cortexfs"]


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    """(wall seconds, stdout) of one whole process."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): "
                         f"{proc.stderr.decode()[-2000:]}")
    return wall, proc.stdout.decode()


def run_rss(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one whole process, via wait4."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    return wall, usage.ru_maxrss


def run_cpu(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in KiB) of one whole process, via wait4."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed: {err.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def median_min(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f})"


def count_atoms(store: Path) -> int:
    pattern = re.compile(r"^(EXP-\d+[a-z]?|K-\d+|PAT-\d+)\.md$")
    root = store / "context" / "projects"
    return sum(1 for p in root.glob("*/*/*.md") if pattern.match(p.name))


def edit_one_atom(store: Path, rep: int) -> None:
    path = next(iter(sorted((store / "context" / "projects").glob("*/experiments/EXP-001.md"))))
    text = path.read_text(encoding="utf-8")
    new = re.sub(r"^summary: .*$", f'summary: "benchmark edit number {rep}"', text, count=1,
                 flags=re.MULTILINE)
    path.write_text(new, encoding="utf-8")


def bench_store(store: Path, reps: int) -> dict[str, str]:
    env = {**os.environ, "CORTEX_HOME": str(store),
           "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@cortexfs.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@cortexfs.invalid"}
    env.pop("CORTEX_DEBUG", None)
    cortex = cortex_bin()
    regen = [*cortex, "index", "regen", "--all"]
    atoms = count_atoms(store)
    print(f"\n{store}: {atoms} atoms", file=sys.stderr)
    first, out = run(regen, env)
    print(f"  first run (folds the logs into the atoms, commits): {first:.2f}s — "
          f"{out.strip()}", file=sys.stderr)
    time.sleep(2.1)  # let the files it wrote age past the racy-mtime window
    only = [sys.executable, "-c", INDEXES_ONLY, "index", "regen", "--all"]
    cold, cold_only, rss = [], [], []
    for _ in range(reps):
        shutil.rmtree(store / ".cache", ignore_errors=True)
        wall, peak = run_rss(regen, env)
        cold.append(wall)
        rss.append(peak)
        shutil.rmtree(store / ".cache", ignore_errors=True)
        cold_only.append(run_rss(only, env)[0])
    run(regen, env)  # the generators' caches, which the last indexes-only run did not fill
    noop, noop_only = [], []
    for _ in range(reps):
        wall, peak = run_rss(regen, env)
        noop.append(wall)
        rss.append(peak)
        noop_only.append(run_rss(only, env)[0])
    reads = []
    log = sorted((store / "context" / "projects").glob("*/_meta/access-log.jsonl"))[0]
    for rep in range(reps):
        with open(log, "a", encoding="utf-8") as f:
            f.write(f'{{"file": "EXP-002.md", "tool": "Read", "ts": "2099-01-01T00:00:{rep:02d}'
                    f'.000Z", "session": "bench"}}\n')
        wall, peak = run_rss([*regen, "--no-commit"], env)
        reads.append(wall)
        rss.append(peak)
    for args in (["add", "-A"], ["commit", "-qm", "benchmark: reads"]):  # a clean tree again
        subprocess.run(["git", *args], cwd=store, env=env, capture_output=True, check=True)
    changed, changed_nc, changed_only = [], [], []
    for rep in range(reps):
        edit_one_atom(store, 3 * rep)
        changed_only.append(run_rss([*only, "--no-commit"], env)[0])
        edit_one_atom(store, 3 * rep + 1)
        wall, peak = run_rss([*regen, "--no-commit"], env)
        changed_nc.append(wall)
        edit_one_atom(store, 3 * rep + 2)
        wall, peak = run_rss(regen, env)
        changed.append(wall)
        rss.append(peak)
    project = sorted(p.name for p in (store / "context" / "projects").iterdir() if p.is_dir())[0]
    new_atom = []
    for rep in range(reps):
        wall, out = run([*cortex, "new", "exp", "-p", project, "-s",
                         f"benchmark atom {rep} on {time.time_ns()}", "-t", "bench"], env)
        if not out.strip().endswith(".md"):
            raise SystemExit(f"cortex new failed: {out}")
        new_atom.append(wall)
    floor_wall, floor_inproc = [], []
    for _ in range(reps):
        wall, out = run([sys.executable, "-c", FLOOR, str(store)], env)
        floor_wall.append(wall)
        floor_inproc.append(float(out.split()[1]))
    helps = [run([*cortex, "--help"], env)[0] for _ in range(reps)]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=store, capture_output=True,
                            text=True).stdout
    return {
        "atoms": f"{atoms:,}",
        "cold": median_min(cold),
        "cold, indexes only": median_min(cold_only),
        "no-op": median_min(noop),
        "no-op, indexes only": median_min(noop_only),
        "1 changed": median_min(changed),
        "1 changed, --no-commit": median_min(changed_nc),
        "1 changed, indexes only, --no-commit": median_min(changed_only),
        "new atom (cortex new, committed)": median_min(new_atom),
        "1 read, --no-commit": median_min(reads),
        "floor (process)": median_min(floor_wall),
        "floor (parse only)": median_min(floor_inproc),
        "cold / floor": f"{statistics.median(cold) / statistics.median(floor_wall):.2f}",
        "peak RSS MB": f"{max(rss) / 1024:.0f}",
        "--help": median_min(helps),
        "git clean after": "yes" if not status.strip() else "NO",
    }


def paired(other: str, size: int, reps: int, source: Path | None, seed: int) -> None:
    """Time this checkout's cortex and `other` on copies of one store, interleaved."""
    import gen_corpus

    base = Path(tempfile.mkdtemp(prefix="cortex-paired-"))
    try:
        pristine = base / "pristine"
        if source is not None and (source / f"store-{size}").is_dir():
            shutil.copytree(source / f"store-{size}", pristine, symlinks=True)
        else:
            gen_corpus.build(pristine, size, 10, seed, dt.date(2026, 11, 1))
        sides = {"this": cortex_bin(), "other": [other]}
        envs = {}
        for name in sides:
            store = base / name
            shutil.copytree(pristine, store, symlinks=True)
            envs[name] = {**os.environ, "CORTEX_HOME": str(store),
                          "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@cortexfs.invalid",
                          "GIT_COMMITTER_NAME": "bench",
                          "GIT_COMMITTER_EMAIL": "bench@cortexfs.invalid"}
            envs[name].pop("CORTEX_DEBUG", None)
            run_cpu([*sides[name], "index", "regen", "--all"], envs[name])  # the first fold
        time.sleep(2.1)
        figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
        loads = []
        project = sorted(p.name for p in (pristine / "context" / "projects").iterdir()
                         if p.is_dir())[0]
        for rep in range(reps):
            order = list(sides) if rep % 2 == 0 else list(reversed(sides))
            for name in order:
                cortex, env = sides[name], envs[name]
                store = Path(env["CORTEX_HOME"])
                regen = [*cortex, "index", "regen", "--all"]
                loads.append(os.getloadavg()[0])
                shutil.rmtree(store / ".cache", ignore_errors=True)
                figures.setdefault(("cold", name), []).append(run_cpu(regen, env)[:2])
                figures.setdefault(("no-op", name), []).append(run_cpu(regen, env)[:2])
                edit_one_atom(store, rep)
                figures.setdefault(("1 changed, --no-commit", name), []).append(
                    run_cpu([*regen, "--no-commit"], env)[:2])
                log = sorted((store / "context" / "projects").glob("*/_meta/access-log.jsonl"))[0]
                with open(log, "a", encoding="utf-8") as f:
                    f.write(f'{{"file": "EXP-002.md", "tool": "Read", "ts": "2099-01-01T00:00:'
                            f'{rep:02d}.000Z", "session": "bench"}}\n')
                figures.setdefault(("1 read, --no-commit", name), []).append(
                    run_cpu([*regen, "--no-commit"], env)[:2])
                figures.setdefault(("--help", name), []).append(
                    run_cpu([*cortex, "--help"], env)[:2])
                for args in (["add", "-A"], ["commit", "-qm", "benchmark: pending"]):
                    subprocess.run(["git", *args], cwd=store, env=env, capture_output=True,
                                   check=True)  # a clean tree, as a user's would be
                edit_one_atom(store, 1000 + rep)
                figures.setdefault(("1 changed (committed)", name), []).append(
                    run_cpu(regen, env)[:2])
                figures.setdefault(("new atom (committed)", name), []).append(run_cpu(
                    [*cortex, "new", "exp", "-p", project, "-s",
                     f"paired benchmark atom {rep} of {reps}", "-t", "bench"], env)[:2])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\n{size:,} atoms, whole processes, median of {reps} interleaved runs: wall s / CPU s")
    print(f"this: {' '.join(cortex_bin())}\nother: {other}")
    print(f"cores: {os.cpu_count()}; load average during: min {min(loads):.2f}, median "
          f"{statistics.median(loads):.2f}, max {max(loads):.2f} (a shared machine inflates "
          "wall times; CPU seconds suffer less)\n")
    print(f"{'':<26}{'this':>16}{'other':>16}{'wall ratio':>12}{'CPU ratio':>11}")
    for what in dict.fromkeys(k[0] for k in figures):
        cells = []
        medians = {}
        for name in ("this", "other"):
            runs = figures[(what, name)]
            medians[name] = (statistics.median(r[0] for r in runs),
                             statistics.median(r[1] for r in runs))
            cells.append(f"{medians[name][0]:.3f} / {medians[name][1]:.3f}")
        ratios = [medians["this"][i] / max(medians["other"][i], 1e-9) for i in (0, 1)]
        print(f"{what:<26}{cells[0]:>16}{cells[1]:>16}{ratios[0]:>12.2f}{ratios[1]:>11.2f}")


def scale_store(store: Path, reps: int) -> dict[str, tuple[float, float, int]]:
    """First (folding) regeneration, cold and no-op: name → (median wall, median CPU, RSS)."""
    env = {**os.environ, "CORTEX_HOME": str(store),
           "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@cortexfs.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@cortexfs.invalid"}
    env.pop("CORTEX_DEBUG", None)
    regen = [*cortex_bin(), "index", "regen", "--all"]
    out: dict[str, tuple[float, float, int]] = {"first (fold + commit)": run_cpu(regen, env)}
    time.sleep(2.1)  # let the files it wrote age past the racy-mtime window
    for name, cold in (("cold", True), ("no-op", False)):
        runs = []
        for _ in range(reps):
            if cold:
                shutil.rmtree(store / ".cache", ignore_errors=True)
            runs.append(run_cpu(regen, env))
        out[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                     max(r[2] for r in runs))
    return out


def scale(sizes: list[int], reps: int, out: Path | None, source: Path | None, seed: int) -> None:
    """Print the regeneration figures per store size, with growth factors."""
    import gen_corpus

    base = out or Path(tempfile.mkdtemp(prefix="cortex-scale-"))
    rows: dict[int, dict[str, tuple[float, float, int]]] = {}
    load_before = os.getloadavg()
    try:
        for size in sizes:
            target = base / f"scale-{size}"
            shutil.rmtree(target, ignore_errors=True)
            if source is not None and (source / f"store-{size}").is_dir():
                shutil.copytree(source / f"store-{size}", target, symlinks=True)
            else:
                gen_corpus.build(target, size, 10, seed, dt.date(2026, 11, 1))
            print(f"{size:,} atoms: timing", file=sys.stderr)
            rows[size] = scale_store(target, reps if size < 50_000 else min(reps, 3))
            shutil.rmtree(target, ignore_errors=True)
    finally:
        if out is None:
            shutil.rmtree(base, ignore_errors=True)
    load_after = os.getloadavg()
    print(f"\ncortex index regen --all by store size: wall s / CPU s (median of {reps}; "
          f"3 from 50,000 atoms on; the first run once), peak RSS MB")
    print(f"cores: {os.cpu_count()}; load average before {load_before[0]:.2f}, after "
          f"{load_after[0]:.2f} (a shared machine inflates every figure)\n")
    import math

    print(f"{'atoms':>9}  " + "".join(f"{name:>28}" for name in rows[sizes[0]]))
    previous: int | None = None
    for size in sizes:
        cells = []
        for name, (wall, cpu, rss) in rows[size].items():
            cell = f"{wall:.2f} / {cpu:.2f}, {rss / 1024:.0f} MB"
            if previous is not None:
                growth = wall / max(rows[previous][name][0], 1e-9)
                exponent = math.log(growth) / math.log(size / previous)
                cell = f"{cell} x{growth:.1f}^{exponent:.2f}"
            cells.append(f"{cell:>28}")
        print(f"{size:>9,}  " + "".join(cells))
        previous = size
    print("\nxG^E: G times the previous size's wall time; E = log G / log(size ratio), "
          "1.0 is linear growth")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", nargs="*", type=Path, help="existing stores to time")
    parser.add_argument("--build", action="store_true", help="generate the stores first")
    parser.add_argument("--scale", action="store_true",
                        help="time first / cold / no-op runs by store size, with growth")
    parser.add_argument("--from", dest="source", type=Path,
                        help="with --scale / --paired: copy DIR/store-N instead of generating it")
    parser.add_argument("--paired", metavar="OTHER_CORTEX",
                        help="compare with another checkout's cortex, runs interleaved")
    parser.add_argument("--sizes", default="1000,10000", help="atoms per built store")
    parser.add_argument("--out", type=Path, help="where to build (default: a temp folder)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.paired:
        paired(args.paired, int(args.sizes.split(",")[-1]), args.reps, args.source, args.seed)
        return 0
    if args.scale:
        sizes = [int(s) for s in (args.sizes if args.sizes != "1000,10000"
                                  else "1000,10000,50000,100000").split(",")]
        scale(sizes, args.reps, args.out, args.source, args.seed)
        return 0
    if not args.build and not args.stores:
        parser.error("pass --build, or the stores to time")
    stores = list(args.stores)
    tmp = None
    if args.build:
        import gen_corpus

        base = args.out or Path(tempfile.mkdtemp(prefix="cortex-bench-"))
        tmp = None if args.out else base
        for size in (int(s) for s in args.sizes.split(",")):
            target = base / f"store-{size}"
            if target.exists():
                shutil.rmtree(target)
            t0 = time.perf_counter()
            gen_corpus.build(target, size, 10, args.seed, dt.date(2026, 11, 1))
            print(f"built {target} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
            stores.append(target)
    load_before = os.getloadavg()
    try:
        results = [bench_store(store, args.reps) for store in stores]
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    load_after = os.getloadavg()
    keys = list(results[0])
    width = max(map(len, keys)) + 2
    print(f"\ncortex index regen --all, whole process, seconds: median (min) of {args.reps}")
    print(f"cores: {os.cpu_count()}; load average before {load_before[0]:.2f}, "
          f"after {load_after[0]:.2f} (a shared machine inflates every figure)\n")
    for key in keys:
        print(f"{key:<{width}}" + "".join(f"{r[key]:>20}" for r in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
