"""`cortex hooks install|uninstall|status` and `cortex watch`: access tracking."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cortexfs.cli import common
from cortexfs.errors import InvalidInputError
from cortexfs.layout import WATCH_LOG

hooks_app = typer.Typer(help="Connect Claude Code: the hooks that log the agent's reads and "
                        "start each session with a brief, and the MCP server.",
                        no_args_is_help=True)

ProjectDir = Annotated[str | None, typer.Option(
    "--project-dir", metavar="DIR",
    help="The project whose .claude/settings.local.json (and .mcp.json) to edit (default: the "
    "current folder).")]
User = Annotated[bool, typer.Option(
    "--user", help="Edit ~/.claude/settings.json (and ~/.claude.json) instead: every project.")]
Local = Annotated[bool, typer.Option(
    "--local", help="The project's .claude/settings.local.json (the default; not committed).")]
Shared = Annotated[bool, typer.Option(
    "--shared", help="The project's .claude/settings.json instead (committed, shared with "
    "everyone who clones the project, so only where they all have the same paths).")]
Mcp = Annotated[bool, typer.Option(
    "--mcp", help="Also register the MCP server (`cortex mcp`): in the project's .mcp.json, "
    "or with --user in ~/.claude.json.")]
DryRun = Annotated[bool, typer.Option(
    "--dry-run", help="Print the change as a diff; write nothing.")]


def _settings(project_dir: str | None, user: bool, local: bool, shared: bool) -> Path:
    from cortexfs.claude_settings import settings_path

    if local and shared:
        raise InvalidInputError("give either --local or --shared, not both")
    if user and (local or shared):
        raise InvalidInputError(f"{'--local' if local else '--shared'} is for a project's "
                                "settings, not with --user")
    return settings_path(project_dir, user, local=not shared)


def _apply(changes: list[Any], dry_run: bool) -> list[dict[str, Any]]:
    """Write (or, with `dry_run`, print) each change; what happened to each file."""
    out = []
    for change in changes:
        if change.changed and dry_run:
            if common.output_format() == "text":
                typer.echo(change.diff(), nl=False)
                typer.echo(f"(dry run: {change.path} not written)")
        elif change.changed:
            change.apply()
        out.append({"path": str(change.path), "changed": change.changed, "written":
                    change.changed and not dry_run})
    return out


@hooks_app.command("install")
def install(
    project_dir: ProjectDir = None,
    user: User = False,
    local: Local = False,
    shared: Shared = False,
    session_start: Annotated[bool, typer.Option(
        "--session-start", help="Also print `cortex brief` at the start of each session.")
    ] = False,
    brief_project: Annotated[str | None, typer.Option(
        "--brief-project", metavar="PROJECT",
        help="With --session-start: brief this project (default: the only one, else all).")
    ] = None,
    budget: Annotated[int | None, typer.Option(
        "--budget", metavar="CHARS", help="With --session-start: the most characters the "
        "brief prints (default 9,000: Claude Code cuts hook output past 10,000).",
        show_default=False)] = None,
    mcp: Mcp = False,
    dry_run: DryRun = False,
) -> None:
    """Add the PostToolUse hook (Read|Grep|Bash) to Claude Code's settings, idempotently;
    with --session-start the session brief, with --mcp the MCP server.

    Project settings go to .claude/settings.local.json by default: the commands hold this
    machine's absolute paths (interpreter, hook script, store)."""
    from cortexfs.brief import MIN_BUDGET
    from cortexfs.claude_settings import (
        BRIEF_CHARS,
        hook_command,
        mcp_path,
        plan_install,
        plan_mcp,
    )
    from cortexfs.tokens import chars_for

    store = common.open_store()
    if (brief_project is not None or budget is not None) and not session_start:
        flag = "--brief-project" if brief_project is not None else "--budget"
        raise InvalidInputError(f"{flag} goes with --session-start")
    if brief_project is not None:
        store.project(brief_project)  # a clear error when there is no such project
    if budget is not None and budget < chars_for(MIN_BUDGET):
        raise InvalidInputError(f"--budget {budget} is too small for a brief: give at least "
                                f"{chars_for(MIN_BUDGET)} characters")
    path = _settings(project_dir, user, local, shared)
    changes = [plan_install(path, store.home, session_start=session_start,
                            brief_project=brief_project, chars=budget or BRIEF_CHARS)]
    if mcp:
        changes.append(plan_mcp(mcp_path(project_dir, user), store.home, portable=not user))
    done = _apply(changes, dry_run)
    if common.output_format() == "json":
        common.print_json({"store": str(store.home), "dry_run": dry_run, "files": done})
        return
    for change in changes:
        if not change.changed:
            common.ok(f"already installed in {change.path}: nothing to do")
        elif not dry_run:
            what = ("the MCP server" if change.path.name in (".mcp.json", ".claude.json")
                    else "the cortex hooks" if session_start else "the cortex hook")
            common.ok(f"installed {what} in {change.path} (store {store.home})")
    if not dry_run and changes[0].changed:
        typer.echo(f"  command: {hook_command(store.home)}")
    if mcp and not user:
        _check_on_path()


