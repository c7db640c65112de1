"""One segment of the lexical index: a batch of atoms, indexed completely and never changed.

The lexical index (`cortexfs.recall.lexical`) is a list of segments, like Lucene's. A first
build streams the atoms into segments of SEGMENT_DOCS docs, each written to disk as soon as
it is full, so memory holds one batch whatever the store's size; an edit writes the changed
atoms into a new small segment and leaves their old rows behind as dead docs; small
segments and ones with many dead docs are merged (`merge`), from their stored tokens
without reading an atom again.

A segment holds, in numpy arrays (one `cortexfs.recall.arrays` file; most memory-mapped):
- its docs: key, project, kind, status, date and content hash as columns, the rest as JSON
  rows (`cortexfs.recall.docs`), and each doc's length in terms;
- its tokens: each doc's head terms (summary, tags, cited ids) and the terms of each body
  line that has any ("lines"), as indexes into its vocabulary — what passages and phrases
  are scored from at query time (`cortexfs.recall.passages`);
- its vocabulary, `terms`: the sorted 64-bit hashes of its terms, and per term its
  postings: the docs that hold it, how often (tf), and in how many body lines;
- its phrases: the hash of each pair of adjacent terms of a line, with the number of lines
  that hold it — the collection statistics of the phrase feature, kept as integers: the
  phrase strings of the previous index were 163 MiB of 404 at 10,000 atoms;
- its words, for the partial-word fallback (`cortexfs.recall.lexicon`).
"""

from __future__ import annotations

import array
import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cortexfs.recall import arrays
from cortexfs.recall.docs import (
    FIELDS,
    KIND_CODE,
    KIND_CODES,
    Doc,
    date_ordinal,
    decode_row,
    encode_rows,
    status_code,
)
from cortexfs.recall.tokenize import MAX_WORD, NEWLINE, PAIR_MULT

SEGMENT_DOCS = 4096  # docs per segment of a first build: ~10 MB of text held at a time
# Memory-mapped rather than read: all but the small columns every query reads whole (a
# query touches a few postings and the rows of the hits it shows; reading and checking
# the rest cost a 10,000-atom process ~60 ms).
MAPPED = frozenset({"fwd", "line_ptr", "line_len", "terms", "t_ptr", "p_doc", "p_tf", "ids",
                    "p_lines", "bi_keys", "bi_df", "head", "head_ptr", "words", "w_term",
                    "tri_keys", "tri_ptr", "tri_word", "keys", "rows", "row_off", "sha",
                    "vsha", "doc_line", "tag_ids", "tag_ptr"})
_U64 = np.uint64


@dataclass
class Batch:
    """Docs on their way into a segment: their fields, and their head (summary, tags, cited
    ids) and body as token streams: numbers (`tokenize.Numbering`: `hashes` gives each
    number's term hash, `is_id` whether it is an atom id), SKIP for stop words, NEWLINE
    after each line."""

    docs: list[Doc] = field(default_factory=list)
    shas: list[bytes] = field(default_factory=list)  # SHA-1 of each file's bytes
    head: array.array[int] = field(default_factory=lambda: array.array("q"))
    head_n: list[int] = field(default_factory=list)  # stream length per doc
    body: array.array[int] = field(default_factory=lambda: array.array("q"))
    body_n: list[int] = field(default_factory=list)
    words: dict[str, int] = field(default_factory=dict)  # surface word → term hash
    hashes: np.ndarray = field(default_factory=lambda: np.zeros(2, np.uint64))
    is_id: np.ndarray = field(default_factory=lambda: np.zeros(2, bool))

    def __len__(self) -> int:
        return len(self.docs)


