"""Passages: an atom's best window of PASSAGE_LINES body lines for a query, scored at query
time from the stored tokens of the atoms the whole-atom BM25 ranked highest.

A long atom (a session of a chat, a meeting's notes) is usually asked about one exchange of
it: its best passage's BM25 rewards the query words found together (Callan 1994). A
passage's features are the query's terms and its phrases — pairs of adjacent query terms
said in that order in one line ("online clothing store" → `onlin cloth`, `cloth store`;
the sequential-dependence idea, Metzler & Croft 2005): of two passages with the same
words, the one that says them in the query's order wins. The statistics behind a
feature's idf are counted in lines: how many body lines hold the term (segment postings) or
the phrase (segment phrase tables).

Only the PASSAGE_POOL best atoms by whole-atom BM25 are looked at: the cost of a query is
bounded by that pool, not by the store (a 100,000-atom store's full passage index was the
bulk of its 7 GB build). Phrases cost nothing to index beyond a table of integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cortexfs.recall.lexical import BM25_B, BM25_K1, LexicalIndex
from cortexfs.recall.tokenize import pair_hash

PASSAGE_POOL = 300  # atoms whose passages are scored, the best by whole-atom BM25 (LoCoMo:
# the same figures for 200, 400 and 1,000; a 10,000-atom query: 9 ms of passages at 1,000)


@dataclass
class Features:
    """What a passage is scored on: the query's term hashes and phrases, each with the
    idf of its line statistics."""

    terms: list[int]
    phrases: list[tuple[int, int]]
    idf: np.ndarray  # terms', then phrases'

    @property
    def size(self) -> int:
        return len(self.terms) + len(self.phrases)


def features(index: LexicalIndex, terms: list[int], line_df: list[int],
             phrases: list[tuple[int, int]], weights: list[float] | None = None,
             phrase_weight: float = 1.0) -> Features:
    """The features of a query: its terms (with their line counts from `lexical.bm25`)
    and its phrases, weighted by idf over the store's body lines."""
    n_lines = max(sum(int(s.meta["lines"]) for s in index.segments), 1)
    keys = np.array([pair_hash(a, b) for a, b in phrases], dtype=np.uint64)
    phrase_df = np.zeros(len(phrases), np.int64)
    for seg in index.segments:
        if len(keys):
            phrase_df += seg.phrase_df(keys)
    found = [p for p, df in zip(phrases, phrase_df.tolist(), strict=True) if df > 0]
    dfs = [*line_df, *(df for df in phrase_df.tolist() if df > 0)]
    idf = np.array([math.log(1 + (n_lines - df + 0.5) / (df + 0.5)) if df else 0.0
                    for df in dfs], dtype=np.float64)
    if weights is not None:
        idf[:len(terms)] *= np.array(weights, dtype=np.float64)
    idf[len(terms):] *= phrase_weight
    return Features(terms, found, idf)


def average_length(index: LexicalIndex, size: int) -> float:
    count = total = 0
    for seg in index.segments:
        c, t = seg.windows(size)
        count, total = count + c, total + t
    return total / count if count else 1.0


def best(index: LexicalIndex, cands: np.ndarray, feats: Features,
         size: int = 3, k1: float = BM25_K1,
         b: float = BM25_B) -> tuple[np.ndarray, np.ndarray]:
    """For each candidate doc (global ids): its best passage's BM25 and the passage's
    first line (among the doc's lines that have terms; 0 when it has none)."""
    score = np.zeros(len(cands), np.float64)
    start = np.zeros(len(cands), np.int64)
    if len(cands) == 0 or feats.size == 0:
        return score, start
    cols = index.columns()
    avg = max(average_length(index, size), 1.0)
    seg_of = np.searchsorted(cols.offsets, cands, side="right") - 1
    for s in sorted(set(seg_of.tolist())):  # (np.unique imports numpy.ma: ~15 ms)
        pick = np.flatnonzero(seg_of == s)
        local = cands[pick] - cols.offsets[s]
        sc, st = _segment_best(index.segments[s].a, index.segments[s].lookup, local, feats,
                               size, k1, b, avg)
        score[pick], start[pick] = sc, st
    return score, start


