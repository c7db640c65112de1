#!/usr/bin/env python3
"""Two machines writing at once, synced many times: is anything lost, duplicated or misdirected?

    python benchmarks/sync.py [--rounds 50] [--atoms 5] [--lines 100] [--workdir DIR]
                              [--processes] [--store STORE [--project NAME]]

Builds a bare remote and two clones under --workdir (a temporary folder by default) — of
an empty store, or of STORE (an existing store, e.g. one from scripts/gen_corpus.py, whose
project NAME, default the first, the clones write into). Each
round, both clones add --atoms atoms with the SAME new ids (experiments, then knowledge
citing them, then a pattern citing both, with `links`, `superseded:` status suffixes and
body mentions) and append --lines access-log lines about their own atoms; then they sync
in both orders (round r even: A, B, A; odd: B, A, B). At the end it prints:

- lost atoms          atoms written that are missing from a clone (target 0)
- lost log lines      log lines written that are missing from a clone (target 0)
- duplicate ids       ids that occur more than once in a clone (target 0)
- dangling references evidence / sources / links / status suffixes naming a missing atom,
                      or a body mention that no longer names the atom it meant (target 0)
- misattributed lines log lines whose `file` is not the atom they were written about (0)
- renumberings, converged (both clones at the same tree), and the median / p90 wall time
  of one sync.

Syncs run in-process through `cortexfs.sync.sync` (the library call `cortex sync` makes);
with --processes each sync is a whole `python -m cortexfs sync` process instead.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from cortexfs import accesslog, git, scaffold
from cortexfs import sync as sync_lib
from cortexfs.atoms import KIND_BY_SHORT
from cortexfs.authoring import NewAtom, create_atom
from cortexfs.commit import commit_paths
from cortexfs.frontmatter import read, set_keys
from cortexfs.loader import atom_paths
from cortexfs.store import Store

PROJECT = "bench"  # the project written into (--project, or the first of --store)


class Machine:
    """One clone, and everything written on it (to check nothing is lost)."""

    def __init__(self, store: Store, name: str) -> None:
        self.store = store
        self.name = name
        self.summaries: list[str] = []
        self.sessions: list[str] = []

    def new(self, kind: str, summary: str, evidence: list[str] | None = None,
            links: list[str] | None = None, body: str = "") -> str:
        atom = create_atom(self.store.project(PROJECT), NewAtom(
            KIND_BY_SHORT[kind], summary, ["bench"], evidence or [], evidence or [],
            links or []))
        if body:
            atom.path.write_text(atom.path.read_text() + body)
        self.summaries.append(summary)
        return atom.id

    def write_round(self, r: int, n_atoms: int, n_lines: int, rng: random.Random) -> None:
        tag = f"{self.name}{r}"
        n_exp = max(1, n_atoms - 2)
        exps: list[str] = []
        for i in range(n_exp):
            links = exps[-1:]
            body = f"Follows {exps[-1]}. ref:{tag} exp {i - 1}\n" if exps else ""
            exps.append(self.new("exp", f"{tag} exp {i}", links=links, body=body))
        paths = []
        if len(exps) >= 2:
            first = self.store.project(PROJECT).folder(KIND_BY_SHORT["exp"]) / f"{exps[0]}.md"
            first.write_text(set_keys(first.read_text(), {"status": f"superseded:{exps[1]}"}))
            paths.append(first)
        ids = list(exps)
        if n_atoms - n_exp >= 1:
            ids.append(self.new("k", f"{tag} knows", evidence=exps,
                                body=f"Rests on {exps[-1]}. ref:{tag} exp {len(exps) - 1}\n"))
        if n_atoms - n_exp >= 2:
            ids.append(self.new("pat", f"{tag} pattern", evidence=exps, links=[ids[-1]]))
        project = self.store.project(PROJECT)
        paths += [p for _, p in atom_paths(project)]
        commit_paths(self.store, paths, f"atom: round {r} on {self.name}")
        known = {p.stem: str(read(p).meta["summary"]) for _, p in atom_paths(project)}
        mine = [i for i, s in known.items() if s.startswith(self.name)]
        lines = []
        for j in range(n_lines):
            atom_id = rng.choice(ids if rng.random() < 0.7 else mine)
            session = f"{known[atom_id]}#{self.name}#{r}#{j}"
            lines.append(accesslog.format_line(f"{atom_id}.md", "Read", session))
            self.sessions.append(session)
        accesslog.append(project.access_log, lines)


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def setup(work: Path, source: Path | None) -> tuple[Machine, Machine]:
    remote = work / "remote.git"
    if source is not None:
        sh(work, "clone", "-q", "--bare", str(source), str(remote))
        for name in ("a", "b"):
            sh(work, "clone", "-q", str(remote), str(work / name))
        return Machine(Store(work / "a"), "A"), Machine(Store(work / "b"), "B")
    sh(work, "init", "-q", "--bare", "-b", "main", str(remote))
    a = Store(work / "a")
    created = scaffold.init_store(a)
    commit_paths(a, [*created, *git.ensure_repo(a)], "chore: initialise cortex store")
    sh(a.home, "checkout", "-q", "-B", "main")
    _, created = scaffold.new_project(a, PROJECT)
    commit_paths(a, created, f"project: add {PROJECT}")
    sync_lib.set_remote(a, str(remote))
    sync_lib.sync(a)
    sh(work, "clone", "-q", str(remote), str(work / "b"))
    return Machine(a, "A"), Machine(Store(work / "b"), "B")


def run_sync(m: Machine, processes: bool, times: list[float],
             renumbered: list[str]) -> int:
    start = time.perf_counter()
    if processes:
        proc = subprocess.run([sys.executable, "-m", "cortexfs", "--home", str(m.store.home),
                               "sync", "--format", "json"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"sync on {m.name} failed: {proc.stderr.strip()}")
        data = json.loads(proc.stdout)
        sent = int(data["sent"])
        renumbered += [f"{r['old']}→{r['new']}" for r in data["renumbered"]]
    else:
        result = sync_lib.sync(m.store)
        sent = result.sent
        renumbered += [f"{r.old}→{r.new}" for r in result.renumbered]
    times.append(time.perf_counter() - start)
    return sent


def check(machines: list[Machine]) -> dict[str, int]:
    written = Counter(s for m in machines for s in m.summaries)
    sessions = Counter(s for m in machines for s in m.sessions)
    out = Counter({"lost atoms": 0, "lost log lines": 0, "duplicate ids": 0,
                   "dangling references": 0, "misattributed lines": 0})
    trees = set()
    for m in machines:
        project = m.store.project(PROJECT)
        atoms = {}
        ids: Counter[str] = Counter()
        for _, path in atom_paths(project):
            doc = read(path)
            atoms[path.stem] = doc
            ids[str(doc.meta.get("id"))] += 1
        out["duplicate ids"] += sum(n - 1 for n in ids.values() if n > 1)
        out["duplicate ids"] += sum(1 for i, d in atoms.items() if d.meta.get("id") != i)
        present = Counter(str(d.meta["summary"]) for d in atoms.values())
        out["lost atoms"] += sum((written - present).values())
        by_summary = {str(d.meta["summary"]): i for i, d in atoms.items()}
        for doc in atoms.values():
            refs = [*_list(doc.meta.get("evidence")), *_list(doc.meta.get("source-experiments")),
                    *_list(doc.meta.get("links"))]
            status = str(doc.meta.get("status") or "")
            if ":" in status:
                refs.append(status.split(":", 1)[1])
            out["dangling references"] += sum(1 for ref in refs if ref not in atoms)
            for line in doc.body.splitlines():
                mention, sep, meant = line.partition("ref:")
                target = by_summary.get(meant)
                if sep and (target is None or not re.search(rf"\b{target}\b", mention)):
                    out["dangling references"] += 1
        log = project.access_log
        entries = [json.loads(x) for x in log.read_text().splitlines() if x.strip()] \
            if log.exists() else []
        seen = Counter(e["session"] for e in entries)
        out["lost log lines"] += sum((sessions - seen).values())
        for e in entries:
            if e.get("session") not in sessions:
                continue  # a line the store had before the benchmark
            meant = e["session"].split("#")[0]
            if by_summary.get(meant, "?") + ".md" != e["file"]:
                out["misattributed lines"] += 1
        trees.add(sh(m.store.home, "rev-parse", "HEAD^{tree}"))
    out["converged"] = int(len(trees) == 1)
    return dict(out)


def _list(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--atoms", type=int, default=5, help="atoms per clone per round")
    ap.add_argument("--lines", type=int, default=100, help="log lines per clone per round")
    ap.add_argument("--workdir", type=Path, help="where to build the clones (default: a temp dir)")
    ap.add_argument("--processes", action="store_true",
                    help="run each sync as a `python -m cortexfs sync` process")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--store", type=Path, help="start from a copy of this existing store")
    ap.add_argument("--project", help="the project to write into (default: the first)")
    args = ap.parse_args()
    global PROJECT
    for var, value in (("GIT_AUTHOR_NAME", "bench"), ("GIT_AUTHOR_EMAIL", "bench@cortexfs.invalid"),
                       ("GIT_COMMITTER_NAME", "bench"),
                       ("GIT_COMMITTER_EMAIL", "bench@cortexfs.invalid")):
        os.environ.setdefault(var, value)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="cortex-sync-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    a, b = setup(work, args.store)
    if args.project or args.store:
        PROJECT = args.project or a.store.project_names()[0]
    times: list[float] = []
    renumbered: list[str] = []
    t0 = time.perf_counter()
    for r in range(args.rounds):
        a.write_round(r, args.atoms, args.lines, rng)
        b.write_round(r, args.atoms, args.lines, rng)
        order = [a, b, a] if r % 2 == 0 else [b, a, b]
        for m in order:
            run_sync(m, args.processes, times, renumbered)
    # settle: a clone that received commits regenerates and may push that once more
    for _ in range(3):
        if sum(run_sync(m, args.processes, times, renumbered) for m in (a, b)) == 0:
            break
    total = time.perf_counter() - t0
    result = check([a, b])
    written_atoms = len(a.summaries) + len(b.summaries)
    written_lines = len(a.sessions) + len(b.sessions)
    print(f"rounds {args.rounds}, {args.atoms} atoms and {args.lines} log lines per clone per "
          f"round ({written_atoms} atoms, {written_lines} log lines); syncs "
          f"{'as processes' if args.processes else 'in-process (library)'}; "
          f"{f'store {args.store} ({PROJECT}), ' if args.store else ''}work dir {work}")
    for key in ("lost atoms", "lost log lines", "duplicate ids", "dangling references",
                "misattributed lines"):
        print(f"{key:22s} {result[key]}")
    print(f"{'renumberings':22s} {len(renumbered)}")
    print(f"{'converged':22s} {'yes' if result['converged'] else 'NO'}")
    times.sort()
    print(f"{'syncs':22s} {len(times)}, median {statistics.median(times) * 1000:.0f} ms, "
          f"p90 {times[int(len(times) * 0.9)] * 1000:.0f} ms, total run {total:.1f} s")
    bad = sum(result[k] for k in ("lost atoms", "lost log lines", "duplicate ids",
                                  "dangling references", "misattributed lines"))
    sys.exit(1 if bad or not result["converged"] else 0)


if __name__ == "__main__":
    main()
