"""cortexfs.recall.segment: segments merged from their stored tokens, and one written with
other Doc fields rebuilt, never misread."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from cortexfs import recall as rc
from cortexfs.recall import arrays, lexical, segment
from cortexfs.store import Project, Store
from recall.helpers import ids, lexical_index, segment_files


def test_small_segments_merge(store: Store, project: Project,
                              write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="quokka census")
    rc.recall(store, "quokka")
    for n in range(2, 2 + lexical.MAX_SMALL + 1):  # each edit: a small segment
        write_atom(f"EXP-{n:03d}", summary=f"quokka census {n}")
        rc.recall(store, "quokka")
    index = lexical_index(store)
    assert len(index.segments) < lexical.MAX_SMALL
    assert len(segment_files(store)) == len(index.segments)  # merged-away files deleted
    assert len(rc.recall(store, "quokka census", k=20).hits) == lexical.MAX_SMALL + 2
    rc.forget_open_indexes()
    assert len(rc.recall(store, "quokka census", k=20).hits) == lexical.MAX_SMALL + 2


def test_a_segment_written_with_other_fields_is_rebuilt(
        store: Store, atoms: Callable[..., Path]) -> None:
    """What a field added to Doc does to an index saved before: it is rebuilt, never read
    with the wrong fields (nor does it crash, as the positional rows of the last round did)."""
    rc.recall(store, "cache")
    rc.forget_open_indexes()
    (path,) = segment_files(store)
    data, meta = arrays.read(path)
    meta["fields"] = [*meta["fields"], "added"]
    arrays.write(path, {k: np.array(v) for k, v in data.items()}, meta, segment.MAPPED)
    assert ids(rc.recall(store, "stale reads"))[0] == "EXP-001"
    (rebuilt,) = segment_files(store)
    assert rebuilt != path
