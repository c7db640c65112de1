"""Recall: ranked pointers to the atoms that answer a query (SPEC §9, the Cortex paper §3.3).

Signals, each ranking the atoms on its own, fused by weighted reciprocal rank fusion:

    score(atom) = Σ_signal  weight[signal] / (RRF_K + rank_signal(atom))

- `lexical`: BM25 (bm25s, Lucene variant) over the summary (counted SUMMARY_REPEAT times),
  the tags (TAGS_REPEAT times) and the body; English stop words out, Snowball stems. A long
  atom (a session of a chat, a meeting's notes) is also scored by its best passage — every
  window of PASSAGE_LINES consecutive body lines, a second BM25 index over the passages —
  and the signal is the sum of the two scores, each divided by its best over the atoms
  searched (document plus best-passage evidence, Callan 1994): the question is usually about
  one exchange of a long atom, and the passage score rewards the query words found together.
  Passages also index each line's phrases — pairs of adjacent terms once stop words are out
  ("online clothing store" → `onlin cloth`, `cloth store`) — and the query's phrases count
  like its words there (the sequential-dependence idea, Metzler & Croft 2005): of two
  passages with the same words, the one that says them in the query's order wins.
- `when`: a query that names a date (`on 9 November, 2022`, `in March 2024`, `2023-06-01`)
  ranks the candidates by how far their date is from it (inside the named day, month or
  year: distance 0).
- `dense`: cosine similarity of all-MiniLM-L6-v2 vectors (`cortexfs.embed`), when the
  `embed` extra is installed. An atom's vectors are its summary line and passages of its
  text (whole lines packed into PASSAGE_TOKENS word pieces, the first DENSE_BUDGET of them);
  its similarity is the best of them, ranked in steps of DENSE_TIE (within a step: a tie).
- `heat`: how hot the atom is from its access log: reads × power-law strength since the
  newest read (`cortexfs.strength`). Atoms never read have no heat rank.
- `recency`: the atom's date, newest first.

Heat, recency and when only reorder the candidate pool —
the POOL best atoms of each query signal — and never pull in an atom that did not match.

The indexes are caches under `$CORTEX_HOME/.cache/recall/`: an atom is re-read only when
its size, mtime or inode changed (or, written within RACY_NS of being indexed, when its
bytes changed), re-tokenized only when its content hash changed and re-embedded only when
the texts its vectors come from changed; a missing or corrupt cache is rebuilt.

Listing hits is not a read: opening one (`read_atom`, `cortex recall --open N`, the MCP
`read_atom` tool) appends a `"tool": "recall"` line to the project's access log.
"""

from cortexfs.recall.dense import VectorStore, dense_texts
from cortexfs.recall.docs import Doc, DocTable
from cortexfs.recall.fuse import (
    DEFAULT_WEIGHTS,
    POOL,
    RRF_K,
    SIGNALS,
    Hit,
    RecallResult,
    SignalMatch,
    Weights,
    dense_ranks,
)
from cortexfs.recall.lexical import RecallIndex, map_npz
from cortexfs.recall.query import (
    MAX_K,
    NO_EMBED_NOTE,
    OpenedAtom,
    dense_available,
    find_atom,
    forget_open_indexes,
    no_embed_note,
    open_index,
    read_atom,
    recall,
)
from cortexfs.recall.tokenize import Analyzer, passage_terms, passages_of, phrases
from cortexfs.recall.when import Period, query_period

__all__ = [
    "DEFAULT_WEIGHTS", "MAX_K", "NO_EMBED_NOTE", "POOL", "RRF_K", "SIGNALS", "Analyzer", "Doc",
    "DocTable", "Hit", "OpenedAtom", "Period", "RecallIndex", "RecallResult", "SignalMatch",
    "VectorStore", "Weights", "dense_available", "dense_ranks", "dense_texts", "find_atom",
    "forget_open_indexes", "map_npz", "no_embed_note", "open_index", "passage_terms",
    "passages_of", "phrases", "query_period", "read_atom", "recall",
]
