"""Which atom file is which doc of the lexical index: the stat data recall checks on every
query, folder by folder.

Per atom folder (`flywheel/experiments`) the table keeps the atom files' names, sorted, with
their (mtime_ns, size, inode) and where their doc lives (segment, doc; segment -1 for a
file that is not a valid atom). A folder whose listing and stat data are exactly those
saved is unchanged, checked with one list and one array comparison; only the files of a
changed folder are looked at one by one. A file written within cache.RACY_NS of being
indexed is "racy" (a later write could keep its mtime and size): its bytes are compared instead,
as git does.

Docs no file points at any more (edited or deleted atoms) are dead: `live_mask` says which.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from cortexfs.atoms import Kind
from cortexfs.loader import AtomFolder, walk_folder

SKIPPED = -1  # the segment of a file that is not a valid atom
PENDING = -2  # a doc on its way into a segment: `doc` numbers it until it lands


@dataclass
class Folder:
    """One atom folder's files: names (sorted) and per file its stamp, racy flag and doc."""

    names: list[str]
    stamps: np.ndarray  # (n, 3) int64: mtime_ns, size, inode
    racy: np.ndarray  # (n,) bool
    seg: np.ndarray  # (n,) int32: segment index, SKIPPED or PENDING
    doc: np.ndarray  # (n,) int32
    listed: tuple[int, int] = (0, 0)  # the folder's AtomFolder.listed when its names were listed

    def same(self, other: Folder) -> bool:
        return (self.names == other.names and self.listed == other.listed
                and np.array_equal(self.stamps, other.stamps)
                and np.array_equal(self.racy, other.racy)
                and np.array_equal(self.seg, other.seg) and np.array_equal(self.doc, other.doc))

    @classmethod
    def empty(cls) -> Folder:
        return cls([], np.zeros((0, 3), np.int64), np.zeros(0, bool), np.zeros(0, np.int32),
                   np.zeros(0, np.int32))


def listing(path: os.PathLike[str] | str, kind: Kind,
            known: Folder | None = None) -> tuple[list[str], np.ndarray, tuple[int, int]]:
    """The folder as the loader's walk sees it (`cortexfs.loader.walk_folder`, not listed
    again while its `listed` stamp holds): the atom-named entries' names, their stamps as
    rows, the folder's `listed` stamp. (A link, folder or FIFO so named is listed: the
    builder reports it, never reads it.)"""
    walked = walk_folder(path, kind, None if known is None
                         else AtomFolder(known.names, [], [], known.listed))
    stats = walked.stats
    rows = np.empty((len(stats), 3), np.int64)  # (column by column: ~2x a list of tuples)
    rows[:, 0] = [s.st_mtime_ns for s in stats]
    rows[:, 1] = [s.st_size for s in stats]
    rows[:, 2] = [s.st_ino for s in stats]
    return walked.names, rows, walked.listed


class FileTable:
    """Every atom folder's Folder, and their (de)serialisation."""

    def __init__(self, folders: dict[str, Folder] | None = None) -> None:
        self.folders: dict[str, Folder] = folders or {}

    def to_arrays(self) -> tuple[list[str], dict[str, Any]]:
        names = list(self.folders)
        parts = [self.folders[n] for n in names]
        keys = "\0".join(name for f in parts for name in f.names).encode("utf-8")

        def cat(attr: str, dtype: Any, shape: tuple[int, ...] = ()) -> np.ndarray:
            arrays = [getattr(f, attr) for f in parts]
            return np.concatenate(arrays).astype(dtype) if arrays \
                else np.zeros((0, *shape), dtype)

        return names, {
            "f_count": np.array([len(f.names) for f in parts], dtype=np.int64),
            "f_names": np.frombuffer(keys, dtype=np.uint8),
            "f_stamps": cat("stamps", np.int64, (3,)), "f_racy": cat("racy", bool),
            "f_seg": cat("seg", np.int32), "f_doc": cat("doc", np.int32),
            "f_listed": np.array([f.listed for f in parts], dtype=np.int64).reshape(
                len(parts), 2),
        }

    @classmethod
    def from_arrays(cls, names: list[str], a: dict[str, np.ndarray]) -> FileTable:
        """The table saved by to_arrays; ValueError when the arrays do not fit together."""
        counts = a["f_count"].tolist()
        blob = bytes(a["f_names"]).decode("utf-8")
        all_names = blob.split("\0") if blob else []
        total = sum(counts)
        if len(counts) != len(names) or len(all_names) != total or \
                a["f_stamps"].shape != (total, 3) or not \
                len(a["f_racy"]) == len(a["f_seg"]) == len(a["f_doc"]) == total or \
                a["f_listed"].shape != (len(names), 2):
            raise ValueError("inconsistent file table")
        folders: dict[str, Folder] = {}
        start = 0
        for j, (name, n) in enumerate(zip(names, counts, strict=True)):
            end = start + n
            mtime, ino = a["f_listed"][j].tolist()
            folders[name] = Folder(all_names[start:end], a["f_stamps"][start:end],
                                   a["f_racy"][start:end], a["f_seg"][start:end],
                                   a["f_doc"][start:end], (mtime, ino))
            start = end
        return cls(folders)

    def live_mask(self, seg_offsets: np.ndarray) -> np.ndarray:
        """Which docs of the segments (numbered one after another) some file points at."""
        live = np.zeros(int(seg_offsets[-1]), dtype=bool)
        for f in self.folders.values():
            ok = f.seg >= 0
            if ok.any():
                live[seg_offsets[f.seg[ok]] + f.doc[ok]] = True
        return live

    def remap(self, new_seg: np.ndarray, new_doc: dict[int, np.ndarray]) -> None:
        """After a merge: segment s becomes new_seg[s]; a merged segment's doc d becomes
        new_doc[s][d] (in the merged segment, new_seg[s])."""
        for f in self.folders.values():
            seg, doc = f.seg.copy(), f.doc.copy()
            for s, docs in new_doc.items():
                hit = f.seg == s
                doc[hit] = docs[f.doc[hit]]
            ok = f.seg >= 0
            seg[ok] = new_seg[f.seg[ok]]
            f.seg, f.doc = seg, doc
