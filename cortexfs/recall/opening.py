"""Opening a hit: reading an atom's full text, which counts as an access (a `"tool":
"recall"` line in its project's access log). Listing hits is not a read."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from cortexfs import accesslog, wall
from cortexfs.atoms import kind_of_id
from cortexfs.errors import AtomParseError, InvalidInputError, OutsideStoreError
from cortexfs.frontmatter import MAX_ATOM_BYTES, decode, parse
from cortexfs.store import Project, Store


@dataclass
class OpenedAtom:
    """An atom read through recall: its location and full text."""

    id: str
    project: str
    path: Path
    text: str


def find_atom(store: Store, atom_id: str, project: str | None = None) -> tuple[Project, Path]:
    """The file of atom `atom_id` (in `project`, or the only project that has it)."""
    atom_id = atom_id.strip()
    kind = kind_of_id(atom_id)
    if kind is None:
        raise InvalidInputError(f"{atom_id!r} is not an atom id: use EXP-NNN, K-NNN or PAT-NNN")
    projects = [store.project(project)] if project else store.projects()
    # a link named like the atom is found here, and refused by read_atom (cortexfs.wall)
    found = [(p, p.folder(kind) / f"{atom_id}.md") for p in projects
             if os.path.lexists(p.folder(kind) / f"{atom_id}.md")]
    if not found:
        where = f"project {project}" if project else "any project"
        raise InvalidInputError(f"no atom {atom_id} in {where}: check the id with "
                                "`cortex recall`")
    if len(found) > 1:
        names = ", ".join(p.name for p, _ in found)
        raise InvalidInputError(f"{atom_id} exists in several projects ({names}): "
                                "name one with --project")
    return found[0]


def read_atom(store: Store, atom_id: str, project: str | None = None,
              session: str = "", tool: str = "recall") -> OpenedAtom:
    """Read an atom's full text and record the read in its project's access log."""
    proj, path = find_atom(store, atom_id, project)
    try:
        text = decode(wall.read_bytes(store.context, path, MAX_ATOM_BYTES), str(path))
        parse(text, str(path))  # only an atom is returned: never any other file's text
    except OutsideStoreError:
        raise
    except OSError as e:
        raise InvalidInputError(f"cannot read {path}: {e.strerror}: it is not an atom "
                                "file") from None
    except AtomParseError as e:
        raise InvalidInputError(f"{e}: not returned until it is fixed (see `cortex "
                                "validate`)") from None
    with contextlib.suppress(OutsideStoreError):  # a linked log is not counted into
        accesslog.append(proj.access_log, [accesslog.format_line(path.name, tool, session)])
    return OpenedAtom(atom_id, proj.name, path, text)
