"""`cortex ready`: the seed's Fresh Session Test as a command (SPEC §7).

Could a new session, with read access to the repository only, learn everything the last
one knew? Ready when none of these gaps exists; each gap comes with its fix:

- validation errors (atoms and the governance checks: STATUS.md over its limit or missing a
  section, ISSUES.md too long, TASKS.yaml broken, incomplete decision records, …);
- generated files out of date: `cortex index regen` would change a byte (index.md files,
  OVERVIEW.md, HIPPOCAMPUS.md, CORTEX.md blocks);
- uncommitted changes, commits not pushed to the configured remote, a merge or rebase in
  progress, no git repository;
- STATUS.md missing, or older than the newest atom: its date is the day of its last commit,
  or its modification time while it has uncommitted changes (a fresh clone gives every file
  a new mtime, so the commit date is the one that means "last written"); it is stale when
  that day is before the `date` of the project's newest atom;
- mission.md / roadmap.md missing, or still the unfilled template;
- knowledge without evidence (none listed, or none of the cited experiments exists);
- broken links: atom `links` to missing atoms, relative markdown links and atom ids in the
  governance files (STATUS, mission, roadmap, ISSUES, hand-written CORTEX.md text) that lead
  nowhere;
- dangling pointers in HIPPOCAMPUS.md (looked for only when regeneration would change it:
  a current index points at existing atoms only).

Cost: each project's atoms are loaded once (from the loader's cache) and shared by every
check, git is asked for status once and for history once (`git log` over the STATUS.md
files, read only until each project's latest commit is seen), and regeneration runs dry.
"""

from __future__ import annotations

import datetime as dt
import marshal
import os
import re
import shlex
import stat
import threading
import time
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from cortexfs import cache, layout, templates, validate, wall
from cortexfs.atoms import ATOM_ID, KINDS, KNOWLEDGE
from cortexfs.errors import CortexError
from cortexfs.layout import GENERATED_END, GENERATED_START
from cortexfs.loader import (
    RACY,
    LoadedProject,
    ProjectScan,
    atom_paths,
    collector_paused,
    scan_many,
)
from cortexfs.store import Project, Store
from cortexfs.wording import plural, some

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

MAX_LISTED_PATHS = 10
_MD_LINK = re.compile(r"\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^\"']*[\"'])?\s*\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_LINKED_FILES = (layout.STATUS_MD, layout.MISSION_MD, layout.ROADMAP_MD, layout.ISSUES_MD,
                 layout.CORTEX_MD)


@dataclass
class Gap:
    """One reason a fresh session could not pick up the work, and how to close it."""

    check: str
    message: str
    fix: str
    project: str | None = None
    path: str | None = None  # relative to CORTEX_HOME, posix

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "project": self.project, "path": self.path,
                "message": self.message, "fix": self.fix}


@dataclass
class ReadyReport:
    """Every gap found; ready when there is none."""

    gaps: list[Gap] = field(default_factory=list)
    projects: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return not self.gaps

    def to_json(self) -> dict[str, Any]:
        return {"ready": self.ready, "projects": self.projects,
                "gaps": [g.to_json() for g in self.gaps]}


def check(store: Store, project: str | None = None, *, use_cache: bool = True) -> ReadyReport:
    """Run every readiness check over `project` (default: the whole store).

    Git is asked afresh every time (in a thread, while the atoms are scanned). The other
    checks depend only on files, so their gaps are cached (`.cache/ready.bin`) under a key
    made of every file's stat data (mtime, ctime, size, inode) in context/ and the templates
    — the atom files as the loader's scan has them (stamp and CRC) —, the commit HEAD
    points at, which STATUS.md files are uncommitted, today's date and cortex's own code:
    when nothing changed, they are not re-run.
    """
    store.require()
    projects = [store.project(project)] if project else store.projects()
    report = ReadyReport(projects=[p.name for p in projects])
    git_gaps: list[Gap] = []
    # git works in its own process while this one walks the atoms
    asked: list[Any] = []

    def ask_git() -> None:
        try:
            asked.append(_git(store, project, git_gaps))
        except BaseException as e:  # raised again below, in this thread
            asked.append(e)

    git = threading.Thread(target=ask_git)
    try:  # (started once the scan has forked: no thread may run at a fork)
        scans = scan_many(projects, meanwhile=git.start)  # the key's and the checks' input
    finally:
        if git.ident is not None:
            git.join()
    state = asked[0]
    if isinstance(state, BaseException):
        raise state
    key = _inputs_key(store, project, state, scans) if use_cache else None
    cached = _cached(store, key[0]) if key else None
    if cached is not None:
        before, after = cached
    else:
        with collector_paused():  # every atom loaded and checked: no cycles among them
            before, after = _file_checks(store, project, projects, state, scans)
        if key is not None and not key[1]:
            _save(store, key[0], before, after)
    report.gaps = [*before, *git_gaps, *after]
    return report


