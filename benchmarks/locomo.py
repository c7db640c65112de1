#!/usr/bin/env python3
"""LoCoMo retrieval benchmark for `cortex recall` (retrieval only: no reader, no answers).

    python benchmarks/locomo.py --data ../shared/data/locomo-dev.json [--workdir DIR]
                                [--no-dense] [--no-ablation] [--conversations N]

Imports LoCoMo (snap-research/LoCoMo `data/locomo10.json` format) into two temporary stores,
one project per conversation:

- turn level: one atom per dialog turn. The atom is what an importer of a chat log writes:
  summary = `Speaker: text` (cut at the summary limit, the full turn is in the body),
  tags = the speaker and the session (`caroline`, `session-3`), date = the session's date;
  the body holds the session's date and speakers, the whole turn (with the caption of a
  shared photo, `[shares a photo of …]`), and the turn before and after it as context:
  a reply such as "Yes, last Friday!" means nothing without the question it answers.
- session level: one atom per session (the unit the Cortex paper scores): summary =
  `Speaker A and Speaker B, <date>` plus the session's first words, the body = every turn.

Then it runs `cortexfs.recall.recall` (the library call) for every question with evidence,
category 5 (adversarial) excluded, and prints per category and overall: turn level
any@10 (some evidence turn in the top 10), all@10 (every evidence turn), MRR@10; session
level any@10 and MRR@10. It also prints plain BM25 (bm25s over `speaker: text`, English
stop words, Snowball stems, k1 1.5 b 0.75 — the data README's baseline) and an ablation
row per signal. The answers are never read, nothing is tuned per question.

Malformed evidence ids (`D8:6; D9:17`, `D:11:26`, `D30:05`) are repaired when unambiguous
and dropped when they name no turn; the counts are printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from cortexfs import recall as rc
from cortexfs import scaffold
from cortexfs.atoms import EXPERIMENT, MAX_SUMMARY
from cortexfs.escape import yaml_scalar
from cortexfs.fsutil import atomic_write
from cortexfs.store import Store

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
K = 10
_DIA = re.compile(r"^D(\d+):(\d+)$")
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}


# --- data ------------------------------------------------------------------------------------


@dataclass
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str  # with the photo caption, if any
    raw: str  # the text alone

    @property
    def line(self) -> str:
        return f"{self.speaker}: {self.text}"

    @property
    def plain(self) -> str:
        return f"{self.speaker}: {self.raw}"


@dataclass
class Session:
    number: int
    when: str  # as the data writes it: "1:56 pm on 8 May, 2023"
    date: dt.date | None
    turns: list[Turn]


@dataclass
class Question:
    conv: str
    text: str
    category: int
    evidence: list[str]  # repaired dia ids that name a turn


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: list[Session]
    questions: list[Question] = field(default_factory=list)

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]


@dataclass
class EvidenceStats:
    ids: int = 0
    repaired: int = 0
    dropped: int = 0
    questions_without_evidence: int = 0


def parse_date(when: str) -> dt.date | None:
    """`1:56 pm on 8 May, 2023` → 2023-05-08."""
    m = re.search(r"(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})", when)
    if not m or m.group(2).lower() not in _MONTHS:
        return None
    return dt.date(int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1)))


def repair_evidence(raw: Iterable[object], known: set[str],
                    stats: EvidenceStats) -> list[str]:
    """Canonical dia ids of an evidence list: split joined ids, fix `D:11:26` and `D30:05`,
    drop what names no turn."""
    out: list[str] = []
    for item in raw:
        text = str(item).strip()
        parts = [p for p in re.split(r"[;,\s]+", text) if p]
        for part in parts:
            stats.ids += 1
            fixed = part
            m = re.match(r"^D:?(\d+):(\d+)$", part)
            if m:
                fixed = f"D{int(m.group(1))}:{int(m.group(2))}"
            if fixed != part or len(parts) > 1:
                stats.repaired += 1
            if fixed in known:
                out.append(fixed)
            else:
                stats.dropped += 1
    return list(dict.fromkeys(out))


def load(path: Path, limit: int | None = None) -> tuple[list[Conversation], EvidenceStats]:
    """The conversations and their scorable questions (category 5 left out)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    stats = EvidenceStats()
    convs: list[Conversation] = []
    for raw in data[:limit]:
        c = raw["conversation"]
        numbers = sorted(int(m.group(1)) for k in c
                         if (m := re.match(r"^session_(\d+)$", k)) and isinstance(c[k], list))
        sessions = []
        for n in numbers:
            turns = []
            for t in c[f"session_{n}"]:
                raw_text = str(t.get("text", "")).strip()
                text = raw_text
                if t.get("blip_caption"):
                    text += f" [shares a photo of {t['blip_caption']}]"
                turns.append(Turn(str(t["dia_id"]), n, str(t["speaker"]), text, raw_text))
            when = str(c.get(f"session_{n}_date_time", ""))
            sessions.append(Session(n, when, parse_date(when), turns))
        conv = Conversation(raw["sample_id"], (c["speaker_a"], c["speaker_b"]), sessions)
        known = {t.dia_id for t in conv.turns}
        for qa in raw["qa"]:
            if int(qa["category"]) == 5:
                continue
            evidence = repair_evidence(qa.get("evidence") or [], known, stats)
            if not evidence:
                stats.questions_without_evidence += 1
                continue
            conv.questions.append(Question(conv.sample_id, str(qa["question"]),
                                           int(qa["category"]), evidence))
        convs.append(conv)
    return convs, stats


