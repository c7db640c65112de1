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

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import io
import json
import math
import os
import re
import stat
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from cortexfs import accesslog, wall
from cortexfs.atoms import ATOM_ID, KIND_BY_PREFIX, Atom, as_date, kind_of_filename, kind_of_id
from cortexfs.errors import AtomParseError, CortexError, InvalidInputError
from cortexfs.frontmatter import MAX_ATOM_BYTES, check_size, decode, parse, read_bytes
from cortexfs.fsutil import atomic_write, file_lock
from cortexfs.loader import RACY_NS
from cortexfs.store import Project, Store
from cortexfs.strength import strength

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
BM25_K1 = 1.5
BM25_B = 0.75
SUMMARY_REPEAT = 2  # the one-line summary says what the atom is about: count it twice
PASSAGE_LINES = 3  # body lines per lexical passage (a question and its answer, and one more)
TAGS_REPEAT = 1
PASSAGE_TOKENS = 128  # word pieces per embedded passage: one topic each, not a diluted mix
DENSE_BUDGET = 2048  # word pieces embedded per atom at most (atoms are meant to be short)
MAX_K = 1000
# The dense ranking compares similarities in steps of this size (0.51 and 0.58 tie). RRF
# trusts ranks, and MiniLM's similarities of a handful of related atoms sit within a few
# hundredths of each other: ranked as they come, that noise reorders the lexical top
# (LoCoMo dev session MRR 0.813; in steps of 0.1, 0.826 for the same turn-level recall).
DENSE_TIE = 0.1

# English function words (the usual IR stop list): they carry no topic, and questions are
# full of them ("what did … do when …").
_STOP_TEXT = """
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't
doing don't down during each few for from further had hadn't has hasn't have haven't having
he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've
if in into is isn't it it's its itself let's me more most mustn't my myself no nor not of off
on once only or other ought our ours ourselves out over own same shan't she she'd she'll she's
should shouldn't so some such than that that's the their theirs them themselves then there
there's these they they'd they'll they're they've this those through to too under until up
very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's
which while who who's whom why why's with won't would wouldn't you you'd you'll you're you've
your yours yourself yourselves also just will shall may might must get got
"""
STOPWORDS = frozenset(_STOP_TEXT.split())

_WORD = re.compile(r"\w+(?:'\w+)*")
CACHE_VERSION = 7
NO_EMBED_NOTE = ("recall is using the lexical, heat and recency signals only; install the "
                 "`embed` extra (pip install 'cortexfs[embed]') to add dense vectors")

# --- results ----------------------------------------------------------------------------------


@dataclass
class SignalMatch:
    """How one signal ranked a hit: its rank (1 = best) and raw score."""

    rank: int
    score: float


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


# --- text processing --------------------------------------------------------------------------


class Analyzer:
    """Text → index terms: lower-cased words of 2+ characters, stop words out, stemmed.

    Atom ids (EXP-042, K-007) also become whole terms (`exp-042`), so a query naming an id
    finds the atom and the atoms that cite it.
    """

    def __init__(self) -> None:
        try:
            import Stemmer  # PyStemmer: bm25s's companion stemmer (Snowball, C)

            self._stem: Callable[[list[str]], list[str]] | None = \
                Stemmer.Stemmer("english").stemWords
            self.name = "snowball-en"
        except ImportError:  # pragma: no cover - PyStemmer is a dependency; stay usable
            self._stem = None
            self.name = "plain"
        self._cache: dict[str, str] = {}

    def terms(self, text: str) -> list[str]:
        words = _words(text)
        out = self._stemmed(words)
        out.extend(m.lower() for m in ATOM_ID.findall(text))
        return out

    def line_terms(self, text: str) -> list[list[str]]:
        """The terms of each line of `text` (what `terms` gives line by line, in one pass)."""
        ids: dict[int, list[str]] = {}
        if "-" in text:
            for m in ATOM_ID.finditer(text):
                ids.setdefault(text.count("\n", 0, m.start()), []).append(m.group().lower())
            text = ATOM_ID.sub(lambda m: " " * len(m.group()), text)
        lowered = text.lower().replace("\u2019", "'")
        newlines = [i for i, ch in enumerate(lowered) if ch == "\n"] if "\n" in lowered \
            else []
        words: list[str] = []
        starts: list[int] = []
        for m in _WORD.finditer(lowered):
            w = m.group()
            if len(w) > 1 and w not in STOPWORDS:
                words.append(w)
                starts.append(m.start())
        out: list[list[str]] = [[] for _ in range(len(newlines) + 1)]
        line_of = np.searchsorted(np.array(newlines, dtype=np.int64), starts).tolist() \
            if newlines else [0] * len(words)
        for line, term in zip(line_of, self._stemmed(words), strict=True):
            out[line].append(term)
        for line, found in ids.items():
            out[line].extend(found)
        return out

    def _stemmed(self, words: list[str]) -> list[str]:
        if self._stem is None:
            return words
        cache = self._cache
        missing = [w for w in dict.fromkeys(words) if w not in cache]
        if missing:
            for w, s in zip(missing, self._stem(missing), strict=True):
                cache[w] = s
            if len(cache) > 500_000:
                cache.clear()
        return [cache[w] for w in words]

    def query_phrases(self, query: str) -> list[str]:
        """Distinct phrases of a query (see `phrases`)."""
        return list(dict.fromkeys(phrases(self._stemmed(_words(query)))))

    def query_terms(self, query: str) -> tuple[list[str], dict[str, str]]:
        """Distinct terms of a query, and which query word each came from."""
        words = _words(query)
        origin: dict[str, str] = {}
        for word, term in zip(words, self._stemmed(words), strict=True):
            origin.setdefault(term, word)
        for m in ATOM_ID.findall(query):
            origin.setdefault(m.lower(), m)
        return list(origin), origin


def _words(text: str) -> list[str]:
    """Lower-cased words of 2+ characters that are not stop words ("don't" is one word),
    atom ids left out."""
    text = ATOM_ID.sub(" ", text)  # ids are whole terms of their own (Analyzer)
    words = _WORD.findall(text.lower().replace("\u2019", "'"))
    return [w for w in words if len(w) > 1 and w not in STOPWORDS]


def lexical_head(summary: str, tags: list[str]) -> str:
    """What BM25 indexes besides the body: the summary and tags, repeated for weight."""
    tag_text = " ".join(t.replace("-", " ").replace("_", " ") for t in tags)
    return "\n".join([summary] * SUMMARY_REPEAT + [tag_text] * TAGS_REPEAT)


