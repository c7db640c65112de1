"""Small helpers of the recall tests."""

from __future__ import annotations

from cortexfs import recall as rc


def ids(result: rc.RecallResult) -> list[str]:
    return [h.id for h in result.hits]


def lexical_only() -> rc.Weights:
    return rc.Weights(dense=0, heat=0, recency=0, when=0)
