"""TASKS.yaml: parsing with line numbers, schema checks, and edits that keep the user's text.

A TASKS.yaml is either a YAML list of tasks or a mapping whose `tasks:` key holds that list
(the scaffold writes the latter, with a comment explaining the fields). A task is a mapping:
`id`, `text`, `status` (todo|doing|done|blocked), and optionally `priority`, `why`,
`done-when`, `depends-on` (ids) and `completed-at` (a date).

Edits are textual: adding a task appends one block after the last task, `done` replaces the
`status` value and adds or replaces `completed-at`, archiving cuts whole task blocks. A task's
block holds the comment lines directly above it (not indented past its `-`; those above the
first task are the file's) and those right below it indented past its `-`. Every other byte
— comments, blank lines, key order, quoting, a BOM, CRLF — stays. Each edit is checked by
parsing the result; when the file's shape defeats a textual edit (a non-empty flow-style list,
odd indentation) the file is rewritten from its data instead, keeping its BOM, line endings
and leading comment lines but losing the others, and the caller is told so. Writes are
atomic and made under a per-project lock.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortexfs import escape, layout, wall
from cortexfs.atoms import as_date, as_list
from cortexfs.errors import CortexError, InvalidInputError, OutsideStoreError
from cortexfs.escape import yaml_scalar
from cortexfs.frontmatter import (
    BOM,
    MAX_YAML_DEPTH,
    decode_text,
    normalize,
    safe_loader,
    too_deep,
    unbounded,
)
from cortexfs.fsutil import atomic_write, file_lock
from cortexfs.store import Project

if TYPE_CHECKING:
    import yaml

    from cortexfs.commit import Transaction
    from cortexfs.validate import Severity

TASK_KEYS = ("id", "text", "status", "priority", "why", "done-when", "depends-on",
             "completed-at")
TASK_STATUSES = ("todo", "doing", "done", "blocked")
OPEN_STATUSES = ("todo", "doing", "blocked")
ARCHIVE_AFTER_DAYS = 3
MAX_TEXT = 300
TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_NUMBERED_ID = re.compile(r"^T-(\d+)\Z")
# `### T-3: Write the loader` — how tasks-archive.md names each archived task
_ARCHIVED = re.compile(r"^###[ \t]+([A-Za-z0-9][A-Za-z0-9._-]*):", re.M)
_STATUS_ORDER = {"doing": 0, "todo": 1, "blocked": 2, "done": 3}


@dataclass
class Problem:
    """One thing wrong with a TASKS.yaml: level is "error" or "warning"; line is 1-based."""

    level: Severity
    line: int | None
    message: str


@dataclass
class Task:
    """One task as written in TASKS.yaml (values normalised: dates are ISO strings)."""

    id: str
    text: str
    status: str
    line: int
    data: dict[str, Any]

    @property
    def priority(self) -> Any:
        return self.data.get("priority")

    @property
    def why(self) -> str | None:
        raw = self.data.get("why")
        return None if raw is None else str(raw)

    @property
    def done_when(self) -> str | None:
        raw = self.data.get("done-when")
        return None if raw is None else str(raw)

    @property
    def depends_on(self) -> list[str]:
        raw = self.data.get("depends-on")
        return as_list(raw) if isinstance(raw, (list, str, int)) else []

    @property
    def completed_at(self) -> dt.date | None:
        return as_date(self.data.get("completed-at"))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "status": self.status,
                "priority": self.priority, "why": self.why, "done-when": self.done_when,
                "depends-on": self.depends_on,
                "completed-at": self.data.get("completed-at"), "line": self.line}


@dataclass
class _Shape:
    """Where the task list sits in the file, for textual edits."""

    container: str  # "list" (top-level list) | "mapping" (under `tasks:`) | "empty"
    seq: yaml.Node | None = None  # the list node, when there is one
    key: yaml.Node | None = None  # the `tasks` key node, for a mapping
    items: list[yaml.Node] = field(default_factory=list)


@dataclass
class TaskFile:
    """A parsed TASKS.yaml: its text, its tasks and what is wrong with it."""

    path: Path
    text: str
    tasks: list[Task] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    shape: _Shape | None = None  # None when the YAML does not parse to a task list
    data: Any = None
    archived: set[str] = field(default_factory=set)  # the ids in tasks-archive.md

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.level == "error"]

    def get(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)

    def open_count(self) -> int:
        """How many of its tasks are open (todo, doing or blocked)."""
        return sum(1 for t in self.tasks if t.status in OPEN_STATUSES)

    def first_error(self) -> str:
        """`path:line: message` of the first error (no `:line` when it has none)."""
        first = self.errors[0]
        where = f"{self.path}:{first.line}" if first.line else str(self.path)
        return f"{where}: {first.message}"


# --- reading -----------------------------------------------------------------------------------


def parse(text: str, path: Path, archived: set[str] | None = None) -> TaskFile:
    """Parse TASKS.yaml text and check it against the schema (SPEC §6).

    `archived` holds the ids in tasks-archive.md: a dependency on one of them is known.
    """
    import yaml

    tf = TaskFile(path, text, archived=archived or set())
    deep = too_deep(text, python=True)  # (loaded below with Python's loader)
    if deep is not None:
        tf.problems.append(Problem("error", deep + 1, f"the YAML nests more than "
                                   f"{MAX_YAML_DEPTH} levels deep: write the tasks out plainly"))
        return tf
    loader = None
    try:
        # (the reader refuses control characters as soon as it is made)
        loader = safe_loader(yaml.SafeLoader)(text)  # a repeated key: an error with its line
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        tf.problems.append(Problem("error", mark.line + 1 if mark else None,
                                   f"invalid YAML: {problem}"))
        return tf
    finally:
        if loader is not None:
            loader.dispose()
    problem = unbounded(data)
    if problem:
        tf.problems.append(Problem("error", None, f"{problem}: write the tasks out plainly"))
        return tf
    tf.data = data
    shape = _shape(node, tf)
    if shape is None:
        return tf
    tf.shape = shape
    _check_tasks(tf, data, shape)
    return tf


def _shape(node: yaml.Node | None, tf: TaskFile) -> _Shape | None:
    import yaml

    if node is None or _is_null(node):
        return _Shape("empty")
    if isinstance(node, yaml.SequenceNode):
        return _Shape("list", node, None, list(node.value))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "tasks":
                if _is_null(value):
                    return _Shape("mapping", None, key)
                if isinstance(value, yaml.SequenceNode):
                    return _Shape("mapping", value, key, list(value.value))
                tf.problems.append(Problem("error", value.start_mark.line + 1,
                                           "`tasks:` must be a list of tasks (`- id: T-1` …)"))
                return None
    tf.problems.append(Problem(
        "error", node.start_mark.line + 1,
        "TASKS.yaml must be a list of tasks, or a mapping with a `tasks:` list"))
    return None


def _is_null(node: yaml.Node) -> bool:
    return node.tag == "tag:yaml.org,2002:null"


def _task_list(data: Any) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        return data.get("tasks") or []
    return []


def _check_tasks(tf: TaskFile, data: Any, shape: _Shape) -> None:
    import yaml

    seen: dict[str, int] = {}
    for n, (item, raw) in enumerate(zip(shape.items, _task_list(data), strict=True), start=1):
        line = item.start_mark.line + 1
        if not isinstance(item, yaml.MappingNode) or not isinstance(raw, dict):
            tf.problems.append(Problem("error", line, f"task #{n} is not a mapping: write it "
                                       "as `- id: T-1` followed by `text:`, `status:` …"))
            continue
        key_lines = {k.value: k.start_mark.line + 1 for k, _ in item.value
                     if isinstance(k, yaml.ScalarNode)}
        values = {str(k): normalize(v) for k, v in raw.items()}
        task = _check_task(tf, values, line, key_lines, n)
        if task is None:
            continue
        if task.id in seen:
            tf.problems.append(Problem("error", line, f"duplicate task id {task.id} (also on "
                                       f"line {seen[task.id]}): give each task its own id"))
            continue
        seen[task.id] = line
        tf.tasks.append(task)
    _check_dependencies(tf)


def _check_task(tf: TaskFile, values: dict[str, Any], line: int, key_lines: dict[str, int],
                n: int) -> Task | None:
    def problem(level: Severity, key: str | None, message: str) -> None:
        tf.problems.append(Problem(level, key_lines.get(key, line) if key else line, message))

    raw_id = values.get("id")
    if raw_id is None or isinstance(raw_id, (bool, list, dict)) or raw_id == "":
        problem("error", "id", f"task #{n} has no id: add `id: T-{n}`")
        return None
    task_id = str(raw_id)
    if not TASK_ID.match(task_id):
        problem("error", "id", f"task id {task_id!r} must be one word (letters, digits, "
                "'.', '_' or '-'), e.g. T-12")
        return None
    name = f"task {task_id}"
    text = values.get("text")
    if not isinstance(text, str) or not text.strip():
        problem("error", "text" if "text" in values else None,
                f"{name} has no text: add `text: what to do`")
        text = ""
    status = values.get("status")
    if status not in TASK_STATUSES:
        shown = "missing" if status is None else repr(status)
        problem("error", "status" if "status" in values else None,
                f"{name} status is {shown}: use one of {'|'.join(TASK_STATUSES)}")
        status = str(status) if status is not None else "todo"
    priority = values.get("priority")
    if isinstance(priority, (list, dict, bool)):
        problem("error", "priority", f"{name} priority must be a single value such as P1 or 2")
    for key in ("why", "done-when"):
        if isinstance(values.get(key), (list, dict)):
            problem("error", key, f"{name} `{key}` must be text, not a "
                    f"{type(values[key]).__name__}")
    deps = values.get("depends-on")
    if deps is not None and (isinstance(deps, bool) or not isinstance(deps, (list, str, int))):
        problem("error", "depends-on", f"{name} `depends-on` must be a list of task ids, "
                "e.g. [T-1, T-2]")
    elif isinstance(deps, list) and any(isinstance(d, (list, dict)) for d in deps):
        problem("error", "depends-on", f"{name} `depends-on` must list task ids only")
    completed = values.get("completed-at")
    if completed is not None and as_date(completed) is None:
        problem("error", "completed-at", f"{name} completed-at {completed!r} is not a date: "
                "write YYYY-MM-DD")
    if status == "done" and completed is None:
        problem("warning", "status", f"{name} is done but has no completed-at: add "
                "`completed-at: YYYY-MM-DD` so `cortex tasks archive` can archive it")
    if status != "done" and completed is not None and status in TASK_STATUSES:
        problem("warning", "completed-at", f"{name} has completed-at but status {status}: "
                "set status done or remove completed-at")
    for key in values:
        if key not in TASK_KEYS:
            problem("warning", key, f"{name} has unknown key {key!r} (known: "
                    f"{', '.join(TASK_KEYS)})")
    return Task(task_id, text.strip() if isinstance(text, str) else "", str(status), line,
                values)


def _check_dependencies(tf: TaskFile) -> None:
    ids = {t.id for t in tf.tasks}
    graph: dict[str, list[str]] = {}
    for task in tf.tasks:
        deps = [d for d in task.depends_on if d]
        for dep in deps:
            if dep not in ids and dep not in tf.archived:
                tf.problems.append(Problem(
                    "error", task.line, f"task {task.id} depends on {dep}, which is neither in "
                    f"{layout.TASKS_FILE} nor in {layout.TASKS_ARCHIVE}: fix the id or remove it"))
        graph[task.id] = [d for d in dict.fromkeys(deps) if d in ids]
    lines = {t.id: t.line for t in tf.tasks}
    for cycle in find_cycles(graph):
        tf.problems.append(Problem(
            "error", lines[cycle[0]], "dependency cycle " + " → ".join(cycle)
            + ": remove one of these depends-on entries"))


def find_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Each dependency cycle once, as a path that starts and ends at its smallest id.

    Iterative depth-first search (a long dependency chain must not hit the recursion limit);
    a back edge to a node on the current path closes a cycle.
    """
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    found: dict[tuple[str, ...], list[str]] = {}
    for root in graph:
        if state.get(root):
            continue
        path: list[str] = [root]
        state[root] = 1
        stack: list[Iterator[str]] = [iter(graph.get(root, ()))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                state[path.pop()] = 2
                continue
            if state.get(nxt) == 1:
                loop = path[path.index(nxt):]
                start = loop.index(min(loop, key=_id_key))
                ring = loop[start:] + loop[:start]
                found.setdefault(tuple(ring), [*ring, ring[0]])
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(graph.get(nxt, ())))
    return list(found.values())


