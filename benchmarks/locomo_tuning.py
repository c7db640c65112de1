"""The tuning modes of benchmarks/locomo.py: leave-one-conversation-out (`--loco`) and the
calibration of recall's abstention (`--abstention`). Run through locomo.py.

--loco: every candidate setting (the defaults, and each tunable number moved one step
either way: `candidates`) is scored on every conversation; then, for each conversation in
turn, the candidate with the best objective — turn any@10 + session MRR@10 — on the
*other* conversations is chosen and scored on this one. The held-out figures pool those
choices; the in-sample ones are the best candidate on all conversations scored on them.
Ties go to the defaults, then to the candidate listed first.

--abstention: each question is asked of its own conversation's atoms (it has an answer
there) and of the next conversation's (it has none); recall's abstention rule (best dense
similarity below DENSE_FLOOR and lexical coverage below COVERAGE_FLOOR) is evaluated on a
grid of floors, chosen by leave-one-conversation-out as above, maximising the share of
unanswerable questions answered "no atom matches" with at most MAX_FALSE_ABSTENTION of the
answerable ones abstained on.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, replace

from locomo import Conversation, K, Scores, Stores, recall_ranker, sess_gold, turn_gold

from cortexfs import recall as rc
from cortexfs.recall.filters import Filters

MAX_FALSE_ABSTENTION = 0.02


@dataclass(frozen=True)
class Candidate:
    weights: rc.Weights
    tuning: rc.Tuning

    def name(self, base: Candidate) -> str:
        """What differs from `base`: `k1 1.2, phrase_weight 0.5` (or `defaults`)."""
        moved = [f"{f} {getattr(self.tuning, f)}" for f in STEPS
                 if getattr(self.tuning, f) != getattr(base.tuning, f)]
        moved += [f"{f} {getattr(self.weights, f)}" for f in WEIGHT_STEPS
                  if getattr(self.weights, f) != getattr(base.weights, f)]
        return ", ".join(moved) or "defaults"

    def neighbours(self, dense: bool) -> list[Candidate]:
        """This setting with one number moved to each of its other values."""
        out = []
        for f, values in STEPS.items():
            out += [Candidate(self.weights, replace(self.tuning, **{f: v})) for v in values
                    if v != getattr(self.tuning, f)]
        for f, values in WEIGHT_STEPS.items():
            if f == "dense" and not dense:
                continue
            out += [Candidate(replace(self.weights, **{f: v}), self.tuning) for v in values
                    if v != getattr(self.weights, f)]
        return out


# the values each number may take (the defaults among them)
STEPS: dict[str, list[float | int]] = {
    "k1": [1.2, 1.5, 2.0], "b": [0.5, 0.75, 0.9], "passage_lines": [2, 3, 4],
    "passage_weight": [0.25, 0.5, 1.0, 2.0], "phrase_weight": [0.0, 0.5, 1.0, 2.0],
    "fuzzy_weight": [0.0, 0.4, 0.7, 1.0]}
WEIGHT_STEPS: dict[str, list[float]] = {
    "when": [0.25, 0.5, 1.0], "recency": [0.0, 0.05, 0.15], "dense": [0.1, 0.25, 0.5]}
ROUNDS = 4  # coordinate-descent rounds at most


def _pool(parts: list[Scores]) -> Scores:
    out = Scores()
    for s in parts:
        for c in s.n:
            out.n[c] += s.n[c]
            out.any_[c] += s.any_[c]
            out.all_[c] += s.all_[c]
            out.mrr[c] += s.mrr[c]
    return out


def _objective(turn: Scores, sess: Scores) -> float:
    return turn.row("any", None) + sess.row("mrr", None)


class Table:
    """Each candidate's scores per conversation, computed once."""

    def __init__(self, convs: list[Conversation], stores: Stores) -> None:
        self.convs, self.stores = convs, stores
        self.scores: dict[Candidate, tuple[dict[str, Scores], dict[str, Scores]]] = {}

    def get(self, cand: Candidate) -> tuple[dict[str, Scores], dict[str, Scores]]:
        if cand not in self.scores:
            started = time.monotonic()
            st = self.stores
            turn_rank = recall_ranker(st.turns, cand.weights, st.turn_key, cand.tuning)
            sess_rank = recall_ranker(st.sessions, cand.weights, st.sess_key, cand.tuning)
            per_t: dict[str, Scores] = {}
            per_s: dict[str, Scores] = {}
            for conv in self.convs:
                per_t[conv.sample_id], per_s[conv.sample_id] = Scores(), Scores()
                for q in conv.questions:
                    per_t[conv.sample_id].add(q.category, turn_rank(q), turn_gold(q))
                    per_s[conv.sample_id].add(q.category, sess_rank(q), sess_gold(q))
            self.scores[cand] = (per_t, per_s)
            print(f"  {len(self.scores):3} candidates scored "
                  f"({time.monotonic() - started:.0f}s for the last)", file=sys.stderr)
        return self.scores[cand]

    def objective(self, cand: Candidate, on: list[str]) -> float:
        per_t, per_s = self.get(cand)
        return round(_objective(_pool([per_t[x] for x in on]),
                                _pool([per_s[x] for x in on])), 9)

    def pooled(self, cand: Candidate, on: list[str]) -> tuple[Scores, Scores]:
        per_t, per_s = self.get(cand)
        return _pool([per_t[x] for x in on]), _pool([per_s[x] for x in on])


