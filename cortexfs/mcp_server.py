"""`cortex mcp`: the store as a stdio MCP server (the official `mcp` SDK, MCPServer API).

Tools: recall, read_atom (counted as an access), show_atom, list_atoms, add_atom (with the
duplicate gate), update_atom, set_status, supersede, invalidate, move_atoms, remove_atom,
list_projects, list_tasks, add_task, complete_task, commit, validate, regenerate, ready,
brief — each a thin translation of what the CLI does (cortexfs.lifecycle, authoring,
tasks …), each description saying when an agent should use it.

Errors reach the agent in one line that speaks the tool's own arguments: a CortexError's
message has its CLI vocabulary (`--project`, `cortex list`) translated (`for_agent`), and
arguments the schema refuses get one line naming the argument (`_ArgumentErrors`) instead
of pydantic's dump with a URL. Anything else is a bug, which the SDK reports as a failed
tool call and logs (with its traceback) on stderr; otherwise the server is quiet there
(WARNING and up). stdout is the protocol channel: nothing else may write to it.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
import sys
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError

from cortexfs import authoring, lifecycle, tasks  # (+30 ms at the server's start, once)
from cortexfs.atoms import parse_since
from cortexfs.brief import MIN_BUDGET, build  # (MIN_BUDGET: the SDK evaluates annotations)
from cortexfs.commit import Change, transaction
from cortexfs.errors import CortexError, InvalidInputError, from_os_error
from cortexfs.store import Store

REFRESH_INTERVAL = 1.0  # seconds during which recall trusts its last look at the files
INSTRUCTIONS = """\
cortex is this user's long-term memory: markdown atoms (experiments EXP-NNN, knowledge K-NNN,
patterns PAT-NNN) in a git repository. Use `recall` to find atoms relevant to the task
(pointers with summaries), then `read_atom` to read the ones you need in full — reads are
counted, which keeps useful atoms hot. Record new findings with `add_atom`; it warns when an
atom with the same content already exists: change that one with `update_atom` instead. When
a finding replaces an older one, `supersede` the old atom; when it proves one wrong,
`invalidate` it. Keep the project's task queue with `list_tasks`, `add_task` and
`complete_task`. Every change is committed when the tool returns. `brief` gives a new
session its starting context; `ready` says whether the files alone are enough to pick up
the work.
"""

F = TypeVar("F", bound=Callable[..., Any])


def _tool_errors(fn: F) -> F:
    """Turn a CortexError into the SDK's ToolError: the agent sees the one-line message,
    in the tool's own words (`for_agent`)."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CortexError as e:
            raise ToolError(for_agent(str(e))) from None
        except OSError as e:  # a read-only or full disk, no permission: say what to fix
            problem = from_os_error(e)
            if problem is None:
                raise
            raise ToolError(for_agent(str(problem))) from None

    return wrapper  # type: ignore[return-value]


def _tool_of(server: Any) -> Callable[[F], F]:
    """A decorator that makes a function one of `server`'s tools (named after it, less a
    `_tool` suffix), its errors turned into one line (`_tool_errors`)."""
    def tool(fn: F) -> F:
        server.tool(name=fn.__name__.removesuffix("_tool"))(_tool_errors(fn))
        return fn

    return tool


