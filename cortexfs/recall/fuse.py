"""Fusing the signals: the tuning in one place, ranks, weighted reciprocal rank fusion, the
status judgement, and the hits.

    score(atom) = status factor × Σ_signal weight[signal] / (rrf_k + rank_signal(atom))

The numbers of `Tuning` and the lexical, when and recency weights were chosen on LoCoMo by
leave-one-conversation-out (benchmarks/locomo.py --loco: coordinate descent on four
conversations, scored on the fifth, in turn), keeping the value most folds chose: k1 1.2
(4 of 5 folds) and passage weight 0.5 (3 of 5); every other number kept its value in most
folds. Held-out, pooled over the folds: turn any@10 0.800, session MRR 0.841 (defaults of
the last round, in-sample: 0.799 / 0.838). Three folds also dropped recency, which LoCoMo
cannot judge (no reads, and a session's date says nothing of the question): it stays, as
the tie-breaker it is (0.05).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SIGNALS = ("lexical", "dense", "heat", "recency", "when")


@dataclass(frozen=True)
class Weights:
    """Weight of each signal in the fusion; 0 turns a signal off.

    Lexical leads. Dense vectors weigh a quarter: all-MiniLM-L6-v2 alone finds less than
    this BM25 does on conversational memory (LoCoMo: turn any@10 0.65 vs 0.80); at 0.25 it
    adds the paraphrases BM25 misses. Heat (0.3) is the Cortex paper's balanced default
    (§6.4.3, §9). Recency is a tie-breaker: when an atom was last read or written says
    little about the query. When (a date the query names) counts half as much as the
    words: the date named may be the event's rather than the atom's.
    """

    lexical: float = 1.0
    dense: float = 0.25
    heat: float = 0.3
    recency: float = 0.05
    when: float = 0.5

    def active(self) -> list[str]:
        return [name for name in SIGNALS if getattr(self, name) > 0]


@dataclass(frozen=True)
class Tuning:
    """The lexical signal's and the fusion's other numbers."""

    k1: float = 1.2  # BM25 term-frequency saturation (Lucene's default)
    b: float = 0.75  # BM25 length normalisation
    passage_lines: int = 3  # lines per passage: a question, its answer, and one more
    passage_weight: float = 0.5  # the best passage's BM25 against the whole atom's (both
    # scaled by their best)
    phrase_weight: float = 1.0  # a phrase in order counts like one more term
    fuzzy_weight: float = 0.7  # a variant of an unknown word counts 0.7 of the word
    rrf_k: int = 60  # the standard RRF smoothing constant (Cormack et al. 2009; paper §9)


DEFAULT_WEIGHTS = Weights()
DEFAULT_TUNING = Tuning()
POOL = 100  # candidates each query signal contributes before fusion
# The dense ranking compares similarities in steps of this size (0.51 and 0.58 tie). RRF
# trusts ranks, and MiniLM's similarities of a handful of related atoms sit within a few
# hundredths of each other: ranked as they come, that noise reorders the lexical top.
DENSE_TIE = 0.1
# Retired atoms (superseded, refined, stale, deprecated, invalidated) and knowledge whose
# evidence is all retired rank below the active ones: their fused score is multiplied by
# this. A half is the score of an atom ranked ~60 places lower: below every active atom
# that matched as well, above ones that barely matched. Invalidated atoms, which are known
# to be wrong, weigh a quarter.
RETIRED_FACTOR = 0.5
INVALIDATED_FACTOR = 0.25


@dataclass
class SignalMatch:
    """How one signal ranked a hit: its rank (1 = best) and raw score."""

    rank: int
    score: float


@dataclass
class Snippet:
    """The passage a hit was ranked by: file lines first..last (1-based; 0 for the
    summary), their text, and the character spans of the query's words in it."""

    first: int
    last: int
    text: str
    spans: list[tuple[int, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"lines": [self.first, self.last] if self.first else None, "text": self.text,
                "highlights": [list(s) for s in self.spans]}


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
    kind: str = "experiments"
    signals: dict[str, SignalMatch] = field(default_factory=dict)
    matched: list[str] = field(default_factory=list)  # query words found in the atom
    variants: dict[str, list[str]] = field(default_factory=dict)  # unknown word → variants
    retired: bool = False  # its status is retired: ranked down
    evidence_retired: bool = False  # knowledge whose evidence is all retired: ranked down
    snippet: Snippet | None = None

    @property
    def marks(self) -> list[str]:
        """What the text output shows next to the id: a retired status, retired evidence."""
        out = [self.status] if self.retired else []
        if self.evidence_retired:
            out.append("evidence retired")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "project": self.project, "path": str(self.path),
            "kind": self.kind, "summary": self.summary, "score": round(self.score, 6),
            "status": self.status, "retired": self.retired,
            "evidence_retired": self.evidence_retired, "date": self.date,
            "signals": {k: {"rank": v.rank, "score": round(v.score, 6)}
                        for k, v in self.signals.items()},
            "matched": self.matched, "variants": self.variants,
            "snippet": self.snippet.to_json() if self.snippet else None,
        }


