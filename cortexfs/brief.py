"""The session brief (`cortex brief`): what a new agent session should start with, packed
into a token budget (SPEC §8: hippocampus.md v2's decay with priorities + the Cortex
paper's token-budgeted assembly with a truncation banner).

For one project the brief holds, in order of importance: its STATUS.md, its open tasks
(TASKS.yaml: doing, todo, blocked — by priority), its ISSUES.md, its strongest active
knowledge and patterns, and its most recent active experiments. With no project named and
several in the store it is a store-level brief: each project's phase and size, open tasks,
issue titles, and the strongest knowledge and newest experiments across all projects.

Ranking: knowledge and patterns by `cortexfs.strength` (hours since the last read, or the
atom's date, up to the store clock — the same as HIPPOCAMPUS.md — with the v1/v2 modifiers:
`priority: critical` never decays, high 0.3×, low 2×, `src: manual` 0.5×, 3+ related 0.7×),
then by reads. Experiments by date, newest first. Only active atoms are listed, and of
them only those at strength 0.1 or more: below it hippocampus.md v2 (§8.3) takes an entry
out of the context (its file stays; HIPPOCAMPUS.md's decay queue lists it) — the section
says how many. Knowledge or a pattern whose evidence experiments are all retired
(superseded, invalidated …) is marked "evidence retired" and ranked after the others: it
may no longer hold. (Checked for the first EVIDENCE_CHECKED lines, more than any budget
shows.)

Packing (the paper's ContextDecomposer): when everything fits, everything is shown. Else
each section first gets a share of the budget and takes its items in rank order while they
fit; the budget left over then goes to the sections in order of importance. Items are never
split (a STATUS.md line, a task, an issue, an atom line); anything over 400 characters is
shortened first. What was cut is listed in a closing banner — per section, how many items
of how many and about how many tokens — so the reader knows what it is missing. Room for
the banner is reserved before packing, so the output, banner included, never exceeds the
budget by `cortexfs.tokens.estimate`.
"""

from __future__ import annotations

import datetime as dt
import marshal
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cortexfs import wall
from cortexfs.atoms import EXPERIMENT, KINDS, status_group
from cortexfs.errors import AtomParseError, CortexError, InvalidInputError
from cortexfs.frontmatter import HTML_COMMENT
from cortexfs.layout import ISSUES_MD, STATUS_MD
from cortexfs.tokens import chars_for, estimate, estimate_joined
from cortexfs.wording import plural

if TYPE_CHECKING:
    from cortexfs.hippocampus import MemoryEntry, Part
    from cortexfs.loader import ProjectScan
    from cortexfs.store import Project, Store

DEFAULT_BUDGET = 4_000
MIN_BUDGET = 100
MAX_ITEM_CHARS = 400
DECAY_FLOOR = 0.1  # hippocampus.md v2 §8.3: below this strength an entry leaves the context
EVIDENCE_CHECKED = 200
SECTIONS_KIND = "brief-atom-sections"


@dataclass
class Slot:
    """One section of the brief: its items in rank order and its share of the budget."""

    key: str
    title: str
    items: list[str]
    share: float
    unit: str = "items"
    intro: str = ""
    kept: int = 0
    shortened: int = 0  # items cut down to MAX_ITEM_CHARS before packing
    lost_tokens: int = 0  # what shortening removed

    def __post_init__(self) -> None:
        items = []
        for text in self.items:
            text = text.rstrip("\n")
            if len(text) > MAX_ITEM_CHARS:
                keep = text[: MAX_ITEM_CHARS - 1].rstrip()
                self.shortened += 1
                self.lost_tokens += estimate(text[len(keep):])
                text = keep + "…"
            items.append(text + "\n")
        self.items = items

    @property
    def head(self) -> str:
        return f"\n## {self.title}\n" + (f"{self.intro}\n" if self.intro else "")

    def cost(self, upto: int) -> int:
        """Characters of this section with its first `upto` items (0 when none)."""
        if upto == 0:
            return 0
        return len(self.head) + sum(len(i) for i in self.items[:upto])

    @property
    def omitted(self) -> int:
        return len(self.items) - self.kept

    @property
    def omitted_tokens(self) -> int:
        """Tokens of the omitted items plus what shortening took out of the others."""
        return estimate_joined(self.items[self.kept:]) + self.lost_tokens

    @property
    def cut(self) -> bool:
        return bool(self.omitted or self.shortened)


