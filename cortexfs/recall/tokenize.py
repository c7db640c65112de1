"""Text → index terms: the analyzer every lexical signal, the snippets and the duplicate
gate share.

A term is a lower-cased word of 2+ characters that is not a stop word, Snowball-stemmed
("rebalancers" → `rebalanc`); atom ids (EXP-042, K-007) are whole terms of their own
(`exp-042`), so a query naming an id finds the atom and the atoms that cite it. The index
stores a term as a 64-bit hash (`term_hash`): no vocabulary of strings is kept or loaded,
and two processes agree on every id without sharing a table.

Speed matters here (a 100,000-atom store is ~30 million words): `stream` splits a whole
atom with one `str.translate` and `split` rather than a regular expression per line (4×
faster, same words; non-ASCII text takes the regular expression) and numbers its tokens
(`Numbering`): each distinct token is stemmed and hashed once per process, and numpy
turns the numbers into terms.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cortexfs.atoms import ATOM_ID
from cortexfs.cache import blake2b  # (without hashlib's OpenSSL import: see cortexfs.cache)
from cortexfs.layout import KIND_FOLDERS, SUFFIXED

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
SUMMARY_REPEAT = 2  # the one-line summary says what the atom is about: count it twice
TAGS_REPEAT = 1
MAX_WORD = 40  # longer "words" (hashes, base64) are kept whole but never fuzzy-matched

_WORD = re.compile(r"\w+(?:'\w+)*")
# ASCII: letters and digits lower-cased, `_` and `'` kept, everything else a space.
_ASCII = {c: (chr(c).lower() if chr(c).isalnum() or chr(c) in "_'" else " ")
          for c in range(128)}
_ASCII_TABLE = str.maketrans(_ASCII)
_SPLIT_QUOTES = re.compile(r"'{2,}")


def term_hash(term: str) -> int:
    """The 64-bit id under which the index stores `term` (stable across processes)."""
    h = int.from_bytes(blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")
    return h if h > 1 else h + 2  # 0 and 1 mark skipped words and line ends in streams


def pair_hash(a: int, b: int) -> int:
    """The id of the phrase `a b` (two term hashes): what `phrase_keys` computes in numpy."""
    return (a * PAIR_MULT + b) & MASK64


PAIR_MULT = 0x9E3779B97F4A7C15  # odd: (a, b) ↦ a·m + b mod 2⁶⁴ mixes a into every bit
MASK64 = (1 << 64) - 1


def words(line: str) -> list[str]:
    """The words of one line (no newline in it): lower-cased, 2+ characters, stop words
    and atom ids left out ("don't" is one word)."""
    if line.isascii():
        text = line.translate(_ASCII_TABLE)
        if "'" in text:
            raw = [w.strip("'") for w in _SPLIT_QUOTES.sub(" ", text).split()]
        else:
            raw = text.split()
    else:
        raw = _WORD.findall(line.lower().replace("\u2019", "'"))
    return [w for w in raw if len(w) > 1 and w not in STOPWORDS]


def _ids_out(line: str) -> tuple[str, list[str]]:
    """The line with its atom ids blanked out, and the ids (as terms)."""
    if "-" not in line:
        return line, []
    found = [m.lower() for m in ATOM_ID.findall(line)]
    return (ATOM_ID.sub(" ", line), found) if found else (line, [])


class Analyzer:
    """Text → index terms (see the module docstring), and their hashes."""

    def __init__(self) -> None:
        import Stemmer  # PyStemmer: Snowball, in C

        self._stem: Callable[[list[str]], list[str]] = Stemmer.Stemmer("english").stemWords
        self.name = "snowball-en"
        self._terms: dict[str, str] = {}  # word → term
        self.numbering = Numbering()  # stream tokens (see `stream`)

    # -- terms as strings (queries, snippets, the duplicate gate) --

    def stems(self, ws: list[str]) -> list[str]:
        """The terms of words (from `words`), in order."""
        cache = self._terms
        missing = [w for w in dict.fromkeys(ws) if w not in cache]
        if missing:
            if len(cache) > 500_000:  # a long-lived server: keep memory bounded
                cache.clear()
            cache.update(zip(missing, self._stem(missing), strict=True))
        return [cache[w] for w in ws]

    def terms(self, text: str) -> list[str]:
        """Every term of `text`, line by line, each line's ids after its words."""
        return [term for line in self.line_terms(text) for term in line]

    def line_terms(self, text: str) -> list[list[str]]:
        """The terms of each line of `text`."""
        out = []
        for line in text.split("\n"):
            line, ids = _ids_out(line)
            out.append(self.stems(words(line)) + ids)
        return out

    def query_terms(self, query: str) -> tuple[list[str], dict[str, str]]:
        """Distinct terms of a query, and the query word each came from first."""
        origin: dict[str, str] = {}
        text, ids = _ids_out(" ".join(query.split()))
        ws = words(text)
        for word, term in zip(ws, self.stems(ws), strict=True):
            origin.setdefault(term, word)
        for found, term in zip(ATOM_ID.findall(query), ids, strict=True):
            origin.setdefault(term, found)
        return list(origin), origin

    def query_phrases(self, query: str) -> list[tuple[str, str]]:
        """Distinct pairs of adjacent query terms, ids left out: `online clothing store` →
        (`onlin`, `cloth`), (`cloth`, `store`)."""
        text, _ = _ids_out(" ".join(query.split()))
        terms = self.stems(words(text))
        return list(dict.fromkeys(zip(terms, terms[1:], strict=False)))

    # -- token streams (what a segment is built from) --

    def stream(self, text: str) -> list[int]:
        """The tokens of `text` in order, as numbers (`Numbering`): NEWLINE after each
        line, SKIP for each word that is no term (stop words, one letter). One translate,
        one split and one dictionary look-up per word, for the ~30 million words of a big
        store. An atom id stands where it is written (the line-by-line path puts them
        last)."""
        if any(map(text.__contains__, _ID_STARTS)):
            # each id becomes one token; plain replaces, longest first (EXP-0421 before
            # EXP-042), cost a third of a substitution with a template
            for found in sorted(set(find_ids(text)), key=len, reverse=True):
                text = text.replace(found, f" {_ID_PREFIX}{found.replace('-', '_')} ")
        if text.isascii():  # a one-character-for-one table keeps str.translate's fast path
            tokens = text.translate(_STREAM_TABLE).replace("\n", " \x01 ").split()
        else:
            tokens = _STREAM_WORD.findall(text.lower().replace("\u2019", "'"))
        tokens.append("\n")
        numbers = self.numbering.of
        try:
            return list(map(numbers.__getitem__, tokens))
        except KeyError:
            for token in set(tokens).difference(numbers):
                self.numbering.add(token, *self._resolve(token))
            return list(map(numbers.__getitem__, tokens))

    def _resolve(self, token: str) -> tuple[int, str | None, bool]:
        """(term hash or SKIP, surface word or None, is an atom id) of a stream token."""
        if token.startswith(_ID_PREFIX):
            return term_hash(token[len(_ID_PREFIX):].replace("_", "-")), None, True
        found = words(token)
        if not found:
            return SKIP, None, False
        return term_hash(self.stems(found[:1])[0]), found[0], False