# --- import --------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def _summary(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_SUMMARY else text[:MAX_SUMMARY - 1].rstrip() + "…"


def _atom(atom_id: str, date: dt.date | None, project: str, summary: str, tags: list[str],
          body: str) -> str:
    return (f"---\nid: {atom_id}\ndate: {date.isoformat() if date else '2000-01-01'}\n"
            f"project: {project}\nsummary: {yaml_scalar(_summary(summary))}\n"
            f"tags: {yaml_scalar(tags)}\n---\n{body}")


def import_turns(store: Store, conv: Conversation) -> dict[str, str]:
    """One experiment atom per turn; returns dia id → atom id."""
    project, _ = scaffold.new_project(store, conv.sample_id)
    folder = project.folder(EXPERIMENT)
    folder.mkdir(parents=True, exist_ok=True)
    ids: dict[str, str] = {}
    n = 0
    for session in conv.sessions:
        header = (f"Session {session.number}, {session.when} — "
                  f"{conv.speakers[0]} and {conv.speakers[1]}.")
        for j, turn in enumerate(session.turns):
            n += 1
            atom_id = EXPERIMENT.format_id(n)
            ids[turn.dia_id] = atom_id
            context = [session.turns[i].line for i in (j - 1, j + 1)
                       if 0 <= i < len(session.turns)]
            body = f"\n{header}\n\n{turn.line}\n"
            if context:
                body += "\n## Context\n\n" + "\n".join(f"> {line}" for line in context) + "\n"
            body += f"\nSource: LoCoMo {conv.sample_id} {turn.dia_id}\n"
            text = _atom(atom_id, session.date, conv.sample_id, turn.line,
                         [_slug(turn.speaker), f"session-{session.number}"], body)
            atomic_write(folder / f"{atom_id}.md", text)
    return ids


def import_sessions(store: Store, conv: Conversation) -> dict[int, str]:
    """One experiment atom per session; returns session number → atom id."""
    project, _ = scaffold.new_project(store, conv.sample_id)
    folder = project.folder(EXPERIMENT)
    folder.mkdir(parents=True, exist_ok=True)
    ids: dict[int, str] = {}
    for n, session in enumerate(conv.sessions, start=1):
        atom_id = EXPERIMENT.format_id(n)
        ids[session.number] = atom_id
        first = session.turns[0].line if session.turns else ""
        summary = f"{conv.speakers[0]} and {conv.speakers[1]}, {session.when}: {first}"
        body = (f"\nSession {session.number}, {session.when}.\n\n"
                + "\n".join(t.line for t in session.turns)
                + f"\n\nSource: LoCoMo {conv.sample_id} session {session.number}\n")
        tags = [_slug(s) for s in conv.speakers] + [f"session-{session.number}"]
        atomic_write(folder / f"{atom_id}.md",
                     _atom(atom_id, session.date, conv.sample_id, summary, tags, body))
    return ids


def make_store(root: Path) -> Store:
    store = Store(root)
    scaffold.init_store(store)
    return store


# --- scoring -----------------------------------------------------------------------------------


@dataclass
class Scores:
    """Per-question metrics, summed per category."""

    n: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    any_: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    all_: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    mrr: dict[int, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, category: int, ranked: list[str], gold: set[str]) -> None:
        top = ranked[:K]
        found = [i for i, a in enumerate(top) if a in gold]
        self.n[category] += 1
        self.any_[category] += 1.0 if found else 0.0
        self.all_[category] += 1.0 if gold <= set(top) else 0.0
        self.mrr[category] += 1.0 / (found[0] + 1) if found else 0.0

    def row(self, metric: str, category: int | None) -> float:
        values = {"any": self.any_, "all": self.all_, "mrr": self.mrr}[metric]
        cats = [category] if category is not None else list(self.n)
        n = sum(self.n[c] for c in cats)
        return sum(values[c] for c in cats) / n if n else 0.0


Ranker = Callable[[Question], list[str]]


def evaluate(convs: list[Conversation], ranker: Ranker,
             gold_of: Callable[[Question], set[str]]) -> Scores:
    scores = Scores()
    for conv in convs:
        for q in conv.questions:
            scores.add(q.category, ranker(q), gold_of(q))
    return scores


