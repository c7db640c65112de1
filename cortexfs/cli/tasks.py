"""`cortex tasks list|add|done|archive`: the project's task queue (TASKS.yaml)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from cortexfs.cli import common
from cortexfs.cli.common import NoCommit, ProjectOpt
from cortexfs.layout import TASKS_ARCHIVE
from cortexfs.wording import plural

if TYPE_CHECKING:
    from collections.abc import Callable

    from cortexfs.store import Project
    from cortexfs.tasks import EditResult, Task

tasks_app = typer.Typer(help="The project's task queue (TASKS.yaml).", no_args_is_help=True)


def _rewritten_note(rewritten: bool, project: Project) -> None:
    if rewritten:
        common.warn(f"{project.name}/TASKS.yaml has a layout cortex cannot edit in place, so it "
                    "was rewritten from its data: its comments other than the leading ones "
                    "are gone (see git diff)")


def _change_one_task(project: str | None, no_commit: bool, verb: str,
                     change: Callable[[Project], EditResult]) -> Task | None:
    """`tasks.change_one` as a command; the task it changed, or None when the JSON report
    was printed instead."""
    from cortexfs import tasks
    from cortexfs.lifecycle import only_project

    store = common.open_store()
    proj = only_project(store, project)
    with common.writing(store, no_commit) as txn:
        result = tasks.change_one(txn, proj, verb, change)
    task = result.tasks[0]
    common.report(txn)
    _rewritten_note(result.rewritten, proj)
    if common.output_format() == "json":
        common.print_json({"project": proj.name, **task.to_json(),
                           "committed": bool(txn.committed)})
        return None
    return task


@tasks_app.command("list")
def tasks_list(
    project: ProjectOpt = None,
    show_all: Annotated[bool, typer.Option("--all", "-a", help="Include done tasks.")] = False,
    status: Annotated[str | None, typer.Option(
        "--status", "-s", metavar="todo|doing|done|blocked", help="Only tasks with this status.")]
        = None,
) -> None:
    """List tasks, doing first, then todo, blocked (and done with --all), by priority."""
    from cortexfs import tasks

    fmt = common.output_format()
    store = common.open_store()
    projects = store.select([project] if project else None)
    found = tasks.listing(projects, status, show_all, strict=project is not None)
    if fmt == "json":
        common.print_json(found.to_json())
        return
    many = len(projects) > 1
    for row in found.rows:
        prefix = f"{row['project']}  " if many else ""
        prio = str(row["priority"]) if row["priority"] is not None else "-"
        line = f"{prefix}{row['id']:<6} {row['status']:<7} {prio:<4} {row['text']}"
        pending = row["waiting-for"]
        if isinstance(pending, list) and pending and row["status"] != "done":
            line += f"  (waits for {', '.join(str(w) for w in pending)})"
        typer.echo(line)
    if not found.rows:
        typer.echo("no tasks" if show_all or status else "no open tasks")
    for message in found.unreadable:
        common.warn(message)
    errors = [p for p in found.problems if p["level"] == "error"
              and p["message"] not in found.unreadable]
    if errors:
        names = sorted({str(p["project"]) for p in errors})
        common.warn(f"TASKS.yaml has {plural(len(errors), 'error')} in {', '.join(names)}: "
                    "run `cortex validate` for details")


@tasks_app.command("add")
def tasks_add(
    text: Annotated[str, typer.Argument(help="What to do, in one line.")],
    project: ProjectOpt = None,
    priority: Annotated[str | None, typer.Option(
        "--priority", help="P0 (highest) … P3, or any label.")] = None,
    why: Annotated[str | None, typer.Option("--why", help="Why it matters.")] = None,
    done_when: Annotated[str | None, typer.Option(
        "--done-when", help="The condition that makes it done.")] = None,
    depends_on: Annotated[list[str] | None, typer.Option(
        "--depends-on", "-d", help="Task ids it waits for (repeat or comma-separate).")] = None,
    status: Annotated[str, typer.Option(
        "--status", metavar="todo|doing|done|blocked", help="Initial status.")] = "todo",
    no_commit: NoCommit = False,
) -> None:
    """Append a task to TASKS.yaml with the next id (T-N) and print that id."""
    from cortexfs import tasks

    task = _change_one_task(project, no_commit, "add", lambda proj: tasks.add_task(
        proj, text, priority=priority, why=why, done_when=done_when,
        depends_on=common.split_list(depends_on), status=status))
    if task is not None:
        typer.echo(task.id)


@tasks_app.command("done")
def tasks_done(
    task_id: Annotated[str, typer.Argument(metavar="ID", help="The task's id, e.g. T-3.")],
    project: ProjectOpt = None,
    no_commit: NoCommit = False,
) -> None:
    """Mark a task done and stamp its completed-at with today's date."""
    from cortexfs import tasks

    task = _change_one_task(project, no_commit, "done",
                            lambda proj: tasks.set_status(proj, task_id, "done"))
    if task is None:
        return
    completed = task.completed_at.isoformat() if task.completed_at else "?"
    common.ok(f"{task.id} done (completed-at {completed}): {task.text}")


@tasks_app.command("archive")
def tasks_archive(
    project: ProjectOpt = None,
    older_than: Annotated[int, typer.Option(
        "--older-than", metavar="DAYS", help="Archive tasks completed more than DAYS ago.")]
        = 3,
    no_commit: NoCommit = False,
) -> None:
    """Move done tasks completed more than 3 days ago to tasks-archive.md, and commit."""
    from cortexfs import tasks
    from cortexfs.commit import Change

    store = common.open_store()
    projects = store.select([project] if project else None)
    moved: list[str] = []
    notes: list[tuple[bool, str]] = []
    with common.writing(store, no_commit) as txn:
        for proj in projects:
            txn.keep(*tasks.files(proj))
            result = tasks.archive(proj, older_than_days=older_than)
            _rewritten_note(result.rewritten, proj)
            if result.tasks:
                ids = ", ".join(t.id for t in result.tasks)
                moved.append(f"{proj.name}: {ids}")
                txn.add(Change(result.paths))
                notes.append((True, f"{proj.name}: archived {ids} to {TASKS_ARCHIVE}"))
            if result.undated:
                notes.append((False, f"{proj.name}: done without completed-at, so not "
                               f"archived: {', '.join(result.undated)} (add "
                               "`completed-at: YYYY-MM-DD`)"))
        if moved:
            txn.add(Change(message=f"auto-archive: completed tasks ({'; '.join(moved)})"))
    common.report(txn)
    if common.output_format() == "json":
        common.print_json({"archived": moved, "notes": [n for _, n in notes],
                           "committed": bool(txn.committed)})
        return
    for good, note in notes:
        (common.ok if good else common.warn)(note)
    if not moved:
        typer.echo(f"nothing to archive: no done task completed more than "
                   f"{plural(older_than, 'day')} ago")


COMMANDS = {"tasks": tasks_app}