def find_ids(text: str) -> list[str]:
    """`ATOM_ID.findall(text)`, by str.find: the regular expression tries every position of
    the text (~30 µs for an atom), this jumps from one `EXP-`, `K-` or `PAT-` to the next."""
    found: list[tuple[int, str]] = []
    n = len(text)
    for prefix in _ID_STARTS:
        i = text.find(prefix)
        while i >= 0:
            j = k = i + len(prefix)
            while k < n and text[k] in _DIGITS:
                k += 1
            if k > j and (i == 0 or not _is_word(text[i - 1])):
                end = -1
                if k == n or not _is_word(text[k]):
                    end = k
                if prefix == _SUFFIXED_START and k < n and "a" <= text[k] <= "z" and \
                        (k + 1 == n or not _is_word(text[k + 1])):
                    end = k + 1
                if end > 0:
                    found.append((i, text[i:end]))
            i = text.find(prefix, i + 1)
    return [m for _, m in sorted(found)]


_DIGITS = frozenset("0123456789")
_ID_STARTS = tuple(f"{p}-" for p in KIND_FOLDERS)  # EXP-, K-, PAT-
_SUFFIXED_START = f"{SUFFIXED}-"


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


class Numbering:
    """Stream tokens numbered in the order first seen, with what each stands for: a token
    stream of small numbers becomes numpy arrays, and numpy maps them to terms."""

    def __init__(self) -> None:
        self.of: dict[str, int] = {"\x01": NEWLINE, "\n": NEWLINE}  # token → number
        self.hashes: list[int] = [0, 0]  # number → term hash (0: SKIP and NEWLINE)
        self.words: list[str | None] = [None, None]  # number → surface word
        self.ids: list[bool] = [False, False]  # number → an atom id

    def add(self, token: str, h: int, word: str | None, is_id: bool) -> None:
        if h == SKIP:
            self.of[token] = SKIP
            return
        self.of[token] = len(self.hashes)
        self.hashes.append(h)
        self.words.append(word)
        self.ids.append(is_id)

    def __len__(self) -> int:
        return len(self.hashes)


SKIP, NEWLINE = 0, 1  # markers of a token stream (no term hash takes these values)
_ID_PREFIX = "_cxid_"
# the stream's ASCII table: as _ASCII, line ends kept (to become tokens of their own)
_STREAM_TABLE = str.maketrans({**_ASCII, 10: "\n"})
_STREAM_WORD = re.compile(r"\w+(?:'\w+)*|\n")


def lexical_head(summary: str, tags: list[str]) -> str:
    """What the index holds of an atom besides its body: the summary and tags, repeated
    for weight."""
    tag_text = " ".join(t.replace("-", " ").replace("_", " ") for t in tags)
    return "\n".join([summary] * SUMMARY_REPEAT + [tag_text] * TAGS_REPEAT)
