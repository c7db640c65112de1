"""Answering a query: the signals of `cortexfs.recall` ranked, fused and judged, the hits
with their snippets — and, with dense vectors, "no atom matches" when nothing is close.

`Retriever` holds one store's lexical index, vectors and folded access logs for the life of
the process (the MCP server's warm cache); `recall()` is the entry point.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cortexfs.errors import InvalidInputError
from cortexfs.recall import filters as flt
from cortexfs.recall import lexicon, passages, snippets
from cortexfs.recall.dense import VectorStore
from cortexfs.recall.docs import KIND_CODES, RETIRED_CODES, STATUS_CODE, Doc
from cortexfs.recall.fuse import (
    DEFAULT_TUNING,
    DEFAULT_WEIGHTS,
    INVALIDATED_FACTOR,
    RETIRED_FACTOR,
    Hit,
    RecallResult,
    SignalMatch,
    Snippet,
    Tuning,
    Weights,
    dense_ranks,
    fuse,
    pool_signal,
    rank_values,
)
from cortexfs.recall.lexical import LexicalIndex, Progress, bm25
from cortexfs.recall.tokenize import term_hash
from cortexfs.recall.when import parse_ts, query_period
from cortexfs.store import Store
from cortexfs.strength import strength

MAX_K = 1000
NO_EMBED_NOTE = ("recall is using the lexical, heat and recency signals only; install the "
                 "`embed` extra (pip install 'cortexfs[embed]') to add dense vectors")
# Abstention (dense vectors only: without them an atom must share a word to be listed).
# The query is answered "no atom matches" when its best dense similarity is below
# DENSE_FLOOR and the best lexical hit holds less than COVERAGE_FLOOR of the query's idf.
# Chosen on LoCoMo by leave-one-conversation-out (the same floors in all five folds;
# benchmarks/locomo.py --abstention), questions asked of their own conversation and of
# another's: held out, 0.1 % of answerable questions abstained on with turn atoms (1.7 %
# with whole sessions), 79 % (91 %) of the unanswerable ones.
DENSE_FLOOR = 0.425
COVERAGE_FLOOR = 0.7
INVALIDATED = STATUS_CODE["invalidated"]


@dataclass
class Query:
    """A query as the lexical signal sees it: terms (with their query word and weight,
    variants of unknown words included) and phrases."""

    terms: list[str]
    words: list[str]  # the query word each term stands for
    hashes: list[int]
    weights: list[float]
    phrases: list[tuple[int, int]]
    variants: dict[str, list[str]] = field(default_factory=dict)


class Retriever:
    """One store's recall: lexical index, dense vectors (when installed), access logs."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.lexical = LexicalIndex(store)
        self.vectors: VectorStore | None = None

    def refresh(self, progress: Progress | None = None, dense: bool = True,
                max_age: float = 0.0, meanwhile: Callable[[], Any] | None = None) -> Any:
        """The index brought up to date (`LexicalIndex.refresh`; `meanwhile` is done during
        the walk unless the vectors must be synced first) and the vectors synced."""
        syncing = dense and self.vectors is not None
        found = self.lexical.refresh(progress, max_age, None if syncing else meanwhile)
        if syncing:
            assert self.vectors is not None
            self.vectors.sync(self.lexical, progress)
        return found

    def invalidate(self) -> None:
        self.lexical.invalidate()

    def analyze(self, text: str, tuning: Tuning = DEFAULT_TUNING) -> Query:
        an = self.lexical.analyzer
        terms, origin = an.query_terms(text)
        q = Query(list(terms), [origin[t] for t in terms], [term_hash(t) for t in terms],
                  [1.0] * len(terms),
                  [(term_hash(a), term_hash(b)) for a, b in an.query_phrases(text)])
        if tuning.fuzzy_weight <= 0:
            return q
        for term, word in zip(terms, [origin[t] for t in terms], strict=True):
            if len(self.lexical.postings(term_hash(term))[0]):
                continue
            found = lexicon.variants(self.lexical, word)
            if found:
                q.variants[word] = [w for w, _ in found]
            for w, h in found:
                if h in q.hashes:
                    continue
                q.terms.append(an.stems([w])[0])
                q.words.append(word)
                q.hashes.append(h)
                q.weights.append(tuning.fuzzy_weight)
        return q

    def search(self, text: str, k: int = 10, weights: Weights = DEFAULT_WEIGHTS,
               tuning: Tuning = DEFAULT_TUNING, filters: flt.Filters | None = None,
               now: dt.datetime | None = None,
               show: bool = True) -> tuple[list[Hit], bool]:
        """The k best atoms for `text`, and whether recall abstained (see DENSE_FLOOR).
        `show` False leaves the snippets out (a benchmark's choice)."""
        idx = self.lexical
        cols = idx.columns()
        f = filters or flt.Filters()
        allowed = flt.mask(idx, cols, f)
        if not allowed.any():
            return [], False
        q = self.analyze(text, tuning)
        ranked: dict[str, dict[int, SignalMatch]] = {}
        pool: dict[int, None] = {}
        found: list[np.ndarray] = []
        start: dict[int, int] = {}
        coverage = 0.0
        if weights.lexical > 0 and q.hashes:
            lexical, found, start, coverage = self._lexical(q, allowed, tuning)
            ranked["lexical"] = pool_signal(pool, lexical, lexical > 0)
        use_dense = weights.dense > 0 and self.vectors is not None and \
            self.vectors.ready(idx)
        if use_dense:
            assert self.vectors is not None
            sims = self.vectors.similarities(text)
            best_sim = float(sims[allowed].max())
            if best_sim < DENSE_FLOOR and coverage < COVERAGE_FLOOR:
                return [], True
            ranked["dense"] = pool_signal(pool, sims, allowed, dense_ranks)
        if not pool:
            return [], False
        cands = list(pool)
        docs = {i: idx.doc(i) for i in cands}
        now = now or dt.datetime.now(dt.UTC)
        if weights.heat > 0:
            ranked["heat"] = rank_values({i: h for i in cands
                                          if (h := self._heat(docs[i], now)) > 0})
        if weights.recency > 0:
            ranked["recency"] = rank_values({i: t for i in cands
                                             if (t := self._last_seen(docs[i])) is not None})
        period = query_period(text) if weights.when > 0 else None
        if period is not None:
            ranked["when"] = rank_values({i: -float(period.distance(int(cols.date[i])))
                                          for i in cands if cols.date[i] > 0})
        scores = fuse(ranked, weights, tuning.rrf_k)
        retired = {i: int(cols.status[i]) in RETIRED_CODES for i in cands}
        weak = {i: self._evidence_retired(docs[i]) for i in cands}
        if f.judged:
            for i in cands:
                if retired[i]:
                    scores[i] *= INVALIDATED_FACTOR if cols.status[i] == INVALIDATED \
                        else RETIRED_FACTOR
                elif weak[i]:
                    scores[i] *= RETIRED_FACTOR
        order = sorted(cands, key=lambda i: (-scores[i], docs[i].key))[:k]
        terms = set(q.terms)
        hits = []
        for i in order:
            doc = docs[i]
            matched = [q.words[j] for j, ids in enumerate(found) if _holds(ids, i)]
            hit = Hit(id=doc.id, project=doc.project, path=self.store.projects_dir / doc.key,
                      summary=doc.summary, score=scores[i], status=doc.status, date=doc.date,
                      kind=KIND_CODES[int(cols.kind[i])],
                      signals={name: r[i] for name, r in ranked.items() if i in r},
                      matched=list(dict.fromkeys(matched)),
                      variants={w: v for w, v in q.variants.items() if w in matched},
                      retired=retired[i], evidence_retired=weak[i])
            if show:
                hit.snippet = self._snippet(hit, doc, start.get(i), terms, tuning)
            hits.append(hit)
        return hits, False

    def closeness(self, text: str, filters: flt.Filters | None = None,
                  tuning: Tuning = DEFAULT_TUNING) -> tuple[float | None, float]:
        """What abstention decides on: the best dense similarity of the query with an atom
        (None without vectors) and the share of its idf its best lexical hit holds."""
        idx = self.lexical
        allowed = flt.mask(idx, idx.columns(), filters or flt.Filters())
        if not allowed.any():
            return None, 0.0
        q = self.analyze(text, tuning)
        coverage = self._lexical(q, allowed, tuning)[3] if q.hashes else 0.0
        if self.vectors is None or not self.vectors.ready(idx):
            return None, coverage
        return float(self.vectors.similarities(text)[allowed].max()), coverage

    def _lexical(self, q: Query, allowed: np.ndarray, tuning: Tuning) \
            -> tuple[np.ndarray, list[np.ndarray], dict[int, int], float]:
        """Whole-atom BM25 plus best-passage BM25, each over its best (Callan 1994); each
        term's docs; each scored atom's best passage; the best atom's query coverage."""
        idx = self.lexical
        whole, found, line_df = bm25(idx, q.hashes, q.weights, tuning.k1, tuning.b)
        whole = np.where(allowed, whole, 0.0).astype(np.float32)
        hit = np.flatnonzero(whole > 0)
        if len(hit) > passages.PASSAGE_POOL:
            hit = hit[np.argpartition(-whole[hit], passages.PASSAGE_POOL - 1)[
                :passages.PASSAGE_POOL]]
        hit.sort()
        feats = passages.features(idx, q.hashes, line_df, q.phrases, q.weights,
                                  tuning.phrase_weight)
        best, first = passages.best(idx, hit, feats, tuning.passage_lines, tuning.k1,
                                    tuning.b)
        out = np.zeros(len(whole), np.float32)
        top = float(whole.max()) if len(whole) else 0.0
        if top > 0:
            out += whole / np.float32(top)
        if len(best) and best.max() > 0:
            out[hit] += (tuning.passage_weight * best / best.max()).astype(np.float32)
        start = {int(i): int(s) for i, s, b in zip(hit, first, best, strict=True) if b > 0}
        return out, found, start, self._coverage(q, found, out)

    def _coverage(self, q: Query, found: list[np.ndarray], scores: np.ndarray) -> float:
        """The share of the query's idf that its best lexical hit holds (a word no atom has
        counts with the highest idf)."""
        if not len(scores) or scores.max() <= 0:
            return 0.0
        best = int(np.argmax(scores))
        n = max(self.lexical.columns().n_live, 1)
        total = held = 0.0
        for j, ids in enumerate(found):
            if q.weights[j] < 1:  # a variant: the word it stands for is counted once
                continue
            idf = math.log(1 + (n - len(ids) + 0.5) / (len(ids) + 0.5))
            total += idf
            held += idf if _holds(ids, best) else 0.0
        return held / total if total else 0.0

    def _heat(self, doc: Doc, now: dt.datetime) -> float:
        """Reads × strength since the newest read (0 for an atom never read)."""
        stats = self.lexical.logs.get(doc.project)
        if stats is None:
            return 0.0
        name = doc.key.rsplit("/", 1)[-1]
        count = stats.counts.get(name, 0)
        if not count:
            return 0.0
        newest = parse_ts(stats.newest.get(name, ""))
        hours = (now - newest).total_seconds() / 3600 if newest else 0.0
        return count * strength(hours, priority=doc.priority, src=doc.src, related=doc.links)

    def _last_seen(self, doc: Doc) -> float | None:
        """When the atom was last read (its log, or the last-ref regeneration wrote), else
        its date — as a day number."""
        stats = self.lexical.logs.get(doc.project)
        logged = stats.newest.get(doc.key.rsplit("/", 1)[-1], "") if stats else ""
        read = [t for t in (parse_ts(logged), parse_ts(doc.last_ref or "")) if t is not None]
        if read:
            last = max(read)
            return last.toordinal() + (last.hour * 3600 + last.minute * 60 + last.second) / 86400
        if doc.date:
            with contextlib.suppress(ValueError):
                return float(dt.date.fromisoformat(doc.date).toordinal())
        return None

    def _evidence_retired(self, doc: Doc) -> bool:
        """Knowledge or a pattern whose evidence experiments (those that exist) are all
        retired."""
        if not doc.evidence:
            return False
        cols = self.lexical.columns()
        folder = self.lexical.files.folders.get(f"{doc.project}/experiments")
        if folder is None:
            return False
        statuses = []
        for exp in doc.evidence:
            j = bisect.bisect_left(folder.names, f"{exp}.md")
            if j < len(folder.names) and folder.names[j] == f"{exp}.md" and folder.seg[j] >= 0:
                gid = int(cols.offsets[folder.seg[j]]) + int(folder.doc[j])
                statuses.append(int(cols.status[gid]))
        return bool(statuses) and all(s in RETIRED_CODES for s in statuses)

    def _snippet(self, hit: Hit, doc: Doc, start: int | None, terms: set[str],
                 tuning: Tuning) -> Snippet:
        an = self.lexical.analyzer
        if start is not None:
            found = snippets.passage(an, str(hit.path), start, tuning.passage_lines, terms)
            if found is not None:
                return found
        return snippets.make(an, doc.summary, 0, 0, terms)


