"""Writing new atoms: id allocation under a lock, rendering from templates."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortexfs import layout, templates, wall
from cortexfs.atoms import (
    ANTI_PATTERN_PREFIX,
    ANTI_PATTERN_TAG,
    EXPERIMENT,
    KIND_BY_SHORT,
    MAX_SUMMARY,
    PATTERN,
    Atom,
    Kind,
    id_number,
    kind_of_filename,
)
from cortexfs.errors import AtomParseError, InvalidInputError
from cortexfs.escape import yaml_scalar
from cortexfs.frontmatter import decode, parse, set_keys
from cortexfs.fsutil import file_lock, write_temp
from cortexfs.loader import ProjectScan, atom_paths, scan
from cortexfs.store import Project

if TYPE_CHECKING:
    from cortexfs.commit import Change
    from cortexfs.dedup import Duplicate

TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/+-]{0,63}\Z")


@dataclass
class NewAtom:
    """What `cortex new` is asked to write."""

    kind: Kind
    summary: str
    tags: list[str]
    evidence: list[str]
    sources: list[str]
    links: list[str]
    executor: str | None = None
    date: dt.date | None = None


def next_number(project: Project, kind: Kind) -> int:
    """Highest existing number of `kind` in the project + 1 (EXP-042b counts as 42)."""
    highest = 0
    for _, path in atom_paths(project, kind):
        highest = max(highest, id_number(path.stem) or 0)
    return highest + 1


def check_request(project: Project, req: NewAtom) -> None:
    """Refuse bad input for a new atom (one line saying what to pass instead)."""
    check_summary(req.summary)
    if req.executor is not None and req.kind is not EXPERIMENT:
        raise InvalidInputError(f"--executor is for experiments (who ran it), not "
                                f"{req.kind.name}: leave it out")
    if req.sources and req.kind is not PATTERN:
        raise InvalidInputError(f"--sources is for patterns (their source experiments), not "
                                f"{req.kind.name}: "
                                + ("use --evidence" if req.kind.name == "knowledge"
                                   else "use --links to relate atoms"))
    if req.evidence and req.kind is EXPERIMENT:
        raise InvalidInputError("--evidence is for knowledge and patterns (the experiments "
                                "they rest on), not experiment: use --links to relate atoms")
    if req.executor is not None and (not req.executor.isprintable() or len(req.executor) > 200):
        raise InvalidInputError("the executor must be one line of at most 200 printable "
                                "characters: the name of who or what ran the experiment")
    check_tags(req.tags)
    cited = [*req.evidence, *req.sources]
    if req.kind.name == "knowledge" and not req.evidence:
        raise InvalidInputError("knowledge needs evidence: pass --evidence EXP-NNN "
                                "(the experiments it rests on)")
    if req.kind is PATTERN and not (req.sources or req.evidence):
        raise InvalidInputError("a pattern needs its source experiments: pass "
                                "--sources EXP-NNN,EXP-MMM")
    for exp in cited:
        if kind_of_filename(f"{exp}.md") is not EXPERIMENT:
            raise InvalidInputError(f"{exp!r} is not an experiment id (EXP-NNN)")
        cited_path = project.folder(EXPERIMENT) / f"{exp}.md"
        if not cited_path.is_file() or wall.reason(project.store.context, cited_path):
            raise InvalidInputError(f"{exp} does not exist in project {project.name}: "
                                    "cite an existing experiment")
    check_links(req.links)
    check_anti_pattern(req.kind, req.summary, req.tags)


def check_summary(summary: str) -> None:
    """A summary is one line of at most MAX_SUMMARY characters, not empty."""
    text = summary.strip()
    if not text:
        raise InvalidInputError("the summary is empty: pass --summary \"what this atom says\"")
    if "\n" in text or "\r" in text:
        raise InvalidInputError("the summary must be one line: put details in the body")
    if len(text) > MAX_SUMMARY:
        raise InvalidInputError(f"the summary is {len(text)} characters: keep it under "
                                f"{MAX_SUMMARY} and put details in the body")
    if not text.isprintable():
        raise InvalidInputError("the summary holds control characters: write it as plain text")


def check_tags(tags: list[str]) -> None:
    """At least one tag, each a word of letters, digits, '-', '_', '.', '/' or '+'."""
    if not tags:
        raise InvalidInputError("no tags: pass --tags a,b (at least one)")
    for tag in tags:
        if not TAG.match(tag):
            raise InvalidInputError(f"invalid tag {tag!r}: use letters, digits, '-', '_', '.' "
                                    "or '/', without spaces")


def check_links(links: list[str]) -> None:
    """Every link is an atom id."""
    for link in links:
        if kind_of_filename(f"{link}.md") is None:
            raise InvalidInputError(f"{link!r} is not an atom id (EXP-NNN, K-NNN or PAT-NNN)")


def check_anti_pattern(kind: Kind, summary: str, tags: list[str]) -> None:
    """Refuse the tag anti-pattern on knowledge whose summary lacks the prefix (the other
    half, a prefix without the tag, `apply_conventions` completes)."""
    if kind.name == "knowledge" and _tagged_anti_pattern(tags) \
            and not _prefixed_anti_pattern(summary):
        raise InvalidInputError(f"the tag {ANTI_PATTERN_TAG} goes with a summary that starts "
                                f"{ANTI_PATTERN_PREFIX!r}: start the summary with it, or drop "
                                "the tag")


def _prefixed_anti_pattern(summary: str) -> bool:
    return summary.lstrip().upper().startswith(ANTI_PATTERN_PREFIX)


def _tagged_anti_pattern(tags: list[str]) -> bool:
    return any(t.lower() == ANTI_PATTERN_TAG for t in tags)


def apply_conventions(req: NewAtom) -> list[str]:
    """Complete `req` by the store's conventions; what was added, for the user."""
    tags, notes = conventional_tags(req.kind, req.summary, req.tags)
    req.tags = tags
    return notes


