"""Recall: ranked pointers to the atoms that answer a query (SPEC §9, the Cortex paper §3.3).

Signals, each ranking the atoms on its own, fused by weighted reciprocal rank fusion
(`fuse`), then judged: retired atoms and knowledge resting only on retired evidence rank
below the active ones, and are marked.

- `lexical`: BM25 over the summary (twice), the tags and the body, plus BM25 of the atom's
  best passage of three body lines with the query's phrases (`lexical`, `passages`);
  unknown query words stand in by their variants in the store (`lexicon`).
- `when`: a date the query names ranks the candidates by their distance to it (`when`).
- `dense`: MiniLM vectors of the summary and passages, with the `embed` extra (`dense`).
- `heat`: reads × power-law strength since the last read (`cortexfs.strength`).
- `recency`: when the atom was last read, else its date.

Heat, recency and when only reorder the candidate pool — the POOL best atoms of each
query signal — and never pull in an atom that did not match.

Modules: `tokenize` (text → terms), `segment` + `files` + `lexical` (the on-disk lexical
index), `passages`, `lexicon`, `dense` (the vector store), `when`, `filters`, `fuse`,
`snippets`, `query` (the `Retriever` and `recall`), `opening` (reading a hit: an access).

The names below are imported on first use: most of recall needs numpy (~60 ms to import), and
commands that only tokenize (the write gate of `cortex new`, `cortexfs.dedup`) must not pay it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cortexfs.recall.dense import VectorStore, dense_texts
    from cortexfs.recall.docs import Doc
    from cortexfs.recall.filters import Filters
    from cortexfs.recall.filters import parse as parse_filters
    from cortexfs.recall.fuse import (
        DEFAULT_TUNING,
        DEFAULT_WEIGHTS,
        POOL,
        SIGNALS,
        Hit,
        RecallResult,
        SignalMatch,
        Snippet,
        Tuning,
        Weights,
        dense_ranks,
    )
    from cortexfs.recall.lexical import LexicalIndex
    from cortexfs.recall.opening import OpenedAtom, find_atom, read_atom
    from cortexfs.recall.query import (
        MAX_K,
        NO_EMBED_NOTE,
        Retriever,
        dense_available,
        forget_open_indexes,
        no_embed_note,
        open_retriever,
        recall,
    )
    from cortexfs.recall.tokenize import Analyzer
    from cortexfs.recall.when import Period, query_period

# each public name → (its module, its name there)
_WHERE = {
    **{n: ("dense", n) for n in ("VectorStore", "dense_texts")},
    "Doc": ("docs", "Doc"), "Filters": ("filters", "Filters"),
    "parse_filters": ("filters", "parse"),
    **{n: ("fuse", n) for n in ("DEFAULT_TUNING", "DEFAULT_WEIGHTS", "POOL", "SIGNALS", "Hit",
                                "RecallResult", "SignalMatch", "Snippet", "Tuning", "Weights",
                                "dense_ranks")},
    "LexicalIndex": ("lexical", "LexicalIndex"),
    **{n: ("opening", n) for n in ("OpenedAtom", "find_atom", "read_atom")},
    **{n: ("query", n) for n in ("MAX_K", "NO_EMBED_NOTE", "Retriever", "dense_available",
                                 "forget_open_indexes", "no_embed_note", "open_retriever",
                                 "recall")},
    "Analyzer": ("tokenize", "Analyzer"),
    **{n: ("when", n) for n in ("Period", "query_period")},
}

__all__ = [
    "DEFAULT_TUNING", "DEFAULT_WEIGHTS", "MAX_K", "NO_EMBED_NOTE", "POOL", "SIGNALS",
    "Analyzer", "Doc", "Filters", "Hit", "LexicalIndex", "OpenedAtom", "Period",
    "RecallResult", "Retriever", "SignalMatch", "Snippet", "Tuning", "VectorStore", "Weights",
    "dense_available", "dense_ranks", "dense_texts", "find_atom", "forget_open_indexes",
    "no_embed_note", "open_retriever", "parse_filters", "query_period", "read_atom", "recall",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where[0]}"), where[1])
    globals()[name] = value
    return value
