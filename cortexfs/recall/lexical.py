"""The lexical index: BM25 over atoms and their passages, cached under .cache/recall/."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import io
import json
import math
import os
import stat
import time
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cortexfs import accesslog
from cortexfs.atoms import KIND_BY_PREFIX, Atom, kind_of_filename
from cortexfs.errors import AtomParseError
from cortexfs.frontmatter import check_size, decode, parse
from cortexfs.fsutil import atomic_write
from cortexfs.loader import RACY_NS
from cortexfs.recall.dense import _vector_key, dense_texts
from cortexfs.recall.docs import Doc, DocTable
from cortexfs.recall.fuse import (
    DEFAULT_WEIGHTS,
    RRF_K,
    Hit,
    SignalMatch,
    Weights,
    _add_pool,
    _rank_values,
    _ranks,
    dense_ranks,
)
from cortexfs.recall.tokenize import (
    PASSAGE_LINES,
    STOPWORDS,
    SUMMARY_REPEAT,
    TAGS_REPEAT,
    Analyzer,
    lexical_head,
    passages_of,
)
from cortexfs.recall.when import _ordinal, _parse_ts, query_period
from cortexfs.store import Project, Store
from cortexfs.strength import strength

if TYPE_CHECKING:
    from cortexfs.recall.dense import VectorStore

CACHE_VERSION = 7
BM25_K1 = 1.5
BM25_B = 0.75


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
                            st = entry.stat()
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
            raw = Path(path).read_bytes()
        except OSError:
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
        raw = path.read_bytes()
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