@dataclass
class Brief:
    """A packed brief: `text` is what a session reads; the rest describes it."""

    project: str | None
    budget: int
    text: str
    slots: list[Slot] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return estimate(self.text)

    @property
    def cut(self) -> list[Slot]:
        return [s for s in self.slots if s.cut]

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.project, "budget": self.budget, "tokens": self.tokens,
            "estimator": "characters / 4",
            "sections": [{"key": s.key, "title": s.title, "unit": s.unit, "total": len(s.items),
                          "included": s.kept, "omitted": s.omitted, "shortened": s.shortened,
                          "omitted_tokens": s.omitted_tokens} for s in self.slots],
            "text": self.text,
        }


# --- packing -----------------------------------------------------------------------------------


def _banner(slots: Sequence[Slot], budget: int, omitted: dict[str, tuple[int, int]]) -> str:
    parts = [f"{s.title} {omitted[s.key][0]:,} of {len(s.items):,} {s.unit}"
             + (f", {s.shortened:,} shortened" if s.shortened else "")
             + f" (~{omitted[s.key][1]:,} tokens)" for s in slots if s.key in omitted]
    return (f"\n---\n[cortex brief: cut to fit the {budget:,}-token budget. Omitted: "
            + "; ".join(parts) + ". Open the files named above, or rerun with a larger "
            "--budget.]\n")


def _compact_banner(budget: int, omitted: dict[str, tuple[int, int]]) -> str:
    omitted_items = sum(n for n, _ in omitted.values())
    omitted_tokens = sum(t for _, t in omitted.values())
    return (f"\n[cortex brief: {omitted_items:,} items (~{omitted_tokens:,} tokens) cut to fit "
            f"{budget:,} tokens; rerun with a larger --budget]\n")


def pack(head: str, slots: list[Slot], budget: int) -> str:
    """Assemble `head` and `slots` into at most `budget` tokens (see the module docstring).
    Sets each slot's `kept`."""
    limit = chars_for(budget)
    for slot in slots:
        slot.kept = len(slot.items)
    full = head + "".join(_render(s) for s in slots)
    shortened = {s.key: (0, s.lost_tokens) for s in slots if s.shortened}
    if len(full) + len(_banner(slots, budget, shortened) if shortened else "") <= limit:
        return full + (_banner(slots, budget, shortened) if shortened else "")
    # reserve room for the worst banner: every item of every section omitted
    worst = {s.key: (len(s.items), estimate_joined(s.items) + s.lost_tokens)
             for s in slots if s.items}
    reserve = len(_banner(slots, budget, worst))
    compact = reserve > limit // 4
    if compact:
        reserve = len(_compact_banner(budget, worst))
    avail = max(limit - len(head) - reserve, 0)
    for slot in slots:
        slot.kept = 0
    used = 0
    for slot in slots:  # first pass: each section within its share
        share = int(avail * slot.share)
        while slot.kept < len(slot.items) and slot.cost(slot.kept + 1) <= share:
            slot.kept += 1
        used += slot.cost(slot.kept)
    for slot in slots:  # second pass: what is left, in order of importance
        while slot.kept < len(slot.items):
            extra = slot.cost(slot.kept + 1) - slot.cost(slot.kept)
            if used + extra > avail:
                break
            slot.kept += 1
            used += extra
    body = head + "".join(_render(s) for s in slots)
    cut = {s.key: (s.omitted, s.omitted_tokens) for s in slots if s.cut}
    text = body + (_compact_banner(budget, cut) if compact else _banner(slots, budget, cut))
    if len(text) > limit:  # cannot happen with the reserve above; never ship an overrun
        text = text[: limit - 2] + "…\n"
    return text