def conventional_tags(kind: Kind, summary: str, tags: list[str]) -> tuple[list[str], list[str]]:
    """`tags` completed by the conventions, and what was added: a knowledge summary starting
    `ANTI-PATTERN:` gets the tag `anti-pattern` (the other half, a tag without the prefix,
    is refused by check_anti_pattern: cortex does not reword a summary)."""
    if kind.name == "knowledge" and _prefixed_anti_pattern(summary) \
            and not _tagged_anti_pattern(tags):
        return [*tags, ANTI_PATTERN_TAG], [
            f"added the tag {ANTI_PATTERN_TAG}: a knowledge summary starting "
            f"{ANTI_PATTERN_PREFIX} carries it"]
    return tags, []


def render_atom(project: Project, req: NewAtom, atom_id: str) -> str:
    """The text of a new atom file, from the store's (or the packaged) template."""
    sources = req.sources or (req.evidence if req.kind is PATTERN else [])
    name = f"atoms/{req.kind.name}.md.j2"
    values = dict(
        id=atom_id,
        date=(req.date or dt.date.today()).isoformat(),
        project=project.name,
        summary=req.summary.strip(),
        summary_yaml=yaml_scalar(req.summary.strip()),
        tags_yaml=yaml_scalar(req.tags),
        evidence=req.evidence,
        evidence_yaml=yaml_scalar(req.evidence),
        sources=sources,
        sources_yaml=yaml_scalar(sources),
        links_yaml=yaml_scalar(req.links),
        executor=req.executor or "",
        executor_yaml=yaml_scalar(req.executor or ""),
    )
    if os.path.lexists(project.store.templates_dir / name):
        return templates.render(project.store, name, **values)
    return render_packaged(req.kind, values)


