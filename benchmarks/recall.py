#!/usr/bin/env python3
"""Recall latency on a store, and how it grows with the store (`--scale`).

    python scripts/gen_corpus.py /tmp/c10k --atoms 10000     # also 50000, 100000
    python benchmarks/recall.py /tmp/c10k [--queries 200] [--processes 10] [--cold] [--dense]
    python benchmarks/recall.py --scale /tmp/c10k /tmp/c50k /tmp/c100k [--reps 5]
    python benchmarks/recall.py --paired OTHER_CORTEX /tmp/c10k /tmp/c100k [--reps 8]

One store: the first refresh of the process (a cold build with --cold, which deletes the
store's .cache/recall first; otherwise loading the index), per-query latency in-process
with a warm index, p50 / p95 / max, two ways — re-checking every atom file before each
query (what `cortex recall` does) and trusting a check made less than a second before
(what the MCP server does) — and the wall time of whole `cortex recall QUERY` processes.

--scale: for each store, whole processes (the way a user meets them): the first
`cortex recall` (its .cache/recall deleted: the index is built) with its peak RSS, a warm
`cortex recall`, `cortex recall` after one atom changed (re-indexing it), `cortex brief`
and `cortex ready`; and the in-process warm query p50. Each figure is the median and min of
--reps runs (the first build: of --build-reps), then the growth factor from the previous
store. Run `cortex index regen --all` on the stores first: brief and ready read its caches.

--paired OTHER_CORTEX: this checkout's `cortex` against another one (e.g. a wrapper that
runs an older checkout: `cd OLD && PYTHONPATH=OLD exec python -m cortexfs "$@"` — the cd
too, as `python -m` looks in the working folder first), each on its own copy
of every store (their caches are keyed by the code that wrote them, so the two sides must
not share one; each copy is re-stamped by `cortex index regen --all` first), runs
interleaved so that both meet the same load: a warm `cortex recall`, `cortex brief`, and
`cortex recall` after one atom changed — wall and CPU, median and min.

CPU time is printed next to wall time: on a shared machine the wall time includes waiting
for a core. Queries are 1-4 words drawn (seeded) from the store's own summaries, so they
match. Dense vectors are left out unless --dense is given (and the embed extra installed).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cortexfs import recall as rc
from cortexfs.store import Store


def queries_from(index: rc.LexicalIndex, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    cols = index.columns()
    sample = random.Random(seed).sample(range(len(cols.live)), min(500, len(cols.live)))
    words = [w for i in sample for w in index.doc(i).summary.split()
             if len(w) > 3 and w.isalpha()]
    if not words:
        raise SystemExit("the store has no atoms with summaries to draw queries from")
    return [" ".join(rng.sample(words, rng.randint(1, 4))) for _ in range(n)]


def _misspell(query: str, n: int) -> str:
    """The query with its longest word cut short (`tokeniz`) or two letters swapped."""
    words = query.split()
    i = max(range(len(words)), key=lambda j: len(words[j]))
    w = words[i]
    if len(w) >= 5:
        words[i] = w[:-2] if n % 2 else w[:2] + w[3] + w[2] + w[4:]
    return " ".join(words)


def percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return f"p50 {statistics.median(ms):6.1f} ms   p95 {p95:6.1f} ms   max {ms[-1]:6.1f} ms"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Run a whole process: (wall s, CPU s, peak RSS MB); exits on failure."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1) or "error" in err.lower():
        raise SystemExit(f"error: `{' '.join(cmd)}` failed: {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def in_process(store: Store, weights: rc.Weights, args: argparse.Namespace) -> int:
    if args.cold:
        shutil.rmtree(store.cache_dir / "recall", ignore_errors=True)
    started = time.perf_counter()
    first = rc.recall(store, "warm up", k=args.k, weights=weights)
    first_s = time.perf_counter() - started
    index = rc.open_retriever(store, dense=args.dense).lexical
    print(f"store: {store.home} — {index.columns().n_live} atoms in "
          f"{len(store.project_names())} projects; signals: {', '.join(first.signals)}")
    print(f"first recall in this process ({'cold build' if args.cold else 'index load'}): "
          f"{first_s:.2f} s")
    queries = queries_from(index, args.queries, args.seed)
    for label, max_age in (("re-checking every file per query", 0.0),
                           ("server mode (files re-checked at most once a second)", 1.0)):
        samples, cpu = [], []
        for q in queries:
            t, c = time.perf_counter(), time.process_time()
            rc.recall(store, q, k=args.k, weights=weights, max_age=max_age)
            samples.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        print(f"in-process, warm, {label}:\n    wall {percentiles(samples)}\n"
              f"    CPU  {percentiles(cpu)}  ({len(samples)} queries)")
    # partial words and typos: the variant look-up only runs for words no atom has
    typos = [_misspell(q, n) for n, q in enumerate(queries)]
    for label, tuning in (("variants of unknown words on", rc.DEFAULT_TUNING),
                          ("variants off", rc.Tuning(fuzzy_weight=0))):
        cpu = []
        for q in typos:
            c = time.process_time()
            rc.recall(store, q, k=args.k, weights=weights, max_age=60, tuning=tuning)
            cpu.append(time.process_time() - c)
        print(f"in-process, server mode, one word misspelt per query, {label}:\n"
              f"    CPU  {percentiles(cpu)}  ({len(cpu)} queries)")
    env = dict(os.environ, CORTEX_HOME=str(store.home))
    cmd = [sys.executable, "-m", "cortexfs", "recall", "--k", str(args.k)]
    if not args.dense:
        cmd.append("--no-dense")
    walls, cpus = [], []
    for q in queries[:args.processes]:
        wall, cpu_s, _ = run([*cmd, q], env)
        walls.append(wall)
        cpus.append(cpu_s)
    print(f"whole `cortex recall` process: wall median {statistics.median(walls):.3f} s, "
          f"max {max(walls):.3f} s; CPU (user+sys) median {statistics.median(cpus):.3f} s  "
          f"({len(walls)} runs)")
    return 0


# --- --scale -------------------------------------------------------------------------------------

ROWS = [("first build, wall s", "build"), ("first build, peak RSS MB", "build_rss"),
        ("warm `cortex recall`, wall s", "warm"), ("in-process warm query p50, ms", "query"),
        ("one atom changed: `cortex recall`, wall s", "changed"),
        ("`cortex brief`, wall s", "brief"), ("`cortex ready`, wall s", "ready")]


def _touch_one(store: Store, n: int) -> None:
    """Change one atom's body (a new sentence, so its content hash changes)."""
    project = store.projects()[n % len(store.projects())]
    folder = project.root / "experiments"
    names = sorted(p for p in os.listdir(folder) if p.startswith("EXP-"))
    path = folder / names[(n * 7919) % len(names)]
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"\nBenchmark edit {n}: quokka{n} census.\n")


