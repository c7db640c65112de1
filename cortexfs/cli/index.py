"""`cortex index regen`: regenerate index.md files (and the store-wide derived files)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from cortexfs.cli import common
from cortexfs.errors import InvalidInputError
from cortexfs.wording import plural, some

if TYPE_CHECKING:
    from cortexfs.regen import RegenResult

index_app = typer.Typer(help="Regenerate the generated index files.", no_args_is_help=True)


@index_app.command("regen")
def regen(
    projects: Annotated[list[str] | None, typer.Argument(
        help="Projects to regenerate.", show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", "-a", help="Regenerate every project.")] = False,
    no_commit: common.NoCommit = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Write nothing; exit 1 if regeneration would change a file.")] = False,
) -> None:
    """Rebuild the index.md files from the frontmatter and commit what changed.

    Also folds the access logs into refs / last-ref and refreshes the store-wide files
    (OVERVIEW.md, HIPPOCAMPUS.md, the CORTEX.md blocks)."""
    from cortexfs.commit import Change
    from cortexfs.regen import regenerate

    fmt = common.output_format()
    if all_ and projects:
        raise InvalidInputError("pass either --all or project names, not both")
    if not all_ and not projects:
        raise InvalidInputError("say what to regenerate: pass --all, or one or more project "
                                "names (`cortex project list` shows them)")
    store = common.open_store()
    selected = None if all_ else projects
    if check:
        result = regenerate(store, selected, dry_run=True, progress=fmt == "text")
        pending: list[str] = []
    else:
        # also finishes what an interrupted or killed command left: what it wrote is
        # committed with the rest, even when nothing needs rendering (and its temporary
        # files are gone: the store's git lock, taken after a killed holder, removes them)
        # (every file it writes is in result.written: git status may run meanwhile)
        with common.writing(store, no_commit, ask_early=True) as txn:
            result = regenerate(store, selected, progress=fmt == "text")
            if result.drained:
                txn.wrote_unlisted()
            txn.add(Change(result.written, "index: regenerate "
                           + ("all projects" if all_ else some(result.projects, 3)),
                           regenerated=set(result.projects)))
        common.nothing_left_to_write()  # (committed: the interpreter's teardown spared)
        common.report(txn)
        pending = txn.result.pending if txn.result else []
    committed = bool(txn.committed) if not check else False
    rel = store.home_rel
    if fmt == "json":
        common.print_json({
            "projects": result.projects,
            "changed" if check else "written": [rel(p) for p in result.written],
            "folded": [rel(p) for p in result.folded],
            "skipped": [{"path": rel(e.path), "line": e.line, "reason": e.reason}
                        for e in result.skipped],
            "fold_errors": [{"path": rel(e.path), "reason": e.reason}
                            for e in result.fold_errors],
            "dubious": [{"path": rel(e.path), "reason": e.reason} for e in result.dubious],
            "committed": committed,
            "pending_committed": [rel(store.home / p) for p in pending],
        })
    else:
        for error in [*result.skipped, *result.fold_errors, *result.dubious]:
            where = f"{rel(error.path)}:{error.line}" if error.line else rel(error.path)
            common.warn(f"{where}: {error.reason}")
        if check:
            for path in result.written:
                typer.echo(f"would change: {rel(path)}")
        _summary(result, check, committed, len(pending),
                 "--all" if all_ else " ".join(result.projects))
    if check and result.written:
        raise typer.Exit(1)


def _summary(result: RegenResult, check: bool, committed: bool, pending: int, target: str) -> None:
    where = plural(len(result.projects), "project")
    skipped = (f"; {plural(len(result.skipped), 'malformed atom')} skipped (run "
               "`cortex validate`)") if result.skipped else ""
    if check:
        if result.written:
            typer.secho(f"{plural(len(result.written), 'file')} out of date in {where}: run "
                        f"`cortex index regen {target}` to update them" + skipped, fg="red",
                        err=True)
        else:
            common.ok(f"indexes are up to date ({where}){skipped}")
        return
    if not result.written:
        also = (f"; committed {plural(pending, 'pending file')}"
                if committed and pending else "")
        common.ok(f"indexes are up to date ({where}){also}{skipped}")
        return
    folded = f", refs updated in {plural(len(result.folded), 'atom')}" if result.folded else ""
    commit = ", committed" if committed else ""
    common.ok(f"regenerated {plural(len(result.written), 'file')} in "
              f"{where}{folded}{commit}{skipped}")


COMMANDS = {"index": index_app}
