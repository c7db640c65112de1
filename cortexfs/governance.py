"""Governance checks (SPEC §6), run by `cortex validate` through `validate.EXTRA_CHECKS`.

Per project: STATUS.md (at most 120 lines, a warning above 80, the four sections), ISSUES.md
(at most 80 lines), TASKS.yaml (schema, unknown dependencies, cycles), the decision records,
and the governance files being there at all. For the store: user/USER.md under 3 KB, the
system decision records, and a CORTEX.md in every folder of the knowledge root.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cortexfs import decisions, tasks, wall
from cortexfs.errors import InvalidInputError
from cortexfs.store import Project, Store
from cortexfs.validate import ERROR, WARNING, Finding, Severity

STATUS_FILE = "STATUS.md"
# Rule names are distinct from the atom rules' (validate.py): `status` there is an atom's
# unknown status, so STATUS.md findings are `status-md`.
STATUS_RULE = "status-md"
ISSUES_FILE = "ISSUES.md"
STATUS_MAX_LINES = 120
STATUS_WARN_LINES = 80
ISSUES_MAX_LINES = 80
USER_MAX_BYTES = 3 * 1024
GOVERNANCE_FILES = ("mission.md", "roadmap.md", STATUS_FILE, ISSUES_FILE, tasks.TASKS_FILE)

# The four STATUS.md sections, each with the words one of its headings must contain.
# Headings match case-insensitively and loosely: "## Current Phase", "## Phase 2: build",
# "## Blockers", "## What's next" all count.
STATUS_SECTIONS: dict[str, tuple[str, ...]] = {
    "Current phase": ("phase",),
    "Recent progress": ("progress", "recent", "done", "completed"),
    "Open blockers": ("blocker", "blocked", "blocking"),
    "Next steps": ("next", "todo", "to do", "upcoming"),
}
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")


# --- STATUS.md -------------------------------------------------------------------------------


@dataclass
class StatusInfo:
    """What a STATUS.md holds: its size, its sections, and the current phase line."""

    lines: int
    sections: dict[str, int] = field(default_factory=dict)  # section → 1-based heading line
    phase: str | None = None

    @property
    def missing(self) -> list[str]:
        return [s for s in STATUS_SECTIONS if s not in self.sections]


def read_status(text: str) -> StatusInfo:
    """Size, sections and phase of a STATUS.md's text."""
    lines = text.splitlines()
    info = StatusInfo(len(lines))
    heads = [(i, m.group(2)) for i, line in enumerate(lines)
             if (m := _HEADING.match(line)) and len(m.group(1)) >= 2]
    for i, title in heads:
        words = " ".join(re.sub(r"[^a-z0-9]+", " ", title.lower()).split())
        for section, keys in STATUS_SECTIONS.items():
            if section not in info.sections and any(
                    re.search(rf"\b{re.escape(k)}", words) for k in keys):
                info.sections[section] = i + 1
                if section == "Current phase":
                    info.phase = _phase_line(lines, i, title)
                break
    return info


def _phase_line(lines: list[str], heading: int, title: str) -> str | None:
    """The phase: the first text line under its heading, else what the heading itself says
    after "phase" (`## Current phase: 2 — build`)."""
    for line in lines[heading + 1:]:
        if _HEADING.match(line):
            break
        text = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line).strip()
        text = re.sub(r"<!--.*?-->", "", text).strip()
        if text:
            return " ".join(text.split())
    tail = re.split(r"(?i)current phase|phase", title, maxsplit=1)[-1].strip(" :—-")
    return tail or None


def status_findings(rel: str, text: str) -> Iterator[Finding]:
    """Size and section findings for one STATUS.md (`rel` relative to context/)."""
    info = read_status(text)
    if info.lines > STATUS_MAX_LINES:
        yield Finding(ERROR, STATUS_RULE, rel, None,
                      f"STATUS.md has {info.lines} lines, over the {STATUS_MAX_LINES}-line "
                      "limit: overwrite it with the current state only (history belongs in "
                      "experiments and decisions)")
    elif info.lines > STATUS_WARN_LINES:
        yield Finding(WARNING, STATUS_RULE, rel, None,
                      f"STATUS.md has {info.lines} lines (limit {STATUS_MAX_LINES}): trim it "
                      "to the current state")
    for section in info.missing:
        yield Finding(ERROR, STATUS_RULE, rel, None,
                      f"STATUS.md has no '{section}' section: add `## {section}`")


# --- per project ------------------------------------------------------------------------------