@dataclass
class RecallResult:
    """The hits, and which signals were available to rank them."""

    query: str
    hits: list[Hit]
    signals: list[str]  # the signals used for this query
    dense_available: bool
    skipped: list[str] = field(default_factory=list)  # atom files that could not be parsed
    abstained: bool = False  # the dense signal saw nothing close and the words matched little

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "signals": self.signals,
                "dense_available": self.dense_available, "abstained": self.abstained,
                "hits": [h.to_json() for h in self.hits], "skipped": self.skipped}


# --- ranks ------------------------------------------------------------------------------------


def ranks(scores: np.ndarray, valid: np.ndarray, ids: list[int]) -> list[int]:
    """The rank among the `valid` docs of each doc of `ids` by score, 1 = best, equal scores
    sharing a rank (1, 2, 2, 4) so that file order never outweighs another signal; 0 for a
    doc not `valid`. (One more than the valid scores above it: a sort of the scores, not of
    the docs — a third of the time at 100,000 atoms.)"""
    above = np.sort(scores[valid])
    at = np.asarray(ids, dtype=np.int64)
    rank = len(above) + 1 - np.searchsorted(above, scores[at], side="right")
    return np.where(valid[at], rank, 0).tolist()


def dense_ranks(sims: np.ndarray, valid: np.ndarray, ids: list[int]) -> list[int]:
    """`ranks` of cosine similarities in steps of DENSE_TIE: 0.51 and 0.58 tie."""
    return ranks(np.floor(sims / DENSE_TIE), valid, ids)


def rank_values(values: dict[int, float]) -> dict[int, SignalMatch]:
    """Competition ranks (1, 2, 2, 4) of the values, highest first: equal values tie."""
    out: dict[int, SignalMatch] = {}
    prev: float | None = None
    rank = 0
    for pos, (i, v) in enumerate(sorted(values.items(), key=lambda t: -t[1]), start=1):
        if v != prev:
            rank, prev = pos, v
        out[i] = SignalMatch(rank, v)
    return out


def pool_signal(pool: dict[int, None], scores: np.ndarray, valid: np.ndarray,
                rank: Callable[[np.ndarray, np.ndarray, list[int]], list[int]] = ranks
                ) -> dict[int, SignalMatch]:
    """Add the POOL best valid docs to the candidate pool; the query signal's matches: the
    rank (by `rank`) and score of each candidate pooled so far that it ranks."""
    masked = np.where(valid, scores, -np.inf)
    top = np.argpartition(-masked, POOL - 1)[:POOL] if len(masked) > POOL \
        else np.arange(len(masked))
    for i in top.tolist():
        if valid[i]:
            pool[i] = None
    cands = list(pool)
    return {i: SignalMatch(r, float(scores[i]))
            for i, r in zip(cands, rank(scores, valid, cands), strict=True) if r > 0}


def fuse(ranked: dict[str, dict[int, SignalMatch]], weights: Weights,
         rrf_k: int) -> dict[int, float]:
    """Each candidate's weighted RRF score over the signals that ranked it."""
    out: dict[int, float] = {}
    for name, matches in ranked.items():
        w = getattr(weights, name)
        for i, match in matches.items():
            out[i] = out.get(i, 0.0) + w / (rrf_k + match.rank)
    return out