# --- plain BM25 (the data README's baseline) -------------------------------------------------


def plain_bm25(convs: list[Conversation], level: str) -> Ranker:
    """bm25s over `speaker: text` per conversation (turns, or whole sessions)."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    indexes: dict[str, tuple[bm25s.BM25, list[str]]] = {}
    for conv in convs:
        if level == "turn":
            keys = [t.dia_id for t in conv.turns]
            docs = [t.plain for t in conv.turns]
        else:
            keys = [str(s.number) for s in conv.sessions]
            docs = ["\n".join(t.plain for t in s.turns) for s in conv.sessions]
        model = bm25s.BM25(k1=1.5, b=0.75)
        model.index(bm25s.tokenize(docs, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
        indexes[conv.sample_id] = (model, keys)

    def rank(q: Question) -> list[str]:
        model, keys = indexes[q.conv]
        tokens = bm25s.tokenize([q.text], stopwords="en", stemmer=stemmer, show_progress=False)
        k = min(K, len(keys))
        try:
            results, scores = model.retrieve(tokens, k=k, show_progress=False)
        except ValueError:  # bm25s refuses a query with no known token
            return []
        return [keys[int(i)] for i, s in zip(results[0], scores[0], strict=True) if s > 0]

    return rank


# --- runs --------------------------------------------------------------------------------------

VARIANTS: list[tuple[str, rc.Weights]] = [
    ("cortex recall (all signals)", rc.DEFAULT_WEIGHTS),
    ("  lexical only", rc.Weights(dense=0, heat=0, recency=0, when=0)),
    ("  dense only", rc.Weights(lexical=0, heat=0, recency=0, when=0)),
    ("  without lexical", rc.Weights(lexical=0)),
    ("  without dense", rc.Weights(dense=0)),
    ("  without heat", rc.Weights(heat=0)),
    ("  without recency", rc.Weights(recency=0)),
    ("  without when (query dates)", rc.Weights(when=0)),
    ("  dense at weight 1 (as lexical)", rc.Weights(dense=1.0)),
]


def recall_ranker(store: Store, weights: rc.Weights, to_key: dict[tuple[str, str], str],
                  tuning: rc.Tuning | None = None) -> Ranker:
    def rank(q: Question) -> list[str]:
        result = rc.recall(store, q.text, project=q.conv, k=K, weights=weights,
                           tuning=tuning, snippets=False, max_age=3600)
        return [to_key[(h.project, h.id)] for h in result.hits]

    return rank


def print_table(title: str, rows: list[tuple[str, Scores]], metrics: list[str]) -> None:
    """One line per run: the overall metrics, then the same per category."""
    cats = sorted({c for _, s in rows for c in s.n})
    names = {"any": f"any@{K}", "all": f"all@{K}", "mrr": f"MRR@{K}"}
    print(f"\n{title}")
    print("per category: " + ", ".join(f"{CATEGORIES.get(c, c)} (n={rows[0][1].n[c]})"
                                       for c in cats))
    head = "".join(f"{names[m]:>9}" for m in metrics)
    cat_head = "".join(f"  {CATEGORIES.get(c, str(c))[:11]:>{9 * len(metrics)}}" for c in cats)
    print(f"{'':38}{head}{cat_head}")
    for name, s in rows:
        overall = "".join(f"{s.row(m, None):>9.3f}" for m in metrics)
        per_cat = "".join("  " + "".join(f"{s.row(m, c):>9.3f}" for m in metrics)
                          for c in cats)
        print(f"{name:38}{overall}{per_cat}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    ap.add_argument("--data", required=True, type=Path, help="locomo10.json-format file")
    ap.add_argument("--workdir", type=Path, help="keep the stores (and their recall caches) "
                    "here to rerun without re-embedding (default: a temporary folder)")
    ap.add_argument("--no-dense", action="store_true", help="skip the dense-vector signal")
    ap.add_argument("--no-ablation", action="store_true", help="only the full-signal row")
    ap.add_argument("--conversations", type=int, help="use the first N conversations only")
    ap.add_argument("--weights", metavar="L,D,H,R,W", help="also run these signal weights "
                    "(lexical, dense, heat, recency, when), e.g. 1,0.25,0.3,0.1,0.5")
    ap.add_argument("--loco", action="store_true",
                    help="choose the tuning by leave-one-conversation-out (tune on all but "
                         "one conversation, score that one, in turn) and report the held-out "
                         "figures next to the in-sample ones")
    ap.add_argument("--abstention", action="store_true",
                    help="calibrate the dense abstention floors: each question against its "
                         "own conversation (true) and another's (no answer there)")
    args = ap.parse_args(argv)
    if not args.data.is_file():
        print(f"error: no data file {args.data}", file=sys.stderr)
        return 1
    convs, ev = load(args.data, args.conversations)
    nq = sum(len(c.questions) for c in convs)
    print(f"LoCoMo: {len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
          f"{sum(len(c.sessions) for c in convs)} sessions, {nq} questions scored "
          f"(category 5 excluded)")
    print(f"evidence ids: {ev.ids} read, {ev.repaired} repaired, {ev.dropped} dropped; "
          f"{ev.questions_without_evidence} questions left with no evidence skipped")
    dense = not args.no_dense and rc.dense_available()
    if args.abstention and not dense:
        print("error: --abstention needs the embed extra (and no --no-dense)", file=sys.stderr)
        return 1
    print(f"dense vectors: {'all-MiniLM-L6-v2' if dense else 'off'}; default weights "
          f"{rc.DEFAULT_WEIGHTS}, {rc.DEFAULT_TUNING}")
    variants = VARIANTS if not args.no_ablation else VARIANTS[:1]
    if args.weights:
        try:
            lex, den, heat, rec, when = (float(x) for x in args.weights.split(","))
        except ValueError:
            print("error: --weights takes five numbers: lexical,dense,heat,recency,when",
                  file=sys.stderr)
            return 1
        variants = [*variants, (f"  weights {args.weights}",
                                rc.Weights(lex, den, heat, rec, when))]
    if not dense:  # the rows that differ only by the dense signal collapse
        variants = [(n + (" — no dense" if i == 0 else ""), replace(w, dense=0.0))
                    for i, (n, w) in enumerate(variants)
                    if "dense" not in n and "without lexical" not in n]
    tmp = None
    if args.workdir:
        root = args.workdir
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="cortex-locomo-")
        root = Path(tmp.name)
    try:
        stores = build_stores(convs, root, dense)
        if args.loco:
            from locomo_tuning import loco

            loco(convs, stores, dense)
        elif args.abstention:
            from locomo_tuning import abstention

            abstention(convs, stores)
        else:
            ablation(convs, stores, variants)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


@dataclass
class Stores:
    """The two imported stores and how their atoms map back to LoCoMo's ids."""

    turns: Store
    turn_key: dict[tuple[str, str], str]  # (project, atom id) → dia id
    sessions: Store
    sess_key: dict[tuple[str, str], str]  # (project, atom id) → session number


