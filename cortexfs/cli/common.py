"""What every command shares: the store it works on and how it prints."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from cortexfs.store import Store

_state: dict[str, str | None] = {"home": None}

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


def check_can_commit(store: Store, no_commit: bool) -> None:
    """Before a command writes: refuse now (writing nothing) what its commit would refuse
    after the writes — a merge under way, no git identity."""
    if no_commit:
        return
    from cortexfs import git
    from cortexfs.errors import GitError

    try:
        git.check_can_commit(store)
    except GitError as e:
        raise GitError(f"{e} (or pass --no-commit to write without committing)") from None


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
