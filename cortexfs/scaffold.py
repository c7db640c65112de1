"""Creating a store (`cortex init`) and a project (`cortex project new`)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from cortexfs import layout, templates, wall
from cortexfs.atoms import KINDS
from cortexfs.errors import InvalidInputError
from cortexfs.fsutil import atomic_write
from cortexfs.layout import EMPTY_BLOCK, PROJECT_FILES, PROJECT_FOLDERS, STORE_FOLDERS
from cortexfs.overview import new_cortex_md, render_overview
from cortexfs.store import Project, Store, check_project_name


def _create(path: Path, text: str, created: list[Path], root: Path) -> None:
    """Write `path` only when it does not exist: init and project new never overwrite
    (`root`: the store's context/, whose wall the write must not cross: cortexfs.wall)."""
    if os.path.lexists(path):
        return  # (a link is left alone: not part of the store, validate reports it)
    atomic_write(path, text, root=root)
    created.append(path)


def check_home(store: Store) -> None:
    """Refuse a CORTEX_HOME that is a file (before anything is written)."""
    if store.home.exists() and not store.home.is_dir():
        raise InvalidInputError(f"{store.home} is a file, not a folder: "
                                "choose another CORTEX_HOME or --home")


def init_store(store: Store) -> list[Path]:
    """Create the layout of a store (idempotent); returns the files it created."""
    check_home(store)
    created: list[Path] = []
    ctx = store.context
    for folder in (ctx, *(ctx / name for name in STORE_FOLDERS)):
        folder.mkdir(parents=True, exist_ok=True)
    _create(ctx / layout.CORTEX_MD,
            templates.render(store, "store/CORTEX.md.j2", generated_block=EMPTY_BLOCK),
            created, ctx)
    _create(ctx / layout.OVERVIEW_MD, render_overview(store, []), created, ctx)
    _create(ctx / layout.USER / layout.USER_MD, templates.render(store, "store/USER.md.j2"),
            created, ctx)
    for name in STORE_FOLDERS:
        _create(ctx / name / layout.CORTEX_MD, new_cortex_md(store, ctx / name), created, ctx)
    return created


def new_project(store: Store, name: str) -> tuple[Project, list[Path]]:
    """Scaffold project `name` (idempotent: existing files are kept)."""
    store.require()
    check_project_name(name)
    project = Project(store, name)
    created: list[Path] = []
    ctx = {"project": name, "date": dt.date.today().isoformat(),
           "generated_block": EMPTY_BLOCK}
    root = store.context
    wall.makedirs(root, project.meta_dir)
    _create(project.root / layout.CORTEX_MD,
            templates.render(store, "project/CORTEX.md.j2", **ctx), created, root)
    for filename in PROJECT_FILES:
        _create(project.root / filename,
                templates.render(store, f"project/{filename}.j2", **ctx), created, root)
    for folder in PROJECT_FOLDERS:
        wall.makedirs(root, project.root / folder)
        _create(project.root / folder / layout.CORTEX_MD,
                new_cortex_md(store, project.root / folder), created, root)
    assert {k.folder for k in KINDS} <= set(PROJECT_FOLDERS)
    return project, created
