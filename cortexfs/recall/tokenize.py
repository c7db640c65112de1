"""Text → index terms: the analyzer every recall signal and the duplicate gate share."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from cortexfs.atoms import ATOM_ID

SUMMARY_REPEAT = 2  # the one-line summary says what the atom is about: count it twice
PASSAGE_LINES = 3  # body lines per lexical passage (a question and its answer, and one more)
TAGS_REPEAT = 1


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
