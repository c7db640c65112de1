#!/usr/bin/env python3
"""Recall latency on a store (e.g. the 10,000-atom one from scripts/gen_corpus.py).

    python scripts/gen_corpus.py /tmp/corpus --atoms 10000
    python benchmarks/recall.py /tmp/corpus [--queries 200] [--processes 10] [--cold] [--dense]

Prints:
- the first refresh of the process (a cold build with --cold, which deletes the store's
  .cache/recall first; otherwise loading the cache from disk),
- per-query latency in-process with a warm cache, p50 / p95 / max, two ways: re-checking
  every atom file before each query (what `cortex recall` does), and trusting a check made
  less than a second before (what the MCP server does),
- the wall time of whole `cortex recall QUERY` processes (median and max).

CPU time is printed next to wall time: on a shared machine the wall time includes waiting
for a core.

Queries are 1-4 words drawn (seeded) from the store's own summaries, so they match.
Dense vectors are left out unless --dense is given (and the embed extra is installed);
embedding a 10,000-atom store the first time takes a long while on a CPU.
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


def percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return f"p50 {statistics.median(ms):6.1f} ms   p95 {p95:6.1f} ms   max {ms[-1]:6.1f} ms"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    ap.add_argument("store", type=Path, help="the store (what CORTEX_HOME points at)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--processes", type=int, default=10, help="whole `cortex recall` runs")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cold", action="store_true", help="delete .cache/recall first")
    ap.add_argument("--dense", action="store_true", help="include the dense signal")
    args = ap.parse_args(argv)
    store = Store.open(args.store)
    if not args.dense:
        os.environ["CORTEX_EMBED_MODEL"] = "off"
    weights = rc.DEFAULT_WEIGHTS if args.dense else rc.Weights(dense=0)
    if args.cold:
        shutil.rmtree(store.cache_dir / "recall", ignore_errors=True)

    started = time.perf_counter()
    first = rc.recall(store, "warm up", k=args.k, weights=weights)
    first_s = time.perf_counter() - started
    index = rc.open_retriever(store, dense=args.dense).lexical
    print(f"store: {store.home} — {index.columns().n_live} atoms in {len(store.project_names())} "
          f"projects; signals: {', '.join(first.signals)}")
    print(f"first recall in this process ({'cold build' if args.cold else 'cache load'}): "
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

    env = dict(os.environ, CORTEX_HOME=str(store.home))
    cmd = [sys.executable, "-m", "cortexfs", "recall", "--k", str(args.k)]
    if not args.dense:
        cmd.append("--no-dense")
    walls, cpus = [], []
    for q in queries[:args.processes]:
        t, c = time.perf_counter(), children_cpu()
        proc = subprocess.run([*cmd, q], env=env, capture_output=True, text=True)
        walls.append(time.perf_counter() - t)
        cpus.append(children_cpu() - c)
        if proc.returncode != 0:
            print(f"error: `cortex recall {q!r}` exited {proc.returncode}: {proc.stderr.strip()}",
                  file=sys.stderr)
            return 1
    print(f"whole `cortex recall` process: wall median {statistics.median(walls):.3f} s, "
          f"max {max(walls):.3f} s; CPU (user+sys) median {statistics.median(cpus):.3f} s  "
          f"({len(walls)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