def scale_one(home: Path, args: argparse.Namespace) -> dict[str, list[float]]:
    store = Store.open(home)
    env = dict(os.environ, CORTEX_HOME=str(home), CORTEX_EMBED_MODEL="off")
    cortex = [sys.executable, "-m", "cortexfs"]
    out: dict[str, list[float]] = {key: [] for _, key in ROWS}
    for _ in range(args.build_reps):
        shutil.rmtree(store.cache_dir / "recall", ignore_errors=True)
        wall, _, rss = run([*cortex, "recall", "--no-dense", "cache latency"], env)
        out["build"].append(wall)
        out["build_rss"].append(rss)
    rc.forget_open_indexes()
    os.environ["CORTEX_EMBED_MODEL"] = "off"
    weights = rc.Weights(dense=0)
    rc.recall(store, "warm up", weights=weights)
    queries = queries_from(rc.open_retriever(store, dense=False).lexical, 20 * args.reps,
                           args.seed)
    for rep in range(args.reps):  # each rep: the p50 of 20 queries
        samples = []
        for q in queries[rep * 20:(rep + 1) * 20]:
            t = time.perf_counter()
            rc.recall(store, q, weights=weights)
            samples.append(time.perf_counter() - t)
        out["query"].append(statistics.median(samples) * 1000)
    time.sleep(2.5)  # past the racy window of the files the queries above may have indexed
    for n in range(args.reps):
        out["warm"].append(run([*cortex, "recall", "--no-dense", queries[n]], env)[0])
    for n in range(args.reps):
        _touch_one(store, n)
        out["changed"].append(run([*cortex, "recall", "--no-dense", queries[n]], env)[0])
    run([*cortex, "brief"], env)
    run([*cortex, "ready"], env)
    for _ in range(args.reps):
        out["brief"].append(run([*cortex, "brief"], env)[0])
        out["ready"].append(run([*cortex, "ready"], env)[0])
    return out


