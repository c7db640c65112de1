"""An atom's life: `cortex new`, `show`, `list`, `edit`, `supersede`, `invalidate`, `mv`
and `rm` (`cortex status ID STATUS` lives with `cortex status`, in cli/sync.py). Each
command calls one function of cortexfs.authoring or cortexfs.lifecycle."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cortexfs.cli import common
from cortexfs.cli.common import NoCommit, ProjectOpt

if TYPE_CHECKING:
    from cortexfs.authoring import NewAtom
    from cortexfs.lifecycle import Located, Shown
    from cortexfs.store import Project, Store

AtomId = Annotated[str, typer.Argument(
    metavar="ID", help="The atom's id (EXP-042, K-7 …; PROJECT/ID names its project too).")]
EDITOR_FALLBACK = "vi"


def _located(atom_id: str, project: str | None) -> tuple[Store, Located]:
    from cortexfs import lifecycle

    store = common.open_store()
    return store, lifecycle.locate(store, atom_id, project)


# --- new -------------------------------------------------------------------------------------

def new(
    kind: Annotated[str, typer.Argument(help="exp, k or pat.", metavar="exp|k|pat")],
    summary: Annotated[str | None, typer.Option(
        "--summary", "-s", help="One-line summary (with --edit: may be written there).")]
        = None,
    tags: Annotated[str | None, typer.Option(
        "--tags", "-t", help="Comma-separated tags (with --edit: may be written there).")]
        = None,
    project: ProjectOpt = None,
    evidence: Annotated[list[str] | None, typer.Option(
        "--evidence", "-e", help="Knowledge, patterns: the experiment ids it rests on "
        "(repeat or comma-separate).")] = None,
    sources: Annotated[list[str] | None, typer.Option(
        "--sources", help="Patterns: source experiments (default: --evidence).")] = None,
    links: Annotated[list[str] | None, typer.Option(
        "--links", "-l", help="Related atom ids.")] = None,
    executor: Annotated[str | None, typer.Option(help="Experiments: who ran it.")] = None,
    body: Annotated[str | None, typer.Option(
        "--body", "-b", metavar="TEXT|-", help="The body (markdown) instead of the template's "
        "sections; `-` reads it from stdin.")] = None,
    body_file: Annotated[Path | None, typer.Option(
        "--body-file", metavar="FILE", help="Read the body from FILE.")] = None,
    edit: Annotated[bool, typer.Option(
        "--edit", help="Write the atom in $EDITOR, starting from its template; saving it "
        "unchanged or empty writes nothing.")] = False,
    no_commit: NoCommit = False,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Refuse (exit 1) when an existing atom nearly duplicates this one.")]
        = False,
) -> None:
    """Write a new atom with the next free id, regenerate its project's index, commit, and
    print its path.

    The body is the template's sections unless --body, --body-file or --edit gives it.
    Warns when an atom of the same kind in the project nearly duplicates it (--strict
    refuses)."""
    from cortexfs import lifecycle
    from cortexfs.authoring import NewAtom, check_request, kind_named
    from cortexfs.errors import InvalidInputError

    fmt = common.output_format()
    atom_kind = kind_named(kind)
    if sum(x is not None for x in (body, body_file)) + edit > 1:
        raise InvalidInputError("give one of --body, --body-file and --edit")
    if not edit and (summary is None or tags is None):
        missing = "--summary" if summary is None else "--tags"
        raise InvalidInputError(f"missing {missing}: pass --summary \"what it says\" --tags "
                                "a,b (or --edit to write the atom in $EDITOR)")
    store = common.open_store()
    proj = lifecycle.only_project(store, project)
    req = NewAtom(atom_kind, summary or "", common.split_list([tags or ""]),
                  common.split_list(evidence), common.split_list(sources),
                  common.split_list(links), executor)
    text = _body_text(body, body_file)
    if edit:
        _new_in_editor(store, proj, req, strict, no_commit, fmt)
        return
    check_request(proj, req)  # bad input is said before git is asked anything
    _write_new(store, proj, req, strict, no_commit, fmt, body=text)


def _body_text(body: str | None, body_file: Path | None) -> str | None:
    """The body given by --body TEXT, --body - (stdin) or --body-file FILE."""
    from cortexfs.errors import InvalidInputError
    from cortexfs.frontmatter import MAX_ATOM_BYTES

    if body is None and body_file is None:
        return None
    if body is not None and body != "-":
        raw = body.encode("utf-8", "surrogatepass")
        where = "--body"
    elif body == "-":
        raw = sys.stdin.buffer.read(MAX_ATOM_BYTES + 1)
        where = "the body on stdin"
    else:
        assert body_file is not None
        where = str(body_file)
        try:
            with open(os.path.expanduser(body_file), "rb") as f:
                raw = f.read(MAX_ATOM_BYTES + 1)
        except IsADirectoryError:
            raise InvalidInputError(f"--body-file {body_file} is a folder: give a file") \
                from None
        except OSError as e:
            raise InvalidInputError(f"cannot read --body-file {body_file}: {e.strerror}") \
                from None
    if len(raw) > MAX_ATOM_BYTES:
        raise InvalidInputError(f"{where} is over the {MAX_ATOM_BYTES:,}-byte limit of an atom: "
                                "split it into several atoms")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"{where} is not UTF-8 text: convert it first") from None
    if "\0" in text:
        raise InvalidInputError(f"{where} holds a NUL character: it must be text")
    if not text.strip():
        raise InvalidInputError(f"{where} is empty: give the atom's text, or leave it out for "
                                "the template's sections")
    return text


def _write_new(store: Store, proj: Project, req: NewAtom, strict: bool, no_commit: bool,
               fmt: str, *, body: str | None = None, extra: dict[str, Any] | None = None,
               body_id: str | None = None) -> None:
    from cortexfs import lifecycle
    from cortexfs.authoring import add_atom
    from cortexfs.loader import Ahead, collector_paused

    # (every file it writes is in its Change or written by atomic_write: git status may run
    # meanwhile, see cortexfs.commit.transaction; the collector is paused: the command makes
    # nothing cyclic, and its walks of the heap took ~10 ms of `new` on 10,000 atoms)
    with collector_paused(), common.writing(store, no_commit, ask_early=True) as txn, \
            Ahead([store.project(n) for n in store.project_names() if n != proj.name]) as ahead:
        # (the other projects are walked meanwhile, on the other core: loader.Ahead)
        added = add_atom(proj, req, strict=strict, body=body, extra=extra, body_id=body_id)
        txn.add(added.change)
        txn.add(lifecycle.regenerate(store, [proj.name], txn, warn=common.warn,
                                     scans=[added.scan] if added.scan else [], ahead=ahead))
    common.nothing_left_to_write()  # (committed: ~20 ms of teardown on 10,000 atoms spared)
    common.report(txn)
    for note in added.notes:
        typer.echo(f"note: {note}", err=True)
    for dup in added.duplicates:
        common.warn(f"{dup.describe()} nearly duplicates {added.atom.id}: update that atom "
                    "instead (`cortex edit`), or pass --strict to refuse near-duplicates")
    if fmt == "json":
        common.print_json({
            "id": added.atom.id, "project": proj.name,
            "path": store.home_rel(added.atom.path),
            "committed": bool(txn.committed), "notes": added.notes,
            "near_duplicates": [{"id": d.id, "summary": d.summary,
                                 "similarity": round(d.similarity, 3)}
                                for d in added.duplicates]})
        return
    typer.echo(str(added.atom.path))


_NEW_KEYS = ("id", "date", "project", "summary", "tags", "evidence", "source-experiments",
             "links", "executor")


def _new_in_editor(store: Store, proj: Project, req: NewAtom, strict: bool, no_commit: bool,
                   fmt: str) -> None:
    """`cortex new --edit`: the rendered template in $EDITOR, then the atom it becomes."""
    from cortexfs.atoms import Atom
    from cortexfs.authoring import NewAtom, check_request, next_number, render_atom
    from cortexfs.errors import AtomParseError, CortexError, InvalidInputError
    from cortexfs.frontmatter import parse

    placeholder = req.kind.format_id(next_number(proj, req.kind))
    rendered = render_atom(proj, req, placeholder)
    draft = _draft_path(store, proj.name, f"new-{req.kind.short}")
    _write_draft(draft, rendered)
    text = _run_editor(draft)
    if not text.strip():
        draft.unlink()
        raise InvalidInputError("the file was saved empty: nothing written")
    if text == rendered:
        draft.unlink()
        raise InvalidInputError("the template was saved unchanged: nothing written")
    try:
        doc = parse(text, str(draft))
        meta = doc.meta
        for key in ("summary", "executor"):
            if meta.get(key) is not None and not isinstance(meta[key], str):
                raise InvalidInputError(f"`{key}` must be text")
        saved = Atom(draft, req.kind, meta)  # (its values as an atom's readers take them)
        if meta.get("date") is not None and saved.date is None:
            raise InvalidInputError(f"`date` {meta['date']!r} is not a date: write YYYY-MM-DD")
        written = NewAtom(req.kind, saved.summary, saved.tags, saved.evidence,
                          saved.source_experiments, saved.links, meta.get("executor") or None,
                          saved.date)
        check_request(proj, written)
        extra = {k: v for k, v in meta.items() if k not in _NEW_KEYS}
        _write_new(store, proj, written, strict, no_commit, fmt, body=doc.body, extra=extra,
                   body_id=placeholder)
    except (CortexError, AtomParseError) as e:
        raise InvalidInputError(f"{e}; nothing written, your text is kept in {draft}") \
            from None
    draft.unlink()


# --- editing ---------------------------------------------------------------------------------

def _draft_path(store: Store, project: str, name: str) -> Path:
    return store.cache_dir / "drafts" / f"{project}-{name}.md"


def _write_draft(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")


def _run_editor(path: Path) -> str:
    """Open `path` in $VISUAL / $EDITOR (vi when neither is set); its text once saved."""
    import shlex
    import subprocess

    from cortexfs.errors import InvalidInputError

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or EDITOR_FALLBACK
    try:
        argv = shlex.split(editor)
    except ValueError:
        argv = []
    if not argv:
        raise InvalidInputError(f"cannot read $EDITOR {editor!r}: set it to an editor command")
    try:
        done = subprocess.run([*argv, str(path)])
    except OSError as e:
        raise InvalidInputError(f"cannot run the editor {argv[0]!r} ({e.strerror}): set "
                                "$EDITOR to an editor on your PATH") from None
    if done.returncode != 0:
        raise InvalidInputError(f"the editor exited with status {done.returncode}: nothing "
                                f"written (the text is in {path})")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"cannot read the edited file {path}: {e}") from None


def edit(
    atom_id: AtomId,
    project: ProjectOpt = None,
    no_commit: NoCommit = False,
) -> None:
    """Edit an atom in $EDITOR, then validate and commit it.

    An edit that fails validation is refused with the error and not saved: the atom stays
    as it was, and your text is kept aside (the next `cortex edit` of the atom starts from
    it)."""
    from cortexfs import lifecycle
    from cortexfs.errors import CortexError, InvalidInputError

    fmt = common.output_format()
    store, loc = _located(atom_id, project)
    original, _ = lifecycle.read(store, loc)
    draft = _draft_path(store, loc.project.name, loc.id)
    start = original
    if draft.is_file():
        start = draft.read_text(encoding="utf-8", errors="replace")
        typer.echo(f"note: starting from your unsaved edit kept in {draft}", err=True)
    else:
        _write_draft(draft, start)
    text = _run_editor(draft)
    if text == original:
        draft.unlink()
        common.say(fmt, {"id": loc.id, "project": loc.project.name, "changed": False},
             f"no change: {loc.id} left as it was")
        return
    if not text.strip():
        draft.unlink()
        raise InvalidInputError(f"the file was saved empty: {loc.id} left as it was (`cortex "
                                "rm` removes an atom)")
    try:
        plan, txn = common.run_plan(store, lambda: lifecycle.replace(store, loc, original,
                                                                     text), no_commit)
    except CortexError as e:
        raise InvalidInputError(f"{e}; your text is kept in {draft} (`cortex edit {loc.id}` "
                                "goes on from it)") from None
    draft.unlink()
    common.finish(plan, txn, f"saved {loc.id}")


# --- reading ---------------------------------------------------------------------------------

def show(atom_id: AtomId, project: ProjectOpt = None) -> None:
    """Print an atom: its frontmatter and body, what it cites and what cites it, its reads.

    Counted as a read of the atom (a `"tool": "show"` line in the access log)."""
    from cortexfs import lifecycle

    fmt = common.output_format()
    store, loc = _located(atom_id, project)
    shown = lifecycle.show(store, loc, session=os.environ.get("CORTEX_SESSION", "cli"))
    if fmt == "json":
        common.print_json(shown.to_json())
        return
    sys.stdout.write(shown.text if shown.text.endswith("\n") else shown.text + "\n")
    typer.echo(_footer(shown))


def _footer(shown: Shown) -> str:
    loc = shown.located
    last = shown.last_read or "never"
    lines = [f"── {loc.id} · {loc.project.name} · context/{loc.rel} · refs {shown.refs} · "
             f"last read {last}"]

    def refs(title: str, items: list[Any], other: str) -> None:
        if not items:
            return
        lines.append(f"{title}:")
        for r in items:
            name = getattr(r, other)
            summary = r.summary if r.exists else "(no such atom in the project)"
            lines.append(f"  {name} ({r.relation}) {summary}".rstrip())

    refs("cites", shown.cites, "target")
    refs("cited by", shown.cited_by, "atom")
    if shown.mentioned_in:
        lines.append(f"mentioned in the body of: {', '.join(shown.mentioned_in)}")
    return "\n".join(lines)


def list_(
    project: Annotated[str | None, typer.Option(
        "--project", "-p", help="Only this project (default: every project).")] = None,
    kind: Annotated[str | None, typer.Option(
        "--kind", "-k", metavar="exp|k|pat", help="Only this kind.")] = None,
    status: Annotated[str | None, typer.Option(
        "--status", "-s", metavar="STATUS", help="Only this status, or group: active "
        "(valid, partial …), superseded (refined, stale …), invalidated.")] = None,
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", "-t", help="Only atoms with this tag (repeat or comma-separate: all of them).")]
        = None,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="DATE|AGE", help="Only atoms dated since YYYY-MM-DD, or 7d, 2w, "
        "3m, 1y ago.")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", "-n", help="At most this many atoms.")] = None,
) -> None:
    """List atoms, sorted as the indexes are (Active, Invalidated, Superseded; each by refs,
    newest, id). --format text, json, or ids (one id a line, for scripts)."""
    from cortexfs import lifecycle
    from cortexfs.atoms import parse_since
    from cortexfs.authoring import kind_named
    from cortexfs.errors import InvalidInputError

    fmt = common.output_format(ids=True)
    atom_kind = kind_named(kind) if kind is not None else None
    when = parse_since(since) if since is not None else None
    if status is not None:
        status = lifecycle.check_status_filter(status)
    if limit is not None and limit < 1:
        raise InvalidInputError(f"--limit {limit}: give at least 1")
    store = common.open_store()
    rows = lifecycle.list_atoms(store, project, atom_kind, status, common.split_list(tag), when)
    total = len(rows)
    rows = rows[:limit] if limit is not None else rows
    if fmt == "json":
        common.print_json({"atoms": [r.to_json() for r in rows], "total": total})
        return
    many = len({r.project for r in rows}) > 1
    if fmt == "ids":
        for r in rows:
            typer.echo(f"{r.project}/{r.atom.file_id}" if many else r.atom.file_id)
        return
    for r in rows:
        a = r.atom
        status_text = str(a.meta.get("status") or "active")
        date = a.date.isoformat() if a.date else "undated"
        where = f"{r.project:<14} " if many else ""
        typer.echo(f"{where}{a.file_id:<9} {date:<10} {status_text[:22]:<22} {a.refs:>4}  "
                   f"{a.summary}")
    from cortexfs.wording import plural

    shown = f" (first {len(rows)})" if len(rows) < total else ""
    typer.echo(f"{plural(total, 'atom')}{shown}", err=True)


# --- lifecycle -------------------------------------------------------------------------------

def supersede(
    old: AtomId,
    by: Annotated[str, typer.Option("--by", metavar="NEW", help="The atom that replaces it.")],
    project: ProjectOpt = None,
    no_commit: NoCommit = False,
) -> None:
    """Mark an atom superseded by a newer one (`status: superseded:NEW`, that key only)."""
    from cortexfs import lifecycle

    store, loc = _located(old, project)
    plan, txn = common.run_plan(store, lambda: lifecycle.supersede(store, loc, by), no_commit)
    common.finish(plan, txn, f"{loc.id} is superseded by {plan.result['status'].split(':')[1]}")


def invalidate(
    atom_id: AtomId,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why it is wrong, in one line.")],
    by: Annotated[str | None, typer.Option(
        "--by", metavar="ID", help="The atom that showed it (status invalidated:ID).")] = None,
    project: ProjectOpt = None,
    no_commit: NoCommit = False,
) -> None:
    """Mark an atom invalidated (a tombstone): status, invalidated-date, invalidated-reason."""
    from cortexfs import lifecycle

    store, loc = _located(atom_id, project)
    plan, txn = common.run_plan(store, lambda: lifecycle.invalidate(store, loc, reason, by),
                                no_commit)
    common.finish(plan, txn, f"{loc.id} is invalidated")


def set_status(atom_id: str, status: str | None, reason: str | None, project: str | None,
               no_commit: bool) -> None:
    """`cortex status ID [STATUS[:CAUSE]]`: print or set an atom's status."""
    from cortexfs import lifecycle
    from cortexfs.atoms import split_status

    store, loc = _located(atom_id, project)
    if status is None:
        fmt = common.output_format()
        _, doc = lifecycle.read(store, loc)
        value = str(doc.meta.get("status") or "active")
        name, cause = split_status(value)
        common.say(fmt, {"id": loc.id, "project": loc.project.name, "status": value,
                   "invalidated-date": doc.meta.get("invalidated-date"),
                   "invalidated-reason": doc.meta.get("invalidated-reason")},
             f"{loc.id}: {value}")
        return
    plan, txn = common.run_plan(
        store, lambda: lifecycle.set_status(store, loc, status, reason), no_commit)
    common.finish(plan, txn, f"{loc.id}: {plan.result['status']} (was {plan.result['was']})")