def _render(slot: Slot) -> str:
    if slot.kept == 0:
        return ""
    return slot.head + "".join(slot.items[: slot.kept])


# --- reading the project -----------------------------------------------------------------------


def markdown_lines(text: str) -> list[str]:
    """A governance file's content lines: HTML comments, blank lines and the `#` title gone,
    headings one level down (they sit under the brief's own `##` section)."""
    text = HTML_COMMENT.sub("", text.replace("\r\n", "\n"))
    out = []
    for line in text.split("\n"):
        if not line.strip() or re.match(r"^#[ \t]", line):
            continue
        if re.match(r"^#{2,5}[ \t]", line):
            line = "#" + line
        out.append(line.rstrip())
    return out


def issue_blocks(text: str) -> list[str]:
    """ISSUES.md as one block per issue (a `##` heading with its lines) or loose line."""
    blocks: list[str] = []
    for line in markdown_lines(text):
        if line.startswith("### ") or not blocks or not blocks[-1].startswith("### "):
            blocks.append(line)
        else:
            blocks[-1] += "\n" + line
    return blocks


def _task_items(project: Project, prefix: str = "") -> tuple[list[tuple[Any, str]], str | None]:
    """Open tasks as (sort key, line); a problem note when TASKS.yaml cannot be read."""
    from cortexfs import tasks

    try:
        tf = tasks.load(project)
    except CortexError as e:
        return [], str(e)
    note = None
    if tf.shape is None and tf.errors:
        note = f"TASKS.yaml could not be read: {tf.errors[0].message}"
    out = []
    for t in tf.tasks:
        if t.status not in tasks.OPEN_STATUSES:
            continue
        flags = ", ".join(str(x) for x in (t.status, t.priority) if x not in (None, ""))
        line = f"- {prefix}{t.id} [{flags}] {' '.join(t.text.split())}"
        if t.done_when:
            line += f" — done when: {' '.join(t.done_when.split())}"
        if t.depends_on:
            line += f" (after {', '.join(t.depends_on)})"
        out.append((tasks.sort_key(t), line))
    return out, note


@dataclass
class Ranked:
    """The brief's atoms: active knowledge and patterns (strongest first, those on retired
    evidence last) and active experiments (newest first), at strength DECAY_FLOOR or more;
    how many were left out below it; the keys of those on retired evidence."""

    minds: list[MemoryEntry]
    experiments: list[MemoryEntry]
    decayed_minds: int = 0
    decayed_experiments: int = 0
    weak: set[str] = field(default_factory=set)


def _rank(store: Store, parts: Sequence[Part]) -> Ranked:
    """The atoms of the brief, with the strengths HIPPOCAMPUS.md shows."""
    from cortexfs.hippocampus import assemble

    entries = assemble(parts).entries
    minds = [e for e in entries if e.kind != "experiments"]
    experiments = [e for e in entries if e.kind == "experiments"]
    out = Ranked([e for e in minds if e.strength >= DECAY_FLOOR],
                 [e for e in experiments if e.strength >= DECAY_FLOOR])
    out.decayed_minds = len(minds) - len(out.minds)
    out.decayed_experiments = len(experiments) - len(out.experiments)
    out.minds.sort(key=lambda e: (-e.strength, -e.hits, e.project, _id_order(e.id)))
    out.experiments.sort(key=lambda e: (-(e.created or dt.date.min).toordinal(), e.project,
                                        _id_order(e.id)))
    head = out.minds[:EVIDENCE_CHECKED]
    out.weak = _on_retired_evidence(store, head)
    out.minds[:len(head)] = [e for e in head if e.key not in out.weak] + \
        [e for e in head if e.key in out.weak]
    return out


