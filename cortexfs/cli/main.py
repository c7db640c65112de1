"""The `cortex` application: global options, error handling, command registration."""

from __future__ import annotations

import copy
import os
import sys
from typing import Any, NoReturn

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from cortexfs import __version__
from cortexfs.cli import common
from cortexfs.errors import CortexError, from_os_error
from cortexfs.interrupt import EXIT_CODE, Interrupted
from cortexfs.layout import CRASH_LOG
from cortexfs.store import Store


class CortexGroup(TyperGroup):
    """Turns every expected error into one red line and exit 1; a bug into exit 2 and a log.

    A usage error (an unknown option, `--k abc`, a missing argument) is bad input too: one
    line and exit 1, not click's boxed usage text and exit 2, which here means a bug.

    The global options (`common.global_options`: --home, --format) are added to the root and
    to every command, so they are taken before the command name and after it alike.
    """

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _add_global_options(self)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None,
                     **extra: Any) -> Any:
        if parent is None:
            common.reset()  # (tests run many commands in one process)
            common.set_argv(args)  # for "run `cortex …` again" after an interruption
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError as e:
            _usage_error(e)

    def invoke(self, ctx: Any) -> Any:  # a click Context (typer vendors click)
        try:
            return super().invoke(ctx)
        except UsageError as e:
            _usage_error(e)
        except CortexError as e:
            typer.secho(f"error: {e}", fg="red", err=True)
            raise typer.Exit(1) from None
        except Interrupted as e:  # SIGINT / SIGTERM, stopped at a file boundary
            typer.secho(e.message(), fg="yellow", err=True)
            raise typer.Exit(EXIT_CODE) from None
        except (typer.Exit, typer.Abort, typer.TyperException, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            # the reader went away (`cortex recall x | head`): nothing left to tell it, and
            # Python's final flush of stdout must not fail again at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(1) from None
        except Exception as e:
            problem = from_os_error(e) if isinstance(e, OSError) else None
            if problem is not None:  # permissions, a read-only or full disk: not a bug
                typer.secho(f"error: {problem}", fg="red", err=True)
                raise typer.Exit(1) from None
            if os.environ.get("CORTEX_DEBUG"):
                raise
            where = _log_crash()
            typer.secho(f"internal error: {type(e).__name__}: {e} — this is a bug; details "
                        f"in {where}", fg="red", err=True)
            raise typer.Exit(2) from None


def _add_global_options(command: Any) -> None:
    """Give `command` and every command under it the global options it lacks."""
    names = {p.name for p in command.params}
    command.params.extend(o for o in common.global_options() if o.name not in names)
    for sub in getattr(command, "commands", {}).values():
        _add_global_options(sub)


def _usage_error(e: UsageError) -> NoReturn:
    if isinstance(e, NoArgsIsHelpError):
        e.exit_code = 1  # `cortex tasks` alone: the group's help, as click prints it
        raise e
    message = " ".join(e.format_message().split())
    command = e.ctx.command_path if e.ctx is not None else "cortex"
    typer.secho(f"error: {message} (see `{command} --help`)", fg="red", err=True)
    raise typer.Exit(1) from None


def _log_crash() -> str:
    import traceback

    try:
        logs = Store.at(common._state["home"]).logs_dir
        logs.mkdir(parents=True, exist_ok=True)
        path = logs / CRASH_LOG
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"--- cortex {' '.join(sys.argv[1:])}\n{traceback.format_exc()}\n")
        return str(path)
    except OSError:
        return "(could not write a log; rerun with CORTEX_DEBUG=1)"


app = typer.Typer(
    cls=CortexGroup,
    name="cortex",
    help="File-based long-term memory for AI agents: atoms, indexes, access tracking, git.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode="markdown",  # reflows docstring paragraphs in --help
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cortex {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """File-based long-term memory for AI agents."""  # (--home, --format: CortexGroup)


def _register() -> None:
    from cortexfs.cli import (
        access,
        atoms,
        core,
        decisions,
        index,
        maintain,
        memory,
        ready,
        recall,
        sync,
        tasks,
        validate,
        view,
    )

    # each module's COMMANDS: what it adds to `cortex` (a command, or a group of them)
    for module in (core, atoms, validate, index, access, sync, tasks, decisions, maintain,
                   ready, memory, recall, view):
        for name, command in module.COMMANDS.items():
            if isinstance(command, typer.Typer):
                app.add_typer(command, name=name)
            else:
                app.command(name)(command)


_register()


_VALUED = ("--home", "--format", "-f")  # the root's options that take a value


def app_for(args: list[str]) -> typer.Typer:
    """The application a console-script run with `args` needs: `app` with only the command
    (or group) named, when the arguments name one, else `app` whole (`cortex`, `--help`,
    `--version`, an unknown command: their output lists or suggests every command).

    typer turns each registered command into a click command, with its parameters from the
    function's signature, before it runs any: ~22 ms for 38 commands, of a 0.25 s target
    for `cortex new`, against ~3 ms for one. The command runs the same, with the same
    usage line, help and errors (tests/cli/test_main.py compares them)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        option = args[i].split("=", 1)[0]
        if option in _VALUED and "=" not in args[i]:
            i += 2
        elif option in _VALUED or (args[i].startswith("-f") and not args[i].startswith("--")):
            i += 1
        else:
            return app
    if i >= len(args):
        return app
    name = args[i]
    commands = [c for c in app.registered_commands if c.name == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if len(commands) + len(groups) != 1:
        return app
    slim = copy.copy(app)
    slim.registered_commands, slim.registered_groups = commands, groups
    return slim


def run() -> None:
    """Console-script entry point."""
    import gc

    # what the start-up made lives as long as the process: set aside from the collector's
    # walks (cortexfs.__main__ imported the CLI with the collector off)
    gc.freeze()
    gc.enable()
    try:
        app_for(sys.argv[1:])()
    except SystemExit as e:
        if common.FINISHED[0] and e.code in (0, None):
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError):
                raise e from None  # (a closed pipe: the usual exit reports it)
            os._exit(0)
        raise