def _id_key(task_id: str) -> tuple[str, int, str]:
    m = re.match(r"^(.*?)(\d+)$", task_id)
    return (m.group(1), int(m.group(2)), task_id) if m else (task_id, -1, task_id)


def archived_ids(text: str) -> set[str]:
    """Ids of the tasks recorded in a tasks-archive.md (its `### T-3: …` headings)."""
    return {m.group(1) for m in _ARCHIVED.finditer(text)}


MAX_BYTES = 1_000_000  # a task queue this big is not one a person or an agent can read


def _read(path: Path, root: Path) -> str | None:
    """The file's text (None when missing); InvalidInputError when it is a link (not part
    of the store: cortexfs.wall), a folder, too big or not UTF-8."""
    try:
        raw = wall.read_bytes(root, path, MAX_BYTES)
        if len(raw) > MAX_BYTES:
            raise InvalidInputError(f"{path} is over the {MAX_BYTES:,}-byte limit: archive "
                                    "or delete old entries")
        return decode_text(raw, str(path))  # bytes: keep CRLF line endings as they are
    except OutsideStoreError:
        raise
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise InvalidInputError(f"{path} is a folder, not a file: move it away") from None


def load(project: Project) -> TaskFile:
    """The project's TASKS.yaml, parsed and checked (an absent file reads as no tasks)."""
    path = project.root / layout.TASKS_FILE
    text = _read(path, project.store.context)
    archive = _read(project.root / layout.TASKS_ARCHIVE, project.store.context) or ""
    return parse(text or "", path, archived_ids(archive))


