"""Time `cortex brief` on an existing store and check that it never exceeds its budget.

    .venv/bin/python benchmarks/brief.py STORE [--runs 5]

STORE is a CORTEX_HOME (e.g. one built by `scripts/gen_corpus.py OUT --atoms 10000`).
Prints, in seconds, the first, best and median whole-process `cortex --home STORE brief`
(wall clock, and the median CPU time, user + system)
for the store-level brief (no project: every project's atoms are ranked) and for the
largest project; then, in one process, the brief of the store and of every project at
budgets 500 … 16,000, checking each against its budget with the same estimator
(`cortexfs.tokens.estimate`, characters / 4) and that a cut brief ends with its banner.
Two of those budgets also go through the command line, whose output must match. Exits 1
when any brief is over its budget.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortexfs.brief import build  # noqa: E402
from cortexfs.loader import atom_paths  # noqa: E402
from cortexfs.store import Store  # noqa: E402
from cortexfs.tokens import estimate  # noqa: E402

BUDGETS = (500, 750, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 12000, 16000)


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cortex(home: Path, *args: str) -> tuple[float, float, str]:
    """Wall-clock seconds, CPU seconds and stdout of one `cortex --home HOME brief ARGS`."""
    cortex_bin = Path(sys.executable).parent / "cortex"
    cpu = _child_cpu()
    start = time.perf_counter()
    proc = subprocess.run([str(cortex_bin), "--home", str(home), "brief", *args],
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"cortex brief {' '.join(args)} failed: {proc.stderr.strip()}")
    return elapsed, _child_cpu() - cpu, proc.stdout


def timing(home: Path, args: list[str], runs: int) -> str:
    runs_ = [cortex(home, *args) for _ in range(runs)]
    times = [r[0] for r in runs_]
    cpu = [r[1] for r in runs_]
    # CPU time says what the command costs when the machine is shared; wall time what a
    # user waits
    return (f"first {times[0]:.3f}s  best {min(times):.3f}s  median "
            f"{statistics.median(times):.3f}s  (CPU median {statistics.median(cpu):.3f}s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path, help="a CORTEX_HOME")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    store = Store.open(args.store)
    projects = store.projects()
    largest = max(projects, key=lambda p: sum(1 for _ in atom_paths(p))).name \
        if projects else None
    atoms = sum(sum(1 for _ in atom_paths(p)) for p in projects)
    print(f"store: {args.store}  projects: {len(projects)}  atoms: {atoms}")
    print(f"cortex brief (store level, whole process): {timing(args.store, [], args.runs)}")
    if largest:
        print(f"cortex brief {largest} (whole process):  "
              f"{timing(args.store, [largest], args.runs)}")
    over: list[str] = []
    checked = 0
    worst = 0.0
    for name in [None, *(p.name for p in projects)]:
        for budget in BUDGETS:
            result = build(store, name, budget)
            used = estimate(result.text)
            checked += 1
            worst = max(worst, used / budget)
            if used > budget:
                over.append(f"{name or '(store)'} @ {budget}: {used} tokens")
            if result.cut and "[cortex brief:" not in result.text:
                over.append(f"{name or '(store)'} @ {budget}: cut without a banner")
    for budget in (500, 16000):
        _, _, text = cortex(args.store, "--budget", str(budget))
        if text != build(store, None, budget).text or estimate(text) > budget:
            over.append(f"command line @ {budget}: output differs or is over budget")
    print(f"budgets {BUDGETS[0]}…{BUDGETS[-1]}: {checked} briefs checked, fullest used "
          f"{worst:.1%} of its budget, {len(over)} over")
    for line in over:
        print(f"  OVER: {line}")
    if over:
        sys.exit(1)


if __name__ == "__main__":
    main()
