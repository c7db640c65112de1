"""Validation of atoms (SPEC §2): one small function per rule, all listed in one registry.

A rule is registered with `@atom_rule(name, severity)` (runs once per parsed atom) or
`@project_rule(name, severity)` (runs once per project). Every finding a rule returns gets
that rule's name and severity, so a rule cannot mislabel what it found.

Rules see atoms only through `cortexfs.loader`, and existence checks are membership tests
in per-project id sets, so validating 10,000 atoms costs one pass over the loaded
frontmatter. The only file reads are for the line numbers of findings (a file with no
finding is never read here). A project whose files did not change since it was last checked
is not checked again (`project_findings`).

Extension point: `EXTRA_CHECKS` lists further checks as "module:function" strings (the
governance checks of SPEC §6 register there). Each function is called once as
`function(store, projects)` with the projects being validated and returns an iterable of
`Finding`s whose paths are relative to `context/`, posix style. `STORE_CHECKS` are called as
`function(store)`, only when the whole store is validated (`cortex validate` without a
project): a store-level decision record is no project's business. They are imported only
when validation runs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import marshal
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from pathlib import Path
from typing import Any, Literal, NamedTuple

from cortexfs import cache, layout, wall
from cortexfs.atoms import (
    ANTI_PATTERN_PREFIX,
    ANTI_PATTERN_TAG,
    EXPERIMENT,
    KIND_BY_PREFIX,
    KINDS,
    KNOWLEDGE,
    MAX_SUMMARY,
    STATUSES,
    Atom,
    Kind,
    kind_of_filename,
    kind_of_id,
    split_status,
)
from cortexfs.errors import AtomParseError
from cortexfs.frontmatter import key_lines, read_bytes
from cortexfs.layout import split_id
from cortexfs.loader import LoadedProject, ProjectScan, collector_paused, scan
from cortexfs.store import Project, Store
from cortexfs.wording import plural

Severity = Literal["error", "warning"]
ERROR: Severity = "error"
WARNING: Severity = "warning"

# Further checks, "module:function"; see the module docstring.
EXTRA_CHECKS: list[str] = [
    "cortexfs.governance:check",
]
STORE_CHECKS: list[str] = [
    "cortexfs.governance:store_check",
]


@dataclass(frozen=True)
class Finding:
    """One problem: where it is (relative to context/, posix; 1-based line) and what to do."""

    severity: Severity
    rule: str
    path: str
    line: int | None
    message: str

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path

    def __str__(self) -> str:
        return f"{self.severity:<7}  {self.location}  [{self.rule}] {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))  # (the fields, in order)


@dataclass
class Report:
    """The findings of one validation, sorted by path then line."""

    findings: list[Finding]
    atoms: int = 0  # atom files examined, including those whose frontmatter did not parse
    projects: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.findings = sorted(self.findings, key=lambda f: (
            f.path, f.line or 0, 0 if f.severity == ERROR else 1, f.rule, f.message))

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings alone do not fail validation)."""
        return not self.errors

    def summary(self) -> str:
        """`2 errors, 1 warning in 40 atoms`."""
        return (f"{plural(len(self.errors), 'error')}, "
                f"{plural(len(self.warnings), 'warning')} in {plural(self.atoms, 'atom')}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "atoms": self.atoms,
            "projects": list(self.projects),
            "findings": [f.to_dict() for f in self.findings],
        }


# --- what every rule sees --------------------------------------------------------------------


class Issue(NamedTuple):
    """What an atom rule found; `key` is the frontmatter key it concerns (for its line)."""

    message: str
    key: str | None = None


class FileIssue(NamedTuple):
    """What a project rule found, in a file given relative to the project folder."""

    path: str
    message: str
    line: int | None = None


