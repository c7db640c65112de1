"""Partial words and variants: when a query word is in no atom, the words of the store that
it begins ("tokeniz" → tokenizer, tokenization), or that are one or two edits away from it
("tokeniser", "tokneizer" → tokenizer), stand in for it.

Only unknown words are looked up — a query whose words all occur pays nothing. Each
segment keeps its words sorted (prefixes: a binary search) and a character-trigram index
of them (`^to`, `tok`, …, `er$`): a word within one edit of another shares all but at most
three of its trigrams, within two edits all but six, so only words sharing enough
trigrams have their edit distance computed.
"""

from __future__ import annotations

import numpy as np

from cortexfs.recall.lexical import LexicalIndex
from cortexfs.recall.tokenize import MAX_WORD

MIN_LENGTH = 4  # shorter unknown words are too ambiguous to stand in for
MAX_VARIANTS = 4  # distinct terms a word may expand to
MAX_PREFIX = 64  # words looked at per segment for a prefix


def variants(index: LexicalIndex, word: str) -> list[tuple[str, int]]:
    """(store word, its term hash) standing in for the unknown `word`, closest first: words
    it begins, then words one edit away (two for words of 8+ letters); at most
    MAX_VARIANTS distinct terms."""
    if len(word) < MIN_LENGTH or len(word) > MAX_WORD or not word.isalpha():
        return []
    limit = 1 if len(word) < 8 else 2
    found: dict[str, tuple[float, int]] = {}  # word → (distance, term hash)
    grams = trigram_keys(word)
    for seg in index.segments:
        words, terms = seg.a["words"], seg.a["w_term"]
        if len(words) == 0:
            continue
        lo = int(np.searchsorted(words, word))
        hi = int(np.searchsorted(words, word + "\U0010ffff"))
        for j in range(lo, min(hi, lo + MAX_PREFIX)):
            w = str(words[j])
            if w != word:
                # a completion is as good as an edit: "tokeniz" → "tokenizer"
                found.setdefault(w, (0.5 + (len(w) - len(word)) / 100, int(terms[j])))
        for j in _sharing(seg.a, grams, len(grams) - 3 * limit):
            w = str(words[j])
            if w in found or abs(len(w) - len(word)) > limit:
                continue
            d = distance(word, w, limit)
            if 0 < d <= limit:
                found[w] = (float(d), int(terms[j]))
    out: list[tuple[str, int]] = []
    seen: set[int] = set()
    for w, (_, h) in sorted(found.items(), key=lambda t: (t[1][0], t[0])):
        if h not in seen:
            if len(seen) == MAX_VARIANTS:
                break
            seen.add(h)
        out.append((w, h))
    return out


def trigram_keys(word: str) -> np.ndarray:
    """The word's trigram keys, as `segment._trigrams` computes them."""
    codes = [1, *(ord(c) for c in word), 2]
    keys = {(codes[j] << 42) | (codes[j + 1] << 21) | codes[j + 2] for j in range(len(word))}
    return np.array(sorted(keys), dtype=np.uint64)


def _sharing(a: dict[str, np.ndarray], grams: np.ndarray, least: int) -> list[int]:
    """The segment's words sharing at least `least` of the trigrams."""
    keys = a["tri_keys"]
    if len(keys) == 0 or len(grams) == 0:
        return []
    pos = np.searchsorted(keys, grams).clip(0, len(keys) - 1)
    have = pos[keys[pos] == grams]
    if len(have) == 0:
        return []
    ptr, owners = a["tri_ptr"], a["tri_word"]
    lists = [np.asarray(owners[int(ptr[p]):int(ptr[p + 1])]) for p in have.tolist()]
    counts = np.bincount(np.concatenate(lists))
    return np.flatnonzero(counts >= max(least, 1)).tolist()


def distance(a: str, b: str, limit: int) -> int:
    """Edit distance with transpositions (optimal string alignment), or limit + 1 once it
    is sure to exceed `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]