# What the CLI's messages name, in the words of this server's tools. A message keeps saying
# what to do; a command that has no tool becomes something to ask the user for.
_COMMANDS: list[tuple[str, str]] = [
    (r"cortex list\b[^`]*", "list_atoms"),
    (r"cortex show\b[^`]*", "show_atom"),
    (r"cortex edit\b[^`]*", "update_atom"),
    (r"cortex invalidate\b[^`]*", "invalidate"),
    (r"cortex status \S+ (\S+)", r"set_status with status \1"),
    (r"cortex status\b[^`]*", "set_status"),
    (r"cortex supersede\b[^`]*", "supersede"),
    (r"cortex mv\b[^`]*", "move_atoms"),
    (r"cortex rm\b[^`]*", "remove_atom"),
    (r"cortex new\b[^`]*", "add_atom"),
    (r"cortex validate\b[^`]*", "validate"),
    (r"cortex index regen\b[^`]*", "regenerate"),
    (r"cortex commit\b[^`]*", "commit"),
    (r"cortex recall\b[^`]*", "recall"),
    (r"cortex ready\b[^`]*", "ready"),
    (r"cortex brief\b[^`]*", "brief"),
    (r"cortex tasks list\b[^`]*", "list_tasks"),
    (r"cortex tasks add\b[^`]*", "add_task"),
    (r"cortex tasks done\b[^`]*", "complete_task"),
    (r"cortex project (?:list)\b[^`]*", "list_projects"),
]
_NO_TOOL = [  # (what, instead): commands no tool does
    (re.compile(r"; create it with `cortex project new [^`]*`"), ""),
    (re.compile(r"create (?:it|one) with `cortex project new [^`]*`"),
     "ask the user to create one"),
    (re.compile(r"(?:run |with |or )?`cortex [^`]*`"), "(ask the user)"),
]
_FLAG = re.compile(r"--([a-z][a-z-]*)(?: (?:NAME|ID|TEXT|EXP-NNN(?:,EXP-MMM)?|a,b))?")


def for_agent(message: str) -> str:
    """A CLI message in the MCP tools' words: `cortex list` → `list_atoms`, `--project
    NAME` → `project`; a command no tool does becomes something to ask the user."""
    text = message
    for pattern, tool in _COMMANDS:
        text = re.sub(rf"`{pattern}`", f"`{tool}`", text)
    for regex, instead in _NO_TOOL:
        text = regex.sub(instead, text)
    text = _FLAG.sub(lambda m: f"`{m.group(1).replace('-', '_')}`", text)
    return " ".join(text.split())


def _argument_error(tool: str, error: Any) -> str:
    """One line for the arguments a tool's schema refused: which, and why."""
    problems = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item.get("loc", ())) or "arguments"
        if item.get("type") == "missing":
            problems.append(f"`{where}` is missing")
            continue
        got = repr(item.get("input"))
        got = got if len(got) <= 40 else got[:37] + "..."
        problems.append(f"`{where}`: {item.get('msg', 'invalid')} (got {got})")
    more = len(error.errors()) - len(problems)
    return (f"invalid arguments for {tool}: {'; '.join(problems)}"
            + (f"; and {more} more" if more > 0 else ""))


def _progress(what: str, done: int, total: int) -> None:
    """A first recall indexes (and, with the embed extra, embeds) every atom: say so on
    stderr (the client's server log), never stdout (the protocol)."""
    print(f"cortex: {what}: {done}/{total}", file=sys.stderr, flush=True)


def add_atom(store: Store, kind: str, project: str | None, summary: str, tags: list[str],
             evidence: list[str] | None = None, sources: list[str] | None = None,
             links: list[str] | None = None, body: str | None = None, strict: bool = False,
             commit: bool = True, executor: str | None = None) -> dict[str, Any]:
    """Write a new atom as `cortex new` does (gate included, its project regenerated);
    `body`, when given, replaces the template's body."""
    proj = lifecycle.only_project(store, project)
    req = authoring.NewAtom(authoring.kind_named(kind), summary,
                            [t.strip() for t in tags if t.strip()], list(evidence or []),
                            list(sources or []), list(links or []), executor)
    authoring.check_request(proj, req)
    if body is not None and not body.strip():
        raise InvalidInputError("the body is empty: give the atom's text, or leave it out for "
                                "the template's sections")
    warnings: list[str] = []
    with transaction(store, commit=commit) as txn:  # refusals before the file is written
        added = authoring.add_atom(proj, req, strict=strict, body=body)
        txn.add(added.change)
        # (the project's scan that the duplicate gate took, with the new atom in it)
        txn.add(lifecycle.regenerate(store, [proj.name], txn, warn=warnings.append,
                                     scans=[added.scan] if added.scan else []))
    if txn.result and txn.result.warning:
        warnings.append(txn.result.warning)
    atom, duplicates = added.atom, added.duplicates
    _recall_changed(store)
    return {"id": atom.id, "project": proj.name, "path": store.home_rel(atom.path),
            "committed": bool(txn.committed),
            "notes": [*added.notes, *(f"warning: {for_agent(w)}" for w in warnings)],
            "near_duplicates": [{"id": d.id, "summary": d.summary,
                                 "similarity": round(d.similarity, 3), "method": d.method}
                                for d in duplicates]}


