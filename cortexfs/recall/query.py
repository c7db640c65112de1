"""The entry points: `recall` a query over a store, and open a hit (an access)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cortexfs import accesslog
from cortexfs.atoms import kind_of_id
from cortexfs.errors import AtomParseError, InvalidInputError
from cortexfs.frontmatter import check_size, decode
from cortexfs.recall.dense import VectorStore
from cortexfs.recall.fuse import DEFAULT_WEIGHTS, RecallResult, Weights
from cortexfs.recall.lexical import RecallIndex
from cortexfs.recall.when import query_period
from cortexfs.store import Project, Store

MAX_K = 1000
NO_EMBED_NOTE = ("recall is using the lexical, heat and recency signals only; install the "
                 "`embed` extra (pip install 'cortexfs[embed]') to add dense vectors")


# --- entry points ---------------------------------------------------------------------------

_indexes: dict[Path, RecallIndex] = {}


def open_index(store: Store, dense: bool = True) -> RecallIndex:
    """The store's recall index, kept for the life of the process (the MCP server's warm
    cache); dense vectors are attached when the embed extra is installed and `dense`."""
    index = _indexes.get(store.home)
    if index is None:
        index = _indexes[store.home] = RecallIndex(store)
    if dense and index.vectors is None:
        from cortexfs import embed

        embedder = embed.load_embedder()
        if embedder is not None:
            index.vectors = VectorStore(index, embedder)
    return index


def forget_open_indexes() -> None:
    """Drop the indexes this process keeps open: the next recall loads them from disk, as a
    new process would."""
    _indexes.clear()


def dense_available() -> bool:
    """Whether the embedding model is installed (without loading it)."""
    from cortexfs import embed

    return embed.find_model_dir() is not None


def recall(store: Store, query: str, project: str | None = None, k: int = 10,
           weights: Weights | None = None,
           progress: Callable[[int, int], None] | None = None,
           max_age: float = 0.0) -> RecallResult:
    """The k atoms that best match `query`, best first, with the signals behind each.

    `max_age` > 0 lets a long-lived caller skip re-checking the atom files when it last
    did so less than that many seconds ago (see RecallIndex.refresh)."""
    query = query.strip()
    if not query:
        raise InvalidInputError("the query is empty: say what you are looking for, "
                                "e.g. `cortex recall \"cache invalidation\"`")
    if not 1 <= k <= MAX_K:
        raise InvalidInputError(f"--k must be between 1 and {MAX_K}, not {k}")
    if project is not None:
        store.project(project)  # a clear error for an unknown project
    weights = weights or DEFAULT_WEIGHTS
    index = open_index(store, dense=weights.dense > 0)
    index.refresh(progress=progress, dense=weights.dense > 0, max_age=max_age)
    try:
        hits = index.search(query, project, k, weights)
    except IndexError:
        # Damaged bytes in the memory-mapped part of the cache (map_npz) show as ids out
        # of range: rebuild it, and ask once more.
        index.discard()
        index.refresh(progress=progress, dense=weights.dense > 0)
        hits = index.search(query, project, k, weights)
    use_dense = index.vectors is not None and weights.dense > 0
    used = [s for s in weights.active() if (s != "dense" or use_dense)
            and (s != "when" or query_period(query) is not None)]
    return RecallResult(query, hits, used, index.vectors is not None,
                        sorted(index.skipped))


def no_embed_note(store: Store) -> str | None:
    """The one-time note that dense vectors are off; None once it has been shown."""
    marker = store.cache_dir / "recall" / "no-embed-noted"
    if marker.exists():
        return None
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(NO_EMBED_NOTE + "\n", encoding="utf-8")
    return NO_EMBED_NOTE


# --- opening a hit (an access) ---------------------------------------------------------------


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