def descend(table: Table, start: Candidate, on: list[str], dense: bool) -> Candidate:
    """Coordinate descent from `start` on the conversations `on`: move the one number whose
    move helps most, until none helps (ties keep the current setting)."""
    current = start
    for _ in range(ROUNDS):
        best, best_score = current, table.objective(current, on)
        for cand in current.neighbours(dense):
            score = table.objective(cand, on)
            if score > best_score:
                best, best_score = cand, score
        if best == current:
            break
        current = best
    return current


def loco(convs: list[Conversation], stores: Stores, dense: bool) -> None:
    w = rc.DEFAULT_WEIGHTS if dense else replace(rc.DEFAULT_WEIGHTS, dense=0.0)
    defaults = Candidate(w, rc.DEFAULT_TUNING)
    table = Table(convs, stores)
    ids = [c.sample_id for c in convs]
    print(f"\nLeave-one-conversation-out: coordinate descent from the defaults on the other "
          f"conversations (objective: turn any@{K} + session MRR@{K}), scored on this one")
    head = (f"{'turn any@10':>12}{'all@10':>9}{'MRR@10':>9}{'sess any@10':>13}"
            f"{'sess MRR':>10}")
    print(f"{'held out':10}{'chosen on the others':46}{head}")

    def cells(t: Scores, s: Scores) -> str:
        return (f"{t.row('any', None):>12.3f}{t.row('all', None):>9.3f}"
                f"{t.row('mrr', None):>9.3f}{s.row('any', None):>13.3f}"
                f"{s.row('mrr', None):>10.3f}")

    held_t: list[Scores] = []
    held_s: list[Scores] = []
    chosen: list[str] = []
    for held in ids:
        cand = descend(table, defaults, [x for x in ids if x != held], dense)
        chosen.append(cand.name(defaults))
        t, s = table.pooled(cand, [held])
        held_t.append(t)
        held_s.append(s)
        print(f"{held:10}{cand.name(defaults)[:45]:46}{cells(t, s)}")
    inside = descend(table, defaults, ids, dense)
    print()
    print(f"{'held-out folds, pooled':56}{cells(_pool(held_t), _pool(held_s))}")
    print(f"{'in-sample (' + inside.name(defaults)[:40] + ')':56}"
          f"{cells(*table.pooled(inside, ids))}")
    print(f"{'defaults, in-sample':56}{cells(*table.pooled(defaults, ids))}")
    print(f"\n{len(table.scores)} candidates scored; choices per fold: " + "; ".join(chosen))


# --- abstention ----------------------------------------------------------------------------------

FLOORS = [round(0.2 + 0.025 * i, 3) for i in range(15)]  # dense similarity: 0.2 … 0.55
COVERAGES = [0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]