def sort_key(task: Task) -> tuple[int, int, int]:
    """Doing first, then todo, blocked, done; within each, by priority (P0/high first)."""
    return (_STATUS_ORDER.get(task.status, 9), priority_rank(task.priority), task.line)


def priority_rank(priority: Any) -> int:
    """A sortable rank for P0..P9, 0..9, critical/high/medium/low; unknown values last."""
    if isinstance(priority, int) and not isinstance(priority, bool):
        return priority
    text = str(priority or "").strip().lower()
    m = re.match(r"^p?(\d+)$", text)
    if m:
        return int(m.group(1))
    return {"critical": 0, "urgent": 0, "high": 1, "medium": 2, "normal": 2,
            "low": 3}.get(text, 99)


@dataclass
class Listing:
    """`cortex tasks list` (and the MCP `list_tasks`): task rows, what is wrong with the
    files, and the files that could not be read at all."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"tasks": self.rows, "problems": self.problems}


def listing(projects: list[Project], status: str | None = None, include_done: bool = False,
            strict: bool = False) -> Listing:
    """Tasks of `projects`, doing first, then todo, blocked (and done with `include_done`),
    by priority; each row carries its project and the open tasks it waits for. `strict`
    (one project named): an unreadable file is an error rather than a problem listed."""
    if status is not None:
        _check_status(status, "--status")
    out = Listing()
    for proj in projects:
        try:
            tf = load(proj)
        except CortexError as e:  # not UTF-8, unreadable: list the other projects' tasks
            if strict:
                raise
            out.unreadable.append(str(e))
            out.problems.append({"project": proj.name, "level": "error", "line": None,
                                 "message": str(e)})
            continue
        if tf.shape is None and strict:
            raise InvalidInputError(tf.first_error())
        out.problems += [{"project": proj.name, **asdict(p)} for p in tf.problems]
        done = {t.id for t in tf.tasks if t.status == "done"}
        for task in sorted(tf.tasks, key=sort_key):
            if status is not None and task.status != status:
                continue
            if status is None and not include_done and task.status == "done":
                continue
            waiting = [d for d in task.depends_on if d not in done and tf.get(d) is not None]
            out.rows.append({"project": proj.name, **task.to_json(), "waiting-for": waiting})
    return out


def _check_status(status: str, name: str = "status") -> None:
    if status not in TASK_STATUSES:
        raise InvalidInputError(f"unknown {name} {status!r}: use one of "
                                f"{'|'.join(TASK_STATUSES)}")


# --- editing -----------------------------------------------------------------------------------


@dataclass
class EditResult:
    """What an edit did: the files written, and whether TASKS.yaml had to be rewritten whole."""

    paths: list[Path]
    rewritten: bool = False
    tasks: list[Task] = field(default_factory=list)


def files(project: Project) -> list[Path]:
    """The files a task edit may rewrite (put back as they were if its command fails)."""
    return [project.root / layout.TASKS_FILE, project.root / layout.TASKS_ARCHIVE]


def change_one(txn: Transaction, project: Project, verb: str,
               change: Callable[[Project], EditResult]) -> EditResult:
    """Run `change` on one project's TASKS.yaml inside `txn`, as one commit
    ("tasks: VERB T-N — text"): the CLI's and the MCP tools' one way to edit a task."""
    from cortexfs.commit import Change

    txn.keep(*files(project))
    result = change(project)
    task = result.tasks[0]
    txn.add(Change(result.paths, f"tasks: {verb} {task.id} — {task.text}"))
    return result


@contextmanager
def _editing(project: Project) -> Iterator[TaskFile]:
    """The project's TASKS.yaml, parsed, under the lock its edits take turns on (refused
    when it is not a task list)."""
    lock = project.store.locks_dir / layout.tasks_lock(project.name)
    with file_lock(lock, what=f"the tasks of {project.name}"):
        tf = load(project)
        if tf.shape is None:
            raise InvalidInputError(f"{tf.first_error()}; fix the file, then run the command "
                                    "again")
        yield tf


def next_id(tf: TaskFile) -> str:
    """T-<highest number among T-N ids in TASKS.yaml and the archive + 1>."""
    numbers = (_NUMBERED_ID.match(task_id) for task_id in [*(t.id for t in tf.tasks), *tf.archived])
    return f"T-{max((int(m.group(1)) for m in numbers if m), default=0) + 1}"


def add_task(project: Project, text: str, *, priority: str | None = None,
             why: str | None = None, done_when: str | None = None,
             depends_on: list[str] | None = None, status: str = "todo") -> EditResult:
    """Append a task with the next free id; its dependencies must exist."""
    text = text.strip()
    if not text:
        raise InvalidInputError("the task text is empty: pass what to do, e.g. "
                                "`cortex tasks add \"Write the loader\"`")
    if "\n" in text or len(text) > MAX_TEXT:
        raise InvalidInputError(f"the task text must be one line under {MAX_TEXT} characters: "
                                "put the reason in --why")
    _check_status(status)
    with _editing(project) as tf:
        known = {t.id for t in tf.tasks} | tf.archived
        for dep in depends_on or []:
            if dep not in known:
                raise InvalidInputError(f"no task {dep} in {project.name}: depend on an "
                                        "existing task id (see `cortex tasks list --all`)")
        task_id = next_id(tf)
        new: dict[str, Any] = {"id": task_id, "text": text, "status": status}
        if priority:
            new["priority"] = priority
        if why:
            new["why"] = why.strip()
        if done_when:
            new["done-when"] = done_when.strip()
        if depends_on:
            new["depends-on"] = list(dict.fromkeys(depends_on))
        if status == "done":
            new["completed-at"] = dt.date.today().isoformat()
        expected = [*_task_list(tf.data), new]
        text_out, rewritten = _edit(tf, expected, lambda: _append_text(tf, new))
        atomic_write(tf.path, text_out, root=project.store.context)
        added = parse(text_out, tf.path, tf.archived).get(task_id)
    return EditResult([tf.path], rewritten, [added] if added else [])


def set_status(project: Project, task_id: str, status: str,
               today: dt.date | None = None) -> EditResult:
    """Set a task's status; `done` also stamps completed-at (today) unless it has one."""
    _check_status(status)
    with _editing(project) as tf:
        task = tf.get(task_id)
        if task is None:
            known = ", ".join(t.id for t in tf.tasks) or "none"
            raise InvalidInputError(f"no task {task_id} in {project.name} (tasks: {known}); "
                                    "see `cortex tasks list --all`")
        updates: dict[str, Any] = {"status": status}
        if status == "done" and task.completed_at is None:
            updates["completed-at"] = (today or dt.date.today()).isoformat()
        index = tf.tasks.index(task)
        item_index = _item_indexes(tf)[task.id]
        expected = [dict(t) if isinstance(t, dict) else t for t in _task_list(tf.data)]
        expected[item_index] = {**expected[item_index], **updates}
        text_out, rewritten = _edit(tf, expected,
                                    lambda: _set_keys_text(tf, item_index, updates))
        if text_out != tf.text:
            atomic_write(tf.path, text_out, root=project.store.context)
        updated = parse(text_out, tf.path).tasks[index]
    return EditResult([tf.path] if text_out != tf.text else [], rewritten, [updated])


