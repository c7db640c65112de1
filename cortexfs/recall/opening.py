"""Opening a hit: reading an atom's full text, which counts as an access (a `"tool":
"recall"` line in its project's access log). Listing hits is not a read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cortexfs import accesslog
from cortexfs.atoms import kind_of_id
from cortexfs.errors import AtomParseError, InvalidInputError
from cortexfs.frontmatter import check_size, decode
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
    found = [(p, p.folder(kind) / f"{atom_id}.md") for p in projects
             if (p.folder(kind) / f"{atom_id}.md").is_file()]
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
        check_size(path.stat().st_size, str(path))
        text = decode(path.read_bytes(), str(path))
    except OSError as e:
        raise InvalidInputError(f"cannot read {path}: {e.strerror}") from None
    except AtomParseError as e:
        raise InvalidInputError(str(e)) from None
    accesslog.append(proj.access_log, [accesslog.format_line(path.name, tool, session)])
    return OpenedAtom(atom_id, proj.name, path, text)
