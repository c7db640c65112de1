"""Small helpers of the recall tests."""

from __future__ import annotations

from pathlib import Path

from cortexfs import recall as rc
from cortexfs.recall.lexical import LexicalIndex
from cortexfs.store import Store


def ids(result: rc.RecallResult) -> list[str]:
    return [h.id for h in result.hits]


def lexical_only() -> rc.Weights:
    return rc.Weights(dense=0, heat=0, recency=0, when=0)


def lexical_index(store: Store) -> LexicalIndex:
    """The store's open lexical index (opened if need be)."""
    return rc.open_retriever(store, dense=False).lexical


def segment_files(store: Store) -> list[Path]:
    """The lexical index's segment files on disk."""
    return sorted((store.cache_dir / "recall" / "lexical").glob("seg-*.seg"))
