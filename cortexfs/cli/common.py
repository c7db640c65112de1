"""What every command shares: the store it works on and how it prints."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cortexfs.layout import CONTEXT_PREFIX
from cortexfs.store import Store
from cortexfs.wording import some

FINISHED = [False]  # see `nothing_left_to_write`


def nothing_left_to_write() -> None:
    """Say that this command has written all it will (its caches renamed into place and
    closed) and has only output left to print. The console script (`main.run`) then ends
    the process with os._exit once the output is flushed, instead of tearing the
    interpreter down object by object: ~30 ms of a 100,000-atom `cortex recall` (0.375 ->
    0.34 s), spent freeing the index it loaded; ~20 ms of `cortex new` on 10,000 atoms.
    In-process callers (tests, the MCP server) never exit this way."""
    FINISHED[0] = True

if TYPE_CHECKING:
    from cortexfs.commit import Transaction
    from cortexfs.lifecycle import Plan

_state: dict[str, Any] = {"home": None, "argv": [], "format": None}
FORMATS = ("text", "json", "ids")

# The options several commands share, worded once.
NoCommit = Annotated[bool, typer.Option("--no-commit",
                                        help="Write the files but do not commit them.")]
ProjectOpt = Annotated[str | None, typer.Option(
    "--project", "-p", help="The project (may be left out when the store has only one).")]


def global_options() -> list[Any]:
    """The options every command takes, before its name or after it: --home, --format.
    (Fresh objects each time: click binds a parameter to one command.)"""
    from typer.core import TyperOption

    return [
        TyperOption(param_decls=["--home"], metavar="DIR", expose_value=False,
                    is_eager=True, callback=_set_home,
                    help="The store to use (default: $CORTEX_HOME, else ~/.cortex)."),
        TyperOption(param_decls=["--format", "-f"], metavar="text|json", expose_value=False,
                    is_eager=True, callback=_set_format,
                    help="Output: text for people, json for tools."),
    ]


def reset() -> None:
    """Forget the options of a previous command (tests run many in one process)."""
    _state.update(home=None, argv=[], format=None)


def _set_home(ctx: Any, param: Any, value: str | None) -> None:
    if value is not None:
        _state["home"] = value


def _set_format(ctx: Any, param: Any, value: str | None) -> None:
    if value is not None:
        if value not in FORMATS:
            from typer._click.exceptions import UsageError

            raise UsageError(f"unknown --format {value[:40]!r}: use text or json", ctx)
        _state["format"] = value


def output_format(*, ids: bool = False) -> str:
    """The --format asked for (text by default); `ids` (one id a line) where the command
    lists atoms."""
    fmt = _state["format"] or "text"
    if fmt == "ids" and not ids:
        from cortexfs.errors import InvalidInputError

        raise InvalidInputError("--format ids is for `cortex list`: use text or json")
    return str(fmt)


def open_store() -> Store:
    """The store named by --home / CORTEX_HOME / ~/.cortex; errors if not initialised."""
    return Store.open(_state["home"])


def unopened_store() -> Store:
    """The store location, whether or not a store exists there yet (for `cortex init`)."""
    return Store.at(_state["home"])


def set_argv(args: list[str]) -> None:
    from cortexfs import interrupt

    _state["argv"] = list(args)
    interrupt.set_command(command_line())


def command_line() -> str:
    """The command being run, as the user would type it again."""
    import shlex

    return shlex.join(["cortex", *_state["argv"]])


def writing(store: Store, no_commit: bool = False, *, init: bool = False,
            has_no_commit: bool = True, ask_early: bool = False,
            ) -> AbstractContextManager[Transaction]:
    """The transaction a writing command runs in (cortexfs.commit.transaction): pre-flight
    (unless --no-commit), the writes in the block, one commit of everything pending under
    context/; Ctrl-C stops it at a file boundary."""
    from cortexfs.commit import transaction

    return transaction(store, commit=not no_commit, command=command_line(), init=init,
                       refusal_hint=" (or pass --no-commit to write without committing)"
                       if has_no_commit else "", ask_early=ask_early)


def report(txn: Transaction) -> None:
    """Say what a command's commit took along besides its own files, and what it could not."""
    done = txn.result
    if done is None:
        return
    if done.pending:
        shown = some([p.removeprefix(CONTEXT_PREFIX) for p in done.pending], 3)
        typer.secho(f"also committed what was pending under context/: {shown}", err=True)
    if done.warning:
        warn(done.warning)


def split_list(values: list[str] | None) -> list[str]:
    """A repeatable, comma-separated option as a list without duplicates:
    `--evidence EXP-001,EXP-002 --evidence EXP-003` → three ids."""
    return list(dict.fromkeys(v.strip() for value in values or [] for v in value.split(",")
                              if v.strip()))


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def say(fmt: str, data: Any, text: str, *, nl: bool = True) -> None:
    """Print `data` as JSON with --format json (`fmt`), else `text`."""
    if fmt == "json":
        print_json(data)
    else:
        typer.echo(text, nl=nl)


def ok(message: str) -> None:
    typer.secho(message, fg="green")


def warn(message: str) -> None:
    typer.secho(f"warning: {message}", fg="yellow", err=True)


def run_plan(store: Store, make: Callable[[], Plan], no_commit: bool = False,
             ) -> tuple[Plan, Transaction]:
    """Work out a lifecycle plan and carry it out in one writing transaction (the plan is
    made under the store's lock, after the pre-flight): (the plan, the transaction)."""
    from cortexfs import lifecycle

    with writing(store, no_commit) as txn:
        plan = make()
        if not plan.empty:
            txn.add(lifecycle.apply(store, plan, txn))
    report(txn)
    return plan, txn


def finish(plan: Plan, txn: Transaction, done: str) -> None:
    """Print what a lifecycle command did: its notes, then one line (or the JSON report)."""
    for note in plan.notes:
        if note.startswith("warning: "):
            warn(note.removeprefix("warning: "))
        else:
            typer.echo(f"note: {note}", err=True)
    if output_format() == "json":
        print_json({**plan.result, "changed": not plan.empty, "commit": txn.committed,
                    "notes": plan.notes})
        return
    if plan.empty:
        typer.echo(f"nothing to change: {done}")
        return
    ok(done + (", committed" if txn.committed else ""))