def _on_retired_evidence(store: Store, entries: Sequence[MemoryEntry]) -> set[str]:
    """The keys of the entries whose evidence experiments (those that exist) are all
    retired: superseded, refined, stale, deprecated or invalidated."""
    from cortexfs.loader import read_atom

    kinds = {k.folder: k for k in KINDS}
    groups: dict[tuple[str, str], str | None] = {}

    def group(project: str, exp: str) -> str | None:
        key = (project, exp)
        if key not in groups:
            path = store.projects_dir / project / EXPERIMENT.folder / f"{exp}.md"
            read = read_atom(path, EXPERIMENT) if not wall.reason(store.context, path) \
                else None
            groups[key] = None if read is None or isinstance(read, AtomParseError) else \
                status_group(read[0].status)
        return groups[key]

    weak = set()
    for e in entries:
        atom = e.atom
        if atom is None:
            if wall.reason(store.context, store.context / e.pointer):
                continue
            read = read_atom(store.context / e.pointer, kinds[e.kind])
            if isinstance(read, AtomParseError):
                continue
            atom = read[0]
        found = [g for exp in atom.cited_experiments() if (g := group(e.project, exp))]
        if found and all(g != "active" for g in found):
            weak.add(e.key)
    return weak


def _decayed(n: int) -> str:
    """What a section's intro says of the atoms below DECAY_FLOOR it leaves out."""
    return f"; {n:,} below strength {DECAY_FLOOR} left out (see HIPPOCAMPUS.md's decay " \
        "queue)" if n else ""


def _id_order(atom_id: str) -> tuple[int, str]:
    """Higher numbers first (EXP-042 before EXP-007); a slice, not a regex: it runs once
    per atom of the store."""
    number = atom_id[atom_id.find("-") + 1:].rstrip("abcdefghijklmnopqrstuvwxyz")
    return (-int(number) if number.isdigit() else 0, atom_id)


def _atom_line(r: MemoryEntry, qualified: bool, with_strength: bool,
               weak: set[str] | None = None) -> str:
    label = r.key if qualified else r.id
    notes = []
    if with_strength:
        notes.append(f"str {r.strength:.2f}")
        if r.hits:
            notes.append(plural(r.hits, "read"))
    else:
        notes.append(r.created.isoformat() if r.created else "undated")
    if r.status not in ("active", "valid"):
        notes.append(r.status)
    if weak and r.key in weak:
        notes.append("evidence retired")
    kind = "pattern " if r.kind == "patterns" else ""
    summary = r.summary or "(no summary)"
    return f"- {kind}{label} ({', '.join(notes)}): {summary}"


# --- assembling ----------------------------------------------------------------------------------


@dataclass
class AtomSections:
    """The brief's atom sections, rendered: knowledge and patterns (rank order), experiments
    (newest first), how many of each fell below DECAY_FLOOR, and per project how many atoms
    of each kind folder parse. A function of the projects' atom files and access logs only,
    so it is cached (`_atom_sections`)."""

    minds: list[str]
    experiments: list[str]
    decayed_minds: int
    decayed_experiments: int
    kinds: list[dict[str, int]]


def _atom_sections(store: Store, projects: Sequence[Project], qualified: bool) -> AtomSections:
    """The atom sections of `projects` (ids `qualified` by their project in a store brief),
    from `.cache/brief/` when the stat data of every atom file and access log is what it
    was when they were cached (`_inputs_key`). At 100,000 atoms that check is ~0.3 s; the
    ranking behind it (the HIPPOCAMPUS.md parts: every atom's cached record, strength and
    order) is ~1.5 s more."""
    from cortexfs import cache
    from cortexfs.loader import scan_many

    scans = scan_many(list(projects))  # (what the ranking reads too, on a miss)
    key = _inputs_key(scans, qualified)
    name = "store.bin" if qualified else f"project-{projects[0].name}.bin"
    path = store.cache_dir / "brief" / name
    if key is not None:
        saved = cache.load(path, SECTIONS_KIND)
        if isinstance(saved, tuple) and len(saved) == 2 and saved[0] == key:
            return AtomSections(*saved[1])
    from cortexfs import hippocampus, regen

    # the projects' HIPPOCAMPUS.md parts: their active atoms with hits and last access,
    # from the regeneration's caches where they are current (`scans`: just taken)
    parts = hippocampus.parts(regen.context(store, scans), [p.name for p in projects])
    ranked = _rank(store, parts)
    atoms = AtomSections(
        [_atom_line(r, qualified, True, ranked.weak) for r in ranked.minds],
        [_atom_line(r, qualified, False) for r in ranked.experiments],
        ranked.decayed_minds, ranked.decayed_experiments, [part.kinds for part in parts])
    if key is not None:
        cache.save(path, SECTIONS_KIND, (key, tuple(vars(atoms).values())))  # (its fields)
    return atoms