def _spans(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of range(starts[i], starts[i] + counts[i])."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + (np.arange(total) - first)


def _segment_best(a: dict[str, np.ndarray], lookup: object, local: np.ndarray,
                  feats: Features, size: int, k1: float, b: float,
                  avg: float) -> tuple[np.ndarray, np.ndarray]:
    doc_line, line_ptr = a["doc_line"], a["line_ptr"]
    l0 = np.asarray(doc_line[local], np.int64)
    n_lines = np.asarray(doc_line[local + 1], np.int64) - l0
    lines = _spans(l0, n_lines)  # the candidates' lines, one after another
    t0 = np.asarray(line_ptr[lines], np.int64)
    per_line = np.asarray(line_ptr[lines + 1], np.int64) - t0
    tokens = a["fwd"][_spans(t0, per_line)].astype(np.int64)  # (index, then convert)
    tok_line = np.repeat(np.arange(len(lines)), per_line)
    width = feats.size
    tf = np.zeros((len(lines), width), np.float64)  # row k: line k
    local_terms = lookup(np.array(feats.terms, dtype=np.uint64))  # type: ignore[operator]
    known = np.flatnonzero(local_terms >= 0)
    if len(known):
        order = np.argsort(local_terms[known])
        q_sorted, q_index = local_terms[known][order], known[order]
        pos = np.searchsorted(q_sorted, tokens).clip(0, len(q_sorted) - 1)
        hit = q_sorted[pos] == tokens
        tf += np.bincount(tok_line[hit] * width + q_index[pos[hit]],
                          minlength=tf.size).reshape(tf.shape)
    if feats.phrases and len(tokens) > 1:
        flat = np.array([h for pair in feats.phrases for h in pair], dtype=np.uint64)
        pl = lookup(flat).reshape(-1, 2)  # type: ignore[operator]
        same = tok_line[:-1] == tok_line[1:]
        for p, (la, lb) in enumerate(pl.tolist()):
            if la < 0 or lb < 0:
                continue
            m = same & (tokens[:-1] == la) & (tokens[1:] == lb)
            if m.any():
                tf[:, len(feats.terms) + p] += np.bincount(tok_line[:-1][m],
                                                           minlength=len(lines))
    lengths = a["line_len"][lines].astype(np.float64)
    # windows: each candidate's runs of `size` lines (all its lines when it has fewer)
    n_win = np.where(n_lines > size, n_lines - size + 1, np.minimum(n_lines, 1))
    first_line = np.cumsum(n_lines) - n_lines  # the candidate's first line, in `lines`
    w_start = _spans(first_line, n_win)
    w_end = np.minimum(w_start + size, np.repeat(first_line + n_lines, n_win))
    c_tf = np.vstack([np.zeros((1, width)), np.cumsum(tf, axis=0)])
    c_len = np.concatenate([[0.0], np.cumsum(lengths)])
    w_tf = c_tf[w_end] - c_tf[w_start]
    w_len = c_len[w_end] - c_len[w_start]
    norm = k1 * (1 - b + b * w_len / avg)
    w_score = (w_tf / (w_tf + norm[:, None]) * feats.idf[None, :]).sum(axis=1)
    score = np.zeros(len(local), np.float64)
    start = np.zeros(len(local), np.int64)
    has = np.flatnonzero(n_win > 0)
    if len(has):
        owner = np.repeat(np.arange(len(local)), n_win)
        # the best window of each candidate, the first of equals
        order = np.lexsort((np.arange(len(w_score)), -w_score, owner))
        firsts = order[np.searchsorted(owner[order], has)]
        score[has] = w_score[firsts]
        start[has] = w_start[firsts] - first_line[has]
    return score, start