def mv(
    atom_ids: Annotated[list[str], typer.Argument(
        metavar="ID...", help="The atoms to move (of one project; PROJECT/ID names it).")],
    project: Annotated[str, typer.Option(
        "--project", "-p", help="The project to move them to.")],
    source: Annotated[str | None, typer.Option(
        "--from", metavar="PROJECT", help="The project they are in (when several have "
        "these ids).")] = None,
    no_commit: NoCommit = False,
) -> None:
    """Move atoms to another project: new ids there, every mention rewritten, their reads
    moved along. Refused while a reference would cross projects (move those together)."""
    from cortexfs import lifecycle

    store = common.open_store()
    located = [lifecycle.locate(store, i, source, besides=project) for i in atom_ids]
    plan, txn = common.run_plan(store, lambda: lifecycle.move(store, located, project),
                                no_commit)
    moved = ", ".join(f"{k} → {project}/{v}" for k, v in plan.result["moved"].items())
    common.finish(plan, txn, f"moved {moved}")


def rm(
    atom_id: AtomId,
    project: ProjectOpt = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Also when other atoms cite it: take its id out of them (and say "
        "which).")] = False,
    no_commit: NoCommit = False,
) -> None:
    """Remove an atom (git history keeps it). Refused while other atoms cite it: supersede
    or invalidate it instead, or pass --force."""
    from cortexfs import lifecycle

    store, loc = _located(atom_id, project)
    plan, txn = common.run_plan(store, lambda: lifecycle.remove(store, loc, force=force),
                                no_commit)
    common.finish(plan, txn, f"removed {loc.id} from {loc.project.name}")


COMMANDS = {"new": new, "show": show, "list": list_, "edit": edit, "supersede": supersede,
            "invalidate": invalidate, "mv": mv, "rm": rm}
