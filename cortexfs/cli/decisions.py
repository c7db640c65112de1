"""`cortex decision new`: the next decision record (decisions/NNNN-title.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from cortexfs.cli import common

decision_app = typer.Typer(help="Decision records (decisions/NNNN-title.md).",
                           no_args_is_help=True)


@decision_app.command("new")
def decision_new(
    title: Annotated[str, typer.Argument(help="The decision's title, e.g. \"Store atoms as "
                                         "files\".")],
    project: Annotated[str | None, typer.Option(
        "--project", "-p", help="Project decision (default: a system-level decision in "
        "context/decisions/).")] = None,
    no_commit: common.NoCommit = False,
) -> None:
    """Write the next decision record NNNN-title.md from its template and print its path."""
    from cortexfs import decisions, lifecycle
    from cortexfs.commit import Change

    store = common.open_store()
    if project is not None:
        store.project(project)  # an unknown project is the first thing to say
    with common.writing(store, no_commit) as txn:
        path = decisions.new_decision(store, title, project)
        txn.add(Change([path], f"decision: add {path.stem}", created=[path]))
        # the CORTEX.md block of its folder lists it: `ready` must not find it stale
        txn.add(lifecycle.regenerate(store, [project] if project else None, txn,
                                     warn=common.warn))
    common.report(txn)
    common.say(common.output_format(), {"path": str(path), "project": project, "committed":
                                        bool(txn.committed)}, str(path))


COMMANDS = {"decision": decision_app}
