"""Every command of the `cortex` CLI, as the paths a user types (`("tasks", "add")`)."""

from __future__ import annotations

from typing import Any

import typer.main

from cortexfs.cli.main import app


def cli_commands() -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        sub = getattr(cmd, "commands", None)
        if sub:
            for name, child in sub.items():
                walk(child, (*path, name))
        else:
            found.append(path)

    walk(typer.main.get_command(app), ())
    return found