def render_packaged(kind: Kind, v: dict[str, Any]) -> str:
    """What the packaged `atoms/<kind>.md.j2` renders from the values `v`, without Jinja:
    importing Jinja and compiling a template is ~30 ms of a `cortex new` that renders
    nothing else through it (tests/test_authoring.py checks that both agree)."""
    head = (f"---\nid: {v['id']}\ndate: {v['date']}\nproject: {v['project']}\n"
            f"summary: {v['summary_yaml']}\ntags: {v['tags_yaml']}\n")
    title = f"# {v['id']}: {v['summary']}\n\n"
    if kind is EXPERIMENT:
        executor = f"executor: {v['executor_yaml']}\n" if v["executor"] else ""
        return (f"{head}status: active\n{executor}links: {v['links_yaml']}\n---\n\n{title}"
                "## Background\n\nWhy this experiment, and what question it answers.\n\n"
                "## Execution\n\nWhat was done, with commands, inputs and versions.\n\n"
                "## Results\n\nWhat was observed (numbers, files, outputs).\n\n"
                "## Conclusion\n\nWhat the results mean.\n\n"
                "## Reflection\n\n- **Goal attainment**: \n- **Unexpected findings**: \n"
                "- **Process defects**: \n- **Behavioural adjustments**: \n")
    if kind is PATTERN:
        evidence = f"evidence: {v['evidence_yaml']}\n" if v["evidence"] else ""
        rows = "".join(f"| {exp} |  |\n" for exp in v["sources"])
        return (f"{head}source-experiments: {v['sources_yaml']}\n{evidence}"
                f"links: {v['links_yaml']}\n---\n\n{title}"
                "## Observation\n\nWhat recurs across the source experiments.\n\n"
                f"## Evidence\n\n| Experiment | Finding |\n|---|---|\n{rows}\n"
                "## Pattern Statement\n\nThe invariant, in one or two sentences.\n\n"
                "## Scope & Limitations\n\nWhere it holds and where it has not been "
                "tested.\n\n## Implications\n\nWhat to do differently because of it.\n")
    items = "".join(f"- {exp}: what it showed.\n" for exp in v["evidence"])
    return (f"{head}evidence: {v['evidence_yaml']}\nlinks: {v['links_yaml']}\n---\n\n"
            f"{title}## Statement\n\nThe fact, heuristic or anti-pattern, stated so that "
            "it can be applied without reading the evidence.\n\n"
            f"## Evidence\n\n{items}")


def kind_named(short: str) -> Kind:
    """The atom kind `cortex new` and the MCP server take by name: exp, k or pat."""
    kind = KIND_BY_SHORT.get(short.strip().lower())
    if kind is None:
        raise InvalidInputError(f"unknown atom type {short!r}: use exp, k or pat")
    return kind


@dataclass
class AddedAtom:
    """What `add_atom` did: the atom, the near-duplicates it warned about, the change to
    commit (cortexfs.commit), and the project's scan with the new atom in it (what the
    gate read: a regeneration that follows need not walk the project again)."""

    atom: Atom
    duplicates: list[Duplicate]
    change: Change
    notes: list[str] = field(default_factory=list)  # what the conventions added
    scan: ProjectScan | None = None


def add_atom(project: Project, req: NewAtom, *, strict: bool = False,
             body: str | None = None, extra: dict[str, object] | None = None,
             body_id: str | None = None) -> AddedAtom:
    """`cortex new` as a library call: the duplicate gate, then the new file.

    Everything that could refuse (bad input, a strict near-duplicate) refuses before the
    file is written; the caller commits `change` (inside a cortexfs.commit.transaction,
    whose pre-flight has checked what the commit needs before this writes).
    """
    from cortexfs import dedup
    from cortexfs.commit import Change

    notes = apply_conventions(req)
    check_request(project, req)
    sc = scan(project, save=False)  # (saved by whoever takes it on, e.g. the regeneration)
    duplicates = dedup.check_new_atom(project, req.kind, req.summary, req.tags, strict=strict,
                                      scan=sc)
    atom = create_atom(project, req, body=body, extra=extra, body_id=body_id)
    sc.refresh(req.kind, atom.path.name)
    change = Change([atom.path], f"atom: add {atom.id} — {atom.summary}", created=[atom.path])
    return AddedAtom(atom, duplicates, change, notes, sc)


