"""Loading a project's atoms: the one place every command gets parsed atoms from.

Validation, regeneration, readiness, recall and the brief all call `load_project`, so a
faster loader (cache, parallel parse) speeds them all up at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cortexfs.atoms import Atom
from cortexfs.errors import AtomParseError
from cortexfs.frontmatter import read
from cortexfs.store import Project


@dataclass
class LoadedProject:
    """A project's atoms that parsed, and the files that did not (with file and line)."""

    project: Project
    atoms: list[Atom] = field(default_factory=list)
    errors: list[AtomParseError] = field(default_factory=list)


def load_project(project: Project) -> LoadedProject:
    """Parse every atom file of `project`, in kind then id order."""
    loaded = LoadedProject(project)
    for kind, path in project.atom_paths():
        try:
            doc = read(path)
        except AtomParseError as e:
            loaded.errors.append(e)
            continue
        loaded.atoms.append(Atom(path, kind, doc.meta, doc.body))
    return loaded