def passage_terms(analyzer: Analyzer, body: str) -> list[list[str]]:
    """The terms of each lexical passage of a body: every window of PASSAGE_LINES
    consecutive lines that have terms (the whole body when it is that short; none when it
    has no terms)."""
    return passages_of(analyzer.line_terms(body))


def passages_of(line_terms: list[list[str]]) -> list[list[str]]:
    """`passage_terms` from the terms of each line: a passage's terms, then its lines'
    phrases."""
    lines = [terms for terms in line_terms if terms]
    if not lines:
        return []
    spans = [(0, len(lines))] if len(lines) <= PASSAGE_LINES else \
        [(j, j + PASSAGE_LINES) for j in range(len(lines) - PASSAGE_LINES + 1)]
    pairs = [phrases(terms) for terms in lines]
    return [[t for terms in lines[a:b] for t in terms] + [p for ps in pairs[a:b] for p in ps]
            for a, b in spans]


def phrases(terms: list[str]) -> list[str]:
    """The pairs of adjacent terms (`"onlin cloth"`): a space never occurs in a term. Atom
    ids (`exp-042`, appended to their line) pair with nothing."""
    return [f"{a} {b}" for a, b in zip(terms, terms[1:], strict=False)
            if "-" not in a and "-" not in b]


def dense_texts(summary: str, tags: list[str], body: str) -> tuple[str, str]:
    """The two texts an atom's vectors come from: its summary, and its body (in passages).

    Tags stay out: a list of keywords is a poor sentence for a sentence encoder (BM25
    weighs them instead)."""
    del tags
    return summary, body.strip()


# --- the cached index ------------------------------------------------------------------------


@dataclass
class Doc:
    """What the index keeps of one atom file."""

    key: str  # path under context/projects/, e.g. "flywheel/experiments/EXP-001.md"
    project: str
    id: str
    summary: str
    tags: list[str]
    date: str | None
    status: str
    priority: str | None
    src: str | None
    links: int
    mtime_ns: int
    size: int
    ino: int
    racy: bool  # written so shortly before it was read that a later write could keep its mtime
    sha: str  # of the file's bytes
    vsha: str  # of the texts its vectors come from: a refs/last-ref update keeps them

    def to_row(self) -> list[Any]:
        return [self.key, self.project, self.id, self.summary, self.tags, self.date,
                self.status, self.priority, self.src, self.links, self.mtime_ns, self.size,
                self.ino, self.racy, self.sha, self.vsha]

    @classmethod
    def from_row(cls, row: list[Any]) -> Doc:
        return cls(*row)


class DocTable:
    """The index's docs: the columns every refresh needs (key, project, stamp, vector key)
    as plain lists, each doc's full row parsed only when asked for — a CLI run that loads a
    10,000-atom cache reads a few hundred rows, not all of them."""

    def __init__(self, docs: list[Doc] | None = None) -> None:
        docs = docs or []
        self._rows: list[Doc | None] = list(docs)
        self._blob = b""  # the saved rows, JSON, one after another (see from_arrays)
        self._off: list[int] = []
        self._saved = 0  # rows below this index, unless modified, are still in _blob
        self._modified: set[int] = set()
        self.keys = [d.key for d in docs]
        self.projects = [d.project for d in docs]
        self.vshas = [d.vsha for d in docs]
        self.stamps: list[Any] = [(d.mtime_ns, d.size, d.ino) for d in docs]
        self.racy = [d.racy for d in docs]

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> DocTable:
        table = cls()
        table.keys = arrays["keys"].tolist()
        table.projects = arrays["projects"].tolist()
        table.vshas = arrays["vshas"].tolist()
        table.stamps = arrays["stamps"].tolist()  # [mtime_ns, size, ino] lists
        table.racy = arrays["racy"].tolist()
        blob, off = arrays["rows"].tobytes(), arrays["row_off"].tolist()
        n = len(table.keys)
        if not (len(table.projects) == len(table.vshas) == len(table.stamps) == len(table.racy)
                == n and len(off) == n + 1 and off[-1] == len(blob)):
            raise ValueError("inconsistent doc table")
        table._blob, table._off, table._saved = blob, off, n
        table._rows = [None] * n
        return table

    def to_arrays(self) -> dict[str, np.ndarray]:
        raws = [raw if (raw := self._raw_row(i)) is not None
                else json.dumps(self[i].to_row()).encode("utf-8") for i in range(len(self))]
        return {
            "keys": np.array(self.keys, dtype=np.str_),
            "projects": np.array(self.projects, dtype=np.str_),
            "vshas": np.array(self.vshas, dtype=np.str_),
            "stamps": np.array(self.stamps, dtype=np.int64).reshape(len(self), 3),
            "racy": np.array(self.racy, dtype=bool),
            "rows": np.frombuffer(b"".join(raws), dtype=np.uint8),
            "row_off": np.concatenate([[0], np.cumsum([len(r) for r in raws])]).astype(
                np.int64),
        }

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> Doc:
        doc = self._rows[i]
        if doc is None:
            raw = self._raw_row(i)
            assert raw is not None
            doc = self._rows[i] = Doc.from_row(json.loads(raw))
        return doc

    def _raw_row(self, i: int) -> bytes | None:
        """The saved JSON row of doc i, while it is unchanged since loading."""
        if i >= self._saved or i in self._modified:
            return None
        return self._blob[self._off[i]:self._off[i + 1]]

    def __setitem__(self, i: int, doc: Doc) -> None:
        self._rows[i] = doc
        self._modified.add(i)
        self.keys[i], self.projects[i], self.vshas[i] = doc.key, doc.project, doc.vsha
        self.stamps[i], self.racy[i] = (doc.mtime_ns, doc.size, doc.ino), doc.racy

    def __iter__(self) -> Iterator[Doc]:
        return (self[i] for i in range(len(self)))


