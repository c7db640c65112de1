"""Fusing the signals: weights, ranks, weighted reciprocal rank fusion, and the hits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# --- the tuning, in one place -----------------------------------------------------------------


@dataclass(frozen=True)
class Weights:
    """Weight of each signal in the fusion; 0 turns a signal off.

    Lexical leads. Dense vectors weigh a quarter: all-MiniLM-L6-v2 alone finds less than
    this BM25 does on conversational memory (LoCoMo dev, benchmarks/locomo.py: turn any@10
    0.65 vs 0.80), and at weight 1 the fusion lost to BM25 alone; at 0.25 it adds the
    paraphrases BM25 misses (turn any@10 0.80 → 0.81). The price is at the top of long
    atoms' rankings (session MRR 0.837 → 0.826, DENSE_TIE already halving it). Heat (0.3) is
    the Cortex paper's balanced default (§6.4.3, §9). Recency is a tie-breaker: an
    atom's date says nothing about the query, and more weight cost LoCoMo MRR. When (a date
    the query names) counts half as much as the words: the date named may be the event's
    rather than the atom's (LoCoMo dev session MRR was flat for weights 0.1 to 1).
    """

    lexical: float = 1.0
    dense: float = 0.25
    heat: float = 0.3
    recency: float = 0.05
    when: float = 0.5

    def active(self) -> list[str]:
        return [name for name in SIGNALS if getattr(self, name) > 0]


SIGNALS = ("lexical", "dense", "heat", "recency", "when")
DEFAULT_WEIGHTS = Weights()
RRF_K = 60  # the standard RRF smoothing constant (Cormack et al. 2009; paper §9)
POOL = 100  # candidates each query signal contributes before fusion
# The dense ranking compares similarities in steps of this size (0.51 and 0.58 tie). RRF
# trusts ranks, and MiniLM's similarities of a handful of related atoms sit within a few
# hundredths of each other: ranked as they come, that noise reorders the lexical top
# (LoCoMo dev session MRR 0.813; in steps of 0.1, 0.826 for the same turn-level recall).
DENSE_TIE = 0.1

@dataclass
class SignalMatch:
    """How one signal ranked a hit: its rank (1 = best) and raw score."""

    rank: int
    score: float


def _ranks(scores: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Rank of each doc by score, 1 = best, equal scores sharing a rank (1, 2, 2, 4) so that
    file order never outweighs another signal; 0 for the docs not `valid`."""
    masked = np.where(valid, scores, -np.inf)
    order = np.argsort(-masked, kind="stable")
    count = int(valid.sum())
    ranked = masked[order[:count]]
    starts = np.ones(count, dtype=bool)
    starts[1:] = ranked[1:] != ranked[:-1]
    position = np.arange(1, count + 1)
    ranks = np.zeros(len(scores), dtype=np.int64)
    ranks[order[:count]] = np.maximum.accumulate(np.where(starts, position, 0))
    return ranks


def dense_ranks(sims: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """`_ranks` of cosine similarities in steps of DENSE_TIE: 0.51 and 0.58 tie."""
    return _ranks(np.floor(sims / DENSE_TIE), valid)


def _rank_values(values: dict[int, float]) -> dict[int, SignalMatch]:
    """Competition ranks (1, 2, 2, 4) of the values, highest first: equal values tie."""
    out: dict[int, SignalMatch] = {}
    prev: float | None = None
    rank = 0
    for pos, (i, v) in enumerate(sorted(values.items(), key=lambda t: -t[1]), start=1):
        if v != prev:
            rank, prev = pos, v
        out[i] = SignalMatch(rank, v)
    return out


def _add_pool(pool: dict[int, None], scores: np.ndarray, valid: np.ndarray) -> None:
    """Add the POOL best valid docs to the candidate pool."""
    masked = np.where(valid, scores, -np.inf)
    top = np.argpartition(-masked, POOL - 1)[:POOL] if len(masked) > POOL \
        else np.arange(len(masked))
    for i in top.tolist():
        if valid[i]:
            pool[i] = None



@dataclass
class Hit:
    """One recalled atom: a pointer (id, project, path) with why it ranked where it did."""

    id: str
    project: str
    path: Path
    summary: str
    score: float
    status: str
    date: str | None
    signals: dict[str, SignalMatch] = field(default_factory=dict)
    matched: list[str] = field(default_factory=list)  # query words found in the atom

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "project": self.project, "path": str(self.path),
            "summary": self.summary, "score": round(self.score, 6), "status": self.status,
            "date": self.date,
            "signals": {k: {"rank": v.rank, "score": round(v.score, 6)}
                        for k, v in self.signals.items()},
            "matched": self.matched,
        }


@dataclass
class RecallResult:
    """The hits, and which signals were available to rank them."""

    query: str
    hits: list[Hit]
    signals: list[str]  # the signals used for this query
    dense_available: bool
    skipped: list[str] = field(default_factory=list)  # atom files that could not be parsed

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "signals": self.signals,
                "dense_available": self.dense_available,
                "hits": [h.to_json() for h in self.hits], "skipped": self.skipped}
