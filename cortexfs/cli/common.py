"""What every command shares: the store it works on and how it prints."""

from __future__ import annotations

import json
import sys
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cortexfs.store import Store

if TYPE_CHECKING:
    from cortexfs.commit import Transaction

_state: dict[str, Any] = {"home": None, "argv": []}

# The options several commands share, worded once.
Format = Annotated[str, typer.Option("--format", "-f", metavar="text|json",
                                     help="Output: text for people, json for tools.")]
NoCommit = Annotated[bool, typer.Option("--no-commit",
                                        help="Write the files but do not commit them.")]


def set_home(home: str | None) -> None:
    _state["home"] = home


def open_store() -> Store:
    """The store named by --home / CORTEX_HOME / ~/.cortex; errors if not initialised."""
    return Store.open(_state["home"])


def unopened_store() -> Store:
    """The store location, whether or not a store exists there yet (for `cortex init`)."""
    from cortexfs.store import resolve_home

    return Store(resolve_home(_state["home"]))


def set_argv(args: list[str]) -> None:
    from cortexfs import interrupt

    _state["argv"] = list(args)
    interrupt.set_command(command_line())


def command_line() -> str:
    """The command being run, as the user would type it again."""
    import shlex

    return shlex.join(["cortex", *_state["argv"]])


def writing(store: Store, no_commit: bool = False, *, init: bool = False,
            has_no_commit: bool = True) -> AbstractContextManager[Transaction]:
    """The transaction a writing command runs in (cortexfs.commit.transaction): pre-flight
    (unless --no-commit), the writes in the block, one commit of everything pending under
    context/; Ctrl-C stops it at a file boundary."""
    from cortexfs.commit import transaction

    return transaction(store, commit=not no_commit, command=command_line(), init=init,
                       refusal_hint=" (or pass --no-commit to write without committing)"
                       if has_no_commit else "")


def report(txn: Transaction) -> None:
    """Say what a command's commit took along besides its own files, and what it could not."""
    done = txn.result
    if done is None:
        return
    if done.pending:
        shown = ", ".join(p.removeprefix("context/") for p in done.pending[:3])
        more = f" and {len(done.pending) - 3} more" if len(done.pending) > 3 else ""
        typer.secho(f"also committed what was pending under context/: {shown}{more}",
                    err=True)
    if done.warning:
        warn(done.warning)


def split_list(values: list[str] | None) -> list[str]:
    """A repeatable, comma-separated option as a list without duplicates:
    `--evidence EXP-001,EXP-002 --evidence EXP-003` → three ids."""
    out: list[str] = []
    for value in values or []:
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return list(dict.fromkeys(out))


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def ok(message: str) -> None:
    typer.secho(message, fg="green")


def warn(message: str) -> None:
    typer.secho(f"warning: {message}", fg="yellow", err=True)


def check_format(fmt: str) -> str:
    from cortexfs.errors import InvalidInputError

    if fmt not in ("text", "json"):
        raise InvalidInputError(f"unknown --format {fmt!r}: use text or json")
    return fmt