def _inputs_key(scans: Sequence[ProjectScan], qualified: bool) -> bytes | None:
    """A digest of everything the atom sections are made from — every atom file of the
    scanned projects as the loader's scan vouches for it (name, mtime, size, CRC of its
    content: a file re-checked by content while its stat data is racy) and their access
    logs' stat data — or None when a log changed within cache.RACY_NS (its stat data
    cannot vouch for its content yet, so nothing is cached or trusted)."""
    from cortexfs import cache

    started = time.time_ns()
    newest = 0
    key = cache.blake2b(b"qualified" if qualified else b"one", digest_size=16)
    for sc in scans:
        key.update(f"\0\0{sc.project.name}".encode())
        for kind in KINDS:
            key.update(sc.inputs_digest(kind))
        try:
            st = os.stat(sc.project.access_log, follow_symlinks=False)
        except OSError:
            key.update(b"\0no log")
            continue
        key.update(marshal.dumps((st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode), 2))
        newest = max(newest, st.st_mtime_ns)
    return None if cache.racy(newest, started) else key.digest()


def build(store: Store, project: str | None = None, budget: int = DEFAULT_BUDGET) -> Brief:
    """The brief for `project`, or for the store when None (the only project's brief when
    the store has just one)."""
    if budget < MIN_BUDGET:
        raise InvalidInputError(f"--budget {budget} is too small: give at least {MIN_BUDGET} "
                                "tokens")
    if project is not None:
        return _project_brief(store, store.project(project), budget)
    projects = store.projects()
    if len(projects) == 1:
        return _project_brief(store, projects[0], budget)
    return _store_brief(store, projects, budget)


def _project_brief(store: Store, project: Project, budget: int) -> Brief:
    atoms = _atom_sections(store, [project], qualified=False)
    rel = f"projects/{project.name}"
    status_items = markdown_lines(wall.text_or_none(store.context, project.root / STATUS_MD) or "")
    issue_items = issue_blocks(wall.text_or_none(store.context, project.root / ISSUES_MD) or "")
    task_items, note = _task_items(project)
    task_items.sort(key=lambda kv: kv[0])
    slots = [
        Slot("status", STATUS_MD, status_items or ["_STATUS.md is missing or empty._\n"],
             0.30, "lines", f"(from {rel}/STATUS.md)"),
        Slot("tasks", "Open tasks",
             ([f"- {note}"] if note else []) + [line for _, line in task_items], 0.15, "tasks",
             f"(from {rel}/TASKS.yaml)"),
        Slot("issues", "Issues", issue_items, 0.10, "issues", f"(from {rel}/ISSUES.md)"),
        Slot("knowledge", "Strongest knowledge and patterns", atoms.minds, 0.30, "atoms",
             f"(files: {rel}/knowledge/K-NNN.md, "
             f"{rel}/patterns/PAT-NNN.md{_decayed(atoms.decayed_minds)})"),
        Slot("experiments", "Recent experiments", atoms.experiments, 0.15, "atoms",
             f"(files: {rel}/experiments/EXP-NNN.md{_decayed(atoms.decayed_experiments)})"),
    ]
    slots = [s for s in slots if s.items]
    head = (f"# Session brief — {project.name}\n"
            f"Knowledge root: {store.context} · `cortex brief` · budget {budget:,} tokens\n")
    text = pack(head, slots, budget)
    return Brief(project.name, budget, text, slots)