def _file_checks(store: Store, project: str | None, projects: list[Project],
                 state: Any, scans: Sequence[ProjectScan]) -> tuple[list[Gap], list[Gap]]:
    """The checks that read files: (gaps listed before the git ones, gaps listed after)."""
    loaded = {sc.project.name: sc.loaded() for sc in scans}
    # the atoms' checks start (on both cores when there are many) while the rest is done
    # (forked before loading instead, the child loads its projects' infos again: 0.3 s more
    # CPU at 100k, and no faster, measured at load 1.3-1.8)
    findings = validate.many_findings(scans)
    ids = _all_ids(store, loaded)
    everywhere = set().union(*ids.values())
    before: list[Gap] = []
    after: list[Gap] = []
    evidence_paths = _knowledge_evidence(store, loaded, before)
    validation = _validation(store, findings, scans, loaded, evidence_paths,
                             whole=project is None)
    derived: list[Gap] = []
    stale = _derived(store, project, derived, scans)
    _status_freshness(store, projects, loaded, state, after)
    for p in projects:
        _charter(store, p, after)
        _links(store, p, ids, everywhere, after)
    if project is None:
        _links_store(store, everywhere, after)
    if any(p.name == layout.HIPPOCAMPUS_MD or layout.HIPPOCAMPUS_DIR in p.parts for p in stale):
        # an up-to-date index points only at atoms that exist: its pointers can dangle only
        # when regeneration would change it
        _hippocampus(store, after)
    return [*before, *validation(), *derived], after


# --- the cache of file-derived gaps ------------------------------------------------------------

CACHE_KIND = "ready"
CACHE_SCOPES = 8  # results kept: the whole store and a few single projects


def _inputs_key(store: Store, project: str | None, state: Any,
                scans: Sequence[ProjectScan]) -> tuple[str, bool]:
    """(digest of everything the file checks read, whether a file changed too recently for
    its stat data to be trusted). The atom files of `scans` are in it as the scan's
    inputs_digest (name, mtime, size, CRC): not stat-ed a second time; the commit HEAD points
    at as git status said."""
    head = (state.head or "no commit") if state.is_repo else "no repo"
    started = time.time_ns()
    stamps: list[Any] = []
    newest = 0
    scanned: dict[str, tuple[bytes, list[str]]] = {}
    for sc in scans:
        for kind in KINDS:
            if kind.folder in sc.others:  # walked (a linked folder is not)
                scanned[str(sc.project.folder(kind))] = (sc.inputs_digest(kind),
                                                         sc.others[kind.folder])
                if any(r[RACY] for _, r in sc.folders[kind.folder]):
                    newest = started
    for root in (store.context, store.templates_dir, templates.package_dir("templates")):
        newest = max(newest, _stamp_tree(root, stamps, scanned))
    # whether a STATUS.md is committed decides which date it has (see _status_freshness)
    dirty_status = [d for d in state.dirty if d.endswith("/STATUS.md")]
    parts = (project, dt.date.today().isoformat(), head, dirty_status, stamps)
    return cache.digest(marshal.dumps(parts, 2)).hex(), cache.racy(newest, started)


