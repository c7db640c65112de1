"""Time `cortex ready` on a 10,000-atom store when nothing has changed.

    .venv/bin/python benchmarks/ready.py OUT_DIR [--atoms 10000] [--runs 7]

Builds OUT_DIR with scripts/gen_corpus.py (unless it already holds a store), makes it ready
the way an agent would — a written mission, roadmap and STATUS.md in every project, then
`cortex index regen --all` and a commit — and times whole `cortex --home OUT_DIR ready`
processes: with nothing changed (the figure: the median after the first run, which may fill
the caches; timed from 2 s after the store was last written, as files younger than that
are not trusted to be unchanged), then with `--no-cache` (every check re-run, as after any
change), then the cost of each check in one process. Prints seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortexfs import cache, ready  # noqa: E402
from cortexfs.loader import load_project, scan_many  # noqa: E402
from cortexfs.store import Store  # noqa: E402

CORTEX = Path(sys.executable).parent / "cortex"
STATUS = """\
# Status — {name}

## Current phase

Phase 2 — consolidating what the experiments showed.

## Recent progress

- Indexed every experiment; newest atom {newest}.

## Open blockers

- None.

## Next steps

- Write patterns for the clusters `cortex maintain` suggests.
"""


def _run(*args: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:4])} … failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def build(out: Path, atoms: int) -> None:
    """A store made ready: generated, governance files written, regenerated, committed."""
    if not (out / "context" / "projects").is_dir():
        start = time.perf_counter()
        _run(sys.executable, str(ROOT / "scripts" / "gen_corpus.py"), str(out),
             "--atoms", str(atoms))
        print(f"built {out} with {atoms} atoms in {time.perf_counter() - start:.1f}s")
    store = Store.open(out)
    for project in store.projects():
        dates = [a.date for a in load_project(project, bodies=False).atoms if a.date]
        newest = max(dates, default=dt.date.today())
        (project.root / "mission.md").write_text(
            f"# Mission — {project.name}\n\n## Goal\n\nKeep {project.name} measurable.\n")
        (project.root / "roadmap.md").write_text(
            f"# Roadmap — {project.name}\n\n## Phase 1\n\n- [x] baseline\n- [ ] patterns\n")
        (project.root / "STATUS.md").write_text(STATUS.format(name=project.name,
                                                              newest=newest))
    start = time.perf_counter()
    _run(str(CORTEX), "--home", str(out), "index", "regen", "--all")
    print(f"cortex index regen --all: {time.perf_counter() - start:.2f}s")
    _run("git", "add", "-A", cwd=out)
    if _run("git", "status", "--porcelain", cwd=out).strip():
        # the commit date must not be older than the newest atom: date it at the newest atom
        _run("git", "commit", "-qm", "benchmark: governance files", cwd=out)


CPU: list[float] = []  # user + system seconds of each timed process (git's included)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def whole_process(out: Path, runs: int, *extra: str) -> tuple[list[float], dict[str, object]]:
    times: list[float] = []
    data: dict[str, object] = {}
    CPU.clear()
    for _ in range(runs):
        start, cpu = time.perf_counter(), _children_cpu()
        proc = subprocess.run([str(CORTEX), "--home", str(out), "ready", "--format", "json",
                               *extra], capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        CPU.append(_children_cpu() - cpu)
        if proc.returncode not in (0, 1):
            sys.exit(f"cortex ready failed: {proc.stderr.strip()}")
        data = json.loads(proc.stdout)
    return times, data


def parts(out: Path) -> dict[str, float]:
    """Seconds spent in each part of the check, in one warm process."""
    store = Store.open(out)
    projects = store.projects()
    gaps: list[ready.Gap] = []
    timings: dict[str, float] = {}
    t = time.perf_counter()
    scans = scan_many(projects)
    loaded = {sc.project.name: sc.loaded() for sc in scans}
    timings["load atoms"] = time.perf_counter() - t
    shutil.rmtree(store.cache_dir / "validate", ignore_errors=True)  # every rule runs
    t = time.perf_counter()
    ready._validation(store, scans, loaded, set(), gaps)
    timings["validation"] = time.perf_counter() - t
    t = time.perf_counter()
    ready._derived(store, None, gaps, scans)
    timings["regeneration (dry)"] = time.perf_counter() - t
    t = time.perf_counter()
    state = ready._git(store, None, gaps)
    timings["git status"] = time.perf_counter() - t
    t = time.perf_counter()
    ready._status_freshness(store, projects, loaded, state, gaps)
    timings["STATUS freshness (git log)"] = time.perf_counter() - t
    t = time.perf_counter()
    ids = ready._all_ids(store, loaded)
    ready._knowledge_evidence(store, loaded, gaps)
    for p in projects:
        ready._charter(store, p, gaps)
        ready._links(store, p, ids, gaps)
    ready._links_store(store, ids, gaps)
    ready._hippocampus(store, gaps)
    timings["charter, evidence, links, pointers"] = time.perf_counter() - t
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="store folder (built when it does not exist)")
    parser.add_argument("--atoms", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    build(args.out, args.atoms)
    # a file written within cache.RACY_NS may be rewritten within the same mtime, so
    # no result is cached until the store has been still that long; a session starts long
    # after the last one wrote its files
    time.sleep(cache.RACY_NS / 1e9 + 0.1)
    times, data = whole_process(args.out, args.runs + 1)
    gaps = data.get("gaps") or []
    assert isinstance(gaps, list)
    print(f"store: {args.out}  ready: {data.get('ready')}  gaps: {len(gaps)}")
    for gap in gaps[:5]:
        print(f"  gap: {gap['check']}: {gap['message'][:120]}")
    warm, cpu = times[1:], CPU[1:]
    print(f"cortex ready (whole process, nothing changed): first {times[0]:.3f}s  "
          f"best {min(warm):.3f}s  median {statistics.median(warm):.3f}s  over {len(warm)} runs "
          f"(CPU median {statistics.median(cpu):.3f}s)")
    full, _ = whole_process(args.out, args.runs, "--no-cache")
    print(f"cortex ready --no-cache (every check re-run): best {min(full):.3f}s  "
          f"median {statistics.median(full):.3f}s  over {len(full)} runs "
          f"(CPU median {statistics.median(CPU):.3f}s)")
    best: dict[str, float] = {}
    for _ in range(3):
        for name, seconds in parts(args.out).items():
            best[name] = min(best.get(name, float("inf")), seconds)
    print("the checks in one process (best of 3): "
          + "  ".join(f"{k} {v:.3f}s" for k, v in best.items()))


if __name__ == "__main__":
    main()