@dataclass
class Context:
    """One project being validated: its loaded atoms and the ids that exist in it."""

    project: Project
    loaded: LoadedProject
    ids: frozenset[str]  # every atom id of the project: file names and frontmatter ids
    experiments: frozenset[str]
    duplicates: dict[int, str]  # id(atom) → the file that has its id first

    @classmethod
    def build(cls, project: Project, loaded: LoadedProject) -> Context:
        ids: set[str] = set()
        experiments: set[str] = set()
        for atom in loaded.atoms:
            stem = atom.path.name[:-3]  # the loader loads only names that are ids of the kind
            ids.add(stem)
            if atom.kind is EXPERIMENT:
                experiments.add(stem)
            raw = atom.meta.get("id")
            if raw != stem and isinstance(raw, str) and _is_atom_id(raw):
                # a wrong id is reported once (id-filename), not again by every citation
                ids.add(raw)
                if _is_experiment_id(raw):
                    experiments.add(raw)
        # a file whose frontmatter is broken still exists: citing it is not a second error
        for e in loaded.errors:
            stem = os.path.basename(e.path).removesuffix(".md")
            ids.add(stem)
            if _is_experiment_id(stem):
                experiments.add(stem)
        return cls(project, loaded, frozenset(ids), frozenset(experiments),
                   _duplicates(loaded.atoms))

    @cached_property
    def stray_files(self) -> list[tuple[Kind, str]]:
        """(folder kind, name) of each file in an atom folder that the loader did not read
        (as the loader's walk listed them)."""
        return [(kind, name) for kind, name in self.loaded.others
                if name != layout.INDEX and not name.startswith(".")]


# An atom rule returns a list or tuple (empty when the atom passes), not a generator.
AtomCheck = Callable[[Atom, Context], Sequence[Issue]]
ProjectCheck = Callable[[Context], Iterable[FileIssue]]


@dataclass(frozen=True)
class Rule:
    name: str
    severity: Severity
    check: Callable[..., Iterable[Any]]
    per_atom: bool

    @property
    def description(self) -> str:
        return (self.check.__doc__ or "").strip().splitlines()[0]


# The registry: every rule, in the order they run.
RULES: list[Rule] = []


def atom_rule(name: str, severity: Severity) -> Callable[[AtomCheck], AtomCheck]:
    def register(check: AtomCheck) -> AtomCheck:
        RULES.append(Rule(name, severity, check, per_atom=True))
        return check
    return register


def project_rule(name: str, severity: Severity) -> Callable[[ProjectCheck], ProjectCheck]:
    def register(check: ProjectCheck) -> ProjectCheck:
        RULES.append(Rule(name, severity, check, per_atom=False))
        return check
    return register


NONE: tuple[Issue, ...] = ()


# --- value shapes ----------------------------------------------------------------------------


# YYYY-MM-DD, optionally with a time: what frontmatter makes of YAML dates and timestamps.
# (datetime.fromisoformat alone would also take 20260309 and week dates such as 2026-W10.)
_ISO_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?")