class RecallIndex:
    """The lexical index, vectors and access-log folds of one store, cached on disk.

    `refresh()` brings it up to date with the atom files (cheap when nothing changed: one
    stat per atom), `search()` ranks. One instance per store per process (`open_index`).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.dir = store.cache_dir / "recall"
        self.analyzer = Analyzer()
        self.docs = DocTable()
        self.skipped: dict[str, tuple[int, int, int, str]] = {}  # key → mtime, size, ino, why
        self.terms: np.ndarray  # every doc's term ids, joined
        self.term_off: np.ndarray  # doc i: [off[i], off[i+1])
        self.vocab: np.ndarray  # sorted: a term's id is its place
        self.bm25: dict[str, np.ndarray]
        # Passages (see PASSAGE_LINES): their term ids joined, passage j is
        # [pterm_off[j], pterm_off[j+1]); doc i owns passages [doc_poff[i], doc_poff[i+1]).
        self.pterms: np.ndarray
        self.pterm_off: np.ndarray
        self.doc_poff: np.ndarray
        self.powner: np.ndarray  # passage → doc
        self.pbm25: dict[str, np.ndarray]
        self.logs: dict[str, accesslog.AccessStats] = {}  # filled by refresh()
        self.log_states: dict[str, list[Any]] = {}  # accesslog.resume states, saved
        self._empty()
        self.by_key: dict[str, int] = {}
        self.vectors: VectorStore | None = None
        self._projects: tuple[dict[str, int], np.ndarray] | None = None
        self._stamp_cache: dict[str, Any] | None = None  # key → (mtime_ns, size, ino)
        self.generation = 0  # bumped whenever the docs change (the vector store follows it)
        self._checked = -math.inf  # time.monotonic() of the last full check
        self._loaded = False

    # -- persistence --

    @property
    def path(self) -> Path:
        return self.dir / f"lexical-v{CACHE_VERSION}.npz"

    def _load(self) -> None:
        self._loaded = True
        try:
            npz = map_npz(self.path)
            meta = json.loads(bytes(npz["meta"]).decode("utf-8"))
            if meta.get("analyzer") != self.analyzer.name or meta.get("params") != _params():
                return
            docs = DocTable.from_arrays({k: npz[k] for k in (
                "keys", "projects", "vshas", "stamps", "racy", "rows", "row_off")})
            vocab = npz["vocab"]
            terms, term_off = npz["terms"], npz["term_off"]
            bm25 = {k: npz[k] for k in ("data", "indices", "indptr")}
            pterms, pterm_off, doc_poff = npz["pterms"], npz["pterm_off"], npz["doc_poff"]
            pbm25 = {k: npz["p_" + k] for k in ("data", "indices", "indptr")}
            if len(term_off) != len(docs) + 1 or len(bm25["indptr"]) != len(vocab) + 1 \
                    or len(doc_poff) != len(docs) + 1 or int(doc_poff[-1]) + 1 != \
                    len(pterm_off) or len(pbm25["indptr"]) != len(vocab) + 1:
                raise ValueError("inconsistent cache")
            self.docs, self.terms, self.term_off, self.bm25 = docs, terms, term_off, bm25
            self._set_passages(pterms, pterm_off, doc_poff, pbm25)
            self.vocab = vocab
            self.skipped = {k: (int(v[0]), int(v[1]), int(v[2]), str(v[3]))
                            for k, v in meta["skipped"].items()}
            self.log_states = {str(p): list(s) for p, s in meta["logs"].items()}
        except (OSError, ValueError, KeyError, TypeError, IndexError, EOFError,
                zipfile.BadZipFile):
            self._empty()  # missing or corrupt
        self._changed_docs()

    def _changed_docs(self) -> None:
        self.by_key = {k: i for i, k in enumerate(self.docs.keys)}
        self._projects = None
        self._stamp_cache = None
        self.generation += 1

    def _save(self) -> None:
        meta = {"analyzer": self.analyzer.name, "params": _params(),
                "skipped": {k: list(v) for k, v in self.skipped.items()},
                "logs": self.log_states}
        arrays: dict[str, Any] = {
            "meta": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
            "vocab": self.vocab, "terms": self.terms, "term_off": self.term_off,
            "pterms": self.pterms, "pterm_off": self.pterm_off, "doc_poff": self.doc_poff,
            **{"p_" + k: v for k, v in self.pbm25.items()},
            **self.bm25, **self.docs.to_arrays()}
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        with contextlib.suppress(OSError):  # a read-only cache only costs speed
            atomic_write(self.path, buf.getvalue())

    # -- freshness --

    def refresh(self, progress: Callable[[int, int], None] | None = None,
                dense: bool = True, max_age: float = 0.0) -> None:
        """Re-read changed atom files, rebuild what changed, fold new access-log lines.

        `max_age` > 0 skips the check when the last one is younger than that many seconds
        (a long-lived server's choice; `invalidate()` forces the next check).
        """
        now = time.monotonic()
        if max_age > 0 and now - self._checked < max_age:
            if dense and self.vectors is not None and not self.vectors.ready(self):
                self.vectors.sync(self, progress)
            return
        try:
            self._refresh(now, progress, dense)
        except IndexError:  # damaged bytes in the mapped cache (map_npz): start afresh
            self.discard()
            self._refresh(now, progress, dense)

    def _refresh(self, now: float, progress: Callable[[int, int], None] | None,
                 dense: bool) -> None:
        now_ns = time.time_ns()
        if not self._loaded:
            self._load()
        changed = False
        seen: set[str] = set()
        new_docs: list[Doc] = []
        new_terms: dict[str, tuple[list[str], list[list[str]]]] = {}
        replaced: dict[int, Doc] = {}
        stamps = self._stamps()
        projects = self.store.projects()
        for project in projects:
            for kind in KIND_BY_PREFIX.values():
                prefix = f"{project.name}/{kind.folder}/"
                if wall.reason(self.store.context, project.folder(kind)):
                    continue  # a linked folder is not part of the store
                try:
                    entries = os.scandir(project.folder(kind))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                with entries:
                    for entry in entries:
                        key = prefix + entry.name
                        known = stamps.get(key)
                        if known is None and kind_of_filename(entry.name) is not kind:
                            continue
                        try:
                            st = entry.stat(follow_symlinks=False)  # a link is skipped
                        except FileNotFoundError:
                            continue
                        if not stat.S_ISREG(st.st_mode):
                            continue
                        seen.add(key)
                        idx = self.by_key.get(key)
                        if known is not None and known[0] == st.st_mtime_ns and \
                                known[1] == st.st_size and known[2] == st.st_ino:
                            if idx is None or not self.docs.racy[idx]:
                                continue
                            same = self._still_same(idx, entry.path, now_ns)
                            if same is not None:
                                changed |= same  # True: its racy flag was cleared
                                continue
                        changed = True
                        parsed = _read_doc(project, key, entry.path, st, now_ns)
                        if isinstance(parsed, str):
                            self.skipped[key] = (st.st_mtime_ns, st.st_size, st.st_ino, parsed)
                            if idx is not None:
                                replaced[idx] = replace(self.docs[idx], sha="")  # drop it
                            continue
                        self.skipped.pop(key, None)
                        doc, text, body = parsed
                        if idx is not None and self.docs[idx].sha == doc.sha:
                            self.docs[idx] = doc  # touched, not changed: keep its terms
                            continue
                        if idx is not None:
                            replaced[idx] = doc
                        else:
                            new_docs.append(doc)
                        lines = self.analyzer.line_terms(body)
                        head = self.analyzer.terms(text)
                        new_terms[key] = (head + [t for terms in lines for t in terms],
                                          passages_of(lines))
        gone = [i for i, k in enumerate(self.docs.keys) if k not in seen]
        for key in [k for k in self.skipped if k not in seen]:
            del self.skipped[key]
            changed = True
        if replaced or new_docs or gone:
            self._rebuild(replaced, new_docs, new_terms, set(gone))
        names = {p.name for p in projects}
        for project in projects:
            saved = self.log_states.get(project.name, [])
            self.logs[project.name], state = accesslog.resume(project.access_log, saved)
            if state != saved:
                self.log_states[project.name] = state
                changed = True
        for name in [n for n in self.log_states if n not in names]:
            del self.log_states[name]
            self.logs.pop(name, None)
            changed = True
        if changed or not self.path.exists():
            self._save()
        if changed:
            self._stamp_cache = None  # (the generation moves only when the doc list does)
        self._checked = now
        if dense and self.vectors is not None:
            self.vectors.sync(self, progress)

    def discard(self) -> None:
        """Forget the lexical index, in memory and on disk: the next refresh rebuilds it."""
        with contextlib.suppress(OSError):
            self.path.unlink()
        self._empty()
        self._changed_docs()
        self.invalidate()

    def _empty(self) -> None:
        """No docs, no terms, no passages (a new index, or a missing or corrupt cache)."""
        self.docs, self.skipped, self.log_states = DocTable(), {}, {}
        self.vocab = np.zeros(0, dtype=np.str_)
        self.terms, self.term_off = np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64)
        self.bm25 = _build_bm25(self.terms, self.term_off, 0)
        self._set_passages(self.terms, self.term_off, np.zeros(1, dtype=np.int64), self.bm25)

    def invalidate(self) -> None:
        """Make the next refresh check the files whatever its max_age (after a write)."""
        self._checked = -math.inf

    def _still_same(self, idx: int, path: str, now_ns: int) -> bool | None:
        """Whether a racily-clean file still holds the bytes indexed (git's check): None
        when it changed, else whether its racy flag could be cleared."""
        doc = self.docs[idx]
        try:
            raw = read_bytes(Path(path))
        except (OSError, AtomParseError):
            return None
        if hashlib.sha1(raw).hexdigest() != doc.sha:
            return None
        if now_ns - doc.mtime_ns >= RACY_NS:
            self.docs[idx] = replace(doc, racy=False)
            return True
        return False

    def _stamps(self) -> dict[str, Any]:
        """(mtime_ns, size, inode) of every file the index knows, parsed or skipped."""
        if self._stamp_cache is None:
            stamps = dict(zip(self.docs.keys, self.docs.stamps, strict=True))
            stamps.update({k: (v[0], v[1], v[2]) for k, v in self.skipped.items()})
            self._stamp_cache = stamps
        return self._stamp_cache

    def _rebuild(self, replaced: dict[int, Doc], new_docs: list[Doc],
                 new_terms: dict[str, tuple[list[str], list[list[str]]]],
                 gone: set[int]) -> None:
        """Recompute the BM25 matrix from every doc's (cached or fresh) term ids.

        Only the fresh docs' terms are strings; the others stay ids, remapped with integer
        arrays into the merged vocabulary (a 10,000-atom store rebuilds in well under a
        second after one edit).
        """
        fresh_words = sorted({t for terms, passages in new_terms.values()
                              for t in (*terms, *(t for p in passages for t in p))})
        vocab = np.union1d(self.vocab, np.array(fresh_words, dtype=np.str_))
        old_to_new = np.searchsorted(vocab, self.vocab)
        lookup = {t: int(i) for t, i in zip(fresh_words, np.searchsorted(vocab, fresh_words),
                                              strict=True)}
        docs: list[Doc] = []
        parts: list[np.ndarray] = []
        pparts: list[np.ndarray] = []  # each doc's passages' term ids, joined
        plengths: list[np.ndarray] = []  # each doc's passage lengths

        def add_fresh(doc: Doc) -> None:
            terms, passages = new_terms[doc.key]
            docs.append(doc)
            parts.append(np.array([lookup[t] for t in terms], np.int64))
            pparts.append(np.array([lookup[t] for p in passages for t in p], np.int64))
            plengths.append(np.array([len(p) for p in passages], np.int64))

        for i in range(len(self.docs)):
            if i in gone:
                continue
            fresh = replaced.get(i)
            if fresh is not None:
                if fresh.sha:  # (else it became unparseable)
                    add_fresh(fresh)
                continue
            docs.append(self.docs[i])
            parts.append(old_to_new[self.terms[self.term_off[i]:self.term_off[i + 1]]])
            a, b = int(self.doc_poff[i]), int(self.doc_poff[i + 1])
            pparts.append(old_to_new[self.pterms[self.pterm_off[a]:self.pterm_off[b]]])
            plengths.append(np.diff(self.pterm_off[a:b + 1]))
        for doc in new_docs:
            add_fresh(doc)
        lengths = [len(p) for p in parts]
        ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        pids = np.concatenate(pparts) if pparts else np.zeros(0, np.int64)
        # Drop the terms only deleted or rewritten atoms had: keep the vocabulary compact.
        used = (np.bincount(ids, minlength=len(vocab)) > 0) | \
            (np.bincount(pids, minlength=len(vocab)) > 0) if len(vocab) else \
            np.zeros(0, bool)
        if not used.all():  # (phrases are in passages only)
            remap = np.cumsum(used) - 1
            ids, pids, vocab = remap[ids], remap[pids], vocab[used]
        self.docs = DocTable(docs)
        self.vocab = vocab
        self.terms = ids.astype(np.int32)
        self.term_off = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(
            np.int64)
        self.bm25 = _build_bm25(self.terms, self.term_off, len(vocab))
        plen = np.concatenate(plengths) if plengths else np.zeros(0, np.int64)
        pterm_off = np.concatenate([[0], np.cumsum(plen, dtype=np.int64)]).astype(np.int64)
        doc_poff = np.concatenate([[0], np.cumsum([len(x) for x in plengths],
                                                  dtype=np.int64)]).astype(np.int64)
        pterms = pids.astype(np.int32)
        self._set_passages(pterms, pterm_off, doc_poff,
                           _build_bm25(pterms, pterm_off, len(vocab)))
        self._changed_docs()

    def _set_passages(self, pterms: np.ndarray, pterm_off: np.ndarray, doc_poff: np.ndarray,
                      pbm25: dict[str, np.ndarray]) -> None:
        self.pterms, self.pterm_off, self.doc_poff, self.pbm25 = \
            pterms, pterm_off, doc_poff, pbm25
        self.powner = np.repeat(np.arange(len(doc_poff) - 1, dtype=np.int64),
                                np.diff(doc_poff))

    def term_id(self, term: str) -> int | None:
        """The term's id in the sorted vocabulary; None for a term no atom has."""
        i = int(np.searchsorted(self.vocab, term))
        return i if i < len(self.vocab) and self.vocab[i] == term else None

    # -- ranking --

    def search(self, query: str, project: str | None = None, k: int = 10,
               weights: Weights = DEFAULT_WEIGHTS, now: dt.datetime | None = None) -> list[Hit]:
        """The k best atoms for `query` (in `project` only, when given)."""
        n = len(self.docs)
        if n == 0:
            return []
        allowed = None
        if project is not None:
            allowed = self._project_mask(project)
        ranked: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # signal → (ranks, scores)
        pool: dict[int, None] = {}
        terms, origin = self.analyzer.query_terms(query)
        known = {t: i for t in terms if (i := self.term_id(t)) is not None}
        term_ids = list(known.values())
        if weights.lexical > 0 and term_ids:
            phrase_ids = [i for p in self.analyzer.query_phrases(query)
                          if (i := self.term_id(p)) is not None]
            lexical = self._lexical_scores(term_ids, phrase_ids, allowed)
            ranked["lexical"] = (_ranks(lexical, lexical > 0), lexical)
            _add_pool(pool, lexical, lexical > 0)
        if weights.dense > 0 and self.vectors is not None and self.vectors.ready(self):
            sims = self.vectors.similarities(query)
            ok = np.ones(n, dtype=bool) if allowed is None else allowed
            ranked["dense"] = (dense_ranks(sims, ok), sims)
            _add_pool(pool, sims, ok)
        if not pool:
            return []
        cands = list(pool)
        ranks: dict[str, dict[int, SignalMatch]] = {
            name: {i: SignalMatch(int(r[i]), float(s[i])) for i in cands if r[i] > 0}
            for name, (r, s) in ranked.items()
        }
        if weights.heat > 0:
            now = now or dt.datetime.now(dt.UTC)
            heat = {i: h for i in cands if (h := self._heat(self.docs[i], now)) > 0}
            ranks["heat"] = _rank_values(heat)
        if weights.recency > 0:
            dated = {i: float(d) for i in cands
                     if (d := _ordinal(self.docs[i].date)) is not None}
            ranks["recency"] = _rank_values(dated)
        period = query_period(query) if weights.when > 0 else None
        if period is not None:
            near = {i: -float(period.distance(d)) for i in cands
                    if (d := _ordinal(self.docs[i].date)) is not None}
            ranks["when"] = _rank_values(near)
        fused: list[tuple[float, int]] = []
        for i in cands:
            score = sum(getattr(weights, name) / (RRF_K + r[i].rank)
                        for name, r in ranks.items() if i in r)
            fused.append((score, i))
        fused.sort(key=lambda t: (-t[0], self.docs.keys[t[1]]))
        hits = []
        for score, i in fused[:k]:
            doc = self.docs[i]
            matched = []
            if i in ranks.get("lexical", {}):
                matched = [origin[t] for t, tid in known.items()
                           if _has_term(self.terms, self.term_off, i, tid)]
            hits.append(Hit(
                id=doc.id, project=doc.project, path=self.store.projects_dir / doc.key,
                summary=doc.summary, score=score, status=doc.status, date=doc.date,
                signals={name: r[i] for name, r in ranks.items() if i in r},
                matched=matched,
            ))
        return hits

    def _lexical_scores(self, term_ids: list[int], phrase_ids: list[int],
                        allowed: np.ndarray | None) -> np.ndarray:
        """BM25 of each doc plus BM25 of its best passage (whose phrases count too), each
        over its best (module doc)."""
        n = len(self.docs)
        whole = _bm25_scores(self.bm25, term_ids, n)
        passages = _bm25_scores(self.pbm25, term_ids + phrase_ids, len(self.powner))
        hit = np.flatnonzero(passages)
        best = np.zeros(n, dtype=np.float32)
        np.maximum.at(best, self.powner[hit], passages[hit])
        if allowed is not None:
            whole[~allowed] = 0.0
            best[~allowed] = 0.0
        out = np.zeros(n, dtype=np.float32)
        for scores in (whole, best):
            top = float(scores.max()) if n else 0.0
            if top > 0:
                out += scores / np.float32(top)
        return out

    def _project_mask(self, project: str) -> np.ndarray:
        if self._projects is None or len(self._projects[1]) != len(self.docs):
            names = sorted(set(self.docs.projects))
            code = {p: j for j, p in enumerate(names)}
            self._projects = (code, np.fromiter((code[p] for p in self.docs.projects),
                                                np.int32, len(self.docs)))
        code, per_doc = self._projects
        return np.asarray(per_doc == code.get(project, -1))

    def _heat(self, doc: Doc, now: dt.datetime) -> float:
        stats = self.logs.get(doc.project)
        if stats is None:
            return 0.0
        name = doc.key.rsplit("/", 1)[-1]
        count = stats.counts.get(name, 0)
        if not count:
            return 0.0
        newest = _parse_ts(stats.newest.get(name, ""))
        hours = (now - newest).total_seconds() / 3600 if newest else 0.0
        return count * strength(hours, priority=doc.priority, src=doc.src, related=doc.links)


# The big arrays of the lexical cache, memory-mapped by map_npz rather than read.
MAPPED = frozenset({"terms", "pterms", "data", "indices", "p_data", "p_indices"})


def map_npz(path: Path, mapped: frozenset[str] = MAPPED) -> dict[str, np.ndarray]:
    """The arrays of an uncompressed .npz file (what np.savez writes); those named in
    `mapped` memory-mapped rather than read: a query touches a few columns of the BM25
    matrices, and a 10,000-atom index is over 150 MB. The others are read whole, their zip
    CRC checked. Raises ValueError (or OSError, zipfile.BadZipFile) for a file it cannot use.

    Mapped bytes are not checked: a damaged one shows as an id out of range (IndexError, see
    `recall`) or a wrong score until the next rebuild. The maps stay valid when the file is
    replaced (atomic_write renames a new one over it).
    """
    out: dict[str, np.ndarray] = {}
    with open(path, "rb") as f, zipfile.ZipFile(f) as z:
        for info in z.infolist():
            name = info.filename
            if info.compress_type != zipfile.ZIP_STORED or not name.endswith(".npy"):
                raise ValueError(f"{name}: not a stored .npy member")
            if name[:-4] not in mapped:
                out[name[:-4]] = np.load(io.BytesIO(z.read(info)), allow_pickle=False)
                continue
            f.seek(info.header_offset)
            local = f.read(30)  # the local file header: its name and extra field follow
            if len(local) != 30 or local[:4] != b"PK\x03\x04":
                raise ValueError(f"{name}: bad local header")
            name_len, extra_len = int.from_bytes(local[26:28], "little"), \
                int.from_bytes(local[28:30], "little")
            f.seek(info.header_offset + 30 + name_len + extra_len)
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) \
                else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
            if dtype.hasobject:
                raise ValueError(f"{name}: holds Python objects")
            if math.prod(shape) == 0:
                out[name[:-4]] = np.zeros(shape, dtype)
                continue
            out[name[:-4]] = np.memmap(f, dtype=dtype, mode="r", offset=f.tell(), shape=shape,
                                       order="F" if fortran else "C")
    return out


def _params() -> dict[str, Any]:
    return {"k1": BM25_K1, "b": BM25_B, "summary": SUMMARY_REPEAT, "tags": TAGS_REPEAT,
            "stop": len(STOPWORDS), "passage": PASSAGE_LINES, "phrases": True}


def _read_doc(project: Project, key: str, path_str: Path | str,
              st: os.stat_result, now_ns: int) -> tuple[Doc, str, str] | str:
    """The doc, its lexical text but the body (`lexical_head` and the ids it cites), and
    its body; or the reason the file is skipped.

    `st` is the stat taken before reading: if the file changes meanwhile, its newer mtime
    makes the next refresh read it again.
    """
    path = Path(path_str)
    try:
        check_size(st.st_size, str(path))  # before reading a huge file into memory
        raw = read_bytes(path)  # a regular file, never through a link
        doc = parse(decode(raw, str(path)), str(path))
    except AtomParseError as e:
        return e.reason
    except OSError as e:
        return f"cannot read: {e.strerror}"
    kind = kind_of_filename(path.name)
    assert kind is not None  # _atom_files only yields atom file names
    atom = Atom(path, kind, doc.meta, doc.body)
    date = atom.date.isoformat() if atom.date else None
    priority = atom.meta.get("priority")
    src = atom.meta.get("src")
    d = Doc(key=key, project=project.name, id=atom.id, summary=atom.summary, tags=atom.tags,
            date=date, status=atom.status,
            priority=str(priority) if priority is not None else None,
            src=str(src) if src is not None else None, links=len(atom.links),
            mtime_ns=st.st_mtime_ns, size=st.st_size, ino=st.st_ino,
            racy=now_ns - st.st_mtime_ns < RACY_NS, sha=hashlib.sha1(raw).hexdigest(), vsha="")
    d.vsha = _vector_key(*dense_texts(atom.summary, atom.tags, atom.body))
    cited = " ".join([atom.id, *atom.cited_experiments(), *atom.links])
    return d, f"{lexical_head(atom.summary, atom.tags)}\n{cited}", atom.body


def _vector_key(head: str, full: str) -> str:
    """What an atom's vectors depend on: its texts and how they are cut into passages."""
    return hashlib.sha1(f"{PASSAGE_TOKENS}/{DENSE_BUDGET}\0{head}\0{full}".encode()) \
        .hexdigest()


def _build_bm25(terms: np.ndarray, term_off: np.ndarray, n_vocab: int) -> dict[str, np.ndarray]:
    """The BM25 score matrix (CSC by term) of the docs, with bm25s."""
    n_docs = len(term_off) - 1
    if n_docs == 0 or n_vocab == 0:
        return {"data": np.zeros(0, np.float32), "indices": np.zeros(0, np.int32),
                "indptr": np.zeros(n_vocab + 1, np.int64)}
    import bm25s  # only to build: queries are scored from the saved matrix with numpy

    corpus = [terms[term_off[i]:term_off[i + 1]].tolist() for i in range(n_docs)]
    vocab = {i: i for i in range(n_vocab)}
    model = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
    model.index((corpus, vocab), create_empty_token=False, show_progress=False)
    scores = model.scores
    indptr = np.asarray(scores["indptr"], dtype=np.int64)
    if len(indptr) < n_vocab + 1:  # terms no doc holds (cannot happen with a compact vocab)
        indptr = np.concatenate([indptr, np.full(n_vocab + 1 - len(indptr), indptr[-1])])
    return {"data": np.asarray(scores["data"], dtype=np.float32),
            "indices": np.asarray(scores["indices"], dtype=np.int32), "indptr": indptr}


def _bm25_scores(bm25: dict[str, np.ndarray], term_ids: list[int], n: int) -> np.ndarray:
    """Sum of each query term's BM25 contribution per doc (bm25s's scoring, in numpy)."""
    scores = np.zeros(n, dtype=np.float32)
    data, indices, indptr = bm25["data"], bm25["indices"], bm25["indptr"]
    for t in term_ids:
        start, end = int(indptr[t]), int(indptr[t + 1])
        np.add.at(scores, indices[start:end], data[start:end])
    return scores


def _has_term(terms: np.ndarray, off: np.ndarray, i: int, term_id: int) -> bool:
    return bool((terms[off[i]:off[i + 1]] == term_id).any())


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


_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august",
                "september", "october", "november", "december")
