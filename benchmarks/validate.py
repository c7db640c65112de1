"""Time `cortex validate` on an existing store: whole processes and the rules alone.

    .venv/bin/python benchmarks/validate.py STORE [--runs 5]

STORE is a CORTEX_HOME (e.g. one built by `scripts/gen_corpus.py OUT --atoms 10000`).
Prints, in seconds: the best and median whole-process `cortex --home STORE validate
--format json` (the first run may fill the loader's cache and the findings cache; later runs
are warm: no project changed, no rule runs), the same with the findings cache deleted before
each run (every project checked, as after a change to each), and, in one process, loading
every project versus running every rule over the loaded atoms — the validation cost on top
of loading, which a first `cortex ready` pays too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortexfs.loader import load_project  # noqa: E402
from cortexfs.store import Store  # noqa: E402
from cortexfs.validate import check_project  # noqa: E402


def whole_process(home: Path, runs: int, *, unchecked: bool = False,
                  ) -> tuple[list[float], dict[str, object]]:
    cortex = Path(sys.executable).parent / "cortex"
    times: list[float] = []
    data: dict[str, object] = {}
    for _ in range(runs):
        if unchecked:
            shutil.rmtree(home / ".cache" / "validate", ignore_errors=True)
        start = time.perf_counter()
        proc = subprocess.run([str(cortex), "--home", str(home), "validate", "--format", "json"],
                              capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            sys.exit(f"cortex validate failed: {proc.stderr.strip()}")
        data = json.loads(proc.stdout)
    return times, data


def in_process(home: Path, runs: int) -> tuple[float, float]:
    store = Store.open(home)
    best_load = best_rules = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        loaded = [(p, load_project(p)) for p in store.projects()]
        mid = time.perf_counter()
        for project, lp in loaded:
            check_project(project, lp)
        end = time.perf_counter()
        best_load, best_rules = min(best_load, mid - start), min(best_rules, end - mid)
    return best_load, best_rules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path, help="a CORTEX_HOME to validate")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    times, data = whole_process(args.store, args.runs)
    print(f"store: {args.store}  atoms: {data['atoms']}  errors: {data['errors']}  "
          f"warnings: {data['warnings']}")
    print(f"cortex validate (whole process): first {times[0]:.3f}s  "
          f"best {min(times):.3f}s  median {statistics.median(times):.3f}s")
    times, _ = whole_process(args.store, args.runs, unchecked=True)
    print(f"cortex validate, every project checked afresh (findings cache deleted): "
          f"best {min(times):.3f}s  median {statistics.median(times):.3f}s")
    load, rules = in_process(args.store, args.runs)
    print(f"in one process: load {load:.3f}s  rules {rules:.3f}s "
          f"({rules / max(int(str(data['atoms'])), 1) * 1e6:.1f} µs per atom)")


if __name__ == "__main__":
    main()
