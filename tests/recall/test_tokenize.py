"""cortexfs.recall.tokenize: words, terms, ids, and the token streams segments are built from."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cortexfs.atoms import ATOM_ID
from cortexfs.recall.tokenize import NEWLINE, SKIP, Analyzer, find_ids, term_hash, words


def test_words_and_terms() -> None:
    an = Analyzer()
    assert words("The cats’ rock'n'roll, don't RUN fast-paced (x)") == [
        "cats", "rock'n'roll", "run", "fast", "paced"]  # "don't": a stop word
    assert words("'quoted' rock''n") == ["quoted", "rock"]
    assert an.terms("Rebalancers moving") == ["rebalanc", "move"]
    assert an.terms("See EXP-042 and K-7") == ["see", "exp-042", "k-7"]  # ids are terms
    assert an.line_terms("red car\n\nblue EXP-1 van") == [["red", "car"], [],
                                                         ["blue", "van", "exp-1"]]


def test_query_terms_and_phrases() -> None:
    an = Analyzer()
    terms, origin = an.query_terms("When did Gina open her online clothing store? EXP-007")
    assert terms == ["gina", "open", "onlin", "cloth", "store", "exp-007"]
    assert origin["cloth"] == "clothing" and origin["exp-007"] == "EXP-007"
    assert an.query_phrases("online clothing store") == [("onlin", "cloth"), ("cloth", "store")]
    assert an.query_phrases("see EXP-042 now") == [("see", "now")]  # ids pair with nothing


def test_stream_is_the_terms_line_by_line() -> None:
    """The fast whole-text path yields the same terms as the line-by-line one (ids stand
    where they are written), NEWLINE after each line, SKIP for stop words."""
    an = Analyzer()
    text = ("See EXP-042 and K-7\nThe cats\u2019 don't run\n\nRunning, fast-paced (PAT-001)\n"
            "café olé")
    numbering = an.numbering
    out = an.stream(text)
    lines: list[list[str]] = [[]]
    by_hash = {term_hash(t): t for line in an.line_terms(text) for t in line}
    for n in out:
        if n == NEWLINE:
            lines.append([])
        elif n != SKIP:
            lines[-1].append(by_hash[numbering.hashes[n]])
    assert [sorted(x) for x in lines[:-1]] == [sorted(x) for x in an.line_terms(text)]
    assert lines[0] == ["see", "exp-042", "k-7"]
    assert numbering.words[out[0]] == "see" and numbering.ids[out[1]]


@given(st.lists(st.sampled_from(["EXP-", "K-", "PAT-", "0", "12", "a", "b", "z", " ", "-",
                                  "_", "é", "X", "\n", "EX"]), max_size=14).map("".join))
def test_find_ids_is_the_regular_expression(text: str) -> None:
    assert find_ids(text) == ATOM_ID.findall(text)


def test_term_hashes_are_stable_and_clear_of_markers() -> None:
    assert term_hash("cach") == term_hash("cach") != term_hash("cache")
    rng = random.Random(3)
    hashes = np.array([term_hash(str(rng.random())) for _ in range(2000)], dtype=np.uint64)
    assert (hashes > NEWLINE).all()