def _recall_changed(store: Store) -> None:
    """The atoms changed: the server's warm recall index must look at the files again."""
    from cortexfs.recall import open_retriever

    open_retriever(store, dense=False).invalidate()


def run_plan(store: Store, make: Callable[[], Any]) -> dict[str, Any]:
    """A lifecycle operation as a tool does it: planned under the store's lock, applied and
    committed in one transaction; its report."""
    with transaction(store) as txn:
        plan = make()
        if not plan.empty:
            txn.add(lifecycle.apply(store, plan, txn))
    if not plan.empty:
        _recall_changed(store)
    warning = [f"warning: {txn.result.warning}"] if txn.result and txn.result.warning else []
    return {**plan.result, "changed": not plan.empty,
            "commit": txn.committed,
            "notes": [for_agent(n) for n in [*plan.notes, *warning]]}


def build_server(store: Store) -> Any:
    """The MCPServer with every cortex tool bound to `store`."""
    from cortexfs import __version__

    server = _server_class()("cortex", instructions=INSTRUCTIONS, version=__version__,
                             log_level="WARNING")
    session = f"mcp-{os.getpid()}-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
    tool = _tool_of(server)

    @tool
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
            hit["path"] = store.home_rel(hit["path"])
        return out

    @tool
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

    @tool
    def add_atom_tool(
        kind: Annotated[Literal["exp", "k", "pat"], Field(
            description="exp = experiment, k = knowledge, pat = pattern.")],
        summary: Annotated[str, Field(description="One line saying what the atom says.")],
        tags: Annotated[list[str], Field(min_length=1, description="At least one tag.")],
        project: Annotated[str | None, Field(
            description="The project to write into (may be left out when the store has "
            "only one).")] = None,
        evidence: Annotated[list[str] | None, Field(
            description="Experiment ids it rests on (required for knowledge).")] = None,
        sources: Annotated[list[str] | None, Field(
            description="Patterns: source experiment ids (default: evidence).")] = None,
        links: Annotated[list[str] | None, Field(description="Related atom ids.")] = None,
        body: Annotated[str | None, Field(
            description="Markdown body (default: the kind's template sections).")] = None,
        strict: Annotated[bool, Field(
            description="Refuse to write when an existing atom nearly duplicates it.")] = False,
        executor: Annotated[str | None, Field(
            description="Experiments: who or what ran it.")] = None,
    ) -> dict[str, Any]:
        """Record a new finding as an atom with the next free id, regenerate the index and
        commit. Use it for what is not in memory yet (recall first): it reports
        near-duplicate atoms already in the project (with strict, refuses to write one) —
        change an existing atom with update_atom instead."""
        return add_atom(store, kind, project, summary, tags, evidence, sources, links, body,
                        strict, executor=executor)

    @tool
    def validate(
        projects: Annotated[list[str] | None, Field(
            description="Projects to check (default: all).")] = None,
    ) -> dict[str, Any]:
        """Check every atom's frontmatter and the governance files: errors and warnings
        with file and line; ok is false when there is any error. Use it after editing
        files by hand."""
        from cortexfs.validate import validate as run

        return run(store, store.select(projects) if projects else None).to_dict()

    @tool
    def regenerate(
        projects: Annotated[list[str] | None, Field(
            description="Projects to regenerate (default: all).")] = None,
        commit: Annotated[bool, Field(description="Commit the files written.")] = True,
    ) -> dict[str, Any]:
        """Rebuild the index.md files, fold the access logs into refs / last-ref, refresh
        OVERVIEW.md, HIPPOCAMPUS.md and the CORTEX.md blocks; commit what changed."""
        from cortexfs.regen import regenerate as regen

        with transaction(store, commit=commit) as txn:
            result = regen(store, projects or None)
            txn.add(Change(result.written, "index: regenerate "
                           + (", ".join(result.projects) or "all projects"),
                           regenerated=set(result.projects)))
        _recall_changed(store)
        return {"projects": result.projects,
                "written": [store.home_rel(p) for p in result.written],
                "skipped": [{"path": store.home_rel(e.path), "line": e.line,
                             "reason": e.reason} for e in result.skipped],
                "committed": bool(txn.committed)}

    @tool
    def ready(
        project: Annotated[str | None, Field(
            description="Project to check (default: the whole store).")] = None,
    ) -> dict[str, Any]:
        """The fresh-session test: ready is true when a new session could pick up the work
        from the files alone; otherwise every gap with its fix."""
        from cortexfs.ready import check

        return check(store, project).to_json()

    @tool
    def brief(
        project: Annotated[str | None, Field(
            description="Project to brief (default: the only project, else the store).")]
            = None,
        budget: Annotated[int, Field(ge=MIN_BUDGET, le=200_000,
                                     description="Most tokens (characters / 4).")] = 4000,
    ) -> str:
        """What a new session should start with — STATUS.md, open tasks, issues, the
        strongest knowledge and patterns, recent experiments — cut to the token budget,
        ending with a banner that lists what was cut."""
        return build(store, project, budget).text

    _lifecycle_tools(server, store, session)
    _task_tools(server, store)
    return server