def id_lock(project: Project, kind: Kind) -> Path:
    """The lock under which a new id of `kind` is allocated in `project`."""
    return project.store.locks_dir / layout.ids_lock(project.name, kind.prefix)


def create_atom(project: Project, req: NewAtom, body: str | None = None,
                extra: dict[str, object] | None = None, body_id: str | None = None) -> Atom:
    """Write a new atom with the next free id; never reuses an id, even under concurrency.

    `body`, when given, replaces the template's body (written for the id `body_id`: its
    mentions become the id allocated, should another atom have taken that one meanwhile);
    `extra` sets further frontmatter keys (`status`, `priority` … that a person wrote into
    `cortex new --edit`'s file).
    """
    check_request(project, req)
    folder = project.folder(req.kind)
    wall.check(project.store.context, folder)  # never write through a linked folder
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(id_lock(project, req.kind), what=f"{req.kind.folder} ids of {project.name}"):
        atom_id = req.kind.format_id(next_number(project, req.kind))
        text = render_atom(project, req, atom_id)
        doc = parse(text, f"template atoms/{req.kind.name}.md.j2")
        path = folder / f"{atom_id}.md"
        if body is not None and body.strip():
            if body_id and body_id != atom_id:
                body = re.sub(rf"\b{re.escape(body_id)}\b", atom_id, body)
            head = "".join(text.splitlines(keepends=True)[:doc.body_line - 1])
            text = f"{head}\n{body.strip()}\n"
        if extra:
            try:
                text = set_keys(text, dict(extra), str(path))
            except AtomParseError as e:
                raise InvalidInputError(f"the new atom would not be readable: {e.reason}") \
                    from None
        try:  # what every reader would refuse (a NUL, over the size limit) is not written
            doc = parse(decode(text.encode("utf-8", "surrogatepass"), str(path)), str(path))
        except AtomParseError as e:
            raise InvalidInputError(f"the new atom would not be readable: {e.reason}") from None
        _check_written(req, doc.meta)
        write_new(path, text)
    return Atom(path, req.kind, doc.meta, doc.body)


def _check_written(req: NewAtom, meta: dict[str, object]) -> None:
    """Refuse a rendering whose frontmatter does not hold exactly the values given: a
    template (a store's override) that puts a value into the YAML unescaped could turn an
    executor such as "bob\\nstatus: invalidated" into keys of its own."""
    sources = req.sources or (req.evidence if req.kind is PATTERN else [])
    given: dict[str, object] = {"summary": req.summary.strip(), "tags": req.tags,
                                "links": req.links}
    if req.executor:
        given["executor"] = req.executor
    if req.kind is PATTERN:
        given["source-experiments"] = sources
    elif req.evidence:
        given["evidence"] = req.evidence
    for key, value in given.items():
        if key in meta and meta[key] != value:
            name = f"atoms/{req.kind.name}.md.j2"
            variable = {"source-experiments": "sources"}.get(key, key) + "_yaml"
            raise InvalidInputError(
                f"the template {name} does not write `{key}` back as given (does it put the "
                f"value into the YAML unescaped?): use {{{{ {variable} }}}} in it")


def write_new(path: Path, text: str) -> None:
    """Create `path` atomically, failing if it exists (a hard link never replaces a file)."""
    tmp = write_temp(path, text.encode("utf-8"))
    try:
        os.chmod(tmp, 0o644)
        os.link(tmp, path)
    except FileExistsError:
        raise InvalidInputError(f"{path.name} already exists: run `cortex new` again") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
