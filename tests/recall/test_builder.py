"""cortexfs.recall.builder: atoms streamed into segments, each written when full."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import recall as rc
from cortexfs.recall import lexical
from cortexfs.store import Store
from recall.helpers import segment_files


def test_a_first_build_streams_segments(store: Store, write_atom: Callable[..., Path],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(1, 12):
        write_atom(f"EXP-{n:03d}", summary=f"note {n} about quokka number{n}")
    one = [h.id for h in rc.recall(store, "quokka number7 note").hits]
    rc.forget_open_indexes()
    for seg in segment_files(store):
        seg.unlink()
    (store.cache_dir / "recall" / "lexical" / "manifest.json").unlink()
    monkeypatch.setattr(lexical, "SEGMENT_DOCS", 4)
    many = [h.id for h in rc.recall(store, "quokka number7 note").hits]
    assert len(segment_files(store)) == 3  # 4 + 4 + 3 docs, each written when full
    assert many == one and many[0] == "EXP-007"
