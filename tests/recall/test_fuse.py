"""cortexfs.recall.fuse: the weights and tuning, and reciprocal-rank fusion."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import recall as rc
from cortexfs.store import Store


def test_weights_and_tuning_live_in_one_place() -> None:
    w, t = rc.DEFAULT_WEIGHTS, rc.DEFAULT_TUNING
    assert (w.lexical, w.dense, w.heat, w.recency, w.when) == (1.0, 0.25, 0.3, 0.05, 0.5)
    assert t.rrf_k == 60 and t.passage_lines == 3
    assert rc.Weights(dense=0, recency=0, when=0).active() == ["lexical", "heat"]


def test_rrf_arithmetic(store: Store, write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="Cache tuning notes", date="2026-01-01")
    hit = rc.recall(store, "cache").hits[0]
    assert hit.score == pytest.approx(1.0 / (60 + 1) + 0.05 / (60 + 1))


def test_ranks_share_a_rank_on_equal_scores_and_skip_the_invalid() -> None:
    import numpy as np

    from cortexfs.recall.fuse import DENSE_TIE, dense_ranks, rank_values, ranks

    scores = np.array([0.5, 2.0, 2.0, 1.0, 9.0])
    valid = np.array([True, True, True, True, False])
    assert ranks(scores, valid, [1, 2, 3, 0, 4]) == [1, 1, 3, 4, 0]
    assert DENSE_TIE == 0.1  # so 0.51 and 0.58 tie
    assert dense_ranks(np.array([0.51, 0.58, 0.2]), np.array([True, True, True]),
                       [0, 1, 2]) == [1, 1, 3]
    assert {i: (m.rank, m.score) for i, m in rank_values({7: 0.5, 8: 3.0, 9: 3.0}).items()} \
        == {8: (1, 3.0), 9: (1, 3.0), 7: (3, 0.5)}


def test_fuse_sums_each_signal_s_weighted_reciprocal_rank() -> None:
    from cortexfs.recall.fuse import SignalMatch, fuse

    ranked = {"lexical": {1: SignalMatch(1, 9.0), 2: SignalMatch(2, 4.0)},
              "heat": {2: SignalMatch(1, 3.0)}}
    scores = fuse(ranked, rc.Weights(lexical=1.0, heat=0.5), rrf_k=60)
    assert scores == pytest.approx({1: 1 / 61, 2: 1 / 62 + 0.5 / 61})
