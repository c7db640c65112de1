"""Governance checks (SPEC §6), run by `cortex validate` through `validate.EXTRA_CHECKS`.

Per project: STATUS.md (at most 120 lines, a warning above 80, the four sections), ISSUES.md
(at most 80 lines), TASKS.yaml (schema, unknown dependencies, cycles), the decision records,
and the governance files being there at all. For the store: user/USER.md under 3 KB, the
system decision records, and a CORTEX.md in every folder of the knowledge root.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from cortexfs import decisions, layout, tasks, wall
from cortexfs.errors import InvalidInputError
from cortexfs.overview import has_broken_markers, walk
from cortexfs.status import read_status
from cortexfs.store import Project, Store
from cortexfs.validate import ERROR, WARNING, Finding

# Rule names are distinct from the atom rules' (validate.py): `status` there is an atom's
# unknown status, so STATUS.md findings are `status-md`.
STATUS_RULE = "status-md"
STATUS_MAX_LINES = 120
STATUS_WARN_LINES = 80
ISSUES_MAX_LINES = 80
USER_MAX_BYTES = 3 * 1024
# (tasks-archive.md is not one: it comes with the first archived task)
GOVERNANCE_FILES = tuple(f for f in layout.PROJECT_FILES if f != layout.TASKS_ARCHIVE)


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
    except OSError:  # missing, a folder, a link, or a FIFO or device named like one
        return None
    except InvalidInputError as e:
        if problems is not None:
            problems.append(Finding(ERROR, "size", store.rel(path), None,
                                    str(e).replace(str(path), path.name)))
        return None


def project_findings(project: Project) -> Iterator[Finding]:
    """Governance findings for one project."""
    store = project.store
    root = project.root
    for name in GOVERNANCE_FILES:
        if (root / name).is_dir():
            yield Finding(ERROR, "governance-file", store.rel(root / name), None,
                          f"{name} is a folder, not a file: move it away, then run `cortex "
                          f"project new {project.name}` to add the file")
        elif not (root / name).is_file():
            yield Finding(WARNING, "governance-file", store.rel(root / name), None,
                          f"project {project.name} has no {name}: run `cortex project new "
                          f"{project.name}` (it adds the missing files and keeps the others)")
    problems: list[Finding] = []
    status = _read(store, root / layout.STATUS_MD, problems)
    if status is not None:
        yield from status_findings(store.rel(root / layout.STATUS_MD), status)
    issues = _read(store, root / layout.ISSUES_MD, problems)
    if issues is not None:
        count = len(issues.splitlines())
        if count > ISSUES_MAX_LINES:
            yield Finding(ERROR, "issues", store.rel(root / layout.ISSUES_MD), None,
                          f"ISSUES.md has {count} lines, over the {ISSUES_MAX_LINES}-line "
                          "limit: delete the resolved issues")
    if (root / layout.TASKS_FILE).is_file():
        rel = store.rel(root / layout.TASKS_FILE)
        try:
            tf = tasks.load(project)
        except InvalidInputError as e:  # not UTF-8, too big: a finding, not a crash
            message = str(e).replace(str(root / layout.TASKS_FILE), layout.TASKS_FILE)
            yield Finding(ERROR, "tasks", rel, None, message)
            tf = None
        for problem in tf.problems if tf else []:
            yield Finding(problem.level, "tasks", rel, problem.line, problem.message)
    yield from problems
    yield from decision_findings(store, root / layout.DECISIONS)


def decision_findings(store: Store, folder: Path) -> Iterator[Finding]:
    """Findings for every record in a decisions folder: names, numbers, required parts."""
    seen: dict[int, str] = {}
    for path in decisions.records(folder, store.context):
        rel = store.rel(path)
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


def store_check(store: Store) -> Iterator[Finding]:
    """The validate.STORE_CHECKS entry: the store's own files (USER.md's size, the
    store-level decision records, a CORTEX.md in every folder) — checked when the whole
    store is, not when one project is."""
    user = store.context / layout.USER / layout.USER_MD
    try:
        size = user.stat().st_size
    except FileNotFoundError:
        size = None
    if size is not None and size >= USER_MAX_BYTES:
        yield Finding(ERROR, "user", store.rel(user), None,
                      f"USER.md is {size:,} bytes, over the 3 KB limit ({USER_MAX_BYTES:,}): "
                      "keep only the preferences that change how the agent works")
    yield from decision_findings(store, store.context / layout.DECISIONS)
    for folder in walk(store):
        path = folder / layout.CORTEX_MD
        rel = store.rel(path)
        text = _read(store, path)
        if text is None:
            where = store.rel(folder) or "."
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
    return [finding for project in projects for finding in project_findings(project)]