_MONTH = {m: i for i, m in enumerate(_MONTH_NAMES, start=1)} | \
    {m[:3]: i for i, m in enumerate(_MONTH_NAMES, start=1) if m != "may"} | {"sept": 9}
_M = r"(" + "|".join(sorted(_MONTH, key=len, reverse=True)) + r")\.?"
# The forms a date takes in a query, most precise first: (pattern, fields in group order).
_DATE_FORMS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), "ymd"),
    (re.compile(r"\b(\d{1,2}) " + _M + r",? (\d{4})\b"), "dmy"),
    (re.compile(r"\b" + _M + r" (\d{1,2}),? ?(\d{4})\b"), "mdy"),
    (re.compile(r"\b(\d{4})-(\d{1,2})\b"), "ym"),
    (re.compile(r"\b" + _M + r",? (\d{4})\b"), "my"),
    (re.compile(r"\b(?:in|during|since|by|before|after|of) (19\d\d|20\d\d)\b"), "y"),
]


@dataclass(frozen=True)
class Period:
    """The days a query's date names: first..last, both included."""

    first: int  # date.toordinal()
    last: int

    def distance(self, day: int) -> int:
        return max(self.first - day, day - self.last, 0)


def query_period(query: str) -> Period | None:
    """The day, month or year a query names (`on 9 November, 2022`, `November 9th 2022`,
    `in March 2024`, `2024-03`, `in 2023`), or None. A month without a year, or a bare
    number, names nothing: too ambiguous to rank by."""
    text = re.sub(r"\b(\d{1,2})(?:st|nd|rd|th)\b", r"\1", query.lower())
    for pattern, fields in _DATE_FORMS:
        for m in pattern.finditer(text):
            parts = dict(zip(fields, m.groups(), strict=True))
            month = parts.get("m")
            try:
                year = int(parts["y"])
                mon = (int(month) if month.isdigit() else _MONTH[month]) if month else None
                if mon is None:
                    first, last = dt.date(year, 1, 1), dt.date(year, 12, 31)
                elif "d" in parts:
                    first = last = dt.date(year, mon, int(parts["d"]))
                else:
                    first = dt.date(year, mon, 1)
                    last = (dt.date(year + mon // 12, mon % 12 + 1, 1) - dt.timedelta(days=1))
            except (ValueError, KeyError):
                continue  # 31 February, month 13: not a date
            return Period(first.toordinal(), last.toordinal())
    return None


def _ordinal(date: str | None) -> int | None:
    d = as_date(date)
    return d.toordinal() if d else None


def _parse_ts(ts: str) -> dt.datetime | None:
    try:
        parsed = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


# --- dense vectors ---------------------------------------------------------------------------


class VectorStore:
    """Per-doc vectors keyed by the hash of the embedded texts (Doc.vsha), cached in
    .cache/recall/vectors-<model>.npz."""

    def __init__(self, index: RecallIndex, embedder: Any) -> None:
        self.embedder = embedder
        self.path = index.dir / f"vectors-{embedder.model_id}.npz"
        self.rows: dict[str, np.ndarray] = {}  # doc vsha → (m, dim) float16
        self._matrix: np.ndarray | None = None
        self._starts: np.ndarray | None = None
        self._generation = -1  # the index generation the matrix was assembled for
        self._queries: dict[str, np.ndarray] = {}
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        try:
            with np.load(self.path, allow_pickle=False) as npz:
                shas = [str(s) for s in npz["shas"]]
                counts, matrix = npz["counts"], npz["matrix"]
            if len(shas) != len(counts) or int(counts.sum()) != len(matrix):
                raise ValueError("inconsistent vectors")
            bounds = np.concatenate([[0], np.cumsum(counts)])
            self.rows = {s: matrix[bounds[j]:bounds[j + 1]] for j, s in enumerate(shas)}
        except (OSError, ValueError, KeyError, IndexError, EOFError, zipfile.BadZipFile):
            self.rows = {}

    def load_cached(self) -> None:
        """Read the vectors cached on disk (without embedding anything)."""
        if not self._loaded:
            self._load()

    def _save(self) -> None:
        shas = list(self.rows)
        matrix = (np.concatenate([self.rows[s] for s in shas]) if shas
                  else np.zeros((0, self.embedder.dim), np.float16))
        buf = io.BytesIO()
        np.savez(buf, shas=np.array(shas, dtype=np.str_),
                 counts=np.array([len(self.rows[s]) for s in shas], dtype=np.int64),
                 matrix=matrix)
        with contextlib.suppress(OSError):
            atomic_write(self.path, buf.getvalue())

    def sync(self, index: RecallIndex, progress: Callable[[int, int], None] | None) -> None:
        """Embed the docs whose texts have no vectors yet; forget vanished ones."""
        if self._generation == index.generation:
            return
        if not self._loaded:
            self._load()
        shas = list(index.docs.vshas)
        if any(s not in self.rows for s in shas):
            # One process embeds at a time; a waiting one then finds the work done on disk.
            with contextlib.ExitStack() as held:
                try:
                    held.enter_context(file_lock(index.dir / "embed.lock", timeout=3600,
                                                 what="the recall vector cache"))
                except OSError as e:
                    if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                        raise
                    # A read-only store: embed for this process alone (_save gives up
                    # quietly). It costs time on every run, never an answer.
                self._load()
                todo = {s: i for i, s in enumerate(shas) if s not in self.rows}
                if todo:
                    self._embed(index, [index.docs[i] for i in todo.values()], progress)
                wanted = set(shas)
                for s in [s for s in self.rows if s not in wanted]:
                    del self.rows[s]
                self._save()
        self._assemble(shas)
        self._generation = index.generation

    def _embed(self, index: RecallIndex, docs: list[Doc],
               progress: Callable[[int, int], None] | None) -> None:
        seqs: list[list[int]] = []
        spans: list[tuple[str, int, int]] = []
        for doc in docs:
            head, full = _doc_dense_texts(index, doc)
            windows = [self.embedder.windows(head, max_windows=1)[0]]
            if full:
                windows += self.embedder.passages(full, PASSAGE_TOKENS, DENSE_BUDGET)
            spans.append((_vector_key(head, full), len(seqs), len(seqs) + len(windows)))
            seqs.extend(windows)
        # Short windows batch with short ones: sort once, embed in slices, put back.
        order = sorted(range(len(seqs)), key=lambda j: len(seqs[j]))
        vectors = np.zeros((len(seqs), self.embedder.dim), dtype=np.float16)
        step = 512
        started = time.monotonic()
        for start in range(0, len(order), step):
            part = order[start:start + step]
            vectors[part] = self.embedder.encode_ids([seqs[j] for j in part])
            if progress and time.monotonic() - started > 2:
                progress(min(start + step, len(seqs)), len(seqs))
        for sha, begin, end in spans:
            self.rows[sha] = vectors[begin:end]

    def _assemble(self, shas: list[str]) -> None:
        # A file that changed while it was being embedded has no rows under its old key:
        # a zero vector stands in until the next refresh re-reads it.
        empty = np.zeros((1, self.embedder.dim), np.float16)
        blocks = [self.rows.get(s, empty) for s in shas]
        if blocks:
            self._matrix = np.concatenate(blocks).astype(np.float32)
            self._starts = np.concatenate([[0], np.cumsum([len(b) for b in blocks])[:-1]]) \
                .astype(np.int64)
        else:
            self._matrix = np.zeros((0, self.embedder.dim), np.float32)
            self._starts = np.zeros(0, np.int64)

    def ready(self, index: RecallIndex) -> bool:
        return self._matrix is not None and self._generation == index.generation

    def similarities(self, query: str) -> np.ndarray:
        """Best cosine similarity of the query with each doc's vectors."""
        assert self._matrix is not None and self._starts is not None
        q = self._queries.get(query)
        if q is None:
            q = self.embedder.embed([query])[0]
            if len(self._queries) >= 4096:  # repeated queries (a server, a benchmark) are free
                self._queries.clear()
            self._queries[query] = q
        sims = self._matrix @ q
        return np.asarray(np.maximum.reduceat(sims, self._starts), dtype=np.float32)


def _doc_dense_texts(index: RecallIndex, doc: Doc) -> tuple[str, str]:
    path = index.store.projects_dir / doc.key
    try:
        parsed = parse(decode(read_bytes(path), str(path)), str(path))
        body = parsed.body
    except (OSError, CortexError):
        body = ""
    return dense_texts(doc.summary, doc.tags, body)


# --- entry points ---------------------------------------------------------------------------

_indexes: dict[Path, RecallIndex] = {}


def open_index(store: Store, dense: bool = True) -> RecallIndex:
    """The store's recall index, kept for the life of the process (the MCP server's warm
    cache); dense vectors are attached when the embed extra is installed and `dense`."""
    index = _indexes.get(store.home)
    if index is None:
        index = _indexes[store.home] = RecallIndex(store)
    if dense and index.vectors is None:
        from cortexfs import embed

        embedder = embed.load_embedder()
        if embedder is not None:
            index.vectors = VectorStore(index, embedder)
    return index


def dense_available() -> bool:
    """Whether the embedding model is installed (without loading it)."""
    from cortexfs import embed

    return embed.find_model_dir() is not None


def recall(store: Store, query: str, project: str | None = None, k: int = 10,
           weights: Weights | None = None,
           progress: Callable[[int, int], None] | None = None,
           max_age: float = 0.0) -> RecallResult:
    """The k atoms that best match `query`, best first, with the signals behind each.

    `max_age` > 0 lets a long-lived caller skip re-checking the atom files when it last
    did so less than that many seconds ago (see RecallIndex.refresh)."""
    query = query.strip()
    if not query:
        raise InvalidInputError("the query is empty: say what you are looking for, "
                                "e.g. `cortex recall \"cache invalidation\"`")
    if not 1 <= k <= MAX_K:
        raise InvalidInputError(f"--k must be between 1 and {MAX_K}, not {k}")
    if project is not None:
        store.project(project)  # a clear error for an unknown project
    weights = weights or DEFAULT_WEIGHTS
    index = open_index(store, dense=weights.dense > 0)
    index.refresh(progress=progress, dense=weights.dense > 0, max_age=max_age)
    try:
        hits = index.search(query, project, k, weights)
    except IndexError:
        # Damaged bytes in the memory-mapped part of the cache (map_npz) show as ids out
        # of range: rebuild it, and ask once more.
        index.discard()
        index.refresh(progress=progress, dense=weights.dense > 0)
        hits = index.search(query, project, k, weights)
    use_dense = index.vectors is not None and weights.dense > 0
    used = [s for s in weights.active() if (s != "dense" or use_dense)
            and (s != "when" or query_period(query) is not None)]
    return RecallResult(query, hits, used, index.vectors is not None,
                        sorted(index.skipped))


def no_embed_note(store: Store) -> str | None:
    """The one-time note that dense vectors are off; None once it has been shown."""
    marker = store.cache_dir / "recall" / "no-embed-noted"
    if marker.exists():
        return None
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(NO_EMBED_NOTE + "\n", encoding="utf-8")
    return NO_EMBED_NOTE


# --- opening a hit (an access) ---------------------------------------------------------------


@dataclass
class OpenedAtom:
    """An atom read through recall: its location and full text."""

    id: str
    project: str
    path: Path
    text: str


def find_atom(store: Store, atom_id: str, project: str | None = None) -> tuple[Project, Path]:
    """The file of atom `atom_id` (in `project`, or the only project that has it)."""
    atom_id = atom_id.strip()
    kind = kind_of_id(atom_id)
    if kind is None:
        raise InvalidInputError(f"{atom_id!r} is not an atom id: use EXP-NNN, K-NNN or PAT-NNN")
    projects = [store.project(project)] if project else store.projects()
    # a link named like the atom is found here, and refused by read_atom (cortexfs.wall)
    found = [(p, p.folder(kind) / f"{atom_id}.md") for p in projects
             if os.path.lexists(p.folder(kind) / f"{atom_id}.md")]
    if not found:
        where = f"project {project}" if project else "any project"
        raise InvalidInputError(f"no atom {atom_id} in {where}: check the id with "
                                "`cortex recall`")
    if len(found) > 1:
        names = ", ".join(p.name for p, _ in found)
        raise InvalidInputError(f"{atom_id} exists in several projects ({names}): "
                                "name one with --project")
    return found[0]


def read_atom(store: Store, atom_id: str, project: str | None = None,
              session: str = "", tool: str = "recall") -> OpenedAtom:
    """Read an atom's full text and record the read in its project's access log."""
    from cortexfs.errors import OutsideStoreError

    proj, path = find_atom(store, atom_id, project)
    try:
        text = decode(wall.read_bytes(store.context, path, MAX_ATOM_BYTES), str(path))
        parse(text, str(path))  # only an atom is returned: never any other file's text
    except OutsideStoreError:
        raise
    except OSError as e:
        raise InvalidInputError(f"cannot read {path}: {e.strerror}: it is not an atom "
                                "file") from None
    except AtomParseError as e:
        raise InvalidInputError(f"{e}: not returned until it is fixed (see `cortex "
                                "validate`)") from None
    with contextlib.suppress(OutsideStoreError):  # a linked log is not counted into
        accesslog.append(proj.access_log, [accesslog.format_line(path.name, tool, session)])
    return OpenedAtom(atom_id, proj.name, path, text)
