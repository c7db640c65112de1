"""`cortex validate`: check atoms against SPEC §2 (and the governance checks)."""

from __future__ import annotations

from typing import Annotated

import typer

from cortexfs.cli import common

_COLOURS = {"error": "red", "warning": "yellow"}


def validate(
    projects: Annotated[list[str] | None, typer.Argument(
        metavar="PROJECT", help="Projects to check (default: all).")] = None,
) -> None:
    """Check every atom's frontmatter (and the governance files); exit 1 on any error."""
    from cortexfs.validate import validate as run

    fmt = common.output_format()
    store = common.open_store()
    report = run(store, store.select(projects) if projects else None)
    if fmt == "json":
        common.print_json(report.to_dict())
    else:
        for finding in report.findings:
            severity = typer.style(f"{finding.severity:<7}", fg=_COLOURS[finding.severity])
            typer.echo(f"{severity}  {finding.location}  [{finding.rule}] {finding.message}")
        typer.secho(report.summary(), fg="green" if report.ok else "red")
    if not report.ok:
        raise typer.Exit(1)


COMMANDS = {"validate": validate}