def scale(args: argparse.Namespace) -> int:
    stores = [Path(s) for s in args.stores]
    results = []
    heads = []
    for home in stores:
        print(f"measuring {home} …", file=sys.stderr, flush=True)
        results.append(scale_one(home, args))
        atoms = rc.open_retriever(Store.open(home), dense=False).lexical.columns().n_live
        heads.append(f"{atoms:,} atoms")
    print(f"\nmedian (min) of {args.reps} runs; first build: {args.build_reps} runs; "
          "×: growth of the median from the previous size")
    print(f"{'':44}" + "".join(f"{h:>24}" for h in heads))
    for label, key in ROWS:
        cells = []
        prev = None
        for res in results:
            med, low = statistics.median(res[key]), min(res[key])
            grow = f" ×{med / prev:.1f}" if prev else ""
            cells.append(f"{med:.2f} ({low:.2f}){grow}" if med < 100 else
                         f"{med:.0f} ({low:.0f}){grow}")
            prev = med
        print(f"{label:44}" + "".join(f"{c:>24}" for c in cells))
    return 0


PAIRED = [("warm `cortex recall`", "warm"), ("`cortex brief`", "brief"),
          ("one atom changed: `cortex recall`", "changed"),
          ("then `cortex brief`", "changed brief")]


def paired(other: str, args: argparse.Namespace) -> int:
    """This checkout's cortex and `other`, each on its own copy of each store, interleaved."""
    sides = {"this": [sys.executable, "-m", "cortexfs"], "other": [other]}
    loads = []
    base = Path(tempfile.mkdtemp(prefix="cortex-recall-paired-"))
    try:
        for home in args.stores:
            print(f"copying {home} …", file=sys.stderr, flush=True)
            envs = {}
            for name, cortex in sides.items():
                copy = base / name
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(home, copy, symlinks=True)
                envs[name] = dict(os.environ, CORTEX_HOME=str(copy), CORTEX_EMBED_MODEL="off")
                # as a user's install runs: compiled once, not on every process
                envs[name].pop("PYTHONDONTWRITEBYTECODE", None)
                run([*cortex, "index", "regen", "--all"], envs[name])
                run([*cortex, "recall", "--no-dense", "warm up"], envs[name])  # (the index)
                run([*cortex, "brief"], envs[name])
            time.sleep(2.5)  # past the racy window of what the commands above wrote
            figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for changed in (False, True):  # (nothing changed first: then every cache holds)
                for rep in range(args.reps):
                    for name in list(sides) if rep % 2 == 0 else list(reversed(sides)):
                        cortex, env = sides[name], envs[name]
                        loads.append(os.getloadavg()[0])
                        if changed:
                            _touch_one(Store.open(Path(env["CORTEX_HOME"])), rep)
                        for key, cmd in (("warm", ["recall", "--no-dense", "cache latency"]),
                                         ("brief", ["brief"])):
                            key = f"changed {key}".replace(" warm", "") if changed else key
                            figures.setdefault((key, name), []).append(
                                run([*cortex, *cmd], env)[:2])
            retriever = rc.open_retriever(Store.open(base / "this"), dense=False)
            retriever.refresh(dense=False)
            atoms = retriever.lexical.columns().n_live
            print(f"\n{home}: {atoms:,} atoms, whole processes, {args.reps} interleaved runs "
                  "each: wall s median (min) / CPU s median (min)")
            print(f"{'':36}{'this':>28}{'other':>28}")
            for label, key in PAIRED:
                cells = []
                for name in sides:
                    wall, cpu = zip(*figures[(key, name)], strict=True)
                    cells.append(f"{statistics.median(wall):.3f} ({min(wall):.3f}) / "
                                 f"{statistics.median(cpu):.2f} ({min(cpu):.2f})")
                print(f"{label:36}" + "".join(f"{c:>28}" for c in cells))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\nthis: {' '.join(sides['this'])}; other: {other}; cores: {os.cpu_count()}; "
          f"load average during the runs: min {min(loads):.2f}, median "
          f"{statistics.median(loads):.2f}, max {max(loads):.2f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    ap.add_argument("stores", type=Path, nargs="+", help="the store(s) (CORTEX_HOME)")
    ap.add_argument("--scale", action="store_true", help="the growth table over the stores")
    ap.add_argument("--paired", metavar="OTHER_CORTEX",
                    help="compare with another cortex command on copies of the stores")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--build-reps", type=int, default=2)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--processes", type=int, default=10, help="whole `cortex recall` runs")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cold", action="store_true", help="delete .cache/recall first")
    ap.add_argument("--dense", action="store_true", help="include the dense signal")
    args = ap.parse_args(argv)
    if args.scale:
        return scale(args)
    if args.paired:
        return paired(args.paired, args)
    if len(args.stores) != 1:
        ap.error("give one store, or --scale with several")
    store = Store.open(args.stores[0])
    if not args.dense:
        os.environ["CORTEX_EMBED_MODEL"] = "off"
    return in_process(store, rc.DEFAULT_WEIGHTS if args.dense else rc.Weights(dense=0), args)


if __name__ == "__main__":
    sys.exit(main())