def _holds(ids: np.ndarray, i: int) -> bool:
    """Whether sorted doc ids `ids` hold doc i."""
    j = int(np.searchsorted(ids, i))
    return j < len(ids) and int(ids[j]) == i


# --- entry points ---------------------------------------------------------------------------

_open: dict[str, Retriever] = {}


def open_retriever(store: Store, dense: bool = True) -> Retriever:
    """The store's retriever, kept for the life of the process (the MCP server's warm
    cache); dense vectors are attached when the embed extra is installed and `dense`."""
    key = str(store.home)
    found = _open.get(key)
    if found is None:
        found = _open[key] = Retriever(store)
    if dense and found.vectors is None:
        from cortexfs import embed

        embedder = embed.load_embedder()
        if embedder is not None:
            found.vectors = VectorStore(found.lexical, embedder)
    return found


def forget_open_indexes() -> None:
    """Drop the retrievers this process keeps open: the next recall loads its index from
    disk, as a new process would."""
    _open.clear()


def dense_available() -> bool:
    """Whether the embedding model is installed (without loading it)."""
    from cortexfs import embed

    return embed.find_model_dir() is not None


def recall(store: Store, query: str, project: str | None = None, k: int = 10,
           weights: Weights | None = None, progress: Progress | None = None,
           max_age: float = 0.0, *, filters: flt.Filters | None = None,
           tuning: Tuning | None = None, snippets: bool = True) -> RecallResult:
    """The k atoms that best match `query`, best first, with the signals behind each.

    `project` is a shorthand for `filters.project`. `max_age` > 0 lets a long-lived caller
    skip re-checking the atom files when it last did so less than that many seconds ago."""
    query = query.strip()
    if not query:
        raise InvalidInputError("the query is empty: say what you are looking for, "
                                "e.g. `cortex recall \"cache invalidation\"`")
    if not 1 <= k <= MAX_K:
        raise InvalidInputError(f"--k must be between 1 and {MAX_K}, not {k}")
    f = filters or flt.Filters()
    if project is not None:
        f = replace(f, project=project)
    if f.project is not None:
        store.project(f.project)  # a clear error for an unknown project
    weights = weights or DEFAULT_WEIGHTS
    tuning = tuning or DEFAULT_TUNING
    dense = weights.dense > 0
    r = open_retriever(store, dense=dense)

    def early() -> tuple[list[Hit], bool] | None:
        """The search, on the index as loaded, while a big store's walk goes on."""
        try:
            return r.search(query, k, weights, tuning, f, show=snippets)
        except (IndexError, ValueError):
            return None  # (asked again below, where a damaged index is rebuilt)

    found = r.refresh(progress=progress, dense=dense, max_age=max_age, meanwhile=early)
    try:
        hits, abstained = found if found is not None else \
            r.search(query, k, weights, tuning, f, show=snippets)
    except (IndexError, ValueError):
        # Damaged bytes in a memory-mapped segment show as ids out of range, a doc row
        # written with other fields as a ValueError: rebuild the index, and ask once more.
        r.lexical.discard()
        r.refresh(progress=progress, dense=dense)
        hits, abstained = r.search(query, k, weights, tuning, f, show=snippets)
    use_dense = r.vectors is not None and dense
    used = [s for s in weights.active() if (s != "dense" or use_dense)
            and (s != "when" or query_period(query) is not None)]
    return RecallResult(query, hits, used, r.vectors is not None, sorted(r.lexical.skipped),
                        abstained)


def no_embed_note(store: Store) -> str | None:
    """The one-time note that dense vectors are off; None once it has been shown."""
    marker = store.cache_dir / "recall" / "no-embed-noted"
    if marker.exists():
        return None
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(NO_EMBED_NOTE + "\n", encoding="utf-8")
    return NO_EMBED_NOTE

