"""Where a store lives and what it holds: CORTEX_HOME, the knowledge root, projects."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cortexfs import layout, wall
from cortexfs.atoms import Kind
from cortexfs.errors import InvalidInputError, NotAStoreError, ProjectNotFoundError

PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")  # (\Z: no final "\n")


@dataclass(frozen=True)
class Store:
    """A cortex store rooted at `home` (a git repository holding `context/`)."""

    home: Path

    @classmethod
    def at(cls, home: str | os.PathLike[str] | None = None) -> Store:
        """The store at `home` as layout.resolve_home finds it, initialised or not."""
        return cls(Path(layout.resolve_home(home)))

    @classmethod
    def open(cls, home: str | os.PathLike[str] | None = None) -> Store:
        """The store at `home` (as layout.resolve_home finds it); it must have been initialised."""
        store = cls.at(home)
        store.require()
        return store

    @property
    def context(self) -> Path:
        return self.home / layout.CONTEXT

    @property
    def projects_dir(self) -> Path:
        return self.context / layout.PROJECTS

    @property
    def cache_dir(self) -> Path:
        return self.home / layout.CACHE

    @property
    def logs_dir(self) -> Path:
        return self.home / layout.LOGS

    @property
    def locks_dir(self) -> Path:
        return self.home / layout.LOCKS

    @property
    def templates_dir(self) -> Path:
        """Per-store template overrides: a file here wins over the packaged one."""
        return self.home / layout.TEMPLATES

    def rel(self, path: str | os.PathLike[str]) -> str:
        """`path` relative to context/, with `/` (how messages and findings name a file)."""
        return os.path.relpath(path, self.context).replace(os.sep, "/")

    def home_rel(self, path: str | os.PathLike[str]) -> str:
        """`path` relative to the store's home, with `/` (how JSON reports name a file)."""
        return os.path.relpath(path, self.home).replace(os.sep, "/")

    def exists(self) -> bool:
        return self.projects_dir.is_dir()

    def require(self) -> None:
        if not self.exists():
            raise NotAStoreError(
                f"no cortex store at {self.home}: run `cortex init` "
                "(or point CORTEX_HOME / --home at an existing store)"
            )
        if self.context.is_symlink():  # (context/ is the wall's root: cortexfs.wall)
            from cortexfs.errors import OutsideStoreError

            raise OutsideStoreError(str(self.context), wall.LINK)

    def project_names(self) -> list[str]:
        """Names of the projects, sorted (a linked folder is not one: cortexfs.wall)."""
        return self.folder_projects(self.projects_dir)

    def folder_projects(self, folder: Path) -> list[str]:
        """Names of the projects in `folder` of context/ (projects/, archive/), sorted."""
        if wall.reason(self.context, folder) or not folder.is_dir():
            return []
        with os.scandir(folder) as it:
            return sorted(e.name for e in it if e.is_dir(follow_symlinks=False)
                          and layout.is_project_folder(e.name))

    def projects(self) -> list[Project]:
        return [Project(self, name) for name in self.project_names()]

    def project(self, name: str) -> Project:
        """The existing project `name`; a clear error when there is none."""
        check_project_name(name)
        project = Project(self, name)
        wall.check(self.context, project.root)
        if not project.root.is_dir():
            import difflib

            names = self.project_names()
            known = ", ".join(names) or "none yet"
            close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
            if close:  # a typo, most likely: not a project to create
                raise ProjectNotFoundError(f"no project named {name!r}: did you mean "
                                           f"{close[0]!r}? (projects: {known})")
            raise ProjectNotFoundError(
                f"no project named {name!r} (projects: {known}); "
                f"create it with `cortex project new {name}`"
            )
        return project

    def select(self, names: list[str] | None) -> list[Project]:
        """The named projects, or every project when `names` is empty."""
        if not names:
            return self.projects()
        return [self.project(n) for n in dict.fromkeys(names)]


def check_project_name(name: str) -> None:
    if not PROJECT_NAME.fullmatch(name):
        raise InvalidInputError(
            f"invalid project name {name!r}: use letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit, at most 64 characters)"
        )


@dataclass(frozen=True)
class Project:
    """One project folder under context/projects/."""

    store: Store
    name: str

    @property
    def root(self) -> Path:
        return self.store.projects_dir / self.name

    @property
    def meta_dir(self) -> Path:
        return self.root / layout.META

    @property
    def access_log(self) -> Path:
        return self.meta_dir / layout.ACCESS_LOG

    def folder(self, kind: Kind) -> Path:
        return self.root / kind.folder