def _store_brief(store: Store, projects: Sequence[Project], budget: int) -> Brief:
    from cortexfs.status import phase_of

    atoms = _atom_sections(store, projects, qualified=True)
    overview: list[str] = []
    for project, counts in zip(projects, atoms.kinds, strict=True):
        name = project.name
        status = wall.text_or_none(store.context, project.root / STATUS_MD)
        overview.append(
            f"- {name}: {' '.join((phase_of(status) or 'no STATUS.md phase').split())} "
            f"({plural(counts.get('experiments', 0), 'experiment')}, "
            f"{counts.get('knowledge', 0)} knowledge, "
            f"{plural(counts.get('patterns', 0), 'pattern')}) → projects/{name}/STATUS.md")
    task_items: list[tuple[Any, str]] = []
    issue_items: list[str] = []
    for p in projects:
        items, note = _task_items(p, prefix=f"{p.name}/")
        task_items += items
        if note:
            task_items.append(((9, 99, 0), f"- {p.name}: {note}"))
        for block in issue_blocks(wall.text_or_none(store.context, p.root / ISSUES_MD) or ""):
            issue_items.append(f"- {p.name}: {block.splitlines()[0].lstrip('#- ')}")
    task_items.sort(key=lambda kv: kv[0])
    slots = [
        Slot("projects", "Projects", overview, 0.20, "projects",
             "(one line each; `cortex brief PROJECT` gives a project's full brief)"),
        Slot("tasks", "Open tasks", [line for _, line in task_items], 0.15,
             "tasks"),
        Slot("issues", "Issues", issue_items, 0.10, "issues"),
        Slot("knowledge", "Strongest knowledge and patterns", atoms.minds, 0.35,
             "atoms", "(files: projects/<project>/knowledge/K-NNN.md, …/patterns/PAT-NNN.md"
             f"{_decayed(atoms.decayed_minds)})"),
        Slot("experiments", "Recent experiments", atoms.experiments, 0.20, "atoms",
             f"(files: projects/<project>/experiments/EXP-NNN.md"
             f"{_decayed(atoms.decayed_experiments)})"),
    ]
    slots = [s for s in slots if s.items]
    if not projects:
        slots = [Slot("projects", "Projects",
                      ["_No projects yet: create one with `cortex project new NAME`._\n"], 1.0)]
    head = (f"# Session brief — {len(projects)} projects\n"
            f"Knowledge root: {store.context} · `cortex brief` · budget {budget:,} tokens\n")
    text = pack(head, slots, budget)
    return Brief(None, budget, text, slots)


def build_within(store: Store, project: str | None, budget: int, max_chars: int) -> Brief:
    """The brief cut to `budget` tokens and to `max_chars` characters, banner included.

    Characters are counted as Claude Code (JavaScript) counts a hook's output: UTF-16 code
    units, so a character outside the BMP (an emoji) counts twice. The token budget gives at
    most 4 code points a token; where astral characters make the text longer in UTF-16, the
    budget is lowered until it fits.
    """
    if max_chars < chars_for(MIN_BUDGET):
        raise InvalidInputError(f"--max-chars {max_chars} is too small: give at least "
                                f"{chars_for(MIN_BUDGET)} characters")
    tokens = min(budget, max_chars // chars_for(1))
    while True:
        brief = build(store, project, tokens)
        over = utf16_len(brief.text) - max_chars
        if over <= 0:
            return brief
        if tokens <= MIN_BUDGET:  # only astral characters could do this: cut the text
            cut = brief.text
            while utf16_len(cut) > max_chars - 2:
                cut = cut[:-max(1, (utf16_len(cut) - max_chars + 2) // 2)]
            brief.text = cut + "…\n"
            return brief
        tokens = max(MIN_BUDGET, tokens - -(-over // 2))


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (what JavaScript's `length` says)."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)
