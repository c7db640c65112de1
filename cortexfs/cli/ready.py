"""`cortex ready`: could a fresh session pick up the work from the files alone?"""

from __future__ import annotations

from typing import Annotated

import typer

from cortexfs.cli import common


def ready(
    project: Annotated[str | None, typer.Argument(
        metavar="[PROJECT]", help="Project to check (default: the whole store).")] = None,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", help="Run every check even when no file changed since the last run.")]
        = False,
) -> None:
    """The fresh-session test: exit 0 when the files hold everything, else list each gap."""
    from cortexfs import ready as lib

    fmt = common.output_format()
    store = common.open_store()
    report = lib.check(store, project, use_cache=not no_cache)
    if fmt == "json":
        common.print_json(report.to_json())
    else:
        typer.secho(lib.render_text(report), nl=False,
                    fg="green" if report.ready else None)
    if not report.ready:
        raise typer.Exit(1)


COMMANDS = {"ready": ready}