def _check_on_path() -> None:
    """The project's .mcp.json runs `cortex` from PATH: say so when it is not this one."""
    import shutil
    import sys

    found = shutil.which("cortex")
    mine = Path(sys.executable).parent / "cortex"
    if found is None:
        common.warn("`cortex` is not on PATH here, and .mcp.json runs it from PATH: put this "
                    f"cortex ({mine}) on PATH (e.g. pipx), or register it for you only with "
                    "`cortex hooks install --mcp --user` (absolute paths)")
    elif mine.exists() and Path(found).resolve() != mine.resolve():
        common.warn(f"`cortex` on PATH is {found}, not this one ({mine}): .mcp.json will start "
                    "that one")


@hooks_app.command("uninstall")
def uninstall(
    project_dir: ProjectDir = None,
    user: User = False,
    local: Local = False,
    shared: Shared = False,
    mcp: Annotated[bool, typer.Option(
        "--mcp", help="Also remove the MCP server (.mcp.json, or with --user ~/.claude.json).")]
        = False,
    dry_run: DryRun = False,
) -> None:
    """Remove cortex's hooks (and only those) from Claude Code's settings: by default from
    the project's settings.local.json and settings.json both."""
    from cortexfs.claude_settings import mcp_path, plan_mcp_removal, plan_uninstall

    if user or local or shared:
        paths = [_settings(project_dir, user, local, shared)]
    else:
        paths = [_settings(project_dir, False, True, False),
                 _settings(project_dir, False, False, True)]
    changes = [plan_uninstall(p) for p in paths]
    if mcp:
        changes.append(plan_mcp_removal(mcp_path(project_dir, user)))
    done = _apply(changes, dry_run)
    if common.output_format() == "json":
        common.print_json({"dry_run": dry_run, "files": done})
        return
    removed = [c for c in changes if c.changed]
    if not removed:
        common.ok(f"no cortex hook in {', '.join(str(c.path) for c in changes)}: nothing to do")
    elif not dry_run:
        for change in removed:
            common.ok(f"removed cortex from {change.path}")


@hooks_app.command("status")
def status(
    project_dir: ProjectDir = None,
) -> None:
    """Where cortex is set up for Claude Code — hooks (user and project settings) and the MCP
    server (.mcp.json, ~/.claude.json) — and whether each is current."""
    from cortexfs.claude_settings import installed, mcp_installed, mcp_path, settings_path

    fmt = common.output_format()
    store = common.unopened_store()
    paths = [settings_path(user=True), settings_path(project_dir, local=False),
             settings_path(project_dir, local=True)]
    found = [h for p in dict.fromkeys(paths) for h in installed(p, store.home)]
    servers = [mcp_path(project_dir), mcp_path(user=True)]
    found += [m for m in (mcp_installed(p, store.home) for p in servers) if m is not None]
    if fmt == "json":
        common.print_json([{"settings": str(h.path), "event": h.event, "command": h.command,
                            "current": h.current} for h in found])
        return
    if not found:
        typer.echo("cortex is not set up for Claude Code (looked in: "
                   f"{', '.join(str(p) for p in [*dict.fromkeys(paths), *servers])}); run "
                   "`cortex hooks install --session-start --mcp`")
        return
    for h in found:
        state = "current" if h.current else "stale (another interpreter, script, store or " \
                                             "format: rerun `cortex hooks install`)"
        typer.echo(f"{h.path}: {h.event}: {state}\n  {h.command}")
    events = {h.event for h in found}
    for event, flag in (("SessionStart", "--session-start"), ("mcpServers", "--mcp")):
        if event not in events:
            typer.echo(f"not set up: {event} (`cortex hooks install {flag}`)")


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

    if sum((foreground, show_status, stop)) > 1:
        raise InvalidInputError("give at most one of --foreground, --status and --stop")
    store = common.open_store()
    log = str(store.logs_dir / WATCH_LOG)
    fmt = common.output_format()
    json_out = fmt == "json"
    if show_status:
        pid = watching.running_pid(store)
        common.say(fmt, {"running": pid is not None, "pid": pid if pid else None,
                         "store": str(store.home), "log": log},
                   f"no watcher running for {store.home}" if pid is None else
                   f"a watcher is running for {store.home}"
                   + (f" (pid {pid})" if pid > 0 else "") + f"; log: {log}")
        if pid is None:
            raise typer.Exit(1)
        return
    if stop:
        pid = watching.stop(store)
        if json_out:
            common.print_json({"stopped": pid})
        elif pid is None:
            common.ok(f"no watcher running for {store.home}: nothing to stop")
        else:
            common.ok(f"stopped the watcher (pid {pid})")
        return
    if foreground:
        watching.run_foreground(store, echo=typer.echo)
        return
    pid = watching.start_background(store)
    if json_out:
        common.print_json({"started": pid, "store": str(store.home), "log": log})
        return
    common.ok(f"watching {store.context} in the background (pid {pid}); log: {log}; stop it "
              "with `cortex watch --stop`")


COMMANDS = {"hooks": hooks_app, "watch": watch}