def turn_gold(q: Question) -> set[str]:
    return set(q.evidence)


def sess_gold(q: Question) -> set[str]:
    return {e.split(":")[0][1:] for e in q.evidence}


def build_stores(convs: list[Conversation], root: Path, dense: bool) -> Stores:
    """Import the conversations (unless `root` holds them already) and index them."""
    turn_store = make_store(root / "turns")
    turn_key: dict[tuple[str, str], str] = {}
    sess_store = make_store(root / "sessions")
    sess_key: dict[tuple[str, str], str] = {}
    for conv in convs:
        for dia, atom_id in import_turns(turn_store, conv).items():
            turn_key[(conv.sample_id, atom_id)] = dia
        for number, atom_id in import_sessions(sess_store, conv).items():
            sess_key[(conv.sample_id, atom_id)] = str(number)
    for store in (turn_store, sess_store):
        started = time.monotonic()
        rc.recall(store, "warm up", k=1, weights=rc.DEFAULT_WEIGHTS if dense
                  else rc.Weights(dense=0), progress=_progress)
        print(f"indexed {store.home.name} in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return Stores(turn_store, turn_key, sess_store, sess_key)


def ablation(convs: list[Conversation], stores: Stores,
             variants: list[tuple[str, rc.Weights]]) -> None:
    """The plain BM25 baseline and one row per variant, turn and session level."""
    rows_t = [("plain BM25 (bm25s, speaker: text)", evaluate(convs, plain_bm25(convs, "turn"),
                                                             turn_gold))]
    rows_s = [("plain BM25 (bm25s, speaker: text)",
               evaluate(convs, plain_bm25(convs, "session"), sess_gold))]
    for name, weights in variants:
        started = time.monotonic()
        rows_t.append((name, evaluate(convs, recall_ranker(stores.turns, weights,
                                                           stores.turn_key), turn_gold)))
        rows_s.append((name, evaluate(convs, recall_ranker(stores.sessions, weights,
                                                           stores.sess_key), sess_gold)))
        print(f"{name.strip()}: {time.monotonic() - started:.1f}s", file=sys.stderr)
    print_table("Turn level (one atom per dialog turn): any / all / MRR @10",
                rows_t, ["any", "all", "mrr"])
    print_table("Session level (one atom per session): any / MRR @10",
                rows_s, ["any", "mrr"])


def _progress(what: str, done: int, total: int) -> None:
    print(f"  {what}: {done}/{total}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