@dataclass
class ArchiveResult(EditResult):
    """Which tasks were archived, and done tasks that could not be (no completed-at)."""

    undated: list[str] = field(default_factory=list)


def archive(project: Project, *, older_than_days: int = ARCHIVE_AFTER_DAYS,
            today: dt.date | None = None) -> ArchiveResult:
    """Move `done` tasks completed more than `older_than_days` ago to tasks-archive.md.

    The archive is written first: a crash in between leaves a task in both files, never in
    neither, and the next run does not archive it twice.
    """
    if older_than_days < 0:
        raise InvalidInputError("--older-than must be 0 or more days")
    today = today or dt.date.today()
    with _editing(project) as tf:
        if tf.errors:
            raise InvalidInputError(f"{tf.first_error()}; fix it before archiving "
                                    "(see `cortex validate`)")
        done = [(t, t.completed_at) for t in tf.tasks if t.status == "done"]
        undated = [t.id for t, on in done if on is None]
        old = [t for t, on in done if on is not None and (today - on).days > older_than_days]
        if not old:
            return ArchiveResult([], undated=undated)
        archive_path = project.root / layout.TASKS_ARCHIVE
        archive_text = _read(archive_path, project.store.context)
        if archive_text is None:
            from cortexfs import templates

            archive_text = templates.render(project.store, "project/tasks-archive.md.j2",
                                            project=project.name,
                                            date=today.isoformat())
        fresh = [t for t in old if t.id not in tf.archived]
        paths: list[Path] = []
        if fresh:
            atomic_write(archive_path, _append_archive(archive_text, fresh, today),
                         root=project.store.context)
            paths.append(archive_path)
        items = _item_indexes(tf)
        drop = {items[t.id] for t in old}
        expected = [t for i, t in enumerate(_task_list(tf.data)) if i not in drop]
        text_out, rewritten = _edit(tf, expected, lambda: _remove_text(tf, drop))
        atomic_write(tf.path, text_out, root=project.store.context)
        paths.append(tf.path)
    return ArchiveResult(paths, rewritten, old, undated)


