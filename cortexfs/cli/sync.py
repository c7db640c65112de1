"""`cortex commit`, `cortex sync`, `cortex status` (the store's, or an atom's) and
`cortex remote set`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from cortexfs.cli import common
from cortexfs.errors import GitError, InvalidInputError
from cortexfs.wording import plural

if TYPE_CHECKING:
    from cortexfs.commit import Committed

remote_app = typer.Typer(help="Configure the git remote the store syncs with.",
                         no_args_is_help=True)


def commit(
    message: Annotated[str | None, typer.Option(
        "--message", "-m", metavar="MSG",
        help="The commit message (default: one naming what changed).")] = None,
) -> None:
    """Commit everything pending under context/ (hand edits, what a killed command left).

    Atoms changed since their index was generated are committed with the index
    regenerated, so the commit holds together. Nothing outside context/ is committed."""
    from cortexfs import git
    from cortexfs.commit import Change

    fmt = common.output_format()
    store = common.open_store()
    if not git.is_repo(store.home):
        raise GitError(f"{store.home} is not a git repository: run `cortex init` to make it one")
    if message is not None and not message.strip():
        raise InvalidInputError("the commit message is empty: pass -m \"what changed\", or "
                                "leave -m out for a generated one")
    with common.writing(store, has_no_commit=False) as txn:
        git.remove_stale_temporaries(store)
        txn.add(Change(message=message))
    _committed(txn.result, fmt)


def _committed(done: Committed | None, fmt: str, note: str | None = None) -> None:
    if fmt == "json":
        common.print_json({"commit": done.commit if done else None,
                           "message": done.message if done else "",
                           "paths": done.paths if done else [],
                           "regenerated": done.regenerated if done else [],
                           "warning": done.warning if done else None, "note": note})
        return
    if done is not None and done.warning:
        common.warn(done.warning)
    if done is not None and done.commit:
        common.ok(f"committed {plural(len(done.paths), 'file')} as {done.commit[:10]}: "
                  f"{done.subject}")
    else:
        typer.echo("nothing to commit under context/")
    if note:
        typer.echo(note)


def sync() -> None:
    """Commit pending changes, pull (renumbering colliding ids), regenerate, and push.

    With no remote yet, commits locally and says how to add one."""
    from cortexfs import git, renumber
    from cortexfs import sync as sync_lib
    from cortexfs.commit import Change

    fmt = common.output_format()
    store = common.open_store()
    known = git.remotes(store.home) if git.is_repo(store.home) else None
    if known is not None and not known.has_remote:
        with common.writing(store, has_no_commit=False) as txn:
            txn.add(Change())
        _committed(txn.result, fmt, "no remote to sync with: add one with `cortex remote set "
                   "URL`, then `cortex sync` pulls and pushes")
        return
    # said at once: a sync that recovers and then stops on a conflict still tells it
    told = None if fmt == "json" else (lambda what: common.warn(f"recovered: {what}"))
    result = sync_lib.sync(store, on_recovered=told, known=known)
    if fmt == "json":
        common.print_json(result.to_json())
        return
    for message in result.committed:
        typer.echo(f"committed: {message}")
    if result.renumbered:
        typer.echo(f"renumbered (the remote has these ids too): "
                   f"{renumber.describe(result.renumbered)}")
    if result.received:
        typer.echo(f"merged {plural(result.received, 'commit')} from {result.upstream}")
    if result.regenerated:
        typer.echo(f"regenerated {plural(len(result.regenerated), 'file')}")
    if result.regen_skipped:
        common.warn(result.regen_skipped)
    typer.echo(f"pushed {plural(result.sent, 'commit')} to {result.upstream}" if result.sent
               else f"nothing to push to {result.upstream}")
    common.ok(f"in sync with {result.upstream}")


def status(
    atom_id: Annotated[str | None, typer.Argument(
        metavar="[ID]", help="An atom: print its status (or set it).", show_default=False)]
        = None,
    new_status: Annotated[str | None, typer.Argument(
        metavar="[STATUS[:CAUSE]]", help="Set the atom's status, e.g. challenged:EXP-051.",
        show_default=False)] = None,
    reason: Annotated[str | None, typer.Option(
        "--reason", "-r", help="With invalidated: why, in one line.")] = None,
    project: common.ProjectOpt = None,
    no_commit: common.NoCommit = False,
) -> None:
    """The store's status: uncommitted changes, unpushed commits, ahead/behind, last sync.

    With an atom id: its status; with a status too, set it (that key only, plus the
    tombstone fields of `invalidated`), regenerate and commit."""
    from cortexfs import sync as sync_lib

    if atom_id is not None:
        from cortexfs.cli.atoms import set_status

        set_status(atom_id, new_status, reason, project, no_commit)
        return

    if reason is not None or project is not None or no_commit:
        raise InvalidInputError("--reason, --project and --no-commit go with an atom id: "
                                "`cortex status ID STATUS`")
    fmt = common.output_format()
    report = sync_lib.status(common.open_store())
    if fmt == "json":
        common.print_json(report.to_json())
        return
    state = report.state
    if not state.is_repo:
        common.warn("the store is not a git repository: run `cortex init`")
        return
    typer.echo(f"branch: {state.branch or '(detached HEAD)'}")
    if state.in_progress:
        common.warn(f"a {state.in_progress} is in progress: finish or abort it")
    if report.remote:
        typer.echo(f"remote: {report.remote} {report.remote_url or ''}".rstrip())
        if state.upstream:
            typer.echo(f"upstream: {state.upstream} — {state.ahead} ahead, {state.behind} "
                       "behind (as of the last fetch)")
        else:
            typer.echo("upstream: none yet (the first `cortex sync` pushes the branch)")
    else:
        typer.echo("remote: none (set one with `cortex remote set URL`)")
    typer.echo(f"last sync: {state.last_sync or 'never'}")
    typer.echo(f"uncommitted: {len(state.dirty)}")
    for path in state.dirty[:20]:
        typer.echo(f"  {path}")
    if len(state.dirty) > 20:
        typer.echo(f"  … and {len(state.dirty) - 20} more")
    if report.remote:
        typer.echo(f"unpushed commits: {report.unpushed_count}")
        for line in report.unpushed:
            typer.echo(f"  {line}")
        if report.unpushed_count > len(report.unpushed):
            typer.echo(f"  … and {report.unpushed_count - len(report.unpushed)} more")


@remote_app.command("set")
def remote_set(
    url: Annotated[str, typer.Argument(help="A git URL or the path of a repository.")],
    name: Annotated[str, typer.Option("--name", help="The remote's name.")] = "origin",
) -> None:
    """Set the remote `cortex sync` pulls from and pushes to."""
    from cortexfs import sync as sync_lib

    value = sync_lib.set_remote(common.open_store(), url, name)
    if common.output_format() == "json":
        common.print_json({"remote": name, "url": value})
        return
    common.ok(f"remote {name} is {value}")


COMMANDS = {"commit": commit, "sync": sync, "status": status, "remote": remote_app}
