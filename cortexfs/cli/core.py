"""`cortex init` and `cortex project new|list|rm|archive|unarchive`."""

from __future__ import annotations

from typing import Annotated

import typer

from cortexfs.cli import common
from cortexfs.cli.common import NoCommit
from cortexfs.store import check_project_name

project_app = typer.Typer(help="Create, list, archive and remove projects.",
                          no_args_is_help=True)


def init(
    no_commit: NoCommit = False,
    remote: Annotated[str | None, typer.Option(
        "--remote", metavar="URL", help="Git remote to sync with (URL or repository path).")
    ] = None,
) -> None:
    """Create a store at CORTEX_HOME (safe to run again: existing files are kept)."""
    from cortexfs import commit, git, lifecycle, scaffold, sync

    store = common.unopened_store()
    if remote is not None:
        sync.check_url(store, remote)  # a bad URL fails before anything is written
    scaffold.check_home(store)
    # refusals (no identity, a read-only or full disk…) come before anything is written;
    # a failure half-way removes what this run made
    with common.writing(store, no_commit, init=True) as txn:
        written = git.ensure_repo(store)
        created = scaffold.init_store(store)
        # .gitignore and .gitattributes even when this run did not write them: an older
        # cortex, refused at the commit, had written them already
        repo_files = [store.home / name for name in commit.INIT_FILES]
        txn.add(commit.Change([*created, *written, *repo_files],
                              "chore: initialise cortex store", created=created))
        # OVERVIEW.md, HIPPOCAMPUS.md, the CORTEX.md blocks
        txn.add(lifecycle.regenerate(store, None, warn=common.warn))
    common.report(txn)
    origin = sync.set_remote(store, remote) if remote is not None else None
    if common.output_format() == "json":
        common.print_json({"home": str(store.home), "created": bool(created),
                           "committed": bool(txn.committed),
                           "remote": origin})
        return
    if created:
        common.ok(f"initialised a cortex store at {store.home}")
    else:
        common.ok(f"the cortex store at {store.home} is already initialised")
    if origin is not None:
        common.ok(f"remote origin is {origin}: `cortex sync` shares the store")


@project_app.command("new")
def project_new(
    name: Annotated[str, typer.Argument(help="Project name (letters, digits, . _ -).")],
    no_commit: NoCommit = False,
) -> None:
    """Scaffold a project: governance files, atom folders and _meta/."""
    from cortexfs import lifecycle, scaffold
    from cortexfs.commit import Change

    store = common.open_store()
    check_project_name(name)
    with common.writing(store, no_commit) as txn:
        txn.fresh(store.projects_dir / name)  # removed whole if the command fails
        project, created = scaffold.new_project(store, name)
        txn.add(Change(created, f"project: add {name}", created=created))
        txn.add(lifecycle.regenerate(store, [name], txn, warn=common.warn))
    common.report(txn)
    if common.output_format() == "json":
        common.print_json({"project": name, "path": str(project.root),
                           "created": bool(created),
                           "committed": bool(txn.committed)})
    elif not created:
        common.ok(f"project {name} already exists at {project.root}")
    else:
        common.ok(f"created project {name} at {project.root}")


@project_app.command("list")
def project_list(
    show_archived: Annotated[bool, typer.Option(
        "--archived", help="Also list the archived projects.")] = False,
) -> None:
    """List the store's projects (--format json: with atom counts, phase, open tasks)."""
    from cortexfs import lifecycle

    store = common.open_store()
    if common.output_format() == "json":
        rows = lifecycle.projects(store)
        common.print_json([r for r in rows if show_archived or not r["archived"]])
        return
    for name in store.project_names():
        typer.echo(name)
    if show_archived:
        for name in lifecycle.archived(store):
            typer.echo(f"{name} (archived)")


@project_app.command("rm")
def project_rm(
    name: Annotated[str, typer.Argument(help="The project to remove.")],
    force: Annotated[bool, typer.Option(
        "--force", help="Also when it holds atoms or open tasks.")] = False,
    no_commit: NoCommit = False,
) -> None:
    """Remove a project's folder (git history keeps it). Refused while it holds atoms or
    open tasks, unless --force; `cortex project archive` keeps it instead."""
    from cortexfs import lifecycle

    store = common.open_store()
    plan, txn = common.run_plan(store, lambda: lifecycle.remove_project(store, name,
                                                                        force=force), no_commit)
    common.finish(plan, txn, f"removed project {name}")


@project_app.command("archive")
def project_archive(
    name: Annotated[str, typer.Argument(help="The project to archive.")],
    no_commit: NoCommit = False,
) -> None:
    """Move a project to context/archive/NAME/: out of the indexes, OVERVIEW, HIPPOCAMPUS,
    recall, the brief, validate and ready; its files stay in the store and in git."""
    from cortexfs import lifecycle

    store = common.open_store()
    plan, txn = common.run_plan(store, lambda: lifecycle.archive_project(store, name),
                                no_commit)
    common.finish(plan, txn, f"archived project {name} to {plan.result.get('archived_to')}")


@project_app.command("unarchive")
def project_unarchive(
    name: Annotated[str, typer.Argument(help="The archived project to bring back.")],
    no_commit: NoCommit = False,
) -> None:
    """Move an archived project back to context/projects/."""
    from cortexfs import lifecycle

    store = common.open_store()
    plan, txn = common.run_plan(store, lambda: lifecycle.unarchive_project(store, name),
                                no_commit)
    common.finish(plan, txn, f"project {name} is back")


COMMANDS = {"init": init, "project": project_app}