def _item_indexes(tf: TaskFile) -> dict[str, int]:
    """Each task id's list position: its first item, as `_check_tasks` keeps it (not its
    line: `[{id: T-1, …}, {id: T-2, …}]` holds two tasks on one line)."""
    found: dict[str, int] = {}
    for i, raw in enumerate(_task_list(tf.data)):
        if isinstance(raw, dict):
            found.setdefault(str(normalize(raw.get("id"))), i)
    return found


def render_archive_entry(task: Task) -> str:
    """A task as tasks-archive.md records it: heading, then one bullet per field."""
    # tasks-archive.md is markdown: each value one line, its markup made literal
    lines = [f"### {task.id}: {escape.line(task.text)}", ""]
    facts = [f"status: {task.status}"]
    for key in ("completed-at", "priority", "depends-on"):
        value = task.data.get(key)
        if value not in (None, "", []):
            shown = ", ".join(as_list(value)) if key == "depends-on" else str(value)
            facts.append(f"{key}: {shown}")
    lines.append("- " + " · ".join(facts))
    for key in ("why", "done-when"):
        value = task.data.get(key)
        if value not in (None, ""):
            body = str(value).strip().splitlines() or [""]
            lines.append(f"- {key}: {body[0]}")
            lines.extend(f"  {rest}" if rest.strip() else "" for rest in body[1:])
    for key, value in task.data.items():
        if key not in TASK_KEYS and value not in (None, ""):
            lines.append(f"- {key}: {escape.line(str(value))}")
    return "\n".join(lines) + "\n"