class Segment:
    """A segment's arrays (see the module docstring) and the docs' parsed rows on demand."""

    def __init__(self, name: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]):
        self.name = name
        self.a = arrays
        self.meta = meta
        self.n = int(meta["docs"])
        self.projects: list[str] = list(meta["projects"])
        self._rows: dict[int, Doc] = {}
        self.check()

    def check(self) -> None:
        """Raise ValueError when the arrays do not fit together (a damaged file)."""
        a, n = self.a, self.n
        v = len(a["terms"])
        if not (len(a["keys"]) == n and len(a["proj"]) == n and a["sha"].shape == (n, 20)
                and a["vsha"].shape == (n, 20) and len(a["dlen"]) == n
                and len(a["doc_line"]) == n + 1 and len(a["head_ptr"]) == n + 1
                and len(a["row_off"]) == n + 1 and len(a["t_ptr"]) == v + 1
                and len(a["tag_ptr"]) == n + 1 and int(a["tag_ptr"][-1]) == len(a["tag_ids"])
                and int(a["doc_line"][-1]) + 1 == len(a["line_ptr"])
                and len(a["line_len"]) + 1 == len(a["line_ptr"])
                and int(a["line_ptr"][-1]) == len(a["fwd"])
                and int(a["t_ptr"][-1]) == len(a["p_doc"]) == len(a["p_tf"])
                and len(a["bi_keys"]) == len(a["bi_df"])
                and len(a["tri_ptr"]) == len(a["tri_keys"]) + 1
                and len(a["words"]) == len(a["w_term"])):
            raise ValueError(f"segment {self.name}: arrays of inconsistent sizes")

    def doc(self, i: int) -> Doc:
        found = self._rows.get(i)
        if found is None:
            a = self.a
            raw = bytes(a["rows"][int(a["row_off"][i]):int(a["row_off"][i + 1])])
            found = self._rows[i] = decode_row(raw, str(a["keys"][i]),
                                               self.projects[int(a["proj"][i])],
                                               KIND_CODES[int(a["kind"][i])],
                                               bytes(a["vsha"][i]).hex())
        return found

    def with_tag(self, tag: str) -> np.ndarray:
        """The docs (local) tagged `tag` (lower-cased)."""
        tags = self.meta["tags"]
        j = _bisect(tags, tag)
        if j < 0:
            return np.zeros(0, np.int64)
        ptr = np.asarray(self.a["tag_ptr"])
        owner = np.repeat(np.arange(self.n), np.diff(ptr))
        return np.unique(owner[np.asarray(self.a["tag_ids"]) == j])

    def sha(self, i: int) -> bytes:
        return bytes(self.a["sha"][i])

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """The local index of each term hash in this segment, -1 where it has none."""
        terms = self.a["terms"]
        if len(terms) == 0:
            return np.full(len(hashes), -1, np.int64)
        pos = np.searchsorted(terms, hashes).clip(0, len(terms) - 1)
        return np.where(terms[pos] == hashes, pos, -1)

    def windows(self, size: int) -> tuple[int, int]:
        """(passages of `size` lines, their total length) over this segment's docs."""
        key = f"windows-{size}"
        if key not in self.meta:
            self.meta[key] = window_stats(np.asarray(self.a["line_len"]),
                                          np.asarray(self.a["doc_line"]), size)
        count, total = self.meta[key]
        return int(count), int(total)

    def phrase_df(self, keys: np.ndarray) -> np.ndarray:
        """Lines of this segment holding each phrase (keys: `tokenize.pair_hash`)."""
        bk = self.a["bi_keys"]
        if len(bk) == 0:
            return np.zeros(len(keys), np.int64)
        pos = np.searchsorted(bk, keys).clip(0, len(bk) - 1)
        return np.where(bk[pos] == keys, self.a["bi_df"][pos].astype(np.int64), 0)

    # -- tokens back as streams (for merging) --

    def streams(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Doc i's head and body as streams of term hashes (stop words gone, NEWLINE after
        each line)."""
        a = self.a
        terms = a["terms"]
        head = np.append(terms[a["head"][int(a["head_ptr"][i]):int(a["head_ptr"][i + 1])]],
                         _U64(NEWLINE))
        l0, l1 = int(a["doc_line"][i]), int(a["doc_line"][i + 1])
        ptr = np.asarray(a["line_ptr"][l0:l1 + 1], np.int64)
        hashes = terms[a["fwd"][int(ptr[0]):int(ptr[-1])]]
        # a NEWLINE after each line's tokens
        out = np.full(len(hashes) + (l1 - l0), NEWLINE, _U64)
        at = (np.arange(len(hashes)) + np.repeat(np.arange(l1 - l0), np.diff(ptr))) \
            if len(hashes) else np.zeros(0, np.int64)
        out[at] = hashes
        return head, out if len(out) else np.array([NEWLINE], _U64)


# --- building ---------------------------------------------------------------------------------


def build(name: str, batch: Batch) -> Segment:
    """The segment of a batch of docs."""
    n = len(batch.docs)
    docs_n = np.arange(n, dtype=np.int64)
    raw_head = np.frombuffer(batch.head, dtype=np.int64)
    head_doc = np.repeat(docs_n, batch.head_n)[raw_head > NEWLINE]
    head_num = raw_head[raw_head > NEWLINE]
    raw = np.frombuffer(batch.body, dtype=np.int64)
    newline = raw == NEWLINE
    raw_line = np.cumsum(newline) - newline  # each token's line, counting every line
    is_term = raw > NEWLINE
    body_num, token_raw_line = raw[is_term], raw_line[is_term]
    body_doc = np.repeat(docs_n, batch.body_n)[is_term]
    starts = np.ones(len(body_num), bool)  # a token that starts a line with terms
    starts[1:] = token_raw_line[1:] != token_raw_line[:-1]
    token_line = np.cumsum(starts) - 1
    n_lines = int(starts.sum())
    line_n = np.bincount(token_line, minlength=n_lines)
    line_doc = body_doc[starts]
    doc_line = _offsets(np.bincount(line_doc, minlength=n)[:n])
    line_ptr = _offsets(line_n)
    # numbers → this segment's terms (sorted hashes): a gather, no sort of the tokens
    present = np.zeros(len(batch.hashes), bool)
    present[head_num] = True
    present[body_num] = True
    used = np.flatnonzero(present)
    terms = _unique(batch.hashes[used])
    local = np.zeros(len(batch.hashes), np.int64)
    local[used] = np.searchsorted(terms, batch.hashes[used])
    head_local, fwd = local[head_num], local[body_num]
    body = terms[fwd]
    is_id = batch.is_id[body_num]
    ids = _unique(batch.hashes[used[batch.is_id[used]]])
    words_per_line = np.bincount(token_line[~is_id], minlength=n_lines)
    line_len = line_n + np.maximum(words_per_line - 1, 0)  # its terms and its phrases
    keys, tf, p_lines = _postings(head_local, head_doc, fwd, body_doc, token_line, n,
                                  n_lines)
    p_term, p_doc = keys // max(n, 1), keys % max(n, 1)
    dlen = np.bincount(head_doc, minlength=n)[:n] + np.bincount(body_doc, minlength=n)[:n]
    words, w_term = _words(batch.words)
    tri_keys, tri_ptr, tri_word = _trigrams(words)
    projects = sorted({d.project for d in batch.docs})
    code = {p: i for i, p in enumerate(projects)}
    doc_tags = [sorted({t.lower() for t in d.tags}) for d in batch.docs]
    tags = sorted({t for ts in doc_tags for t in ts})
    tag_code = {t: i for i, t in enumerate(tags)}
    rows = encode_rows(batch.docs)
    arrays = {
        "keys": np.array([d.key for d in batch.docs], dtype=np.str_),
        "proj": np.array([code[d.project] for d in batch.docs], dtype=np.uint16),
        "kind": np.array([KIND_CODE[d.kind] for d in batch.docs], dtype=np.uint8),
        "status": np.array([status_code(d.status) for d in batch.docs], dtype=np.uint8),
        "date": np.array([date_ordinal(d.date) for d in batch.docs], dtype=np.int32),
        "sha": np.frombuffer(b"".join(batch.shas), dtype=np.uint8).reshape(n, 20),
        "vsha": np.frombuffer(b"".join(bytes.fromhex(d.vsha) for d in batch.docs),
                              dtype=np.uint8).reshape(n, 20),
        "dlen": dlen.astype(np.int32),
        "rows": np.frombuffer(b"".join(rows), dtype=np.uint8),
        "row_off": _offsets([len(r) for r in rows]),
        "tag_ids": np.array([tag_code[t] for ts in doc_tags for t in ts], dtype=np.int32),
        "tag_ptr": _offsets([len(ts) for ts in doc_tags]),
        "head": head_local.astype(np.int32), "head_ptr": _offsets(np.bincount(
            head_doc, minlength=n)[:n]),
        "fwd": fwd.astype(np.int32), "line_ptr": line_ptr, "doc_line": doc_line,
        "line_len": line_len.astype(np.int32),
        "terms": terms, "ids": ids,
        "t_ptr": np.searchsorted(p_term, np.arange(len(terms) + 1)).astype(np.int64),
        "p_doc": p_doc.astype(np.int32),
        "p_tf": np.minimum(tf, 65535).astype(np.uint16),
        "p_lines": np.minimum(p_lines, 65535).astype(np.uint16),
        **dict(zip(("bi_keys", "bi_df"), _phrases(body, token_line), strict=True)),
        "words": words, "w_term": w_term,
        "tri_keys": tri_keys, "tri_ptr": tri_ptr, "tri_word": tri_word,
    }
    meta: dict[str, Any] = {"docs": n, "projects": projects, "tags": tags,
                            "fields": list(FIELDS), "lines": n_lines}
    for size in range(1, 6):  # the passage sizes worth trying
        meta[f"windows-{size}"] = window_stats(arrays["line_len"], doc_line, size)
    return Segment(name, arrays, meta)


def _postings(head_local: np.ndarray, head_doc: np.ndarray, fwd: np.ndarray,
              body_doc: np.ndarray, token_line: np.ndarray, n: int,
              n_lines: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (term, doc) pairs in term then doc order (as term · n + doc), each with its
    count and the number of body lines holding it: one sort of (term, doc, line) keys,
    a head token's line being n_lines (no line)."""
    width = n_lines + 1
    top = (int(max(head_local.max(initial=0), fwd.max(initial=0))) + 1) * max(n, 1) * width
    pair_h = head_local * n + head_doc
    pair_b = fwd * n + body_doc
    if top < (1 << 62):
        triples, counts = _unique(np.concatenate([pair_h * width + n_lines,
                                                  pair_b * width + token_line]), counts=True)
        pairs, lines = triples // width, triples % width
        starts = np.flatnonzero(np.r_[True, pairs[1:] != pairs[:-1]])
        tf = np.add.reduceat(counts, starts)
        in_body = (lines < n_lines).astype(np.int64)
        return pairs[starts], tf, np.add.reduceat(in_body, starts)
    keys, tf = _unique(np.concatenate([pair_h, pair_b]), counts=True)  # pragma: no cover
    body_lines = _unique(pair_b * width + token_line) // width
    lk, lc = _unique(body_lines, counts=True)
    p_lines = np.zeros(len(keys), np.int64)
    p_lines[np.searchsorted(keys, lk)] = lc
    return keys, tf, p_lines


