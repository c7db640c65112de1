"""`cortex commit`, `cortex sync`, `cortex status` and `cortex remote set`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from cortexfs.cli import common

if TYPE_CHECKING:
    from cortexfs.commit import Committed

remote_app = typer.Typer(help="Configure the git remote the store syncs with.",
                         no_args_is_help=True)

Format = common.Format


def commit(
    message: Annotated[str | None, typer.Option(
        "--message", "-m", metavar="MSG",
        help="The commit message (default: one naming what changed).")] = None,
    fmt: Format = "text",
) -> None:
    """Commit everything pending under context/ (hand edits, what a killed command left).

    Atoms changed since their index was generated are committed with the index
    regenerated, so the commit holds together. Nothing outside context/ is committed."""
    from cortexfs import git
    from cortexfs.commit import Change, remove_stale_temporaries
    from cortexfs.errors import GitError

    common.check_format(fmt)
    store = common.open_store()
    if not git.is_repo(store.home):
        raise GitError(f"{store.home} is not a git repository: run `cortex init` to make it one")
    if message is not None and not message.strip():
        from cortexfs.errors import InvalidInputError

        raise InvalidInputError("the commit message is empty: pass -m \"what changed\", or "
                                "leave -m out for a generated one")
    with common.writing(store, has_no_commit=False) as txn:
        remove_stale_temporaries(store)
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
        common.ok(f"committed {len(done.paths)} file(s) as {done.commit[:10]}: {done.subject}")
    else:
        typer.echo("nothing to commit under context/")
    if note:
        typer.echo(note)


def sync(fmt: Format = "text") -> None:
    """Commit pending changes, pull (renumbering colliding ids), regenerate, and push.

    With no remote yet, commits locally and says how to add one."""
    from cortexfs import git, renumber
    from cortexfs import sync as sync_lib
    from cortexfs.commit import Change

    common.check_format(fmt)
    store = common.open_store()
    if git.is_repo(store.home) and not git.git_run(store.home, "remote").stdout.split():
        with common.writing(store, has_no_commit=False) as txn:
            txn.add(Change())
        _committed(txn.result, fmt, "no remote to sync with: add one with `cortex remote set "
                   "URL`, then `cortex sync` pulls and pushes")
        return
    # said at once: a sync that recovers and then stops on a conflict still tells it
    told = None if fmt == "json" else (lambda what: common.warn(f"recovered: {what}"))
    result = sync_lib.sync(store, on_recovered=told)
    if fmt == "json":
        common.print_json(result.to_json())
        return
    for message in result.committed:
        typer.echo(f"committed: {message}")
    if result.renumbered:
        typer.echo(f"renumbered (the remote has these ids too): "
                   f"{renumber.describe(result.renumbered)}")
    if result.received:
        typer.echo(f"merged {result.received} commit(s) from {result.upstream}")
    if result.regenerated:
        typer.echo(f"regenerated {len(result.regenerated)} file(s)")
    if result.regen_skipped:
        common.warn(result.regen_skipped)
    typer.echo(f"pushed {result.sent} commit(s) to {result.upstream}" if result.sent
               else f"nothing to push to {result.upstream}")
    common.ok(f"in sync with {result.upstream}")


def status(fmt: Format = "text") -> None:
    """Uncommitted changes, unpushed commits, ahead/behind and the last sync."""
    from cortexfs import sync as sync_lib

    common.check_format(fmt)
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
    common.ok(f"remote {name} is {value}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("commit")(commit)
    app.command("sync")(sync)
    app.command("status")(status)
    app.add_typer(remote_app, name="remote")
