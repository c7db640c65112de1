"""The lexical index: every atom's terms, in segments under `.cache/recall/lexical/`.

`refresh()` brings it up to date with the atom files: the folders' stat data is compared
with what was indexed (`cortexfs.recall.files`), changed files are read through
`cortexfs.loader` and tokenized into new segments (`cortexfs.recall.segment`), a first
build streaming them SEGMENT_DOCS at a time. One stat per file is most of a warm query at
100,000 atoms, so a big store's walk is shared with a forked process, and the query is
answered on the index as loaded meanwhile — kept only if the walk finds nothing changed.
Docs of changed or deleted files stay behind, dead, until their segment is merged: when
small segments pile up (MAX_SMALL) or a segment's dead share passes DEAD_SHARE.

BM25 (Lucene's variant) is computed at query time from the stored term counts, so an
edit changes no other doc's rows: `bm25` scores whole atoms, `cortexfs.recall.passages`
their best passage.

On disk: `manifest.json` (the code and parameters the index was built with, its segments,
skipped files), `files.arr` (the file table) and the segments; the folded access logs
are the store's shared ones (`cortexfs.accesslog.current`). Anything missing, damaged or
written by other code reads as "no index": it is rebuilt, never misread. A process that
cannot write the cache keeps what it built in memory.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cortexfs import accesslog, cache, forked, layout, wall
from cortexfs.atoms import KINDS, Kind
from cortexfs.fsutil import cache_lock, removed_on_error, write_temp
from cortexfs.recall import arrays, docs, files, segment
from cortexfs.recall.builder import Builder
from cortexfs.recall.docs import Doc
from cortexfs.recall.files import PENDING, SKIPPED, FileTable, Folder
from cortexfs.recall.segment import SEGMENT_DOCS, Segment
from cortexfs.recall.tokenize import Analyzer
from cortexfs.store import Project, Store

BM25_K1 = 1.5
BM25_B = 0.75
MAX_SMALL = 4  # small segments (under SEGMENT_DOCS / 4 docs) allowed before they merge
DEAD_SHARE = 0.25  # a segment with more dead docs than this is rewritten
FORK_MIN_FILES = 20_000  # atom files below which a forked walk costs more than it saves
Progress = Callable[[str, int, int], None]  # (what, done, total)


@dataclass
class Columns:
    """What a query needs of every doc at once, the segments' columns joined."""

    offsets: np.ndarray  # segment s holds docs [offsets[s], offsets[s + 1])
    live: np.ndarray  # bool: a file points at it
    project: np.ndarray  # int32 codes into `projects`
    projects: list[str]
    kind: np.ndarray  # uint8, docs.KIND_CODES
    status: np.ndarray  # uint8, docs.STATUS_CODES
    date: np.ndarray  # int32 ordinals, 0 = none
    dlen: np.ndarray  # terms per doc
    n_live: int
    avgdl: float

    def locate(self, i: int) -> tuple[int, int]:
        s = int(np.searchsorted(self.offsets, i, side="right")) - 1
        return s, i - int(self.offsets[s])