def _append_archive(text: str, tasks: list[Task], today: dt.date) -> str:
    heading = f"## Archived {today.isoformat()}"
    headings = re.findall(r"^## .*$", text, re.M)
    out = text if text.endswith("\n") or not text else text + "\n"
    if not headings or headings[-1].strip() != heading:
        out += f"\n{heading}\n"
    for task in tasks:
        out += "\n" + render_archive_entry(task)
    return out


# --- textual edits -----------------------------------------------------------------------------


def _edit(tf: TaskFile, expected: list[Any], textual: Callable[[], str | None]) -> \
        tuple[str, bool]:
    """The new text by a textual edit when that yields exactly `expected`, else a rewrite."""
    want = [normalize(t) for t in expected]
    try:
        candidate = textual()
    except _CannotEdit:
        candidate = None
    if candidate is not None:
        edited = parse(candidate, tf.path)
        if edited.shape is not None and [normalize(t) for t in _task_list(edited.data)] == want:
            return candidate, False
    return _rewrite(tf, expected), True


class _CannotEdit(Exception):
    """The file's layout is one the textual editor does not handle."""


def _rewrite(tf: TaskFile, tasks: list[Any]) -> str:
    """The whole file re-serialised from data, keeping its leading comment block, its BOM and
    its line endings."""
    import yaml

    bom = BOM if tf.text.startswith(BOM) else ""
    header: list[str] = []
    for line in tf.text.removeprefix(bom).splitlines():
        if line.startswith("#") or (not line.strip() and header):
            header.append(line)
        else:
            break
    while header and not header[-1].strip():
        header.pop()
    body: Any = tasks
    if isinstance(tf.data, dict):
        body = {**tf.data, "tasks": tasks}
    dumped = yaml.safe_dump(body, sort_keys=False, allow_unicode=True, default_flow_style=False,
                            width=100) if tasks or isinstance(body, dict) else "[]\n"
    out = ("\n".join(header) + "\n" if header else "") + dumped
    return bom + out.replace("\n", _eol(tf.text))


