"""`cortex mcp`: the store as a stdio MCP server (the official `mcp` SDK, MCPServer API).

Tools: recall, read_atom (counted as an access), add_atom (with the duplicate gate),
validate, regenerate, ready, brief. A CortexError becomes a tool error carrying its
one-line message; anything else is a bug, which the SDK reports as a failed tool call and
logs (with its traceback) on stderr. stdout is the protocol channel: nothing else may
write to it.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field

from cortexfs.errors import CortexError, from_os_error
from cortexfs.store import Store

REFRESH_INTERVAL = 1.0  # seconds during which recall trusts its last look at the files
INSTRUCTIONS = """\
cortex is this user's long-term memory: markdown atoms (experiments EXP-NNN, knowledge K-NNN,
patterns PAT-NNN) in a git repository. Use `recall` to find atoms relevant to the task
(pointers with summaries), then `read_atom` to read the ones you need in full — reads are
counted, which keeps useful atoms hot. Record new findings with `add_atom`; it warns when an
atom with the same content already exists (update that one instead). `brief` gives a new
session its starting context; `ready` says whether the files alone are enough to pick up
the work.
"""

F = TypeVar("F", bound=Callable[..., Any])


def _tool_errors(fn: F) -> F:
    """Turn a CortexError into the SDK's ToolError: the agent sees the one-line message."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CortexError as e:
            raise ToolError(str(e)) from None
        except OSError as e:  # a read-only or full disk, no permission: say what to fix
            problem = from_os_error(e)
            if problem is None:
                raise
            raise ToolError(str(problem)) from None

    return wrapper  # type: ignore[return-value]


def _progress(what: str, done: int, total: int) -> None:
    """A first recall indexes (and, with the embed extra, embeds) every atom: say so on
    stderr (the client's server log), never stdout (the protocol)."""
    print(f"cortex: {what}: {done}/{total}", file=sys.stderr, flush=True)


def _rel(store: Store, path: Path | str) -> str:
    return os.path.relpath(path, store.home)


def add_atom(store: Store, kind: str, project: str, summary: str, tags: list[str],
             evidence: list[str] | None = None, sources: list[str] | None = None,
             links: list[str] | None = None, body: str | None = None, strict: bool = False,
             commit: bool = True) -> dict[str, Any]:
    """Write a new atom as `cortex new` does (gate included); `body`, when given, replaces
    the template's body."""
    from cortexfs import authoring
    from cortexfs.commit import transaction
    from cortexfs.recall import open_retriever

    proj = store.project(project)
    req = authoring.NewAtom(authoring.kind_named(kind), summary,
                            [t.strip() for t in tags if t.strip()], list(evidence or []),
                            list(sources or []), list(links or []))
    authoring.check_request(proj, req)
    with transaction(store, commit=commit) as txn:  # refusals before the file is written
        added = authoring.add_atom(proj, req, strict=strict, body=body)
        txn.add(added.change)
    atom, duplicates = added.atom, added.duplicates
    committed = bool(txn.result and txn.result.commit)
    open_retriever(store, dense=False).invalidate()
    return {"id": atom.id, "project": proj.name, "path": _rel(store, atom.path),
            "committed": committed,
            "near_duplicates": [{"id": d.id, "summary": d.summary,
                                 "similarity": round(d.similarity, 3), "method": d.method}
                                for d in duplicates]}