def _stamp_tree(root: Path, out: list[Any], scanned: dict[str, tuple[bytes, list[str]]]) -> int:
    """Append (path, mtime, ctime, size, inode) of every file under `root`; newest time.
    A folder of `scanned` (folder → the scan's inputs_digest of its atom files and the names
    of its other entries) is not listed again: the digest is appended, and only its other
    entries are stat-ed."""
    newest = 0
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        if folder in scanned:
            digest, names = scanned[folder]
            out.append((folder, digest))
        else:
            try:
                names = sorted(os.listdir(folder))
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue
        for name in names:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(path)
                continue
            out.append((path, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    return newest


def _cache_path(store: Store) -> Path:
    return store.cache_dir / "ready.bin"


def _cached(store: Store, key: str) -> tuple[list[Gap], list[Gap]] | None:
    data = cache.load(_cache_path(store), CACHE_KIND)
    if not isinstance(data, dict) or key not in data:
        return None
    try:
        before, after = data[key]
        return [Gap(*g) for g in before], [Gap(*g) for g in after]
    except (TypeError, ValueError):
        return None


def _save(store: Store, key: str, before: list[Gap], after: list[Gap]) -> None:
    data = cache.load(_cache_path(store), CACHE_KIND)
    entries: dict[str, Any] = data if isinstance(data, dict) else {}
    entries.pop(key, None)
    entries[key] = ([astuple(g) for g in before], [astuple(g) for g in after])
    while len(entries) > CACHE_SCOPES:
        entries.pop(next(iter(entries)))
    cache.save(_cache_path(store), CACHE_KIND, entries)


def _project_of(path: str) -> str | None:
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == layout.CONTEXT and parts[1] == layout.PROJECTS:
        return parts[2]
    return None


def _all_ids(store: Store, loaded: dict[str, LoadedProject]) -> dict[str, set[str]]:
    """Project → its atom ids (files whose frontmatter does not parse included)."""
    out: dict[str, set[str]] = {}
    for name in store.project_names():
        if name in loaded:
            lp = loaded[name]
            found = {a.path.stem for a in lp.atoms} | {a.id for a in lp.atoms}
            found |= {Path(e.path).stem for e in lp.errors}
        else:
            found = {path.stem for _, path in atom_paths(store.project(name))}
        out[name] = found
    return out


# --- the checks --------------------------------------------------------------------------------


def _knowledge_evidence(store: Store, loaded: dict[str, LoadedProject],
                        gaps: list[Gap]) -> set[str]:
    """Knowledge that cites no experiment that exists; returns the paths it flagged."""
    flagged: set[str] = set()
    for name, lp in loaded.items():
        experiments = {a.id for a in lp.atoms if a.kind.prefix == "EXP"}
        for atom in lp.atoms:
            if atom.kind is not KNOWLEDGE or atom.group == "invalidated":
                continue
            cited = atom.evidence
            if any(e in experiments for e in cited):
                continue
            rel = store.home_rel(atom.path)
            flagged.add(rel)
            what = ("lists no evidence" if not cited else
                    f"cites only experiments that do not exist ({', '.join(cited)})")
            gaps.append(Gap("knowledge-evidence", f"{atom.id} {what}",
                            f"add `evidence: [EXP-NNN]` naming the experiments {atom.id} rests "
                            "on (or mark it invalidated)", name, rel))
    return flagged


def _validation(store: Store, started: Callable[[dict[str, LoadedProject]], list[list[Any]]],
                scans: Sequence[ProjectScan], loaded: dict[str, LoadedProject],
                skip: set[str], whole: bool = True) -> Callable[[], list[Gap]]:
    """The validation gaps: the store's checks done, and the atoms' (`started`:
    validate.many_findings) finished by the returned function."""
    # (a project's readiness: not the store's checks)
    extra = validate.extra_findings(store, [sc.project for sc in scans], whole)
    return lambda: _validation_gaps(
        store, [f for found in started(loaded) for f in found] + extra, skip)


def _validation_gaps(store: Store, findings: list[Any], skip: set[str]) -> list[Gap]:
    gaps: list[Gap] = []
    for f in validate.Report(findings).findings:
        path = f"{store.context.name}/{f.path}"  # (relative to CORTEX_HOME, not context/)
        where = f"{path}:{f.line}" if f.line else path
        if f.rule == "links":
            gaps.append(Gap("broken-link", f"{where}: {f.message}",
                            "fix or remove the id in `links`", _project_of(path), path))
            continue
        if f.severity != validate.ERROR:
            continue
        if path in skip and "evidence" in f.message:
            continue  # already a knowledge-evidence gap
        fix = ("rewrite STATUS.md as the current state only: at most 120 lines, with the "
               "sections Current phase, Recent progress, Open blockers, Next steps"
               if f.rule == "status-md" else "fix it as the message says (details: `cortex "
               "validate`)")
        gaps.append(Gap(f"validation:{f.rule}", f"{where}: {f.message}", fix,
                        _project_of(path), path))
    return gaps


def _derived(store: Store, project: str | None, gaps: list[Gap],
             scans: Sequence[ProjectScan] = ()) -> list[Path]:
    """Generated files a regeneration would change; one gap listing them."""
    from cortexfs.regen import regenerate

    result = regenerate(store, [project] if project else None, dry_run=True, scans=scans)
    if result.written:
        paths = sorted(store.home_rel(p) for p in result.written)
        target = project or "--all"
        gaps.append(Gap("derived", f"{plural(len(paths), 'generated file')} out of date: "
                        f"{some(paths, MAX_LISTED_PATHS)}",
                        f"run `cortex index regen {target}` (it commits what it writes)",
                        project, None))
    return result.written


def _git(store: Store, project: str | None, gaps: list[Gap]) -> Any:
    from cortexfs.git import worktree_state

    state = worktree_state(store)
    if not state.is_repo:
        gaps.append(Gap("git", f"{store.home} is not a git repository: nothing is committed",
                        "run `cortex init` (it makes the store a git repository and commits "
                        "it)"))
        return state
    if state.in_progress:
        gaps.append(Gap("git", f"a {state.in_progress} is in progress in {store.home}",
                        "finish or abort it (`git status` says how)"))
    dirty = state.dirty
    if project is not None:
        dirty = [d for d in dirty if _project_of(d) in (None, project)]
    if dirty:
        outside = [d for d in dirty if not d.startswith(layout.CONTEXT_PREFIX)]
        fix = "run `cortex commit`" if not outside else (
            f"commit them: `git -C {store.home} add -- "
            f"{' '.join(shlex.quote(p) for p in outside[:3])}"
            f"{' …' if len(outside) > 3 else ''} && git -C {store.home} commit` (cortex "
            "commits only context/)" + (", and `cortex commit` for the rest"
                                        if len(outside) < len(dirty) else ""))
        gaps.append(Gap("uncommitted", f"{plural(len(dirty), 'uncommitted change')}: "
                        f"{some(dirty, MAX_LISTED_PATHS)}",
                        fix, project, None))
    if state.has_remote:
        if state.upstream is None:
            gaps.append(Gap("unpushed", f"branch {state.branch or '(detached HEAD)'} has no "
                            "upstream on the configured remote: its commits are not pushed",
                            "run `cortex sync` (or `git push -u <remote> <branch>`)"))
        elif state.ahead:
            gaps.append(Gap("unpushed", f"{plural(state.ahead, 'commit')} not pushed to "
                            f"{state.upstream}", "run `cortex sync` (or `git push`)"))
    return state


def _status_freshness(store: Store, projects: list[Project], loaded: dict[str, LoadedProject],
                      state: Any, gaps: list[Gap]) -> None:
    """STATUS.md present, and not older than the project's newest atom."""
    from cortexfs.git import last_commit_days

    wanted: dict[str, Project] = {}
    for p in projects:
        path = p.root / layout.STATUS_MD
        rel = store.home_rel(path)
        if not path.is_file():
            gaps.append(Gap("status", "STATUS.md is missing: a new session has no current "
                            "state to start from", f"run `cortex project new {p.name}` (it "
                            "adds the missing files), then write the current phase, recent "
                            "progress, open blockers and next steps", p.name, rel))
            continue
        wanted[rel] = p
    today = dt.date.today()
    dirty = set(state.dirty) if state.is_repo else set()
    need_log = [rel for rel in wanted if rel not in dirty] if state.is_repo else []
    committed = last_commit_days(store.home, need_log)
    for rel, p in wanted.items():
        dated = ((a.date, a.id) for a in loaded[p.name].atoms)
        # an atom dated in the future (a typo) cannot make STATUS.md stale before its day
        newest = max(((d, i) for d, i in dated if d is not None and d <= today), default=None)
        if newest is None:
            continue
        day = committed.get(rel)
        if day is None:  # uncommitted, untracked or no repository: the file's own time
            day = dt.date.fromtimestamp((p.root / layout.STATUS_MD).stat().st_mtime)
        if day < newest[0]:
            gaps.append(Gap("status-stale", f"STATUS.md was last updated {day.isoformat()}, "
                            f"before the newest atom {newest[1]} ({newest[0].isoformat()})",
                            "rewrite STATUS.md to cover the work since then, and commit it",
                            p.name, rel))


def _charter(store: Store, project: Project, gaps: list[Gap]) -> None:
    """mission.md and roadmap.md exist and are no longer the unfilled template."""
    for name, what in ((layout.MISSION_MD, "the goal, success conditions and scope"),
                       (layout.ROADMAP_MD, "the phases and milestones with testable conditions")):
        path = project.root / name
        rel = store.home_rel(path)
        try:
            text = wall.read_text(store.context, path)
        except OSError:  # missing, a folder, a link (not part of the store: OutsideStoreError)
            gaps.append(Gap("charter", f"{name} is missing", f"run `cortex project new "
                            f"{project.name}` (it adds the missing files), then write {what}",
                            project.name, rel))
            continue
        except CortexError:
            continue  # too big (validate says so)
        if _squash(text) == _unfilled(store, name, project.name):
            gaps.append(Gap("charter", f"{name} is still the unfilled template",
                            f"write {what} in {name}", project.name, rel))


def _squash(text: str) -> str:
    return " ".join(text.split())


_UNFILLED_KIND = "ready-unfilled"


def _unfilled(store: Store, name: str, project: str) -> str:
    """A governance file as `cortex project new` writes it (squashed): rendered once per
    project and template version, then remembered — Jinja costs more than the check."""
    path = store.cache_dir / "ready-unfilled.bin"
    stamps = templates.stamps(store, time.time_ns())
    key = cache.digest(repr((name, project, stamps)).encode()).hex() if stamps else None
    data = cache.load(path, _UNFILLED_KIND)
    known: dict[str, str] = data if isinstance(data, dict) else {}
    if key is not None and isinstance(known.get(key), str):
        return known[key]
    text = _squash(templates.render(store, f"project/{name}.j2", project=project, date="",
                                    generated_block=""))
    if key is not None:
        if len(known) > 4 * CACHE_SCOPES * 16:  # old template versions and projects
            known.clear()
        known[key] = text
        cache.save(path, _UNFILLED_KIND, known)
    return text


def _links(store: Store, project: Project, ids: dict[str, set[str]], everywhere: set[str],
           gaps: list[Gap]) -> None:
    """Relative links and atom ids in the project's governance files lead somewhere
    (`everywhere`: every project's ids)."""
    for name in _LINKED_FILES:
        _file_links(store, project.root / name, project.name, ids.get(project.name, set()),
                    everywhere, gaps, cite_ids=name == layout.STATUS_MD)


def _links_store(store: Store, everywhere: set[str], gaps: list[Gap]) -> None:
    from cortexfs.overview import walk

    for folder in walk(store, skip=store.projects_dir):  # projects: checked one by one
        _file_links(store, folder / layout.CORTEX_MD, None, set(), everywhere, gaps, cite_ids=False)


def _file_links(store: Store, path: Path, project: str | None, own: set[str],
                everywhere: set[str], gaps: list[Gap], *, cite_ids: bool) -> None:
    text = wall.text_or_none(store.context, path)
    if text is None:  # missing, a link (not part of the store), too big
        return
    start = text.find(GENERATED_START)
    end = text.find(GENERATED_END, start + 1 if start >= 0 else 0)
    if start >= 0 and end > start:  # the generated block is regeneration's business
        text = text[:start] + "\n" * text.count("\n", start, end) + text[end:]
    rel = store.home_rel(path)
    in_code = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for m in _MD_LINK.finditer(line):
            target = m.group(1)
            if _SCHEME.match(target) or target.startswith("#"):
                continue
            local = unquote(target.split("#", 1)[0].split("?", 1)[0])
            if not local:
                continue
            resolved = (store.home / local.lstrip("/")) if local.startswith("/") else \
                path.parent / local
            if not resolved.exists():
                gaps.append(Gap("broken-link", f"{rel}:{number}: the link to {target} leads "
                                "nowhere", "fix the path or remove the link", project, rel))
        if cite_ids:
            for m in ATOM_ID.finditer(re.sub(r"`[^`]*`", "", line)):
                atom_id = m.group(0)
                if atom_id not in own and atom_id not in everywhere:
                    gaps.append(Gap("broken-link", f"{rel}:{number}: cites {atom_id}, which "
                                    "exists in no project", "fix the id, or write that atom",
                                    project, rel))


def _hippocampus(store: Store, gaps: list[Gap]) -> None:
    from cortexfs.hippocampus import check_pointers

    for problem in check_pointers(store):
        rel = store.home_rel(problem.file)
        gaps.append(Gap("hippocampus", f"{rel}:{problem.line}: pointer {problem.pointer!r} "
                        f"{problem.reason}", "run `cortex index regen --all`", None, rel))


# --- text output -------------------------------------------------------------------------------


def render_text(report: ReadyReport) -> str:
    """Ready, or every gap with its fix."""
    scope = ", ".join(report.projects) if len(report.projects) <= 3 else \
        f"{len(report.projects)} projects"
    if report.ready:
        return f"ready: a fresh session can pick up the work from the files ({scope})\n"
    lines = [f"not ready: {plural(len(report.gaps), 'gap')} ({scope})"]
    for gap in report.gaps:
        where = f"[{gap.project}] " if gap.project else ""
        lines.append(f"- {where}{gap.message}")
        lines.append(f"    fix: {gap.fix}")
    return "\n".join(lines) + "\n"