def _eol(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _content_end(node: yaml.Node, text: str) -> int:
    """Index just after the last character of `node`'s own content (comments excluded)."""
    import yaml

    if isinstance(node, yaml.ScalarNode):
        pos = node.end_mark.index
        while pos > node.start_mark.index and text[pos - 1] in " \t\r\n":
            pos -= 1
        return pos
    if getattr(node, "flow_style", False) or not node.value:
        return int(node.end_mark.index)
    last = node.value[-1]
    return _content_end(last[1] if isinstance(node, yaml.MappingNode) else last, text)


def _line_after(text: str, pos: int) -> int:
    """Index of the start of the line after the one holding `pos - 1`."""
    if pos > 0 and text[pos - 1] == "\n":
        return pos
    nl = text.find("\n", pos)
    return len(text) if nl < 0 else nl + 1


def _line_start(text: str, pos: int) -> int:
    """Index of the start of the line holding `pos`; a BOM is before the first line, not in it."""
    start = text.rfind("\n", 0, pos) + 1
    return len(BOM) if start == 0 and text.startswith(BOM) and pos >= len(BOM) else start


def _dash_of(item: yaml.Node, text: str) -> int:
    """Index of the `-` that introduces a block-list item."""
    pos = item.start_mark.index - 1
    while pos >= 0 and text[pos] in " \t\r\n":
        pos -= 1
    if pos < 0 or text[pos] != "-":
        raise _CannotEdit
    return pos


def _dump(value: Any) -> str:
    """Inline YAML for a value; an ISO date stays unquoted (it reads back as the same date)."""
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) and as_date(value):
        return value
    return yaml_scalar(value)


def _render_block(task: dict[str, Any], indent: str, eol: str) -> str:
    return "".join(f"{indent}{'  ' if n else '- '}{key}: {_dump(value)}{eol}"
                   for n, (key, value) in enumerate(task.items()))


def _append_text(tf: TaskFile, task: dict[str, Any]) -> str:
    assert tf.shape is not None
    text, shape, eol = tf.text, tf.shape, _eol(tf.text)
    if shape.items:
        if shape.seq is None or getattr(shape.seq, "flow_style", False):
            raise _CannotEdit
        dash = _dash_of(shape.items[0], text)
        indent = text[_line_start(text, dash):dash]
        if indent.strip():
            raise _CannotEdit
        at = _comments_below(text, _line_after(text, _content_end(shape.items[-1], text)),
                             len(indent))
        head = text[:at] if at == 0 or text[at - 1] == "\n" else text[:at] + eol
        return head + _render_block(task, indent, eol) + text[at:]
    if shape.container == "empty":
        # only comments: the list starts at the top level
        body = text
        if body and not body.endswith("\n"):
            body += eol
        return body + _render_block(task, "", eol)
    if shape.container == "list":
        assert shape.seq is not None
        # `[]` at the top level: replace it by the block
        start, end = shape.seq.start_mark.index, shape.seq.end_mark.index
        rest = text[end:]
        eol_after = re.match(r"[ \t]*(\r\n|\n|\Z)", rest)  # the end of `[]`'s line, if bare
        if eol_after:
            rest = rest[eol_after.end():]
        return text[:start] + _render_block(task, "", eol).rstrip("\r\n") + eol + rest
    # `tasks: []`, `tasks:` or `tasks: ~`: drop the empty value, add the block after the line
    assert shape.key is not None
    key_end = shape.key.end_mark.index
    line_end = _line_after(text, key_end)
    line = text[key_end:line_end]
    m = re.match(r"^([ \t]*:[ \t]*)(\[\s*\]|~|null|Null|NULL)?(.*)$", line, re.S)
    if m is None:
        raise _CannotEdit
    rest = m.group(3)
    new_line = (m.group(1).rstrip(" \t") + (" " + rest.strip() if rest.strip() else "")
                ).rstrip(" \t") + eol
    indent = " " * (shape.key.start_mark.column + 2)
    return text[:key_end] + new_line + _render_block(task, indent, eol) + text[line_end:]


