"""`cortex maintain`: the experiment-maintenance report (SPEC §7). Read-only.

Per project:
- cold atoms: never read (refs 0) and dated more than 14 days ago;
- stale candidates: never read and dated more than 30 days ago (also cold) — candidates for
  `status: stale`;
- knowledge and patterns resting on experiments that are superseded or invalidated, saying
  whether that is all of their evidence or part of it;
- consolidation suggestions: at least 3 experiments sharing a pair of tags that no pattern
  cites; clusters of at least 3 atoms connected through `links` that no single pattern
  covers; supersede chains of at least 3 atoms (A superseded by B superseded by C);
- the validity summary: atoms per kind in each status group, and the challenged ones.

Only active atoms (no status, or active|valid|partial|challenged|corrected) are cold, stale
candidates or consolidation material: superseded and invalidated ones are already retired.
`refs` is the larger of the frontmatter count and the access log's count, so reads since
the last regeneration count too.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cortexfs import accesslog
from cortexfs.atoms import EXPERIMENT, KINDS, KNOWLEDGE, PATTERN, Atom
from cortexfs.loader import load_project
from cortexfs.store import Project, Store
from cortexfs.wording import plural

COLD_DAYS = 14
STALE_DAYS = 30
MIN_CLUSTER = 3
MAX_CLUSTER = 25  # a linked web bigger than this is not one pattern's worth


@dataclass
class AtomNote:
    """One atom in a list of the report."""

    id: str
    kind: str
    path: str  # relative to context/
    summary: str
    date: str | None
    refs: int
    age_days: int | None

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))  # (the fields, in order; not asdict: it deep-copies each row)


@dataclass
class WeakEvidence:
    """A knowledge or pattern atom citing retired experiments."""

    atom: AtomNote
    extent: str  # "all" | "part"
    retired: list[dict[str, str | None]]  # {"id", "status", "by"}
    cited: int

    def to_json(self) -> dict[str, Any]:
        return {**self.atom.to_json(), "extent": self.extent, "retired": self.retired,
                "cited": self.cited}


@dataclass
class Suggestion:
    """A consolidation suggestion: what kind, which atoms, and why."""

    kind: str  # "tag-pair" | "link-cluster" | "supersede-chain"
    atoms: list[str]
    reason: str
    tags: list[list[str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v or k != "tags"}  # (tags when some)


@dataclass
class ProjectMaintenance:
    """The maintenance report of one project."""

    project: str
    counts: dict[str, int]
    validity: dict[str, dict[str, int]]
    cold: list[AtomNote] = field(default_factory=list)
    stale_candidates: list[AtomNote] = field(default_factory=list)
    weak_evidence: list[WeakEvidence] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)
    unreadable: int = 0  # atom files whose frontmatter did not parse (see `cortex validate`)

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "counts": self.counts,
            "validity": self.validity,
            "cold": [a.to_json() for a in self.cold],
            "stale_candidates": [a.to_json() for a in self.stale_candidates],
            "weak_evidence": [w.to_json() for w in self.weak_evidence],
            "consolidation": [s.to_json() for s in self.suggestions],
            "unreadable": self.unreadable,
        }


@dataclass
class MaintenanceReport:
    """The report over the selected projects, as of `today`."""

    today: dt.date
    projects: list[ProjectMaintenance]

    def to_json(self) -> dict[str, Any]:
        return {"date": self.today.isoformat(), "cold_days": COLD_DAYS,
                "stale_days": STALE_DAYS, "projects": [p.to_json() for p in self.projects]}


def maintain(store: Store, projects: Sequence[Project] | None = None,
             today: dt.date | None = None) -> MaintenanceReport:
    """The maintenance report of `projects` (default: all)."""
    today = today or dt.date.today()
    selected = store.projects() if projects is None else list(projects)
    return MaintenanceReport(today, [project_report(p, today) for p in selected])


def project_report(project: Project, today: dt.date) -> ProjectMaintenance:
    loaded = load_project(project)
    atoms = loaded.atoms
    log_counts = accesslog.current(project)[0].counts
    refs = {id(a): max(a.refs, log_counts.get(a.path.name, 0)) for a in atoms}
    context = project.store.context

    def note(atom: Atom) -> AtomNote:
        day = atom.date
        return AtomNote(atom.id, atom.kind.name, atom.path.relative_to(context).as_posix(),
                        atom.summary, day.isoformat() if day else None, refs[id(atom)],
                        (today - day).days if day else None)

    report = ProjectMaintenance(
        project.name,
        counts={k.folder: sum(1 for a in atoms if a.kind is k) for k in KINDS},
        validity=_validity(atoms),
        unreadable=len(loaded.errors),
    )
    active = [a for a in atoms if a.group == "active"]
    for atom in sorted(active, key=lambda a: (a.date or dt.date.min, a.id)):
        day = atom.date
        if refs[id(atom)] or day is None:
            continue
        age = (today - day).days
        if age > COLD_DAYS:
            report.cold.append(note(atom))
        if age > STALE_DAYS:
            report.stale_candidates.append(note(atom))
    report.weak_evidence = _weak_evidence(atoms, note)
    report.suggestions = [*_tag_pairs(atoms), *_link_clusters(atoms), *_chains(atoms)]
    return report


def _validity(atoms: list[Atom]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for kind in KINDS:
        of_kind = [a for a in atoms if a.kind is kind]
        groups = Counter(a.group for a in of_kind)
        out[kind.folder] = {
            "total": len(of_kind),
            **{group: groups[group] for group in ("active", "superseded", "invalidated")},
            "challenged": sum(1 for a in of_kind if a.status == "challenged"),
        }
    return out


def _weak_evidence(atoms: list[Atom], note: Any) -> list[WeakEvidence]:
    experiments = {a.id: a for a in atoms if a.kind is EXPERIMENT}
    out: list[WeakEvidence] = []
    for atom in atoms:
        if atom.kind not in (KNOWLEDGE, PATTERN) or atom.group != "active":
            continue
        cited = [experiments[e] for e in atom.cited_experiments() if e in experiments]
        retired = [e for e in cited if e.group != "active"]
        if not retired:
            continue
        out.append(WeakEvidence(
            note(atom), "all" if len(retired) == len(cited) else "part",
            [{"id": e.id, "status": e.status, "by": e.status_ref} for e in retired],
            len(cited)))
    out.sort(key=lambda w: (w.extent != "all", w.atom.id))
    return out


def _pattern_citations(atoms: list[Atom]) -> list[set[str]]:
    return [set(a.cited_experiments()) for a in atoms
            if a.kind is PATTERN and a.group != "invalidated"]


def _tag_pairs(atoms: list[Atom]) -> list[Suggestion]:
    """≥ 3 active experiments sharing a tag pair, none of them cited by a pattern."""
    cited = set().union(*_pattern_citations(atoms))
    by_pair: dict[tuple[str, str], list[str]] = defaultdict(list)
    for atom in atoms:
        if atom.kind is not EXPERIMENT or atom.group != "active" or atom.id in cited:
            continue
        tags = sorted({t.lower() for t in atom.tags})
        for pair in itertools.combinations(tags, 2):
            by_pair[pair].append(atom.id)
    groups: dict[tuple[str, ...], list[list[str]]] = defaultdict(list)
    for pair, ids in by_pair.items():
        if len(ids) >= MIN_CLUSTER:
            groups[tuple(sorted(ids, key=_id_key))].append(list(pair))
    out = [Suggestion("tag-pair", list(ids),
                      f"{len(ids)} experiments share the tags "
                      f"{' / '.join('+'.join(p) for p in sorted(pairs))} and no pattern cites "
                      "them: write a pattern (or knowledge) that consolidates them",
                      sorted(pairs))
           for ids, pairs in groups.items()]
    out.sort(key=lambda s: (-len(s.atoms), s.tags))
    return out


def _link_clusters(atoms: list[Atom]) -> list[Suggestion]:
    """Connected components of ≥ 3 atoms over `links` that no single pattern covers."""
    live = {a.id: a for a in atoms if a.group != "invalidated"}
    parent = {i: i for i in live}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for atom in live.values():
        for other in atom.links:
            if other in live and other != atom.id:
                a, b = find(atom.id), find(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    components: dict[str, list[str]] = defaultdict(list)
    for atom_id in live:
        components[find(atom_id)].append(atom_id)
    patterns = _pattern_citations(atoms)
    out: list[Suggestion] = []
    for members in components.values():
        if len(members) < MIN_CLUSTER:
            continue
        exps = {m for m in members if live[m].kind is EXPERIMENT}
        if exps and any(exps <= cites for cites in patterns):
            continue  # a pattern already consolidates every experiment of the cluster
        ids = sorted(members, key=_id_key)
        if len(ids) > MAX_CLUSTER:
            reason = (f"{len(ids)} atoms are linked into one web, too many for one pattern: "
                      "consolidate its sub-topics (see the tag-pair suggestions)")
        else:
            reason = (f"{len(ids)} atoms are linked together ({len(exps)} experiments) and no "
                      "pattern cites all of their experiments: consolidate what they show "
                      "into a pattern")
        out.append(Suggestion("link-cluster", ids, reason))
    # clusters a pattern can summarise first, biggest first; the sprawling webs last
    out.sort(key=lambda s: (len(s.atoms) > MAX_CLUSTER, -len(s.atoms), s.atoms))
    return out


def _chains(atoms: list[Atom]) -> list[Suggestion]:
    """Supersede chains of ≥ 3 atoms: A superseded/refined by B, B by C, …"""
    by_id = {a.id: a for a in atoms}
    successor = {atom.id: atom.status_ref for atom in atoms
                 if atom.status in ("superseded", "refined") and atom.status_ref in by_id
                 and atom.status_ref != atom.id}
    targets = set(successor.values())
    out: list[Suggestion] = []
    for start in sorted(successor, key=_id_key):
        if start in targets:
            continue  # not the head of a chain
        chain = [start]
        seen = {start}
        while chain[-1] in successor and successor[chain[-1]] not in seen:
            chain.append(successor[chain[-1]])
            seen.add(chain[-1])
        if len(chain) >= MIN_CLUSTER:
            out.append(Suggestion("supersede-chain", chain,
                                  f"{' → '.join(chain)}: {len(chain)} versions of one finding; "
                                  f"fold what still matters into {chain[-1]} (or a knowledge "
                                  "atom) so a reader need not walk the chain"))
    return out


def _id_key(atom_id: str) -> tuple[str, int, str]:
    prefix, _, rest = atom_id.partition("-")
    digits = "".join(itertools.takewhile(str.isdigit, rest))
    return (prefix, int(digits) if digits else -1, atom_id)


# --- text output -------------------------------------------------------------------------------


def render_text(report: MaintenanceReport, limit: int = 20) -> str:
    """The report for people: one section per project, long lists cut at `limit`."""
    out: list[str] = []
    for p in report.projects:
        out.append(f"{p.project} — " + ", ".join(f"{n} {k}" for k, n in p.counts.items()))
        parts = []
        for kind, v in p.validity.items():
            if v["total"]:
                extra = f" ({v['challenged']} challenged)" if v["challenged"] else ""
                parts.append(f"{kind} {v['active']} active{extra}, {v['superseded']} "
                             f"superseded, {v['invalidated']} invalidated")
        out.append("  validity: " + ("; ".join(parts) if parts else "no atoms"))
        if p.unreadable:
            out.append(f"  {plural(p.unreadable, 'atom file')} could not be read: run "
                       "`cortex validate`")
        stale = {a.id for a in p.stale_candidates}
        young = [a for a in p.cold if a.id not in stale]
        title = f"cold (refs 0, older than {COLD_DAYS} days): {len(p.cold) or 'none'}"
        if stale and p.cold:
            title += f", of which {len(stale)} older than {STALE_DAYS} days (below)"
        _section(out, title, young, limit,
                 lambda a: f"{a.id:<9} {a.date}  {a.age_days} days  {a.summary}", count=False)
        _section(out, f"stale candidates (refs 0, older than {STALE_DAYS} days): consider "
                 "`status: stale`", p.stale_candidates, limit,
                 lambda a: f"{a.id:<9} {a.date}  {a.age_days} days  {a.summary}")
        _section(out, "resting on superseded or invalidated experiments", p.weak_evidence,
                 limit, _weak_line)
        _section(out, "consolidation suggestions", p.suggestions, limit,
                 lambda s: f"[{s.kind}] {', '.join(s.atoms)} — {s.reason}")
        out.append("")
    if not report.projects:
        out.append("no projects: create one with `cortex project new NAME`")
    return "\n".join(out).rstrip("\n") + "\n"


def _weak_line(w: WeakEvidence) -> str:
    retired = ", ".join(f"{r['id']} ({r['status']}{':' + str(r['by']) if r['by'] else ''})"
                        for r in w.retired)
    what = "ALL of its evidence" if w.extent == "all" else \
        f"{len(w.retired)} of its {w.cited} experiments"
    return f"{w.atom.id:<9} {what} retired: {retired} — re-check: {w.atom.summary}"


def _section(out: list[str], title: str, items: Sequence[Any], limit: int, line: Any,
             count: bool = True) -> None:
    out.append(f"  {title}: {len(items) if items else 'none'}" if count else f"  {title}")
    for item in items[:limit]:
        out.append(f"    {line(item)}")
    if len(items) > limit:
        out.append(f"    … and {len(items) - limit} more (--format json lists them all)")
