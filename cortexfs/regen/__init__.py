"""Regeneration (`cortex index regen`): the index.md of every atom folder, refs folded from
the access logs, then the store-wide derived files.

For each selected project (cortexfs.regen.run):
1. scan its atoms (cortexfs.loader: cached, fast-path parsed); malformed ones are reported
   and left out of the index;
2. fold `_meta/access-log.jsonl` incrementally (the folded counts and the byte offset are
   cached; a log that shrank or was replaced is folded again from the start) and write
   changed `refs` / `last-ref` into the atom frontmatter, touching only those two keys
   (cortexfs.regen.fold);
3. render `index.md` of each atom folder (cortexfs.regen.render) and write it
   (cortexfs.regen.write). The "Last updated" line changes only when the rest of the file
   does, so a second run writes nothing. A digest of every input of a folder (its atom
   files, the access counts, the date, the templates, this code) is cached with the index
   file's stamp: when neither moved, the folder is not even rendered.
Then the store-wide generators of cortexfs.derived run with a RegenContext.

A cold run (atoms not in the cache) of several projects shares them with one forked worker
process (cortexfs.regen.worker), so that both cores parse and render.

`context(store)` gives other readers (the session brief) the same RegenContext without
regenerating.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortexfs import accesslog, interrupt, layout
from cortexfs.loader import Ahead, ProjectScan, collector_paused
from cortexfs.regen import worker
from cortexfs.regen.records import RegenContext, RegenResult
from cortexfs.regen.run import Run

if TYPE_CHECKING:
    from cortexfs.store import Project, Store

__all__ = ["RegenContext", "RegenResult", "context", "regenerate"]


def regenerate(store: Store, projects: list[str] | None = None, *, dry_run: bool = False,
               progress: bool = False, scans: Iterable[ProjectScan] = (),
               ahead: Ahead | None = None) -> RegenResult:
    """Regenerate the indexes of `projects` (all when None) and the store-wide files.

    With `dry_run`, nothing in the store is written (caches may be): `written` then lists
    what a real run would change — empty means the indexes are up to date. `scans`: scans
    (cortexfs.loader.scan_many) this process has just taken of some of the store's
    projects, e.g. to validate them, reused rather than taken again; `ahead`: scans still
    being taken (cortexfs.loader.Ahead), waited for when first needed.
    """
    from cortexfs.fsutil import file_lock

    store.require()
    selected = store.select(projects)
    result = RegenResult(projects=[p.name for p in selected])
    lock = (contextlib.nullcontext() if dry_run
            else file_lock(store.locks_dir / layout.REGEN_LOCK, timeout=120,
                           what="index regeneration"))
    # (without the collector: a fifth of a cold run was it walking the growing heap)
    with collector_paused(), lock:
        if not dry_run:  # lines appends set aside while a sync replaced the logs
            result.drained = accesslog.drain_all(store.home)
        run = Run(store, dry_run)
        if ahead is not None and ahead.names:
            run.ahead = ahead
        for sc in scans:
            if sc.project.store.home == store.home:
                run.scans[sc.project.name] = sc
        try:
            _regenerate(run, selected, progress, result)
        finally:
            if run.ahead is not None:  # not needed after all: no process outlives the run
                run.ahead.close()
        return result


def _regenerate(run: Run, selected: list[Project], progress: bool,
                result: RegenResult) -> None:
    mine, theirs = worker.share_out([p for p in selected if p.name not in run.scans]) \
        if len(run.scans) < len(selected) else (selected, [])
    mine = [p for p in selected if p not in theirs]
    child = worker.start(run.store, theirs, run.dry_run, run.now) if theirs else None
    if child is None:
        mine, theirs = selected, []
    done: list[str] = []
    try:
        from cortexfs.derived import GENERATORS

        run.prescan(mine)
        bar = _Progress(enabled=progress, total=len(selected))
        for project in mine:
            interrupt.check()
            run.regenerate_project(project, result)
            done.append(project.name)
            bar.advance(project.name)
        if child is not None:  # while it works: what the generators will need of ours
            worker.prepare(run, [p.name for p in mine])
        if child is not None and not worker.join(child, result):
            for project in theirs:  # the worker failed: do its share here
                interrupt.check()
                run.regenerate_project(project, result)
        done.extend(p.name for p in theirs)
        bar.close()
        ctx = run.context([p.name for p in selected])
        for spec in GENERATORS:
            interrupt.check()
            module, _, name = spec.partition(":")
            generator = getattr(importlib.import_module(module), name)
            for path in generator(ctx, dry_run=run.dry_run):
                result.add(Path(path))
        run.save()  # what the generators made us scan and fold in other projects
    except interrupt.Interrupted as e:
        # stopped between two files (each written whole); the next run does the rest
        projects = f"{len(selected)} project{'s' if len(selected) != 1 else ''}"
        if child is not None and child.stop():  # it had written files of its own
            e.done = f"regeneration of {projects} stopped part-way (files were written)"
        else:
            e.done = f"{len(done)} of {projects} regenerated ({len(result.written):,} " \
                     "file(s) written)"
        raise


def context(store: Store, scans: Iterable[ProjectScan] = ()) -> RegenContext:
    """What the generators see, for a command that reads the same data without regenerating
    (the session brief): every project's folded atoms, access stats and fingerprints, from
    the caches where they are current. Nothing is written but caches of derived data.
    `scans`: scans this process has just taken of some projects, used rather than taken
    again."""
    store.require()
    run = Run(store, dry_run=True)
    for sc in scans:
        run.scans[sc.project.name] = sc
    return run.context(store.project_names())


class _Progress:
    """A rich progress bar on a terminal, shown only once a run has taken a while."""

    DELAY = 0.5

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled = enabled and sys.stdout.isatty() and sys.stderr.isatty()
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.bar: Any = None
        self.task: Any = None

    def advance(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.bar is None and self.done < self.total \
                and time.monotonic() - self.started > self.DELAY:
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("regenerating indexes", total=self.total)
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, description=f"indexed {label}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