def abstention(convs: list[Conversation], stores: Stores) -> None:
    ids = [c.sample_id for c in convs]
    levels = {"turn": stores.turns, "session": stores.sessions}
    # level → conversation → (answerable, best dense similarity, lexical coverage)
    seen: dict[str, dict[str, list[tuple[bool, float, float]]]] = {}
    for level, store in levels.items():
        retriever = rc.open_retriever(store, dense=True)
        retriever.refresh()
        seen[level] = {x: [] for x in ids}
        started = time.monotonic()
        for n, conv in enumerate(convs):
            other = ids[(n + 1) % len(ids)]
            for q in conv.questions:
                for project, answerable in ((conv.sample_id, True), (other, False)):
                    sim, cov = retriever.closeness(q.text, Filters(project=project))
                    seen[level][conv.sample_id].append((answerable, sim or 0.0, cov))
        print(f"  {level}: {2 * sum(len(c.questions) for c in convs)} asked in "
              f"{time.monotonic() - started:.0f}s", file=sys.stderr)

    def rates(on: list[str], floor: float, cover: float,
              only: str | None = None) -> tuple[float, float]:
        rows = [r for lv in seen if only in (None, lv) for x in on for r in seen[lv][x]]
        false = [r for r in rows if r[0]]
        true = [r for r in rows if not r[0]]

        def abstains(r: tuple[bool, float, float]) -> bool:
            return r[1] < floor and r[2] < cover

        return (sum(map(abstains, false)) / len(false), sum(map(abstains, true)) / len(true))

    def choose(on: list[str]) -> tuple[float, float]:
        """The floors abstaining most on unanswerable questions with at most
        MAX_FALSE_ABSTENTION of the answerable ones abstained on, at either level."""
        grid = [(f, c) for f in FLOORS for c in COVERAGES]
        ok = [g for g in grid if max(rates(on, *g, only=lv)[0] for lv in seen)
              <= MAX_FALSE_ABSTENTION]
        return max(ok, key=lambda g: (rates(on, *g)[1], -g[0], -g[1])) if ok else (0.0, 0.0)

    print("\nAbstention: each question against its own conversation (answerable) and the "
          "next one's (not), turn and session atoms")
    for lv in seen:
        ans = [r[1] for x in ids for r in seen[lv][x] if r[0]]
        una = [r[1] for x in ids for r in seen[lv][x] if not r[0]]
        print(f"best dense similarity, {lv} atoms: answerable median "
              f"{statistics.median(ans):.3f}, unanswerable median {statistics.median(una):.3f}")
    print(f"{'held out':12}{'floors chosen on the others':30}"
          + "".join(f"{lv + ' false abst.':>20}{lv + ' abst. no answer':>22}" for lv in seen))
    chosen = {held: choose([x for x in ids if x != held]) for held in ids}
    for held, (floor, cover) in chosen.items():
        cells = "".join(f"{a:>20.3f}{b:>22.3f}"
                        for a, b in (rates([held], floor, cover, lv) for lv in seen))
        print(f"{held:12}{f'dense < {floor}, coverage < {cover}':30}{cells}")
    for lv in seen:  # pooled over the held-out folds, each with its own floors
        rows = [(r, chosen[x]) for x in ids for r in seen[lv][x]]
        false = [r[1] < f and r[2] < c for r, (f, c) in rows if r[0]]
        true = [r[1] < f and r[2] < c for r, (f, c) in rows if not r[0]]
        print(f"held-out, pooled, {lv} atoms: false abstention {sum(false) / len(false):.3f}, "
              f"abstained when there is no answer {sum(true) / len(true):.3f}")
    floor, cover = choose(ids)
    for lv in seen:
        fa, ta = rates(ids, floor, cover, lv)
        print(f"in-sample floors (dense < {floor}, coverage < {cover}), {lv} atoms: false "
              f"abstention {fa:.3f}, abstained when no answer {ta:.3f}")
        fa, ta = rates(ids, rc.query.DENSE_FLOOR, rc.query.COVERAGE_FLOOR, lv)
        print(f"shipped floors (dense < {rc.query.DENSE_FLOOR}, coverage < "
              f"{rc.query.COVERAGE_FLOOR}), {lv} atoms: false abstention {fa:.3f}, abstained "
              f"when no answer {ta:.3f}")
