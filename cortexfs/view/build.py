"""`cortex view`'s build: the store → a static site, rewriting only what changed.

1. Per project, a fingerprint of its inputs (cortexfs.view.model.fingerprint: atom files,
   access log, governance files — stat data and digests, no parsing) is compared with the
   one its pages were last built from: a project that did not change, whose files are all
   still as they were left, is not even loaded.
2. A changed project is loaded (cortexfs.view.model) and each atom page gets its key from
   the signatures of the atoms it shows (cortexfs.view.pages.atom_key) without its body
   being read, when the atom's file is unchanged (the ids its body mentions are cached in
   `.cache/view/atoms/<project>.bin`); only pages whose key moved are rendered. When many
   are (a first build), a forked worker shares them, each process taking chunks as it goes
   (from either end, so the faster does more): markdown rendering is most of a first
   build's time, and a machine has more than one core.
3. The search index re-tokenizes the atoms whose files changed (cortexfs.view.search).
4. Project, graph, store and search pages, data files and assets are put with their keys.
5. The site sweeps what it did not produce and saves its manifest (cortexfs.view.site).
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from cortexfs import cache, forked
from cortexfs.escape import data_script, url_part
from cortexfs.fsutil import file_lock
from cortexfs.layout import VIEW_LOCK
from cortexfs.loader import collector_paused
from cortexfs.regen import RegenContext, context
from cortexfs.store import Project, Store
from cortexfs.view import model, pages, search
from cortexfs.view.markdown import renderer
from cortexfs.view.model import AtomModel, ProjectModel, read_body
from cortexfs.view.site import Site, open_site

ATOMS_KIND = "view-atoms"
PROJECTS_KIND = "view-projects"
PARALLEL_MIN = 400  # atom pages to render from which a second process pays for itself
CHUNK = 8  # atom jobs claimed at a time by either process (Shares)
STATIC = Path(__file__).resolve().parent / "static"


@dataclass
class BuildResult:
    """What a build made: the site folder, its files, what was written and removed."""

    root: Path
    files: int
    written: int
    removed: int
    bytes: int
    seconds: float
    projects: int
    atoms: int
    reloaded: list[str] = field(default_factory=list)  # projects whose inputs had changed
    changed: list[str] = field(default_factory=list)  # the files written (relative paths)
    warnings: list[str] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.root / "index.html"

    def to_json(self) -> dict[str, Any]:
        return {"site": str(self.root), "index": str(self.index), "files": self.files,
                "written": self.written, "removed": self.removed, "bytes": self.bytes,
                "seconds": round(self.seconds, 3), "projects": self.projects,
                "atoms": self.atoms, "reloaded": self.reloaded, "warnings": self.warnings}


def default_dir(store: Store) -> Path:
    """Where the site goes without --out: a cache of the store, never committed."""
    return store.cache_dir / "site"


def build(store: Store, projects: list[str] | None = None, out: Path | None = None) \
        -> BuildResult:
    """Build (or bring up to date) the site of `projects` (all when None) in `out`."""
    started = time.perf_counter()
    store.require()
    shown, skipped = model.select(store, projects)
    site = open_site(out if out is not None else default_dir(store), store.home,
                     store.cache_dir)
    # many small objects and no cycles: the collector would only slow the build down.
    # Builds of one store take turns, and `cortex watch` does not count the atoms a build
    # reads as reads by the user.
    with collector_paused(), file_lock(store.locks_dir / VIEW_LOCK, timeout=60,
                                       what="the site (cortex view)"):
        run = _Build(store, site, shown, skipped)
        run.run()
        removed = site.finish()
    return BuildResult(site.root, len(site.new), len(site.written), len(removed), site.size(),
                       time.perf_counter() - started, len(shown), run.atoms,
                       run.reloaded, sorted(site.written), run.warnings)


# (project, file name, its stamp to remember (None: racy or unread), the ids its body
# names, its search terms (None: not asked for))
_JobResult = tuple[str, str, Any, list[str], "search.Terms | None"]


@dataclass
class _Job:
    """One atom page to look at with its body: rendered if its key moved, tokenized for
    search if `tokenize`."""

    pm: ProjectModel
    am: AtomModel
    tokenize: bool


class _Build:
    def __init__(self, store: Store, site: Site, shown: list[Project], skipped: list[str]) \
            -> None:
        self.store = store
        self.site = site
        self.shown = shown
        self.skipped = skipped
        self.ctx: RegenContext = context(store)
        self.ident = pages.identity()
        self.md = renderer()
        self.now_ns = time.time_ns()
        self.atoms = 0
        self.reloaded: list[str] = []
        self.warnings = list(skipped)

    def run(self) -> None:
        state_path = self.site.state_dir / "projects.bin"
        saved = cache.load(state_path, PROJECTS_KIND)
        states: dict[str, Any] = saved if isinstance(saved, dict) else {}
        index = search.SearchIndex(self.site.state_dir)
        docs: list[search.Doc] = []
        changed: list[tuple[ProjectModel, str | None]] = []
        fingerprints = {}
        for project in self.shown:
            fp = model.fingerprint(self.ctx, project, self.now_ns)
            fp = f"{fp}:{self.ident}" if fp else None
            fingerprints[project.name] = fp
            old = states.get(project.name)
            if (fp is not None and isinstance(old, dict) and old.get("fp") == fp
                    and all(self.site.keep(rel) for rel in old["files"])):
                docs += index.previous(project.name)
                self.atoms += old["row"]["atoms"]
                self.warnings += old["warnings"]
                continue
            pm = model.load_project(self.ctx, project)
            changed.append((pm, fp))
            self.reloaded.append(pm.name)
            self.atoms += len(pm.atoms)
            docs += [search.Doc(_doc_key(pm, am), am.stamp, _doc_row(pm, am))
                     for am in pm.atoms]
        need_terms = index.plan(docs, self.site.intact)
        # an unchanged project whose search segment was lost must be read for its terms
        lost = {key.split("/", 1)[0] for key in need_terms} - {pm.name for pm, _ in changed}
        for project in self.shown:
            if project.name in lost:
                pm = model.load_project(self.ctx, project)
                changed.append((pm, fingerprints[project.name]))
                self.reloaded.append(pm.name)
        # the project pages are made while a forked worker renders atom pages, if there is one
        def project_pages() -> None:
            for pm, _ in changed:
                self._project(pm)

        self._atom_pages(changed, index, need_terms, meanwhile=project_pages)
        self._put_all(index.table_files())
        for rel in index.kept():
            self.site.keep(rel)
        index.save()
        files: dict[str, list[str]] = {}
        for rel in self.site.new:
            if rel.startswith("p/"):
                files.setdefault(rel.split("/", 2)[1], []).append(rel)
        for pm, fp in changed:
            warnings = [f"{pm.name}: {len(pm.symlinks)} symlinked atom file(s) skipped (not "
                        "part of the store)"] if pm.symlinks else []
            self.warnings += warnings
            states[pm.name] = {
                "fp": fp, "warnings": warnings,
                "row": {**pages.store_row(pm), "atoms": len(pm.atoms)},
                "files": [*files.get(url_part(pm.name), []), _graph_rel(pm)]}
        names = [p.name for p in self.shown]
        states = {n: v for n, v in states.items() if n in names}
        cache.save(state_path, PROJECTS_KIND, states)
        self._store_page(states, fingerprints)
        self.site.put("search.html", pages.digest(self.ident), pages.render_search)
        self._assets()

    def _store_page(self, states: dict[str, Any], fingerprints: dict[str, str | None]) -> None:
        """The store page: its decay queue depends on every project of the store (the
        store clock), its rows on the shown ones, its cold counts on the date."""
        names = [p.name for p in self.shown]
        today = self.ctx.now.date()
        key = None
        if all(fingerprints.values()):
            key = pages.digest(self.ident, today.isoformat(), names, self.skipped,
                               [fingerprints[n] for n in names],
                               self.ctx.fingerprint(list(self.ctx.projects), dated=False))

        def make() -> str:
            decay = model.decay_queue(self.ctx, set(names))
            data = pages.store_data(str(self.store.home), today,
                                    [states[n]["row"] for n in names], decay,
                                    len(self.ctx.projects), self.skipped,
                                    lambda rel: rel in self.site.new)
            return pages.render_store(data)

        if key is None:
            self.site.write("index.html", make(), "")
        else:
            self.site.put("index.html", key, make)

    # --- atom pages ------------------------------------------------------------------------

    def _atom_pages(self, changed: list[tuple[ProjectModel, str | None]], index: search.SearchIndex,
                    need_terms: set[str], meanwhile: Callable[[], Any]) -> None:
        jobs: list[_Job] = []
        known = {pm.name: self._known(pm) for pm, _ in changed}
        for pm, _ in changed:
            for am in pm.atoms:
                doc_key = _doc_key(pm, am)
                named = None if self._racy(am) else known[pm.name].get(am.atom.path.name)
                if named is not None and named[0] == am.stamp and doc_key not in need_terms:
                    self.site.put(_atom_rel(pm, am), self._atom_key(pm, am, named[1], 0),
                                  partial(self._render_atom, pm, am, None))
                    continue
                jobs.append(_Job(pm, am, doc_key in need_terms))
        for (project, file, stamp, named, _) in self._run_jobs(jobs, index, meanwhile):
            if stamp is not None:
                known[project][file] = [stamp, named]
        for pm, _ in changed:
            files = {am.atom.path.name for am in pm.atoms}
            cache.save(self._known_path(pm), ATOMS_KIND,
                       {f: v for f, v in known[pm.name].items() if f in files})

    def _known_path(self, pm: ProjectModel) -> Path:
        return self.store.cache_dir / "view" / "atoms" / f"{pm.name}.bin"

    def _known(self, pm: ProjectModel) -> dict[str, Any]:
        """file name → [stamp, ids its body mentions], from the last build."""
        saved = cache.load(self._known_path(pm), ATOMS_KIND)
        return saved if isinstance(saved, dict) else {}

    def _racy(self, am: AtomModel) -> bool:
        """Changed so recently that its stat data cannot vouch for its content yet."""
        return cache.racy(am.stamp[0], self.now_ns)

    def _atom_key(self, pm: ProjectModel, am: AtomModel, named: list[str], content: int) \
            -> str:
        """An atom page's key (pages.atom_key) — for a file changed too recently for its
        stat data to vouch for its content (`content` not 0), with its content's CRC."""
        key = pages.atom_key(self.ident, pm, am, named)
        return f"{key}:{content:x}" if content else key

    def _job(self, job: _Job) -> _JobResult:
        pm, am = job.pm, job.am
        body = read_body(am)
        text = body or ""
        named = pages.mentions(text)
        racy = self._racy(am)
        key = self._atom_key(pm, am, named,
                             zlib.crc32(text.encode()) | 1 if racy or body is None else 0)
        self.site.put(_atom_rel(pm, am), key, partial(self._render_atom, pm, am, text))
        a = am.atom
        terms = search.terms(a.id, a.summary, a.tags, text) if job.tokenize else None
        return (pm.name, a.path.name, None if racy or body is None else am.stamp, named, terms)

    def _render_atom(self, pm: ProjectModel, am: AtomModel, body: str | None) -> str:
        """An atom page (its body read now unless given)."""
        if body is None:
            body = read_body(am) or ""
        return pages.render_atom(self.md, pm, pages.atom_data(pm, am), body)

    def _run_jobs(self, jobs: list[_Job], index: search.SearchIndex, meanwhile: Callable[[], Any]) \
            -> list[_JobResult]:
        """Do the atom jobs, `meanwhile`, and the search segments that changed — in two
        processes when there are many jobs: this one does `meanwhile` and takes jobs from
        the front, a forked worker takes them from the back (Shares), so that whichever
        gets more of the machine does more. Each makes the files of the search segments
        whose jobs it did all of; this one makes the rest once the worker is done."""
        if len(jobs) < PARALLEL_MIN or not forked.can_fork():
            meanwhile()
            return self._finish([self._job(j) for j in jobs], index, set(index.dirty))
        jobs = sorted(jobs, key=lambda j: index.segment(_doc_key(j.pm, j.am)))
        segs = [index.segment(_doc_key(j.pm, j.am)) for j in jobs]
        shares = Shares(len(jobs))

        def whole(lo: int, hi: int) -> set[int]:
            """The segments all of whose jobs are in jobs[lo:hi]."""
            edges = {segs[lo]} if 0 < lo < len(segs) and segs[lo - 1] == segs[lo] else set()
            if 0 < hi < len(segs) and segs[hi - 1] == segs[hi]:
                edges.add(segs[hi])
            return set(segs[lo:hi]) - edges

        def work() -> tuple[Any, ...]:  # in the worker, which writes into the site too
            self.site.new, self.site.written = {}, []
            done = self._finish([self._job(jobs[i]) for i in shares.back()], index,
                                own := whole(shares.back_start, len(jobs)))
            return (self.site.new, self.site.written, done,
                    {seg: index.buckets[seg] for seg in own})

        worker = forked.start(work)
        try:
            meanwhile()
            results = [self._job(jobs[i]) for i in shares.front()]
        except BaseException:
            if worker is not None:
                worker.stop()
            raise
        finally:
            shares.close()
        made = whole(0, shares.front_end)
        results = self._finish(results, index, made)  # while the worker may still work
        reported = worker.join() if worker is not None else None
        if reported is None:  # no worker, or it failed: do what it took here
            done = self._finish([self._job(j) for j in jobs[shares.front_end:]], index, set())
        else:
            entries, written, done, buckets = reported
            self.site.adopt(entries, written)
            index.buckets.update(buckets)
            made |= set(buckets)
            for project, file, _, _, terms in done:  # of the segments it shared with us
                if terms is not None:
                    index.add_terms(f"{project}/{file}", terms)
        self._put_all(index.segment_files(index.dirty - made))
        return results + done

    def _finish(self, results: list[_JobResult], index: search.SearchIndex,
                segments: set[int]) -> list[_JobResult]:
        """Add the terms of done jobs to the index and make the files of `segments` (which
        these jobs hold all the new terms of); the results keep the other segments' terms."""
        for project, file, _, _, terms in results:
            if terms is not None:
                index.add_terms(f"{project}/{file}", terms)
        self._put_all(index.segment_files(segments))
        return [(p, f, s, n, None if index.segment(f"{p}/{f}") in segments else t)
                for p, f, s, n, t in results]

    def _put_all(self, files: dict[str, str]) -> None:
        """Put files made whole (the site keys them by their content)."""
        for rel, content in files.items():
            self.site.put(rel, cache.digest(content.encode()).hex(), partial(str, content))

    # --- the other pages -------------------------------------------------------------------

    def _project(self, pm: ProjectModel) -> None:
        folder = f"p/{url_part(pm.name)}"
        self.site.put(f"{folder}/index.html", pages.project_key(self.ident, pm),
                      lambda: pages.render_project(self.md, pm, pages.project_data(pm)))
        self.site.put(f"{folder}/graph.html", pages.digest(self.ident, pm.name),
                      lambda: pages.render_graph(pm))
        self.site.put(_graph_rel(pm), pages.graph_key(self.ident, pm),
                      lambda: data_script(f"graph/{pm.name}", pages.graph_data(pm)))

    def _assets(self) -> None:
        for folder, _, names in os.walk(STATIC):
            for name in names:
                if name.endswith(".md"):
                    continue  # notes for maintainers (VENDORED.md), not part of the site
                path = Path(folder) / name
                raw = path.read_bytes()
                rel = "assets/" + path.relative_to(STATIC).as_posix()
                self.site.put(rel, cache.digest(raw).hex(), partial(bytes, raw))


