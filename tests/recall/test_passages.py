"""cortexfs.recall.passages: an atom's best passage, and phrases in the query's order."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from cortexfs import recall as rc
from cortexfs.recall import passages
from cortexfs.recall.segment import window_stats
from cortexfs.store import Store
from recall.helpers import ids, lexical_only


def test_best_passage_outranks_scattered_words(store: Store,
                                               write_atom: Callable[..., Path]) -> None:
    # Same words, same length: the atom that has them in one exchange wins.
    filler = [f"Line {n} talks about weather number{n} today." for n in range(12)]
    together = filler[:6] + ["Ana: the pottery class made a blue plate."] + filler[6:] + \
        ["Ana: nothing else.", "Ben: fine."]
    apart = ["Ana: the pottery was fun."] + filler[:6] + ["Ben: a class ran late."] + \
        filler[6:] + ["Ana: a blue plate broke.", "Ben: made it."]
    write_atom("EXP-001", summary="Session one", body="\n" + "\n".join(apart) + "\n")
    write_atom("EXP-002", summary="Session two", body="\n" + "\n".join(together) + "\n")
    result = rc.recall(store, "pottery class blue plate made", weights=lexical_only())
    assert ids(result) == ["EXP-002", "EXP-001"]
    assert result.hits[0].snippet is not None
    assert "pottery class made a blue plate" in result.hits[0].snippet.text


def test_phrase_order_breaks_a_tie_of_words(store: Store, write_atom: Callable[..., Path]) -> None:
    filler = [f"Note {w}: nothing else." for w in ("one", "two", "three", "four")]
    write_atom("EXP-001", summary="Session one",
               body="\n" + "\n".join(["Gina: the store sells clothing online."] + filler) + "\n")
    write_atom("EXP-002", summary="Session two",
               body="\n" + "\n".join(["Gina: my online clothing store is open."] + filler) + "\n")
    result = rc.recall(store, "online clothing store", weights=lexical_only())
    assert ids(result) == ["EXP-002", "EXP-001"]
    assert result.hits[0].score > result.hits[1].score
    off = rc.recall(store, "online clothing store", weights=lexical_only(),
                    tuning=rc.Tuning(phrase_weight=0))
    assert off.hits[0].signals["lexical"].score == off.hits[1].signals["lexical"].score


def test_window_statistics() -> None:
    # docs of 5, 2 and 0 lines; line lengths 1..7
    line_len = np.arange(1, 8)
    doc_line = np.array([0, 5, 7, 7])
    # size 3: the first doc has windows 1-3, 2-4, 3-5; the second one window of 2 lines
    assert window_stats(line_len, doc_line, 3) == [4, (1 + 2 + 3) + (2 + 3 + 4) + (3 + 4 + 5)
                                                   + (6 + 7)]
    assert window_stats(line_len, doc_line, 1) == [7, sum(range(1, 8))]


def test_the_pool_bounds_the_work(store: Store, write_atom: Callable[..., Path],
                                  monkeypatch: object) -> None:
    """Only the PASSAGE_POOL best atoms by whole-atom BM25 get a passage score."""
    import pytest

    for n in range(1, 6):
        write_atom(f"EXP-{n:03d}", summary=f"quokka {'census ' * n}",
                   body=f"\nquokka census line {n}\n")
    mp = pytest.MonkeyPatch()
    mp.setattr(passages, "PASSAGE_POOL", 2)
    try:
        hits = rc.recall(store, "quokka census", weights=lexical_only()).hits
    finally:
        mp.undo()
    with_passage = [h for h in hits if h.snippet is not None and h.snippet.first > 0]
    assert len(hits) == 5 and len(with_passage) == 2
