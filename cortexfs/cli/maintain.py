"""`cortex maintain`: cold and stale atoms, weak evidence, consolidation (read-only)."""

from __future__ import annotations

from typing import Annotated

import typer

from cortexfs.cli import common


def maintain(
    project: Annotated[str | None, typer.Argument(
        metavar="[PROJECT]", help="Project to report on (default: all).")] = None,
) -> None:
    """Report cold and stale atoms, weak evidence, consolidation suggestions (read-only)."""
    from cortexfs import maintain as lib

    fmt = common.output_format()
    store = common.open_store()
    report = lib.maintain(store, store.select([project] if project else None))
    if fmt == "json":
        common.print_json(report.to_json())
    else:
        typer.echo(lib.render_text(report), nl=False)


COMMANDS = {"maintain": maintain}