class Shares:
    """`count` jobs shared by two processes as they go: one takes chunks from the front
    (`front`), the other from the back (`back`), each claiming a chunk by reading one byte
    of a pipe that holds one byte per chunk, made before the fork; so the two meet wherever
    their speeds put them, and every job is taken exactly once."""

    def __init__(self, count: int) -> None:
        self.count = count
        # at most 4,096 chunks: a pipe holds at least a page (a user with many pipes open
        # gets one-page pipes), and nobody reads this one while it is filled
        self.size = max(CHUNK, -(-count // 4096))
        self.chunks = -(-count // self.size)
        self.front_end = 0  # where the front's jobs ended, once it took its last chunk
        self.back_start = count  # where the back's began
        self._fd, write_fd = os.pipe()
        try:
            view = memoryview(b"x" * self.chunks)
            while view:
                view = view[os.write(write_fd, view):]
        finally:
            os.close(write_fd)

    def front(self) -> Iterator[int]:
        taken = 0
        while os.read(self._fd, 1):
            yield from range(taken * self.size, min((taken + 1) * self.size, self.count))
            taken += 1
            self.front_end = min(taken * self.size, self.count)

    def back(self) -> Iterator[int]:
        taken = 0
        while os.read(self._fd, 1):
            chunk = self.chunks - 1 - taken
            yield from range(chunk * self.size, min((chunk + 1) * self.size, self.count))
            taken += 1
            self.back_start = chunk * self.size

    def close(self) -> None:
        os.close(self._fd)


def _doc_key(pm: ProjectModel, am: AtomModel) -> str:
    """An atom's key in the search index."""
    return f"{pm.name}/{am.atom.path.name}"


def _atom_rel(pm: ProjectModel, am: AtomModel) -> str:
    return f"p/{url_part(pm.name)}/{url_part(am.stem)}.html"


def _graph_rel(pm: ProjectModel) -> str:
    return f"data/graph/{url_part(pm.name)}.js"


def _doc_row(pm: ProjectModel, am: AtomModel) -> list[Any]:
    """What a search hit shows: [project, page stem, id, kind prefix, summary, status class]."""
    a = am.atom
    return [pm.name, am.stem, a.id, a.kind.prefix, a.summary[:200], am.status_class]