OnlyProject = Annotated[str | None, Field(
    description="The project (may be left out when the store has only one).")]
AnyProject = Annotated[str | None, Field(
    description="Only this project (default: every project).")]
AtomId = Annotated[str, Field(description="The atom id, e.g. EXP-042, K-007, PAT-003.")]
ProjectArg = Annotated[str | None, Field(
    description="The atom's project (needed only when several projects have this id).")]


def _lifecycle_tools(server: Any, store: Store, session: str) -> None:
    """show, list, update, status, supersede, invalidate, move, remove, projects, commit."""
    tool = _tool_of(server)

    @tool
    def show_atom(atom_id: AtomId, project: ProjectArg = None) -> dict[str, Any]:
        """An atom as data: frontmatter, body, the atoms it cites and that cite it (by
        evidence, source-experiments, links, status), the atoms whose body mentions it, its
        reads. Use it before changing, superseding or removing an atom; counted as a read."""
        loc = lifecycle.locate(store, atom_id, project)
        return lifecycle.show(store, loc, session=session, tool="mcp").to_json()

    @tool
    def list_atoms(
        project: AnyProject = None,
        kind: Annotated[Literal["exp", "k", "pat"] | None, Field(
            description="Only this kind: exp, k or pat.")] = None,
        status: Annotated[str | None, Field(
            description="Only this status, or group: active (valid, partial …), superseded "
            "(refined, stale …), invalidated.")] = None,
        tags: Annotated[list[str] | None, Field(
            description="Only atoms carrying every one of these tags.")] = None,
        since: Annotated[str | None, Field(
            description="Only atoms dated since YYYY-MM-DD, or an age: 7d, 2w, 3m, 1y.")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many.")] = 50,
    ) -> dict[str, Any]:
        """Atoms by their frontmatter, sorted as the index files are (active first, then
        invalidated, superseded; each by reads, newest, id): id, summary, status, tags,
        refs. Use it to browse or audit a project; to find atoms about a topic use recall.
        Listing is not a read."""
        rows = lifecycle.list_atoms(
            store, project, authoring.kind_named(kind) if kind else None, status, tags,
            parse_since(since) if since else None)
        return {"atoms": [r.to_json() for r in rows[:limit]], "total": len(rows)}

    @tool
    def update_atom(
        atom_id: AtomId,
        project: ProjectArg = None,
        body: Annotated[str | None, Field(
            description="The new body (markdown), replacing the old one whole.")] = None,
        summary: Annotated[str | None, Field(description="The new one-line summary.")] = None,
        tags: Annotated[list[str] | None, Field(
            description="The new tags (replacing the old ones).")] = None,
        links: Annotated[list[str] | None, Field(
            description="The new related atom ids (replacing the old ones).")] = None,
    ) -> dict[str, Any]:
        """Change an existing atom — its body, summary, tags or links (only what is given;
        other keys stay byte for byte) — validate, regenerate and commit. Use it to correct
        or complete an atom, e.g. the near-duplicate add_atom pointed at; to retire an
        atom use supersede or invalidate."""
        loc = lifecycle.locate(store, atom_id, project)
        return run_plan(store, lambda: lifecycle.update(store, loc, body=body,
                                                        summary=summary, tags=tags,
                                                        links=links))

    @tool
    def set_status(
        atom_id: AtomId,
        status: Annotated[str, Field(
            description="active, valid, partial, challenged, corrected, superseded, refined, "
            "invalidated, stale or deprecated; optionally :ID of the atom that caused it, "
            "e.g. challenged:EXP-051.")],
        reason: Annotated[str | None, Field(
            description="With invalidated: why, in one line.")] = None,
        project: ProjectArg = None,
    ) -> dict[str, Any]:
        """Set an atom's status (that key only; invalidated also writes invalidated-date
        and -reason, leaving it removes them), regenerate and commit. Use it when new
        evidence challenges, corrects or partly confirms an atom."""
        loc = lifecycle.locate(store, atom_id, project)
        return run_plan(store, lambda: lifecycle.set_status(store, loc, status, reason))

    @tool
    def supersede(
        atom_id: AtomId,
        by: Annotated[str, Field(description="The active atom that replaces it.")],
        project: ProjectArg = None,
    ) -> dict[str, Any]:
        """Mark an atom superseded by a newer one (status superseded:BY), regenerate and
        commit. Use it when a newer atom replaces an older one that was right in its time."""
        loc = lifecycle.locate(store, atom_id, project)
        return run_plan(store, lambda: lifecycle.supersede(store, loc, by))

    @tool
    def invalidate(
        atom_id: AtomId,
        reason: Annotated[str, Field(description="Why it is wrong, in one line.")],
        by: Annotated[str | None, Field(
            description="The atom that showed it (status invalidated:BY).")] = None,
        project: ProjectArg = None,
    ) -> dict[str, Any]:
        """Mark an atom invalidated — a tombstone that stays so nobody relies on it again —
        with the date and reason, regenerate and commit. Use it when an atom turns out
        wrong (not merely outdated: that is supersede)."""
        loc = lifecycle.locate(store, atom_id, project)
        return run_plan(store, lambda: lifecycle.invalidate(store, loc, reason, by))

    @tool
    def move_atoms(
        atom_ids: Annotated[list[str], Field(
            min_length=1, description="The atoms to move, all from one project.")],
        to_project: Annotated[str, Field(description="The project to move them to.")],
        from_project: Annotated[str | None, Field(
            description="Their project (needed only when several have these ids).")] = None,
    ) -> dict[str, Any]:
        """Move atoms to another project: new ids there, every mention rewritten, their
        reads moved along; one commit. Use it when atoms were filed in the wrong project.
        Refused while a reference would cross projects: move those atoms together."""
        located = [lifecycle.locate(store, i, from_project, besides=to_project)
                   for i in atom_ids]
        return run_plan(store, lambda: lifecycle.move(store, located, to_project))

    @tool
    def remove_atom(
        atom_id: AtomId,
        project: ProjectArg = None,
        force: Annotated[bool, Field(
            description="Also when other atoms cite it: take its id out of them.")] = False,
    ) -> dict[str, Any]:
        """Delete an atom (git history keeps it). Use it only for an atom that should never
        have been written (a mistake, a duplicate); to retire knowledge use supersede or
        invalidate, which keep it visible. Refused while other atoms cite it (force rewrites
        them and says which)."""
        loc = lifecycle.locate(store, atom_id, project)
        return run_plan(store, lambda: lifecycle.remove(store, loc, force=force))

    @tool
    def list_projects(
        archived: Annotated[bool, Field(description="Also the archived projects.")] = False,
    ) -> list[dict[str, Any]]:
        """The store's projects with their atom counts, phase (from STATUS.md) and open
        tasks. Use it to learn which project names the other tools take."""
        return [p for p in lifecycle.projects(store) if archived or not p["archived"]]

    @tool
    def commit(
        message: Annotated[str | None, Field(
            description="The commit message (default: one naming what changed).")] = None,
    ) -> dict[str, Any]:
        """Commit everything pending in the store (files edited by hand, e.g. STATUS.md or
        an atom written with a file tool), with the indexes regenerated where atoms
        changed. Every other tool commits its own change: use this one after editing files
        directly."""
        from cortexfs.git import remove_stale_temporaries

        if message is not None and not message.strip():
            raise InvalidInputError("the message is empty: give one, or leave it out for a "
                                    "generated one")
        with transaction(store) as txn:
            remove_stale_temporaries(store)
            txn.add(Change(message=message))
        done = txn.result
        _recall_changed(store)
        return {"commit": txn.committed,
                "message": done.message if done else "",
                "paths": done.paths if done else [],
                "warning": for_agent(done.warning) if done and done.warning else None}


def _task_tools(server: Any, store: Store) -> None:
    """list_tasks, add_task, complete_task (TASKS.yaml)."""
    tool = _tool_of(server)

    @tool
    def list_tasks(
        project: AnyProject = None,
        status: Annotated[Literal["todo", "doing", "done", "blocked"] | None, Field(
            description="Only tasks with this status.")] = None,
        include_done: Annotated[bool, Field(description="Also done tasks.")] = False,
    ) -> dict[str, Any]:
        """The task queue (TASKS.yaml): doing first, then todo, blocked, by priority, with
        what each waits for. Use it to pick the next thing to work on."""
        projects = [store.project(project)] if project else store.projects()
        return tasks.listing(projects, status, include_done,
                             strict=project is not None).to_json()

    @tool
    def add_task(
        text: Annotated[str, Field(description="What to do, in one line.")],
        project: OnlyProject = None,
        priority: Annotated[str | None, Field(description="P0 (highest) … P3.")] = None,
        why: Annotated[str | None, Field(description="Why it matters.")] = None,
        done_when: Annotated[str | None, Field(
            description="The condition that makes it done.")] = None,
        depends_on: Annotated[list[str] | None, Field(
            description="Ids of the tasks it waits for.")] = None,
    ) -> dict[str, Any]:
        """Add a task to the project's queue with the next id (T-N) and commit. Use it for
        work that a later session should pick up."""
        return _task_change(store, project, "add", lambda proj: tasks.add_task(
            proj, text, priority=priority, why=why, done_when=done_when,
            depends_on=list(depends_on or [])))

    @tool
    def complete_task(
        task_id: Annotated[str, Field(description="The task's id, e.g. T-3.")],
        project: OnlyProject = None,
    ) -> dict[str, Any]:
        """Mark a task done (completed-at today) and commit. Use it when the task's
        done-when condition holds."""
        return _task_change(store, project, "done",
                            lambda proj: tasks.set_status(proj, task_id, "done"))


def _task_change(store: Store, project: str | None, verb: str,
                 change: Callable[[Any], Any]) -> dict[str, Any]:
    """A task edit as a tool does it (`tasks.change_one`, committed): its report."""
    proj = lifecycle.only_project(store, project)
    with transaction(store) as txn:
        task = tasks.change_one(txn, proj, verb, change).tasks[0]
    return {"project": proj.name, **task.to_json(),
            "commit": txn.committed}


def _server_class() -> Any:
    """MCPServer, with arguments its schema refuses reported in one line (`_argument_error`)
    rather than pydantic's multi-line text with a documentation URL."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

    class Server(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any],
                            context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as e:
                cause = e.__cause__
                if isinstance(e, UnexpectedToolError) or not isinstance(cause, ValidationError):
                    raise
                raise ToolError(_argument_error(name, cause)) from cause

    return Server


def serve(store: Store) -> None:
    """Run the server on stdin/stdout until the client disconnects."""
    build_server(store).run("stdio")
