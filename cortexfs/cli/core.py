"""`cortex init`, `cortex project …` and `cortex new`."""

from __future__ import annotations

from typing import Annotated

import typer

from cortexfs.cli import common

project_app = typer.Typer(help="Create and list projects.", no_args_is_help=True)

NoCommit = common.NoCommit


def init(
    no_commit: NoCommit = False,
    remote: Annotated[str | None, typer.Option(
        "--remote", metavar="URL", help="Git remote to sync with (URL or repository path).")
    ] = None,
) -> None:
    """Create a store at CORTEX_HOME (safe to run again: existing files are kept)."""
    from cortexfs import commit, git, scaffold, sync

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
    common.report(txn)
    if created:
        common.ok(f"initialised a cortex store at {store.home}")
    else:
        common.ok(f"the cortex store at {store.home} is already initialised")
    if remote is not None:
        common.ok(f"remote origin is {sync.set_remote(store, remote)}: "
                  "`cortex sync` shares the store")


@project_app.command("new")
def project_new(
    name: Annotated[str, typer.Argument(help="Project name (letters, digits, . _ -).")],
    no_commit: NoCommit = False,
) -> None:
    """Scaffold a project: governance files, atom folders and _meta/."""
    from cortexfs import scaffold
    from cortexfs.commit import Change
    from cortexfs.store import check_project_name

    store = common.open_store()
    check_project_name(name)
    with common.writing(store, no_commit) as txn:
        txn.fresh(store.projects_dir / name)  # removed whole if the command fails
        project, created = scaffold.new_project(store, name)
        txn.add(Change(created, f"project: add {name}", created=created))
    common.report(txn)
    if not created:
        common.ok(f"project {name} already exists at {project.root}")
        return
    common.ok(f"created project {name} at {project.root}")


@project_app.command("list")
def project_list() -> None:
    """List the store's projects."""
    store = common.open_store()
    for name in store.project_names():
        typer.echo(name)


def new(
    kind: Annotated[str, typer.Argument(help="exp, k or pat.", metavar="exp|k|pat")],
    project: Annotated[str, typer.Option("--project", "-p", help="Project to write into.")],
    summary: Annotated[str, typer.Option("--summary", "-s", help="One-line summary.")],
    tags: Annotated[str, typer.Option("--tags", "-t", help="Comma-separated tags.")],
    evidence: Annotated[list[str] | None, typer.Option(
        "--evidence", "-e", help="Experiment ids it rests on (repeat or comma-separate).")] = None,
    sources: Annotated[list[str] | None, typer.Option(
        "--sources", help="Patterns: source experiments (default: --evidence).")] = None,
    links: Annotated[list[str] | None, typer.Option(
        "--links", "-l", help="Related atom ids.")] = None,
    executor: Annotated[str | None, typer.Option(help="Experiments: who ran it.")] = None,
    no_commit: NoCommit = False,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Refuse (exit 1) when an existing atom nearly duplicates this one.")]
        = False,
) -> None:
    """Write a new atom from its template with the next free id, and print its path.

    Warns when an atom of the same kind in the project nearly duplicates it (--strict
    refuses)."""
    from cortexfs.authoring import NewAtom, add_atom, check_request, kind_named

    atom_kind = kind_named(kind)
    store = common.open_store()
    proj = store.project(project)
    req = NewAtom(atom_kind, summary, common.split_list([tags]), common.split_list(evidence),
                  common.split_list(sources), common.split_list(links), executor)
    check_request(proj, req)  # bad input is said before git is asked anything
    with common.writing(store, no_commit) as txn:
        added = add_atom(proj, req, strict=strict)
        txn.add(added.change)
    common.report(txn)
    for dup in added.duplicates:
        common.warn(f"{dup.describe()} nearly duplicates {added.atom.id}: update that atom "
                    "instead, or pass --strict to refuse near-duplicates")
    typer.echo(str(added.atom.path))


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    app.command("init")(init)
    app.command("new")(new)
    app.add_typer(project_app, name="project")
