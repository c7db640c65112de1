#!/usr/bin/env python3
"""Build a realistic cortex store for benchmarks and load tests.

    python scripts/gen_corpus.py OUT_DIR --atoms 10000 [--projects 10] [--seed 1]
                                 [--log-lines-per-atom 5] [--end-date 2026-11-01]
                                 [--malformed 0] [--no-git]

OUT_DIR becomes a real, initialised store (it is what CORTEX_HOME should point at):
`cortex init` layout, N scaffolded projects, and the atoms spread over them — about 70 %
experiments, 20 % knowledge, 10 % patterns — each with the frontmatter a real store has
(quoted summaries, flow-list tags, statuses such as `valid`, `challenged:EXP-…`,
`superseded:EXP-…`, `invalidated:EXP-…` with `invalidated-date` / `invalidated-reason`,
`links`, knowledge `evidence` and pattern `source-experiments` citing experiments that
exist) and a ~2 KB body following the packaged templates' sections. A few per cent of atoms
use the rarer YAML shapes people write by hand (comments, block lists, quoted dates, `|`
and backticks in summaries) so that every parser path is exercised.

Each project gets `_meta/access-log.jsonl`: lines in `cortexfs.accesslog.format_line`
format, timestamps ascending over the 60 days before --end-date, a Zipf-skewed choice of
atoms (a third of the atoms are never read, so the cold list is populated), ~5 % of lines
`_directory_search`. The atoms carry no `refs` / `last-ref` yet: the first
`cortex index regen` folds the logs into them.

Everything is derived from --seed and --end-date: the same arguments give the same bytes.
The store is committed to git (one initial commit) unless --no-git is given.
`--malformed N` adds N atoms with broken frontmatter (for tests of skipping and reporting).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import time
from pathlib import Path

from cortexfs import accesslog, git, scaffold
from cortexfs.atoms import EXPERIMENT, KNOWLEDGE, PATTERN, Kind
from cortexfs.escape import yaml_scalar
from cortexfs.store import Store

PROJECT_NAMES = [
    "flywheel", "cortex-self", "tactile-reasoning", "registry", "pipeline-ops",
    "eval-harness", "retrieval", "agent-infra", "data-quality", "planner",
    "vision-lab", "speech", "billing", "search-ranking", "onboarding",
]
_WORDS = (
    "registry pipeline stage throughput latency cache index shard replica queue worker "
    "scheduler retry timeout budget token prompt context window embedding recall rank "
    "fusion lexical dense sparse vector batch stream parser schema frontmatter atom "
    "experiment baseline ablation variance regression drift signal noise threshold sample "
    "dataset label annotation split holdout metric precision coverage artifact manifest "
    "snapshot commit merge conflict branch remote sync watcher hook session agent tool "
    "call payload response error fallback guard invariant heuristic evidence pattern "
    "cluster outlier histogram median percentile warmup cold hot decay strength memory "
    "consolidation review upstream downstream service dependency smoke test deploy "
    "rollback canary config flag migration backfill compaction checkpoint"
)
WORDS = _WORDS.split()
_TAGS = (
    "registry data-analysis milestone-2.2 pipeline diagnosis stage-isolation smoke-test "
    "service-dependency retrieval ranking latency caching eval ablation infra git sync "
    "hooks parsing yaml memory decay consolidation tooling prompt-design budget "
    "benchmark regression flaky-test deployment monitoring schema migration"
)
TAGS = _TAGS.split()
EXECUTORS = ["Cortex-lab1", "Cortex-lab2", "claude-code", "codex", "human"]
REASONS = [
    "baseline was measured on the wrong split",
    "the metric double-counted retries",
    "could not reproduce on a clean checkout",
    "the cache masked the real latency",
]
TOOLS = ["Read"] * 14 + ["Grep"] * 4 + ["Bash"] * 2


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng, 8, 18) for _ in range(sentences))


def _summary(rng: random.Random, kind: Kind) -> str:
    text = _sentence(rng, 6, 16)[:-1]
    roll = rng.random()
    if kind is KNOWLEDGE and roll < 0.15:
        return "ANTI-PATTERN: " + text
    if roll < 0.02:
        return text + " | with a pipe"
    if roll < 0.04:
        return text + " using `cortex index regen`"
    if roll < 0.05:
        return text + " <2 KB> & more"
    if roll < 0.08:
        return text + ": a colon case"
    return text


def _status(rng: random.Random, exp_ids: list[str]) -> str | None:
    """A status drawn with the frequencies of a lived-in store; None means no status key."""
    roll = rng.random()
    ref = rng.choice(exp_ids) if exp_ids else "EXP-001"
    if roll < 0.45:
        return "valid"
    if roll < 0.60:
        return "active"
    if roll < 0.65:
        return "partial"
    if roll < 0.70:
        return f"challenged:{ref}"
    if roll < 0.73:
        return "corrected"
    if roll < 0.81:
        return f"superseded:{ref}"
    if roll < 0.84:
        return f"refined:{ref}"
    if roll < 0.89:
        return f"invalidated:{ref}"  # dates added by _frontmatter
    if roll < 0.92:
        return "stale"
    if roll < 0.93:
        return "deprecated"
    return None  # no status at all: active


def _flow(items: list[str]) -> str:
    return yaml_scalar(items)


def _frontmatter(rng: random.Random, kind: Kind, atom_id: str, date: dt.date, project: str,
                 summary: str, tags: list[str], status: str | None, cited: list[str],
                 links: list[str]) -> str:
    lines: list[str] = []
    quirk = rng.random()
    if quirk < 0.02:
        lines.append("# written by hand; keep the evidence list in sync with the body")
    lines.append(f"id: {atom_id}")
    lines.append(f'date: "{date.isoformat()}"' if 0.02 <= quirk < 0.04
                 else f"date: {date.isoformat()}")
    lines.append(f"project: {project}")
    # the seed's stores double-quote summaries; a few hand-written ones are plain
    plain = 0.04 <= quirk < 0.06
    lines.append(f"summary: {yaml_scalar(summary) if plain else json.dumps(summary)}")
    if 0.06 <= quirk < 0.08:
        lines.append("tags:")
        lines.extend(f"  - {t}" for t in tags)
    else:
        lines.append(f"tags: {_flow(tags)}")
    if kind is KNOWLEDGE:
        lines.append(f"evidence: {_flow(cited)}")
    elif kind is PATTERN:
        lines.append(f"source-experiments: {_flow(cited)}")
        if rng.random() < 0.7:
            lines.append(f"evidence: {_flow(cited)}")
    if status is not None:
        lines.append(f"status: {status}")
        if status.startswith("invalidated"):
            inv = date + dt.timedelta(days=rng.randint(1, 40))
            lines.append(f"invalidated-date: {inv.isoformat()}")
            lines.append(f"invalidated-reason: {yaml_scalar(rng.choice(REASONS))}")
    if kind is EXPERIMENT:
        lines.append(f"executor: {rng.choice(EXECUTORS)}")
    if links or kind is EXPERIMENT:
        lines.append(f"links: {_flow(links)}")
    return "\n".join(lines) + "\n"


def _body(rng: random.Random, kind: Kind, atom_id: str, summary: str, cited: list[str]) -> str:
    out = [f"# {atom_id}: {summary}", ""]
    if kind is EXPERIMENT:
        sections = ["Background", "Execution", "Results", "Conclusion"]
        for name in sections:
            out += [f"## {name}", "", _paragraph(rng, rng.randint(3, 5)), ""]
        if rng.random() < 0.3:
            # a horizontal rule inside the body: must not be taken for a fence
            out += ["---", ""]
        out += ["## Reflection", "",
                f"- **Goal attainment**: {_sentence(rng, 6, 12)}",
                f"- **Unexpected findings**: {_sentence(rng, 6, 12)}",
                f"- **Process defects**: {_sentence(rng, 6, 12)}",
                f"- **Behavioural adjustments**: {_sentence(rng, 6, 12)}", ""]
    elif kind is KNOWLEDGE:
        out += ["## Statement", "", _paragraph(rng, rng.randint(5, 8)), "", "## Evidence", ""]
        out += [f"- {exp}: {_sentence(rng, 10, 20)}" for exp in cited]
        out += ["", _paragraph(rng, 3), ""]
    else:
        out += ["## Observation", "", _paragraph(rng, 4), "", "## Evidence", "",
                "| Experiment | Finding |", "|---|---|"]
        out += [f"| {exp} | {_sentence(rng, 5, 10)} |" for exp in cited]
        out += ["", "## Pattern Statement", "", _paragraph(rng, 2), "",
                "## Scope & Limitations", "", _paragraph(rng, 2), "",
                "## Implications", "", _paragraph(rng, 2), ""]
    return "\n".join(out)


def _split_counts(total: int, projects: int, rng: random.Random) -> list[int]:
    """Uneven but deterministic: weights 1..2, remainder to the first projects."""
    weights = [1 + rng.random() for _ in range(projects)]
    scale = total / sum(weights)
    counts = [int(w * scale) for w in weights]
    for i in range(total - sum(counts)):
        counts[i % projects] += 1
    return counts


def _project_name(i: int) -> str:
    base = PROJECT_NAMES[i % len(PROJECT_NAMES)]
    return base if i < len(PROJECT_NAMES) else f"{base}-{i // len(PROJECT_NAMES) + 1}"


def build_project(store: Store, name: str, atoms: int, rng: random.Random,
                  end: dt.date, log_lines_per_atom: float, malformed: int) -> int:
    """Write one project's atoms and access log; returns the number of files written."""
    project, _ = scaffold.new_project(store, name)
    n_exp = max(1, round(atoms * 0.7))
    n_k = round(atoms * 0.2)
    n_pat = max(0, atoms - n_exp - n_k)
    start = end - dt.timedelta(days=540)
    span = (end - start).days
    exp_dates = sorted(start + dt.timedelta(days=rng.randint(0, span)) for _ in range(n_exp))
    exp_ids = [EXPERIMENT.format_id(i + 1) for i in range(n_exp)]
    k_ids = [KNOWLEDGE.format_id(i + 1) for i in range(n_k)]
    pat_ids = [PATTERN.format_id(i + 1) for i in range(n_pat)]
    all_ids = exp_ids + k_ids + pat_ids
    files: list[str] = []  # atom file names, for the access log
    written = 0
    for kind, ids in ((EXPERIMENT, exp_ids), (KNOWLEDGE, k_ids), (PATTERN, pat_ids)):
        folder = project.folder(kind)
        for n, atom_id in enumerate(ids):
            if kind is EXPERIMENT:
                date = exp_dates[n]
                earlier = exp_ids[:n]
            else:
                date = start + dt.timedelta(days=rng.randint(30, span))
                earlier = exp_ids
            summary = _summary(rng, kind)
            tags = rng.sample(TAGS, rng.randint(2, 4))
            if summary.startswith("ANTI-PATTERN:"):
                tags = ["anti-pattern", *tags[:3]]
            status = _status(rng, exp_ids[n + 1:] if kind is EXPERIMENT else exp_ids)
            cited: list[str] = []
            if kind is not EXPERIMENT:
                pool = earlier or exp_ids
                cited = sorted(rng.sample(pool, min(len(pool), rng.randint(1, 5))))
            links = sorted(rng.sample(all_ids, min(len(all_ids), rng.randint(0, 3))))
            links = [x for x in links if x != atom_id]
            fm = _frontmatter(rng, kind, atom_id, date, name, summary, tags, status, cited,
                              links)
            text = f"---\n{fm}---\n\n{_body(rng, kind, atom_id, summary, cited)}"
            (folder / f"{atom_id}.md").write_text(text, encoding="utf-8")
            files.append(f"{atom_id}.md")
            written += 1
    for i in range(malformed):
        bad = project.folder(EXPERIMENT) / f"EXP-{n_exp + 1 + i:03d}.md"
        shapes = [
            "---\nid: EXP-X\nsummary: [unclosed\n---\nBody\n",
            "no frontmatter at all\n",
            "---\nid: EXP-X\ndate: 2026-01-01\n",  # never closed
            "---\n- a list\n- not a mapping\n---\n",
        ]
        bad.write_text(shapes[i % len(shapes)], encoding="utf-8")
        written += 1
    _write_log(project.access_log, files, rng, end, int(len(files) * log_lines_per_atom))
    return written