class LexicalIndex:
    """The lexical index of one store (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.dir = store.cache_dir / "recall" / "lexical"
        self.analyzer = Analyzer()
        self.segments: list[Segment] = []
        self.files = FileTable()
        self.skipped: dict[str, str] = {}  # key → why it is not indexed
        self.log_states: dict[str, list[Any]] = {}  # accesslog.current states, as last folded
        self.logs: dict[str, accesslog.AccessStats] = {}  # filled by refresh()
        self.generation = 0  # moves whenever the docs do
        self.unsaved: set[str] = set()  # segments built but not (yet) on disk
        self._manifest_id = ""
        self._columns: Columns | None = None
        self._checked = -math.inf
        self._loaded = False

    def segment_docs(self) -> int:
        """Docs per segment of a first build (a module constant, read when used)."""
        return SEGMENT_DOCS

    # -- persistence --

    def _params(self) -> dict[str, Any]:
        return {"code": cache.code_key(), "analyzer": self.analyzer.name,
                "fields": list(docs.FIELDS), "segment_docs": SEGMENT_DOCS}

    def _load(self) -> None:
        """Read the index saved on disk; a missing, damaged or foreign one reads as empty
        (the next refresh rebuilds it). A segment deleted while being opened — another
        process merged it away — means a newer manifest: read that one instead."""
        self._loaded = True
        for _ in range(3):
            try:
                self._read()
                return
            except FileNotFoundError:
                continue  # a concurrent writer replaced the manifest: try the new one
            except (OSError, ValueError, KeyError, TypeError, IndexError, EOFError):
                break
        self._empty()

    def _read(self) -> None:
        manifest = json.loads((self.dir / "manifest.json").read_bytes())
        if manifest.get("params") != self._params():
            raise ValueError("built by other code")
        segs = [segment.load(self.dir, str(name)) for name in manifest["segments"]]
        table = FileTable.from_arrays(list(manifest["folders"]),
                                      arrays.read(self.dir / "files.arr")[0])
        sizes = np.array([seg.n for seg in segs] + [0], dtype=np.int64)
        for f in table.folders.values():
            ok = f.seg >= 0
            if (f.seg[ok] >= len(segs)).any() or (f.seg < SKIPPED).any() or \
                    (f.doc[ok] >= sizes[np.minimum(f.seg[ok], len(segs))]).any():
                raise ValueError("the file table points past the segments")
        skipped = {str(k): str(v) for k, v in manifest["skipped"].items()}
        self.segments, self.files, self.skipped = segs, table, skipped
        self._manifest_id = str(manifest.get("id", ""))
        self._changed()

    def _empty(self) -> None:
        self.segments, self.files, self.skipped, self.log_states = [], FileTable(), {}, {}
        self.unsaved = set()
        self._manifest_id = ""
        self._changed()

    def _changed(self) -> None:
        self.generation += 1
        self._columns = None

    def _save(self) -> None:
        """Write the new segments, the file table and the manifest (last, atomically: a
        reader sees the old index or the new one), then delete segments no longer listed.
        A cache that cannot be written only costs speed."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            for seg in self.segments:
                if seg.name in self.unsaved:
                    segment.save(seg, self.dir)
            names, table = self.files.to_arrays()
            arrays.write(self.dir / "files.arr", table, None, frozenset())
            self._manifest_id = os.urandom(8).hex()
            manifest = {"params": self._params(), "id": self._manifest_id,
                        "segments": [s.name for s in self.segments], "folders": names,
                        "skipped": self.skipped}
            path = self.dir / "manifest.json"
            tmp = write_temp(path, json.dumps(manifest).encode("utf-8"), durable=False)
            with removed_on_error(tmp):
                os.replace(tmp, path)
        except OSError:
            return
        self.unsaved = set()
        listed = {f"{s.name}.seg" for s in self.segments}
        with contextlib.suppress(OSError), os.scandir(self.dir) as it:
            for entry in it:
                if entry.name.startswith("seg-") and entry.name not in listed:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)

    def _on_disk_id(self) -> str:
        try:
            return str(json.loads((self.dir / "manifest.json").read_bytes()).get("id", ""))
        except (OSError, ValueError, AttributeError):
            return ""

    def discard(self) -> None:
        """Forget the index, in memory and on disk: the next refresh rebuilds it."""
        with contextlib.suppress(OSError):
            (self.dir / "manifest.json").unlink()
        self._empty()
        self._loaded = True
        self.invalidate()

    def invalidate(self) -> None:
        """Make the next refresh check the files whatever its max_age (after a write)."""
        self._checked = -math.inf

    # -- freshness --

    def refresh(self, progress: Progress | None = None, max_age: float = 0.0,
                meanwhile: Callable[[], Any] | None = None) -> Any:
        """Bring the index up to date with the atom files and fold new access-log lines.

        `max_age` > 0 skips the check when the last one is younger than that many seconds
        (a long-lived server's choice; `invalidate()` forces the next check).

        `meanwhile`: work on the index as it stands (a query), done while a forked process
        walks its share of a big store (see `walk`). Its result is returned when the walk
        found nothing to change — the index it ran on was the fresh one; otherwise None,
        and the caller does the work again on the refreshed index."""
        now = time.monotonic()
        if max_age > 0 and now - self._checked < max_age:
            return None
        try:
            found = self._refresh(progress, meanwhile)
        except IndexError:  # damaged bytes in a mapped segment: start afresh
            self.discard()
            found = self._refresh(progress, None)
        self._checked = now
        return found

    def _refresh(self, progress: Progress | None,
                 meanwhile: Callable[[], Any] | None) -> Any:
        if not self._loaded:
            self._load()
        projects = self.store.projects()
        done: list[Any] = []

        def gap() -> None:  # (while the forked child walks: the logs, and the work)
            self._fold_logs(projects)
            done.append(None if meanwhile is None else meanwhile())

        walked_at = time.time_ns()  # (before the stats: what the racy rule measures from)
        walked = self.walk(projects, gap)
        if walked:
            done.clear()
            with cache_lock(self.dir.parent / layout.LEXICAL_LOCK, 600, "the recall index"):
                if self._manifest_id != self._on_disk_id():  # another process wrote it
                    self._load()
                    walked_at = time.time_ns()
                    walked = self.walk(projects)
                if walked and self._apply(walked, progress, walked_at):
                    self._compact()
                    self._save()
        if not done:
            self._fold_logs(projects)
        return done[0] if done else None

    def walk(self, projects: list[Project],
              gap: Callable[[], None] | None = None) -> dict[str, tuple[Any, ...]]:
        """The folders whose listing or stat data differ from the table's (or that are
        gone): folder key → (project, kind, names, stamps, listed).

        A big walk (FORK_MIN_FILES files in the table, on two cores or more) is shared with
        one forked process (`cortexfs.forked.share`: each side takes the next folder when
        it is free); the child sends back only the folders that differ, and what it did not
        report is walked here: the answer is the same either way. `gap` (work that does not
        change the index) is done first, while the child starts on the folders."""
        jobs = [(f"{project.name}/{kind.folder}", project, kind)
                for project in projects for kind in KINDS]
        sizes = [len(f.names) if (f := self.files.folders.get(fkey)) else 0
                 for fkey, _, _ in jobs]
        shared = forked.share(sorted(range(len(jobs)), key=lambda j: -sizes[j]),
                              lambda j: self._walk_folder(*jobs[j], compact=True)) \
            if sum(sizes) >= FORK_MIN_FILES else None
        found: dict[int, tuple[Any, ...] | None] = {}
        try:
            if shared is not None and gap is not None:
                gap()
            for j in shared.mine() if shared is not None else range(len(jobs)):
                found[j] = self._walk_folder(*jobs[j])
        except BaseException:
            if shared is not None:
                shared.stop()
            raise
        if shared is not None:
            for j, diff in shared.join().items():
                found[j] = None if diff is None else (
                    jobs[j][1], jobs[j][2], diff[0],
                    np.frombuffer(diff[1], np.int64).reshape(-1, 3).copy(), tuple(diff[2]))
            found.update((j, self._walk_folder(*jobs[j])) for j in shared.missing())
        out = {jobs[j][0]: w for j, w in sorted(found.items()) if w is not None}
        seen = {fkey for fkey, _, _ in jobs}
        for fkey in self.files.folders:
            if fkey not in seen:
                out[fkey] = (None, None, [], np.zeros((0, 3), np.int64), (0, 0))
        return out

    def _walk_folder(self, fkey: str, project: Project, kind: Kind, *,
                     compact: bool = False) -> Any:
        """One folder of `walk`: None when its listing and stat data are the table's;
        with `compact` (in the forked child), what crosses the pipe (marshal's types)."""
        old = self.files.folders.get(fkey)
        folder = project.folder(kind)
        names: list[str] = []
        stamps = np.zeros((0, 3), np.int64)
        listed = (0, 0)
        if not wall.reason(self.store.context, folder):  # (a linked project or
            # folder is not part of the store: cortexfs.wall)
            names, stamps, listed = files.listing(folder, kind, old)
        if old is not None and old.names == names and old.listed == listed and \
                np.array_equal(old.stamps, stamps) and not old.racy.any():
            return None
        if old is None and not names:
            return None
        if compact:
            return [names, stamps.tobytes(), listed]
        return (project, kind, names, stamps, listed)

    def _apply(self, walked: dict[str, tuple[Any, ...]], progress: Progress | None,
               walked_at: int) -> bool:
        """Update the table (and write segments) for the walked folders; False when nothing
        changed after all (racily-clean files whose bytes were the same)."""
        total = sum(len(w[2]) for w in walked.values())
        builder = Builder(self, total, progress)
        changed = False
        for fkey, (project, kind, names, stamps, listed) in walked.items():
            old = self.files.folders.get(fkey, Folder.empty())
            if project is None:
                self.files.folders.pop(fkey, None)
                for name in old.names:
                    self.skipped.pop(f"{fkey}/{name}", None)
                changed = True
                continue
            new = self._update(project, kind, fkey, names, stamps, old, builder,
                               walked_at)
            new.listed = listed
            changed = changed or not old.same(new)
            self.files.folders[fkey] = new
        builder.flush()
        if not changed:
            return False
        for f in self.files.folders.values():  # the docs that landed in new segments
            pending = f.seg == PENDING
            if pending.any():
                seg, doc = builder.landed[f.doc[pending]].T
                f.seg = f.seg.copy()
                f.doc = f.doc.copy()
                f.seg[pending], f.doc[pending] = seg, doc
        self._changed()
        return True

    def _update(self, project: Project, kind: Kind, fkey: str, names: list[str],
                stamps: np.ndarray, old: Folder, builder: Builder,
                walked_at: int) -> Folder:
        """The folder's new row of the table: unchanged files keep their doc (found with
        array comparisons: a folder of 10,000 files with one change costs no loop over
        them), the others are read — one whose bytes are those indexed (a racily-clean or a
        touched file) keeps its doc. A file is racy by the time its stat data was taken
        (`walked_at`), not by now: the walk of a large store takes a fraction of a second."""
        n = len(names)
        if old.names == names:
            prev = np.arange(n)
        else:
            at = {name: i for i, name in enumerate(old.names)}
            prev = np.array([at.get(name, -1) for name in names], dtype=np.int64)
            for name in set(old.names).difference(names):
                self.skipped.pop(f"{fkey}/{name}", None)
        has = prev >= 0
        p = np.where(has, prev, 0)
        if len(old.names):
            seg = np.where(has, old.seg[p], SKIPPED).astype(np.int32)
            doc = np.where(has, old.doc[p], 0).astype(np.int32)
            same = has & (old.stamps[p] == stamps).all(axis=1)
            racy = same & old.racy[p]
        else:
            seg, doc = np.full(n, SKIPPED, np.int32), np.zeros(n, np.int32)
            same = racy = np.zeros(n, bool)
        folder = project.folder(kind)
        for j in np.flatnonzero(~same | racy).tolist():  # new, changed or racily clean
            name, i = names[j], int(prev[j])
            old_sha = self.segments[old.seg[i]].sha(int(old.doc[i])) \
                if i >= 0 and old.seg[i] >= 0 else None
            racy[j] = cache.racy(int(stamps[j][0]), walked_at)
            found = builder.add(project, kind, f"{fkey}/{name}", folder / name, old_sha)
            if found is None:  # not an atom (the builder noted why)
                seg[j], doc[j] = SKIPPED, 0
            elif found != "same":  # (touched or racily clean, not changed: keeps its doc)
                seg[j], doc[j] = PENDING, found
        return Folder(names, stamps, racy, seg, doc)

    def _compact(self) -> None:
        """Merge the small segments once MAX_SMALL of them pile up, and rewrite any segment
        whose dead share passed DEAD_SHARE (with the small ones, if any)."""
        cols = self.columns()
        live_per = np.add.reduceat(cols.live.astype(np.int64), cols.offsets[:-1]) if self.segments \
            else np.zeros(0, np.int64)
        small = [s for s, seg in enumerate(self.segments) if seg.n < SEGMENT_DOCS // 4]
        dead = [s for s, seg in enumerate(self.segments)
                if seg.n - int(live_per[s]) > DEAD_SHARE * seg.n]
        chosen = sorted(set(dead) | (set(small) if len(small) >= MAX_SMALL or dead else set()))
        if not chosen or (len(chosen) == 1 and chosen[0] in small and not dead):
            return
        parts = [(self.segments[s], np.flatnonzero(
            cols.live[cols.offsets[s]:cols.offsets[s + 1]])) for s in chosen]
        merged = segment.merge(self._new_name(), parts) if sum(len(d) for _, d in parts) \
            else None
        keep = [s for s in range(len(self.segments)) if s not in chosen]
        new_seg = np.full(len(self.segments), -1, np.int64)
        new_seg[keep] = np.arange(len(keep))
        new_doc: dict[int, np.ndarray] = {}
        start = 0
        for s, live_docs in parts:
            index = self.segments.index(s)
            mapping = np.full(s.n, -1, np.int32)
            mapping[live_docs] = np.arange(start, start + len(live_docs), dtype=np.int32)
            start += len(live_docs)
            new_doc[index] = mapping
            new_seg[index] = len(keep)
        self.files.remap(new_seg, new_doc)
        self.segments = [self.segments[s] for s in keep] + ([merged] if merged else [])
        if merged is not None:
            self.unsaved.add(merged.name)
        self._changed()

    def _new_name(self) -> str:
        return f"seg-{time.time_ns():x}-{os.urandom(3).hex()}"

    def _fold_logs(self, projects: list[Project]) -> None:
        """The access stats of `projects`: the store's one folded state of each log."""
        names = {p.name for p in projects}
        for project in projects:
            self.logs[project.name], self.log_states[project.name] = accesslog.current(
                project, self.log_states.get(project.name))
        for name in [n for n in self.log_states if n not in names]:
            del self.log_states[name]
            self.logs.pop(name, None)

    # -- what queries read --

    def columns(self) -> Columns:
        if self._columns is None:
            offsets = np.zeros(len(self.segments) + 1, np.int64)
            np.cumsum([s.n for s in self.segments], out=offsets[1:])
            projects = sorted({p for s in self.segments for p in s.projects})
            code = {p: i for i, p in enumerate(projects)}

            def cat(name: str, dtype: Any) -> np.ndarray:
                if not self.segments:
                    return np.zeros(0, dtype)
                return np.concatenate([np.asarray(s.a[name]) for s in self.segments]) \
                    .astype(dtype, copy=False)

            project = np.concatenate([np.array([code[p] for p in s.projects], np.int32)[
                np.asarray(s.a["proj"], np.int64)] for s in self.segments]) \
                if self.segments else np.zeros(0, np.int32)
            live = self.files.live_mask(offsets)
            dlen = cat("dlen", np.int32)
            n_live = int(live.sum())
            avgdl = float(dlen[live].mean()) if n_live else 1.0
            self._columns = Columns(offsets, live, project, projects, cat("kind", np.uint8),
                                    cat("status", np.uint8), cat("date", np.int32), dlen,
                                    n_live, max(avgdl, 1.0))
        return self._columns

    def doc(self, i: int) -> Doc:
        s, j = self.columns().locate(i)
        return self.segments[s].doc(j)

    def docs_in(self, folder: str) -> list[Doc]:
        """The docs of an atom folder (`flywheel/knowledge`), in file-name order."""
        f = self.files.folders.get(folder)
        if f is None:
            return []
        return [self.segments[int(s)].doc(int(d)) for s, d in zip(f.seg, f.doc, strict=True)
                if s >= 0]

    def vshas(self) -> list[str]:
        """Every doc's Doc.vsha, in doc order (what its dense vectors are keyed by)."""
        return [row.tobytes().hex() for s in self.segments for row in np.asarray(s.a["vsha"])]

    def postings(self, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The live docs holding term hash `h`: global ids, tf, lines holding it."""
        cols = self.columns()
        key = np.array([h], dtype=np.uint64)
        parts = []
        for s, seg in enumerate(self.segments):
            t = int(seg.lookup(key)[0])
            if t < 0:
                continue
            a, b = int(seg.a["t_ptr"][t]), int(seg.a["t_ptr"][t + 1])
            parts.append((np.asarray(seg.a["p_doc"][a:b], np.int64) + cols.offsets[s],
                          np.asarray(seg.a["p_tf"][a:b]), np.asarray(seg.a["p_lines"][a:b])))
        if not parts:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty
        ids = np.concatenate([p[0] for p in parts])
        keep = cols.live[ids]
        return (ids[keep], np.concatenate([p[1] for p in parts])[keep],
                np.concatenate([p[2] for p in parts])[keep])


def bm25(index: LexicalIndex, hashes: list[int], weights: list[float] | None = None,
         k1: float = BM25_K1, b: float = BM25_B) -> tuple[np.ndarray, list[np.ndarray],
                                                          list[int]]:
    """BM25 of every doc for the query terms (hashes, each counted `weights[i]` times):
    the scores, each term's docs, and each term's line count (the lines holding it, for
    the passages' statistics)."""
    cols = index.columns()
    scores = np.zeros(len(cols.live), np.float32)
    found: list[np.ndarray] = []
    line_df: list[int] = []
    for j, h in enumerate(hashes):
        ids, tf, lines = index.postings(h)
        found.append(ids)
        line_df.append(int(lines.sum()))
        if len(ids) == 0:
            continue
        idf = math.log(1 + (cols.n_live - len(ids) + 0.5) / (len(ids) + 0.5))
        norm = k1 * (1 - b + b * cols.dlen[ids] / cols.avgdl)
        w = weights[j] if weights is not None else 1.0
        scores[ids] += (w * idf * tf / (tf + norm)).astype(np.float32)
    return scores, found, line_df

