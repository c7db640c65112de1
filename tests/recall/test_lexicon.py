"""cortexfs.recall.lexicon: partial words, spelling variants and typos of unknown words."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cortexfs import recall as rc
from cortexfs.recall.lexicon import distance, variants
from cortexfs.store import Store
from recall.helpers import ids


@pytest.fixture
def words(write_atom: Callable[..., Path]) -> None:
    write_atom("EXP-001", summary="The tokenizer splits words", tags="[nlp]")
    write_atom("EXP-002", summary="Colour calibration of the camera", tags="[vision]")
    write_atom("EXP-003", summary="Token budgets for prompts", tags="[llm]")


@pytest.mark.parametrize("query", ["tokeniz", "tokeniser", "tokneizer", "tokenizr"])
def test_partial_and_misspelt_words_find_the_atom(store: Store, words: None,
                                                  query: str) -> None:
    result = rc.recall(store, query)
    assert "EXP-001" in ids(result)
    hit = result.hits[ids(result).index("EXP-001")]
    assert hit.matched == [query] and hit.variants[query][0] == "tokenizer"


def test_known_words_are_not_expanded(store: Store, words: None) -> None:
    result = rc.recall(store, "token")
    assert set(ids(result)) == {"EXP-001", "EXP-003"}  # stems: tokenizer → token
    assert all(not h.variants for h in result.hits)
    assert rc.recall(store, "colr").hits == []  # 4 letters, two edits from colour: too far
    assert ids(rc.recall(store, "calibraton")) == ["EXP-002"]


def test_variants_can_be_turned_off(store: Store, words: None) -> None:
    assert rc.recall(store, "tokeniser", tuning=rc.Tuning(fuzzy_weight=0)).hits == []


def test_variants_and_distance(store: Store, words: None) -> None:
    rc.recall(store, "x")
    index = rc.open_retriever(store, dense=False).lexical
    assert [w for w, _ in variants(index, "tokeniz")] == ["tokenizer"]
    assert variants(index, "tok") == []  # too short to stand for anything
    assert distance("tokeniser", "tokenizer", 2) == 1
    assert distance("tokneizer", "tokenizer", 2) == 1  # a transposition is one edit
    assert distance("abc", "xyz", 1) == 2  # past the limit: limit + 1