def _unique(x: np.ndarray, counts: bool = False) -> Any:
    """np.unique by sorting (numpy 2's hashing unique is several times slower on the
    mostly-distinct keys built here)."""
    s = np.sort(x)
    first = np.ones(len(s), bool)
    first[1:] = s[1:] != s[:-1]
    if not counts:
        return s[first]
    starts = np.flatnonzero(first)
    return s[starts], np.diff(np.append(starts, len(s)))


def window_stats(line_len: np.ndarray, doc_line: np.ndarray, size: int) -> list[int]:
    """[passages, their total length] of docs cut into passages of `size` lines (a doc
    with fewer lines: one passage), lengths counted in terms and phrases."""
    n = np.diff(doc_line)
    count = int(np.where(n > size, n - size + 1, np.minimum(n, 1)).sum())
    line_doc = np.repeat(np.arange(len(n)), n)
    j = np.arange(len(line_len)) - doc_line[:-1][line_doc]
    nl = n[line_doc]
    cover = np.where(nl <= size, 1, np.minimum(j, nl - size) - np.maximum(0, j - size + 1) + 1)
    return [count, int((np.asarray(line_len, np.int64) * cover).sum())]


def merge(name: str, parts: Iterable[tuple[Segment, Iterable[int]]]) -> Segment:
    """One segment of the given docs of other segments (the live ones), from their tokens."""
    batch = Batch()
    head: list[np.ndarray] = []
    body: list[np.ndarray] = []
    ids: list[np.ndarray] = []
    for seg, docs in parts:
        for i in docs:
            h, b = seg.streams(i)
            batch.docs.append(seg.doc(i))
            batch.shas.append(seg.sha(i))
            head.append(h)
            body.append(b)
        batch.words.update(zip(seg.a["words"].tolist(), seg.a["w_term"].tolist(),
                               strict=True))
        ids.append(np.asarray(seg.a["ids"]))
    # number the hashes (NEWLINE stays 1)
    flat = np.concatenate([*head, *body]) if head else np.zeros(0, _U64)
    hashes, inverse = np.unique(np.concatenate([np.array([0, NEWLINE], _U64), flat]),
                                return_inverse=True)
    numbers = inverse[2:]
    batch.hashes = hashes
    batch.is_id = np.isin(hashes, np.concatenate(ids)) if ids else np.zeros(len(hashes), bool)
    at = 0
    for streams, out, sizes in ((head, batch.head, batch.head_n),
                                (body, batch.body, batch.body_n)):  # (in `flat`'s order)
        for stream in streams:
            out.extend(numbers[at:at + len(stream)].tolist())
            sizes.append(len(stream))
            at += len(stream)
    return build(name, batch)