def _write_log(path: Path, files: list[str], rng: random.Random, end: dt.date,
               lines: int) -> None:
    """A Zipf-skewed access log; a third of the files are never read."""
    if not files or lines <= 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return
    readable = rng.sample(files, max(1, (len(files) * 2) // 3))
    weights = [1.0 / (rank + 1) ** 1.1 for rank in range(len(readable))]
    sessions = [f"{rng.getrandbits(128):032x}" for _ in range(max(3, lines // 40))]
    t_end = dt.datetime.combine(end, dt.time(), tzinfo=dt.UTC)
    t0 = t_end - dt.timedelta(days=60)
    span_ms = int((t_end - t0).total_seconds() * 1000)
    stamps = sorted(rng.randrange(span_ms) for _ in range(lines))
    chosen = rng.choices(readable, weights, k=lines)
    out: list[bytes] = []
    for ms, file in zip(stamps, chosen, strict=True):
        ts = t0 + dt.timedelta(milliseconds=ms)
        stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"
        tool = rng.choice(TOOLS)
        if rng.random() < 0.05:
            file, tool = accesslog.DIRECTORY_SEARCH, "Grep"
        out.append(accesslog.format_line(file, tool, rng.choice(sessions), stamp))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(out))


def build(out: Path, atoms: int, projects: int, seed: int, end: dt.date,
          log_lines_per_atom: float = 5.0, malformed: int = 0, commit: bool = True) -> Store:
    """Create the store at `out` (which must not hold one yet) and return it."""
    if (out / "context").exists():
        raise SystemExit(f"{out} already holds a store: pick an empty folder")
    rng = random.Random(seed)
    store = Store(out.absolute())
    scaffold.init_store(store)
    counts = _split_counts(atoms, max(1, projects), rng)
    for i, count in enumerate(counts):
        # a per-project generator: changing one project's size leaves the others as they were
        build_project(store, _project_name(i), count, random.Random(f"{seed}:{i}"), end,
                      log_lines_per_atom, malformed if i == 0 else 0)
    if commit:
        git.ensure_repo(store)
        git.git_run(store.home, "add", "--all")
        git.git_run(store.home, "commit", "--quiet", "--no-verify", "-m",
                    f"chore: generated corpus ({atoms} atoms, {projects} projects, seed {seed})")
    return store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the new store (CORTEX_HOME)")
    parser.add_argument("--atoms", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-lines-per-atom", type=float, default=5.0)
    parser.add_argument("--end-date", type=dt.date.fromisoformat,
                        default=dt.date(2026, 11, 1),
                        help="newest atom date / log timestamp (default 2026-11-01)")
    parser.add_argument("--malformed", type=int, default=0,
                        help="atoms with broken frontmatter to add to the first project")
    parser.add_argument("--no-git", action="store_true", help="do not commit the store")
    args = parser.parse_args(argv)
    if args.atoms < 1 or args.projects < 1:
        parser.error("--atoms and --projects must be at least 1")
    t0 = time.perf_counter()
    build(args.out, args.atoms, args.projects, args.seed, args.end_date,
          args.log_lines_per_atom, args.malformed, commit=not args.no_git)
    print(f"built {args.atoms} atoms in {args.projects} projects at {args.out} "
          f"({time.perf_counter() - t0:.1f}s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