def build_server(store: Store) -> Any:
    """The MCPServer with every cortex tool bound to `store`."""
    from mcp.server.mcpserver import MCPServer

    from cortexfs import __version__

    server = MCPServer("cortex", instructions=INSTRUCTIONS, version=__version__,
                       log_level="WARNING")
    session = f"mcp-{os.getpid()}-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"

    @server.tool()
    @_tool_errors
    def recall(
        query: Annotated[str, Field(description="What to look for: plain words or atom ids.")],
        project: Annotated[str | None, Field(
            description="Search this project only (default: every project).")] = None,
        k: Annotated[int, Field(ge=1, le=100, description="How many atoms to return.")] = 10,
        status: Annotated[str | None, Field(
            description="Only atoms of this status: active, retired, superseded, invalidated "
                        "or a status name (several: commas); 'any' searches all with no "
                        "status ranking. Default: all, retired ones ranked below.")] = None,
        kind: Annotated[str | None, Field(
            description="Only this kind: exp, k or pat (several: commas).")] = None,
        tags: Annotated[list[str] | None, Field(
            description="Only atoms with every one of these tags.")] = None,
        since: Annotated[str | None, Field(
            description="Only atoms dated on or after this date (YYYY-MM-DD) or within "
                        "this age (7d, 2w, 3m, 1y).")] = None,
    ) -> dict[str, Any]:
        """Ranked pointers to the atoms that best match the query: id, project, path,
        summary, score, the signals that matched (lexical BM25, dense vectors when
        installed, heat from reads, recency) and the snippet each was ranked by. Retired
        atoms and knowledge on retired evidence rank lower and are marked. Listing is not a
        read: open an atom with read_atom."""
        from cortexfs import recall as rc

        filters = rc.parse_filters(project, kind, status, tags, since)
        result = rc.recall(store, query, k=k, max_age=REFRESH_INTERVAL, progress=_progress,
                           filters=filters)
        out = result.to_json()
        for hit in out["hits"]:
            hit["path"] = _rel(store, hit["path"])
        return out

    @server.tool()
    @_tool_errors
    def read_atom(
        atom_id: Annotated[str, Field(description="The atom id, e.g. EXP-042, K-007, PAT-003.")],
        project: Annotated[str | None, Field(
            description="The atom's project (needed when several projects have this id).")]
            = None,
    ) -> str:
        """The full text of an atom (frontmatter and body). The read is recorded in the
        project's access log, which makes the atom hotter for recall and the brief."""
        from cortexfs.recall import read_atom as read

        return read(store, atom_id, project, session=session).text

    @server.tool(name="add_atom")
    @_tool_errors
    def add_atom_tool(
        kind: Annotated[Literal["exp", "k", "pat"], Field(
            description="exp = experiment, k = knowledge, pat = pattern.")],
        project: Annotated[str, Field(description="The project to write into.")],
        summary: Annotated[str, Field(description="One line saying what the atom says.")],
        tags: Annotated[list[str], Field(min_length=1, description="At least one tag.")],
        evidence: Annotated[list[str] | None, Field(
            description="Experiment ids it rests on (required for knowledge).")] = None,
        sources: Annotated[list[str] | None, Field(
            description="Patterns: source experiment ids (default: evidence).")] = None,
        links: Annotated[list[str] | None, Field(description="Related atom ids.")] = None,
        body: Annotated[str | None, Field(
            description="Markdown body (default: the kind's template sections).")] = None,
        strict: Annotated[bool, Field(
            description="Refuse to write when an existing atom nearly duplicates it.")] = False,
    ) -> dict[str, Any]:
        """Write a new atom with the next free id and commit it. Reports near-duplicate
        atoms already in the project (with strict, refuses to write one)."""
        return add_atom(store, kind, project, summary, tags, evidence, sources, links, body,
                        strict)

    @server.tool()
    @_tool_errors
    def validate(
        projects: Annotated[list[str] | None, Field(
            description="Projects to check (default: all).")] = None,
    ) -> dict[str, Any]:
        """Check every atom's frontmatter and the governance files: errors and warnings
        with file and line; ok is false when there is any error."""
        from cortexfs.validate import validate as run

        return run(store, store.select(projects)).to_dict()

    @server.tool()
    @_tool_errors
    def regenerate(
        projects: Annotated[list[str] | None, Field(
            description="Projects to regenerate (default: all).")] = None,
        commit: Annotated[bool, Field(description="Commit the files written.")] = True,
    ) -> dict[str, Any]:
        """Rebuild the index.md files, fold the access logs into refs / last-ref, refresh
        OVERVIEW.md, HIPPOCAMPUS.md and the CORTEX.md blocks; commit what changed."""
        from cortexfs.commit import Change, transaction
        from cortexfs.index import regenerate as regen
        from cortexfs.recall import open_retriever

        with transaction(store, commit=commit) as txn:
            result = regen(store, projects or None)
            txn.add(Change(result.written, "index: regenerate "
                           + (", ".join(result.projects) or "all projects"),
                           regenerated=set(result.projects)))
        committed = bool(txn.result and txn.result.commit)
        open_retriever(store, dense=False).invalidate()
        return {"projects": result.projects,
                "written": [_rel(store, p) for p in result.written],
                "skipped": [{"path": _rel(store, e.path), "line": e.line, "reason": e.reason}
                            for e in result.skipped],
                "committed": committed}

    @server.tool()
    @_tool_errors
    def ready(
        project: Annotated[str | None, Field(
            description="Project to check (default: the whole store).")] = None,
    ) -> dict[str, Any]:
        """The fresh-session test: ready is true when a new session could pick up the work
        from the files alone; otherwise every gap with its fix."""
        from cortexfs.ready import check

        return check(store, project).to_json()

    @server.tool()
    @_tool_errors
    def brief(
        project: Annotated[str | None, Field(
            description="Project to brief (default: the only project, else the store).")]
            = None,
        budget: Annotated[int, Field(ge=200, le=200_000, description="Most tokens.")] = 4000,
    ) -> str:
        """What a new session should start with — STATUS.md, open tasks, issues, the
        strongest knowledge and patterns, recent experiments — cut to the token budget,
        ending with a banner that lists what was cut."""
        from cortexfs.brief import build

        return build(store, project, budget).text

    return server


def serve(store: Store) -> None:
    """Run the server on stdin/stdout until the client disconnects."""
    build_server(store).run("stdio")