def _bisect(items: list[str], item: str) -> int:
    j = bisect.bisect_left(items, item)
    return j if j < len(items) and items[j] == item else -1


def _offsets(counts: list[int] | np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _phrases(body: np.ndarray, token_line: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct phrase (pair of adjacent terms in a line) and how often it occurs: the
    lines holding it, but for a line that repeats it."""
    same = token_line[:-1] == token_line[1:]
    with np.errstate(over="ignore"):
        keys = body[:-1][same] * _U64(PAIR_MULT) + body[1:][same]
    if len(keys) == 0:
        return np.zeros(0, _U64), np.zeros(0, np.uint32)
    uniq, counts = _unique(keys, counts=True)
    return uniq, counts.astype(np.uint32)


def _words(words: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    kept = sorted(w for w in words if len(w) <= MAX_WORD)
    return (np.array(kept, dtype=f"<U{MAX_WORD}"),
            np.array([words[w] for w in kept], dtype=_U64))


def _trigrams(words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A character-trigram index of the words (`^to`, `tok`, …, `er$`): trigram key →
    the words holding it."""
    n = len(words)
    if n == 0:
        return np.zeros(0, _U64), np.zeros(1, np.int64), np.zeros(0, np.int32)
    codes = words.view(np.uint32).reshape(n, MAX_WORD).astype(np.uint64)
    lengths = np.char.str_len(words)
    padded = np.zeros((n, MAX_WORD + 2), np.uint64)
    padded[:, 0] = 1  # ^
    padded[:, 1:MAX_WORD + 1] = codes
    padded[np.arange(n), lengths + 1] = 2  # $
    keys = (padded[:, :-2] << _U64(42)) | (padded[:, 1:-1] << _U64(21)) | padded[:, 2:]
    valid = np.arange(MAX_WORD)[None, :] < lengths[:, None]
    k = keys[valid]
    w = np.broadcast_to(np.arange(n)[:, None], keys.shape)[valid]
    order = np.lexsort((w, k))
    k, w = k[order], w[order]
    first = np.ones(len(k), bool)  # a word counts once per trigram ("banana": one "ana")
    first[1:] = (k[1:] != k[:-1]) | (w[1:] != w[:-1])
    k, w = k[first], w[first]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    return k[starts], np.append(starts, len(k)).astype(np.int64), w.astype(np.int32)


# --- files ------------------------------------------------------------------------------------


def save(seg: Segment, folder: Path) -> Path:
    """Write the segment as `<name>.seg` in `folder` (`arrays.write`: renamed into place,
    a reader never sees half of one)."""
    path = folder / f"{seg.name}.seg"
    arrays.write(path, seg.a, seg.meta, MAPPED)
    return path


def load(folder: Path, name: str) -> Segment:
    """The segment saved as `<name>.seg`; ValueError or OSError when it cannot be used
    (missing, damaged, written with other Doc fields)."""
    data, meta = arrays.read(folder / f"{name}.seg")
    if not isinstance(meta, dict) or meta.get("fields") != list(FIELDS):
        raise ValueError(f"segment {name} was written with other doc fields")
    return Segment(name, data, meta)