def is_date(value: object) -> bool:
    """A real calendar date written YYYY-MM-DD, optionally followed by a time."""
    if not isinstance(value, str) or not _ISO_DATE.fullmatch(value):
        return False
    try:
        if len(value) == 10:
            dt.date.fromisoformat(value)
        else:
            dt.datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _yaml_repr(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


def _shape_text(value: object) -> str | None:
    return None if isinstance(value, str) else "must be text: put it in quotes"


def _shape_project(value: object) -> str | None:
    # a folder named 2024 gives `project: 2024`, which YAML reads as a number
    return None if isinstance(value, (str, int)) and not isinstance(value, bool) \
        else "must be the project's folder name"


def _shape_tags(value: object) -> str | None:
    if not isinstance(value, list):
        return "must be a list: write `tags: [a, b]`"
    bad = [v for v in value if not isinstance(v, str)]
    if bad:
        return f"must be a list of text: quote {_yaml_repr(bad[0])}"
    return None


def _shape_experiments(value: object, required: bool) -> str | None:
    if not isinstance(value, list):
        return "must be a list of experiment ids: write `[EXP-001, EXP-002]`"
    if not value and required:
        return "is empty: list the experiments it rests on, e.g. `[EXP-001]`"
    for v in value:
        if not (isinstance(v, str) and _is_experiment_id(v)):
            return f"must list experiment ids (EXP-NNN): {_yaml_repr(v)} is not one"
    return None


def _shape_links(value: object) -> str | None:
    if not isinstance(value, list):
        return "must be a list of atom ids: write `links: [EXP-001, K-002]`"
    bad = [v for v in value if not isinstance(v, str)]
    return f"must be a list of atom ids: {_yaml_repr(bad[0])} is not one" if bad else None


def _shape_refs(value: object) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return None
    return "must be a whole number ≥ 0 (cortex writes it from the access log)"


def _shape_timestamp(value: object) -> str | None:
    if is_date(value):
        return None
    return "must be an ISO timestamp (cortex writes it from the access log)"


# What each known key must hold; dates are the `date` rule's concern, not this table's.
_SHAPES: dict[str, Callable[[object], str | None]] = {
    "id": _shape_text,
    "project": _shape_project,
    "summary": _shape_text,
    "tags": _shape_tags,
    "links": _shape_links,
    "refs": _shape_refs,
    "last-ref": _shape_timestamp,
    "status": _shape_text,
    "executor": _shape_text,
    "invalidated-reason": _shape_text,
    "priority": _shape_text,
    "src": _shape_text,
}
_TEXT_KEYS = frozenset(k for k, shape in _SHAPES.items() if shape is _shape_text)
_EXPERIMENT_LISTS = ("evidence", "source-experiments")
_DATE_KEYS = ("date", "invalidated-date")

_MISSING_HINT = {
    "id": "add `id: {id}`",
    "date": "add `date: YYYY-MM-DD`",
    "project": "add `project: {project}`",
    "summary": "add `summary: \"what this atom records, in one line\"`",
    "tags": "add `tags: [a, b]`",
    "evidence": "add `evidence: [EXP-NNN]` (the experiments it rests on)",
    "source-experiments": "add `source-experiments: [EXP-NNN, …]` "
                          "(the experiments it was drawn from)",
}


# --- errors ----------------------------------------------------------------------------------


@project_rule("frontmatter", ERROR)
def frontmatter_parses(ctx: Context) -> Iterable[FileIssue]:
    """The file starts with a `---` frontmatter block holding valid YAML `key: value` lines."""
    for e in ctx.loaded.errors:
        yield FileIssue(_project_relative(ctx.project, e.path), e.reason, e.line)


@atom_rule("required", ERROR)
def required_fields_present(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """Every field its kind requires is present and not empty (null)."""
    meta = atom.meta
    missing = [k for k in atom.kind.required if meta.get(k) is None]
    if not missing:
        return NONE
    return [Issue(f"{atom.kind.name} needs `{k}`: "
                  + _MISSING_HINT[k].format(id=atom.path.stem, project=ctx.project.name))
            for k in missing]


@atom_rule("type", ERROR)
def fields_have_their_types(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """Each known field holds the right kind of value (text, list of text, EXP ids, count)."""
    issues: list[Issue] = []
    kind = atom.kind
    for key, value in atom.meta.items():
        if value is None or (value.__class__ is str and key in _TEXT_KEYS):
            continue  # absent (the `required` rule's concern), or text where text belongs
        if key in _EXPERIMENT_LISTS:
            if key not in kind.required and key not in kind.optional:
                continue
            problem = _shape_experiments(value, required=key in kind.required)
        else:
            shape = _SHAPES.get(key)
            problem = shape(value) if shape else None
        if problem:
            issues.append(Issue(f"`{key}` {problem}", key))
    return issues


@atom_rule("id-filename", ERROR)
def id_matches_filename(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """The `id` is the file name without `.md` (EXP-042 lives in EXP-042.md)."""
    raw = atom.meta.get("id")
    if not isinstance(raw, str) or raw == atom.path.name[:-3]:
        return NONE
    return [Issue(f"id {raw!r} does not match the file name {atom.path.name}: "
                  f"fix the id or rename the file", "id")]


@atom_rule("id-folder", ERROR)
def id_prefix_matches_folder(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """The `id` prefix is the folder's kind (EXP- in experiments/, K- in knowledge/ …)."""
    raw = atom.meta.get("id")
    kind = kind_of_id(raw) if isinstance(raw, str) else None
    if kind is None or kind is atom.kind:
        return NONE
    return [Issue(f"id {raw} is a {kind.name} id but the file is in {atom.kind.folder}/: "
                  f"move it to {kind.folder}/ or fix the id", "id")]


@atom_rule("project", ERROR)
def project_matches_folder(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """The `project` field names the project folder the atom is in."""
    raw = atom.meta.get("project")
    if raw is None or isinstance(raw, bool) or not isinstance(raw, (str, int)):
        return NONE
    if str(raw) == ctx.project.name:
        return NONE
    return [Issue(f"project {str(raw)!r} is not the folder it is in "
                  f"({ctx.project.name}): write `project: {ctx.project.name}`", "project")]


@atom_rule("date", ERROR)
def dates_are_dates(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """`date` (and `invalidated-date`) is a real calendar date, YYYY-MM-DD."""
    return [Issue(f"`{key}` {_yaml_repr(value)} is not a date: write YYYY-MM-DD", key)
            for key in _DATE_KEYS if (value := atom.meta.get(key)) is not None
            and not is_date(value)]


_STATUS_LIST = ", ".join(STATUSES)


@atom_rule("status", ERROR)
def status_is_known(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """`status` is one of the lifecycle's statuses, optionally `:ID` of the atom that caused it."""
    raw = atom.meta.get("status")
    if not isinstance(raw, str) or not raw.strip():
        return NONE
    name, ref = split_status(raw)
    if name not in STATUSES:
        return [Issue(f"unknown status {name!r}: use one of {_STATUS_LIST} "
                      "(optionally `:ID`, e.g. superseded:EXP-050)", "status")]
    if ref is not None and not _is_atom_id(ref):
        return [Issue(f"status {raw.strip()!r}: {ref!r} is not an atom id "
                      f"(write e.g. {name}:EXP-050)", "status")]
    return NONE


@atom_rule("duplicate-id", ERROR)
def ids_are_unique(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """No two atoms of a project share an id (EXP-7 and EXP-007 are the same id)."""
    first = ctx.duplicates.get(id(atom))
    if first is None:
        return NONE
    return [Issue(f"duplicate id {_atom_id(atom)}: {first} has it too; "
                  "renumber one of them (`cortex new` picks the next free id)", "id")]


@atom_rule("evidence", ERROR)
def evidence_exists(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """Every experiment in `evidence` / `source-experiments` exists in the project."""
    issues: list[Issue] = []
    kind = atom.kind
    for key in _EXPERIMENT_LISTS:
        value = atom.meta.get(key)
        if not isinstance(value, list) or (key not in kind.required and key not in kind.optional):
            continue
        for exp in value:
            if isinstance(exp, str) and exp not in ctx.experiments and _is_experiment_id(exp):
                issues.append(Issue(f"`{key}` cites {exp}, which does not exist in project "
                                    f"{ctx.project.name}: fix the id or write that experiment",
                                    key))
    return issues


@project_rule("misplaced", ERROR)
def atom_files_in_their_folder(ctx: Context) -> Iterable[FileIssue]:
    """An atom file sits in its kind's folder (no K-001.md inside experiments/)."""
    for folder_kind, name in ctx.stray_files:
        kind = kind_of_filename(name)
        if kind is not None and kind is not folder_kind:
            yield FileIssue(f"{folder_kind.folder}/{name}",
                            f"{name} is a {kind.name} atom in {folder_kind.folder}/, where "
                            f"cortex does not read it: move it to {kind.folder}/")


# --- warnings --------------------------------------------------------------------------------


@atom_rule("links", WARNING)
def links_resolve(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """Every id in `links` names an atom of the project."""
    value = atom.meta.get("links")
    if not isinstance(value, list) or not value:
        return NONE
    issues: list[Issue] = []
    for link in value:
        if not isinstance(link, str) or link in ctx.ids:
            continue
        if _is_atom_id(link):
            issues.append(Issue(f"links to {link}, which does not exist in project "
                                f"{ctx.project.name}", "links"))
        else:
            issues.append(Issue(f"links to {link!r}, which is not an atom id "
                                "(EXP-NNN, K-NNN or PAT-NNN)", "links"))
    return issues


@atom_rule("status-ref", WARNING)
def status_ref_resolves(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """The atom named after a status (`superseded:EXP-050`) exists in the project."""
    raw = atom.meta.get("status")
    if not isinstance(raw, str) or ":" not in raw:
        return NONE
    name, ref = split_status(raw)
    if ref is None or ref in ctx.ids or not _is_atom_id(ref) or name not in STATUSES:
        return NONE
    return [Issue(f"status {name}:{ref} names {ref}, which does not exist in project "
                  f"{ctx.project.name}", "status")]




@atom_rule("anti-pattern", WARNING)
def anti_pattern_convention(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """Knowledge: a summary starting `ANTI-PATTERN:` carries the tag `anti-pattern`, and back."""
    if atom.kind is not KNOWLEDGE:
        return NONE
    summary, tags = atom.meta.get("summary"), atom.meta.get("tags")
    if not isinstance(summary, str) or not isinstance(tags, list):
        return NONE
    prefixed = summary.lstrip().upper().startswith(ANTI_PATTERN_PREFIX)
    tagged = any(isinstance(t, str) and t.lower() == ANTI_PATTERN_TAG for t in tags)
    if prefixed and not tagged:
        return [Issue(f"the summary starts with {ANTI_PATTERN_PREFIX} but the tags lack "
                      f"`{ANTI_PATTERN_TAG}`: add it", "tags")]
    if tagged and not prefixed:
        return [Issue(f"tagged `{ANTI_PATTERN_TAG}` but the summary does not start with "
                      f"{ANTI_PATTERN_PREFIX}: prefix it (or drop the tag)", "summary")]
    return NONE


MAX_KEY_ISSUES = 10  # unknown keys listed one by one per atom


@atom_rule("unknown-key", WARNING)
def keys_are_known(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """Every frontmatter key is one its kind defines (catches typos such as `tag:`)."""
    if not atom.meta.keys() - _KNOWN_KEYS[atom.kind.name]:
        return NONE
    known = _KNOWN_KEYS[atom.kind.name]
    unknown = [k for k in atom.meta if k not in known]
    issues = [Issue(f"unknown key `{k}` for {atom.kind.name} "
                    f"(known: {', '.join((*atom.kind.required, *atom.kind.optional))})", k)
              for k in unknown[:MAX_KEY_ISSUES]]
    if len(unknown) > MAX_KEY_ISSUES:  # 60,000 junk keys: one capped list, not 60,000 lines
        shown = ", ".join(f"`{k[:40]}`" for k in unknown[MAX_KEY_ISSUES:2 * MAX_KEY_ISSUES])
        issues.append(Issue(f"… and {len(unknown) - MAX_KEY_ISSUES:,} more unknown keys "
                            f"({shown}{' …' if len(unknown) > 2 * MAX_KEY_ISSUES else ''}): "
                            "is this file an atom?"))
    return issues


@atom_rule("summary", WARNING)
def summary_is_one_useful_line(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """The summary is one line, neither empty nor longer than MAX_SUMMARY (200) characters."""
    summary = atom.meta.get("summary")
    if not isinstance(summary, str):
        return NONE
    text = summary.strip()
    if not text:
        return [Issue("the summary is empty: say in one line what this atom records",
                      "summary")]
    if "\n" in text or "\r" in text:
        return [Issue("the summary spans several lines: keep it to one line and put "
                      "details in the body", "summary")]
    if len(text) > MAX_SUMMARY:
        return [Issue(f"the summary is {len(text)} characters, over the {MAX_SUMMARY} limit: "
                      "shorten it and put details in the body", "summary")]
    return NONE


@atom_rule("tombstone", WARNING)
def invalidated_says_why(atom: Atom, ctx: Context) -> Sequence[Issue]:
    """An invalidated atom says why: `invalidated:ID` or an `invalidated-reason`."""
    raw = atom.meta.get("status")
    if not isinstance(raw, str):
        return NONE
    name, ref = split_status(raw)
    if name != "invalidated" or ref or atom.meta.get("invalidated-reason"):
        return NONE
    return [Issue("invalidated without saying why: write `status: invalidated:EXP-NNN` or "
                  "add `invalidated-reason:` (and `invalidated-date:`)", "status")]


# Names that were meant to be atoms but that cortex does not read: exp-1.md, EXP_001.md,
# K-001.MD, PAT-3-notes.md.
_ATOM_LIKE = re.compile(rf"^({layout.PREFIX_PATTERN})[-_ ]?(\d+)([a-z]?).*\.(md|markdown)$",
                        re.IGNORECASE)


@project_rule("filename", WARNING)
def atom_like_files_are_named_right(ctx: Context) -> Iterable[FileIssue]:
    """A file in an atom folder that looks like an atom is named exactly PREFIX-NNN.md."""
    for folder_kind, name in ctx.stray_files:
        if kind_of_filename(name) is not None:
            continue
        m = _ATOM_LIKE.match(name)
        if m is None:
            continue
        kind = KIND_BY_PREFIX[m.group(1).upper()]
        suffix = m.group(3).lower() if kind is EXPERIMENT else ""
        expected = f"{kind.format_id(int(m.group(2)))}{suffix}.md"
        yield FileIssue(f"{folder_kind.folder}/{name}",
                        f"{name} looks like an atom but is not named {kind.prefix}-NNN.md, so "
                        f"cortex ignores it: rename it (e.g. to {expected}) or move it out")


@project_rule("access-log", WARNING)
def access_log_lines_are_entries(ctx: Context) -> Iterable[FileIssue]:
    """Every line of the project's access log is a log entry (reads are counted from them)."""
    from cortexfs import accesslog

    stats = accesslog.current(ctx.project)[0]  # the shared fold: reads only what is new
    n = stats.bad_lines
    if n:
        what = ("1 line is not a log entry and is not counted as a read" if n == 1 else
                f"{n} lines are not log entries and are not counted as reads "
                f"(the first is line {stats.first_bad})")
        yield FileIssue(f"_meta/{ctx.project.access_log.name}",
                        f"{what}: torn by a full disk or a killed writer — delete "
                        f"{'it' if n == 1 else 'them'}, or rewrite "
                        f"{'it' if n == 1 else 'them'} as JSON lines like the others",
                        stats.first_bad)


# --- running ---------------------------------------------------------------------------------


def validate(store: Store, projects: list[Project] | None = None) -> Report:
    """Check every atom of `projects` against every rule, plus EXTRA_CHECKS; with None, the
    whole store: every project and the STORE_CHECKS."""
    selected = store.projects() if projects is None else projects
    findings: list[Finding] = []
    atoms = 0
    for project in selected:  # (one at a time: a cold scan holds a project's atoms)
        sc = scan(project)
        atoms += sum(len(files) for files in sc.folders.values())  # each: an atom or an error
        with collector_paused():  # (its atoms loaded and checked: no cycles among them)
            findings.extend(project_findings(sc))
    findings.extend(extra_findings(store, selected, whole=projects is None))
    findings.extend(link_findings(store, selected, {f.path for f in findings}))
    return Report(findings, atoms, [p.name for p in selected])


def link_findings(store: Store, projects: list[Project], reported: set[str]) -> list[Finding]:
    """Every symbolic link in the store (in the projects being validated and outside any
    project) and in its templates folder, once: none is part of the store (cortexfs.wall),
    so cortex skips it and everything under it. `reported`: paths already named."""
    selected = {p.name for p in projects}
    prefix = str(store.projects_dir) + os.sep
    templates = store.templates_dir
    found = wall.links(store.context)
    found += [str(templates)] if templates.is_symlink() else wall.links(templates)
    out = []
    for path in found:
        parts = path[len(prefix):].split(os.sep) if path.startswith(prefix) else []
        if len(parts) > 1 and parts[0] not in selected:
            continue  # inside a project not being validated
        rel = store.rel(path)
        if rel in reported:
            continue
        out.append(Finding(ERROR, "link", rel, None,
                           "a symbolic link, which is not part of the store: cortex neither "
                           "reads nor writes through it (nor anything under it); replace it "
                           "with the file or folder itself, or remove it"))
    return out


def check_project(project: Project, loaded: LoadedProject) -> list[Finding]:
    """Every rule over one loaded project (usable by callers that already loaded it)."""
    ctx = Context.build(project, loaded)
    prefix = f"projects/{project.name}/"
    findings: list[Finding] = []
    atom_rules = [(r.name, r.severity, r.check) for r in RULES if r.per_atom]
    pending: dict[int, tuple[Atom, list[tuple[str, Severity, Issue]]]] = {}
    atoms = loaded.atoms
    for name, severity, check in atom_rules:
        # rule by rule over all atoms: map() keeps the per-atom cost to the rule itself
        for atom, issues in zip(atoms, map(check, atoms, repeat(ctx)), strict=True):
            if issues:
                found = pending.setdefault(id(atom), (atom, []))[1]
                found.extend((name, severity, issue) for issue in issues)
    for atom, issues in pending.values():
        # the one file read of validation: where the keys with findings are, for their lines
        lines = _key_lines(str(atom.path)) if any(i.key for _, _, i in issues) else {}
        rel = f"{prefix}{atom.kind.folder}/{atom.path.name}"
        for name, severity, issue in issues:
            line = lines.get(issue.key) if issue.key else None
            findings.append(Finding(severity, name, rel, line, issue.message))
    for rule in RULES:
        if not rule.per_atom:
            for file_issue in rule.check(ctx):
                findings.append(Finding(rule.severity, rule.name, prefix + file_issue.path,
                                        file_issue.line, file_issue.message))
    return findings


# --- the cache of each project's findings -------------------------------------------------------

FINDINGS_KIND = "findings"


def project_findings(sc: ProjectScan) -> list[Finding]:
    """`check_project` over a scanned project (its atoms loaded from `sc`, without bodies: no
    rule reads one).

    The findings are cached (`.cache/validate/<project>.bin`) under a digest of everything
    the rules read: each atom file's name, mtime, size and CRC of its content (the scan's
    inputs_digest: a folder whose records did not change is not digested again), the other
    entries of the atom folders, the access log's bad lines, the project, and the rules —
    the code is the cache's own key. When none of it moved, no rule runs and no atom is
    loaded (at 100,000 atoms, the rules were two thirds of a warm `cortex validate`)."""
    key = _findings_key(sc)
    found = _cached_findings(sc.project, key)
    return found if found is not None else _check(sc, key, None)


FORK_MIN_ATOMS = 5000  # atoms to check below which a second process costs more than it saves


def many_findings(scans: Sequence[ProjectScan],
                  ) -> Callable[[Mapping[str, LoadedProject]], list[list[Finding]]]:
    """`project_findings` of each scanned project, started now: the returned function,
    given the projects' loaded atoms, finishes and returns them. When those whose findings
    are not cached hold FORK_MIN_ATOMS files or more, a forked process
    (cortexfs.forked.share) starts at once, largest project first, on the second core: it
    loads (from the scans' infos, when the caller has read them) and checks the projects it
    takes while the caller does other work; finishing takes the projects still queued
    (100,000 atoms, checked from scratch, were 2.4 s of a first `cortex ready`)."""
    from cortexfs import forked

    keys = [_findings_key(sc) for sc in scans]
    out = [_cached_findings(sc.project, key) for sc, key in zip(scans, keys, strict=True)]
    sizes = [sum(map(len, sc.folders.values())) for sc in scans]
    todo = sorted((i for i, found in enumerate(out) if found is None), key=lambda i: -sizes[i])
    shared = forked.share(todo, lambda i: _rows(_check(scans[i], keys[i], None))) \
        if len(todo) > 1 and sum(sizes[i] for i in todo) >= FORK_MIN_ATOMS else None

    def finish(loaded: Mapping[str, LoadedProject]) -> list[list[Finding]]:
        def check(i: int) -> list[Finding]:
            return _check(scans[i], keys[i], loaded.get(scans[i].project.name))

        if shared is not None:
            try:
                for i in shared.mine():
                    out[i] = check(i)
                for i, rows in shared.join().items():
                    with contextlib.suppress(TypeError, ValueError):
                        out[i] = [Finding(*row) for row in rows]
            except BaseException:
                shared.stop()
                raise
        for i in todo:
            if out[i] is None:  # (not shared, or the child failed)
                out[i] = check(i)
        return [found or [] for found in out]
    return finish


def _findings_key(sc: ProjectScan) -> str:
    from cortexfs import accesslog

    project = sc.project
    stats = accesslog.current(project)[0]
    files = [sc.inputs_digest(kind) for kind in KINDS]  # (name, mtime, size, CRC) of each
    rules = [(r.name, r.severity, r.check.__module__, r.check.__qualname__) for r in RULES]
    # marshal format 2 has no back-references: equal values always give equal bytes
    return cache.digest(marshal.dumps((project.name, str(project.root), rules, files,
                                       sorted(sc.others.items()), stats.bad_lines,
                                       stats.first_bad), 2)).hex()


def _findings_path(project: Project) -> Path:
    return project.store.cache_dir / "validate" / f"{project.name}.bin"


def _cached_findings(project: Project, key: str) -> list[Finding] | None:
    saved = cache.load(_findings_path(project), FINDINGS_KIND)
    if isinstance(saved, tuple) and len(saved) == 2 and saved[0] == key:
        with contextlib.suppress(TypeError):
            return [Finding(*row) for row in saved[1]]
    return None


def _check(sc: ProjectScan, key: str, loaded: LoadedProject | None) -> list[Finding]:
    findings = check_project(sc.project, loaded if loaded is not None else sc.loaded())
    cache.save(_findings_path(sc.project), FINDINGS_KIND, (key, _rows(findings)))
    return findings


def _rows(findings: list[Finding]) -> list[tuple[Any, ...]]:
    return [(f.severity, f.rule, f.path, f.line, f.message) for f in findings]


def extra_findings(store: Store, projects: list[Project], whole: bool) -> list[Finding]:
    """What the EXTRA_CHECKS find in `projects`, and with `whole` (the whole store
    validated) the STORE_CHECKS: each entry names its function as "module:function"."""
    def load(spec: str) -> Callable[..., Iterable[Finding]]:
        module, _, name = spec.partition(":")
        check: Callable[..., Iterable[Finding]] = getattr(importlib.import_module(module), name)
        return check

    found = [f for spec in EXTRA_CHECKS for f in load(spec)(store, projects)]
    for spec in STORE_CHECKS if whole else []:
        found.extend(load(spec)(store))
    return found


# --- helpers ---------------------------------------------------------------------------------


def _is_atom_id(text: str) -> bool:
    return split_id(text) is not None


def _is_experiment_id(text: str) -> bool:
    parts = split_id(text)
    return parts is not None and parts[0] == EXPERIMENT.prefix


_KNOWN_KEYS = {k.name: frozenset((*k.required, *k.optional)) for k in KINDS}


def _atom_id(atom: Atom) -> str:
    """The atom's id: its frontmatter `id` when that is an atom id, else its file name."""
    stem = atom.path.name[:-3]
    raw = atom.meta.get("id")
    if raw == stem or not isinstance(raw, str) or not _is_atom_id(raw):
        return stem
    return raw


def _same_id_key(atom_id: str) -> str:
    """EXP-7, EXP-007 and EXP-0007 → EXP-7: ids that only differ in leading zeros collide."""
    if "-0" not in atom_id:  # no leading zero: already in this form (and cheap to tell)
        return atom_id
    parts = split_id(atom_id)
    return f"{parts[0]}-{parts[1]}{parts[2]}" if parts else atom_id


def _duplicates(atoms: list[Atom]) -> dict[int, str]:
    """For each atom that repeats another's id: id(atom) → the file that keeps it.

    The keeper is the file named after the id (EXP-042.md for id EXP-042), else the first
    by path; the others are the ones to renumber.
    """
    groups: dict[str, list[Atom]] = defaultdict(list)
    for atom in atoms:
        groups[_same_id_key(_atom_id(atom))].append(atom)
    found: dict[int, str] = {}
    for group in groups.values():
        if len(group) > 1:
            ordered = sorted(group, key=lambda a: (a.path.name[:-3] != _atom_id(a), str(a.path)))
            keeper = f"{ordered[0].kind.folder}/{ordered[0].path.name}"
            for atom in ordered[1:]:
                found[id(atom)] = keeper
    return found


def _project_relative(project: Project, path: str) -> str:
    """`path` (absolute, or already relative) as a posix path inside the project folder."""
    root = str(project.root) + os.sep
    if path.startswith(root):
        path = path[len(root):]
    return path.replace(os.sep, "/")


def _key_lines(path: str) -> dict[str, int]:
    try:  # (read_bytes: never through a link, never more than an atom's limit)
        return key_lines(read_bytes(Path(path)).decode("utf-8", "replace"))
    except AtomParseError:
        return {}