def _set_keys_text(tf: TaskFile, item_index: int, updates: dict[str, Any]) -> str:
    import yaml

    assert tf.shape is not None
    text, eol = tf.text, _eol(tf.text)
    item = tf.shape.items[item_index]
    if not isinstance(item, yaml.MappingNode):
        raise _CannotEdit
    edits: list[tuple[int, int, str]] = []
    pending = dict(updates)
    for key, value in item.value:
        if isinstance(key, yaml.ScalarNode) and key.value in pending:
            new = _dump(pending.pop(key.value))
            if not isinstance(value, yaml.ScalarNode) or value.style in ("|", ">"):
                raise _CannotEdit
            if value.style in ("'", '"') and re.fullmatch(r"[\w.-]+", new):
                new = value.style + new + value.style  # `status: "todo"` keeps its quotes
            if _is_null(value) and value.start_mark.index == value.end_mark.index:
                edits.append((key.end_mark.index, _colon_end(text, key.end_mark.index),
                              ": " + new))
            else:
                edits.append((value.start_mark.index, value.end_mark.index, new))
    if pending:
        if item.flow_style:
            close = item.end_mark.index - 1
            if text[close] != "}":
                raise _CannotEdit
            while text[close - 1] in " \t":  # `{ id: T-1 }`: the new keys go before the space
                close -= 1
            extra = "".join(f", {k}: {_dump(v)}" for k, v in pending.items())
            edits.append((close, close, extra))
        else:
            first_key = item.value[0][0]
            indent = " " * first_key.start_mark.column
            at = _line_after(text, _content_end(item, text))
            lead = "" if text[at - 1:at] == "\n" else eol
            extra = "".join(f"{indent}{k}: {_dump(v)}{eol}" for k, v in pending.items())
            edits.append((at, at, lead + extra))
    out = text
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]
    return out


def _colon_end(text: str, pos: int) -> int:
    m = re.compile(r"[ \t]*:").match(text, pos)
    if m is None:
        raise _CannotEdit
    return m.end()


def _remove_text(tf: TaskFile, drop: set[int]) -> str:
    assert tf.shape is not None and tf.shape.seq is not None
    shape, seq, text = tf.shape, tf.shape.seq, tf.text
    if getattr(seq, "flow_style", False):
        raise _CannotEdit
    spans: list[tuple[int, int]] = []
    prev_end = seq.start_mark.index
    for i, item in enumerate(shape.items):
        dash = _dash_of(item, text)
        start = _line_start(text, dash)
        end = _comments_below(text, _line_after(text, _content_end(item, text)), dash - start)
        if i in drop:
            if i > 0:
                start = _comments_above(text, start, prev_end, dash - start)
            spans.append((start, end))
        prev_end = end
    out = text
    for start, end in reversed(spans):
        out = out[:start] + out[end:]
    if len(drop) == len(shape.items) and shape.container == "mapping":
        assert shape.key is not None
        # every task went: leave `tasks: []` rather than a bare `tasks:`
        at = _colon_end(out, shape.key.end_mark.index)
        out = out[:at] + " []" + out[at:]
    return out


def _comments_above(text: str, start: int, floor: int, column: int) -> int:
    """Extend `start` upward over comment lines directly above it (not past `floor`) whose `#`
    is not indented deeper than `column`, the task's `-`: a deeper one is the task above's."""
    while start > floor:
        prev = _line_start(text, start - 1)
        line = text[prev:start]
        if prev < floor or not line.strip().startswith("#") or _is_comment_deeper(line, column):
            break
        start = prev
    return start


def _comments_below(text: str, end: int, column: int) -> int:
    """Extend `end` downward over the comment lines right below a task whose `#` is indented
    deeper than `column`, the task's `-`: they are the task's own."""
    while end < len(text) and _is_comment_deeper(text[end:_line_after(text, end + 1)], column):
        end = _line_after(text, end + 1)
    return end


def _is_comment_deeper(line: str, column: int) -> bool:
    """Whether `line` is a comment whose `#` is indented deeper than `column`."""
    return line.strip().startswith("#") and len(line) - len(line.lstrip(" \t")) > column
