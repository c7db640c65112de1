"""`cortex hooks install|uninstall|status` and `cortex watch`: access tracking."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cortexfs.cli import common

hooks_app = typer.Typer(help="Install the Claude Code hooks that log the agent's reads.",
                        no_args_is_help=True)

ProjectDir = Annotated[str | None, typer.Option(
    "--project-dir", metavar="DIR",
    help="The project whose .claude/settings.json to edit (default: the current folder).")]
User = Annotated[bool, typer.Option(
    "--user", help="Edit ~/.claude/settings.json (every project) instead.")]
Local = Annotated[bool, typer.Option(
    "--local", help="Edit the project's .claude/settings.local.json (not committed) instead.")]
DryRun = Annotated[bool, typer.Option(
    "--dry-run", help="Print the change as a diff; write nothing.")]


def _settings(project_dir: str | None, user: bool, local: bool) -> Path:
    from cortexfs.claude_settings import settings_path

    return settings_path(project_dir, user, local)


def _show(change: object, dry_run: bool, done: str, nothing: str) -> None:
    from cortexfs.claude_settings import Change

    assert isinstance(change, Change)
    if not change.changed:
        common.ok(nothing)
        return
    if dry_run:
        typer.echo(change.diff(), nl=False)
        typer.echo(f"(dry run: {change.path} not written)")
        return
    change.apply()
    common.ok(done)


@hooks_app.command("install")
def install(
    project_dir: ProjectDir = None,
    user: User = False,
    local: Local = False,
    session_start: Annotated[bool, typer.Option(
        "--session-start", help="Also print `cortex brief` at the start of each session.")
    ] = False,
    brief_project: Annotated[str | None, typer.Option(
        "--brief-project", metavar="PROJECT",
        help="With --session-start: brief this project (default: the only one, else all).")
    ] = None,
    dry_run: DryRun = False,
) -> None:
    """Add the PostToolUse hook (Read|Grep|Bash) to Claude Code's settings, idempotently."""
    from cortexfs.claude_settings import hook_command, plan_install
    from cortexfs.errors import InvalidInputError

    store = common.open_store()
    if brief_project is not None:
        if not session_start:
            raise InvalidInputError("--brief-project goes with --session-start")
        store.project(brief_project)  # a clear error when there is no such project
    path = _settings(project_dir, user, local)
    change = plan_install(path, store.home, session_start=session_start,
                          brief_project=brief_project)
    what = "hooks are" if session_start else "hook is"
    _show(change, dry_run,
          done=f"installed the cortex hook{'s' if session_start else ''} in {path} "
               f"(store {store.home})\n  command: {hook_command(store.home)}",
          nothing=f"the cortex {what} already installed in {path}: nothing to do")


@hooks_app.command("uninstall")
def uninstall(
    project_dir: ProjectDir = None,
    user: User = False,
    local: Local = False,
    dry_run: DryRun = False,
) -> None:
    """Remove cortex's hooks (and only those) from Claude Code's settings."""
    from cortexfs.claude_settings import plan_uninstall

    path = _settings(project_dir, user, local)
    change = plan_uninstall(path)
    _show(change, dry_run, done=f"removed the cortex hooks from {path}",
          nothing=f"no cortex hook in {path}: nothing to do")


@hooks_app.command("status")
def status(
    project_dir: ProjectDir = None,
) -> None:
    """Where the cortex hooks are installed (user and project settings), and if current."""
    from cortexfs.claude_settings import installed, settings_path

    fmt = common.output_format()
    store = common.unopened_store()
    paths = [settings_path(user=True), settings_path(project_dir),
             settings_path(project_dir, local=True)]
    found = [h for p in dict.fromkeys(paths) for h in installed(p, store.home)]
    if fmt == "json":
        common.print_json([{"settings": str(h.path), "event": h.event, "command": h.command,
                            "current": h.current} for h in found])
        return
    if not found:
        typer.echo("no cortex hook installed (looked in: "
                   f"{', '.join(str(p) for p in dict.fromkeys(paths))}); "
                   "run `cortex hooks install`")
        return
    for h in found:
        state = "current" if h.current else "stale (another interpreter, script or store: " \
                                             "rerun `cortex hooks install`)"
        typer.echo(f"{h.path}: {h.event}: {state}\n  {h.command}")


def watch(
    foreground: Annotated[bool, typer.Option(
        "--foreground", help="Stay attached to the terminal (Ctrl-C stops it).")] = False,
    show_status: Annotated[bool, typer.Option(
        "--status", help="Say whether a watcher runs for this store (exit 1 if none).")
    ] = False,
    stop: Annotated[bool, typer.Option("--stop", help="Stop the running watcher.")] = False,
) -> None:
    """Regenerate and commit as atoms change; log other programs' reads of atoms (Linux)."""
    from cortexfs import watch as watching
    from cortexfs.errors import InvalidInputError

    if sum((foreground, show_status, stop)) > 1:
        raise InvalidInputError("give at most one of --foreground, --status and --stop")
    store = common.open_store()
    if show_status:
        pid = watching.running_pid(store)
        if pid is None:
            typer.echo(f"no watcher running for {store.home}")
            raise typer.Exit(1)
        typer.echo(f"a watcher is running for {store.home}"
                   + (f" (pid {pid})" if pid > 0 else "")
                   + f"; log: {store.logs_dir / watching.LOG_NAME}")
        return
    if stop:
        pid = watching.stop(store)
        if pid is None:
            common.ok(f"no watcher running for {store.home}: nothing to stop")
        else:
            common.ok(f"stopped the watcher (pid {pid})")
        return
    if foreground:
        watching.run_foreground(store, echo=typer.echo)
        return
    pid = watching.start_background(store)
    common.ok(f"watching {store.context} in the background (pid {pid}); log: "
              f"{store.logs_dir / watching.LOG_NAME}; stop it with `cortex watch --stop`")


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.add_typer(hooks_app, name="hooks")
    app.command("watch")(watch)