def _read(store: Store, path: Path, problems: list[Finding] | None = None) -> str | None:
    """A governance file's text; None when missing, a folder or a link (not part of the
    store: cortexfs.wall), or too big to read (a finding in `problems`)."""
    try:
        return wall.read_text(store.context, path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except InvalidInputError as e:
        if problems is not None:
            problems.append(Finding(ERROR, "size", _rel(store, path), None,
                                    str(e).replace(str(path), path.name)))
        return None
    except OSError:  # a FIFO or device named like one: not a file
        return None


def _rel(store: Store, path: Path) -> str:
    return path.relative_to(store.context).as_posix()


def project_findings(project: Project) -> Iterator[Finding]:
    """Governance findings for one project."""
    store = project.store
    root = project.root
    for name in GOVERNANCE_FILES:
        if (root / name).is_dir():
            yield Finding(ERROR, "governance-file", _rel(store, root / name), None,
                          f"{name} is a folder, not a file: move it away, then run `cortex "
                          f"project new {project.name}` to add the file")
        elif not (root / name).is_file():
            yield Finding(WARNING, "governance-file", _rel(store, root / name), None,
                          f"project {project.name} has no {name}: run `cortex project new "
                          f"{project.name}` (it adds the missing files and keeps the others)")
    problems: list[Finding] = []
    status = _read(store, root / STATUS_FILE, problems)
    if status is not None:
        yield from status_findings(_rel(store, root / STATUS_FILE), status)
    issues = _read(store, root / ISSUES_FILE, problems)
    if issues is not None:
        count = len(issues.splitlines())
        if count > ISSUES_MAX_LINES:
            yield Finding(ERROR, "issues", _rel(store, root / ISSUES_FILE), None,
                          f"ISSUES.md has {count} lines, over the {ISSUES_MAX_LINES}-line "
                          "limit: delete the resolved issues")
    if (root / tasks.TASKS_FILE).is_file():
        rel = _rel(store, root / tasks.TASKS_FILE)
        try:
            tf = tasks.load(project)
        except InvalidInputError as e:  # not UTF-8, too big: a finding, not a crash
            message = str(e).replace(str(root / tasks.TASKS_FILE), tasks.TASKS_FILE)
            yield Finding(ERROR, "tasks", rel, None, message)
            tf = None
        for problem in tf.problems if tf else []:
            severity: Severity = ERROR if problem.level == "error" else WARNING
            yield Finding(severity, "tasks", rel, problem.line, problem.message)
    yield from problems
    yield from decision_findings(store, root / decisions.FOLDER)


def decision_findings(store: Store, folder: Path) -> Iterator[Finding]:
    """Findings for every record in a decisions folder: names, numbers, required parts."""
    seen: dict[int, str] = {}
    for path in decisions.records(folder, store.context):
        rel = _rel(store, path)
        number = decisions.record_number(path.name)
        if not decisions.RECORD_NAME.match(path.name):
            yield Finding(WARNING, "decision", rel, None,
                          f"{path.name} is not named NNNN-title.md (four digits, then a "
                          "lowercase-hyphenated title): rename it")
        if number is not None:
            if number in seen:
                yield Finding(WARNING, "decision", rel, None,
                              f"decision number {number:04d} is also used by {seen[number]}: "
                              "renumber one of them")
            seen.setdefault(number, path.name)
        problems: list[Finding] = []
        text = _read(store, path, problems) or ""
        yield from problems
        for problem in decisions.check_record(text):
            yield Finding(ERROR, "decision", rel, problem.line, problem.message)


# --- the store ---------------------------------------------------------------------------------


def store_findings(store: Store) -> Iterator[Finding]:
    """Store-wide findings: USER.md size, system decisions, a CORTEX.md in every folder."""
    from cortexfs.overview import content_dirs, has_broken_markers

    user = store.context / "user" / "USER.md"
    try:
        size = user.stat().st_size
    except FileNotFoundError:
        size = None
    if size is not None and size >= USER_MAX_BYTES:
        yield Finding(ERROR, "user", _rel(store, user), None,
                      f"USER.md is {size:,} bytes, over the 3 KB limit ({USER_MAX_BYTES:,}): "
                      "keep only the preferences that change how the agent works")
    yield from decision_findings(store, store.context / decisions.FOLDER)
    for folder in content_dirs(store):
        path = folder / "CORTEX.md"
        rel = _rel(store, path)
        text = _read(store, path)
        if text is None:
            where = _rel(store, folder) or "."
            yield Finding(WARNING, "cortex-md", rel, None,
                          f"the folder {where}/ has no CORTEX.md: run `cortex index regen "
                          "--all` to create one, then say in it what the folder is for")
        elif has_broken_markers(text):
            yield Finding(WARNING, "cortex-md", rel, None,
                          "the generated-block markers are broken (a start marker without "
                          "its end marker): fix or delete them so `cortex index regen --all` "
                          "can refresh the block")


def check(store: Store, projects: list[Project]) -> Iterable[Finding]:
    """The validate.EXTRA_CHECKS entry: governance findings for `projects`."""
    findings: list[Finding] = []
    for project in projects:
        findings.extend(project_findings(project))
    return findings


def store_check(store: Store) -> Iterable[Finding]:
    """The validate.STORE_CHECKS entry: the store's own files (USER.md, the store-level
    decision records, a CORTEX.md in every folder) — checked when the whole store is, not
    when one project is."""
    return list(store_findings(store))
