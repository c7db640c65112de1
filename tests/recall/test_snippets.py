"""cortexfs.recall.snippets: the passage a hit was ranked by, its words marked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cortexfs import recall as rc
from cortexfs.store import Store

# --- snippets ----------------------------------------------------------------------------------


def test_hits_carry_the_passage_they_were_ranked_by(store: Store,
                                                    write_atom: Callable[..., Path]) -> None:
    filler = [f"Line {n} is about the weather number{n}." for n in range(8)]
    body = "\n# EXP-001: Session\n\n" + "\n".join(
        filler[:4] + ["Ana: the pottery class made a blue plate.", "Ben: nice!"] + filler[4:])
    path = write_atom("EXP-001", summary="Session one", body=body + "\n")
    write_atom("EXP-002", summary="Pottery plans", body="\n")
    result = rc.recall(store, "pottery class plate")
    top = result.hits[0]
    assert top.id == "EXP-001" and top.snippet is not None
    lines = path.read_text().split("\n")
    first, last = top.snippet.first, top.snippet.last
    assert "pottery class made a blue plate" in "\n".join(lines[first - 1:last])
    assert lines[first - 1:last] == top.snippet.text.split("\n")
    marked = [top.snippet.text[a:b] for a, b in top.snippet.spans]
    assert marked == ["pottery", "class", "plate"]
    summary_only = result.hits[1].snippet
    assert summary_only is not None and summary_only.first == 0
    assert summary_only.text == "Pottery plans"
    data = result.to_json()["hits"][0]["snippet"]
    assert data["lines"] == [first, last] and data["highlights"][0] == list(top.snippet.spans[0])


# --- opening a hit ---------------------------------------------------------------------------


def test_words_of_the_query_are_marked_by_their_stems_and_ids_as_ids() -> None:
    from cortexfs.recall.snippets import highlights, make
    from cortexfs.recall.tokenize import Analyzer

    analyzer = Analyzer()
    terms = set(analyzer.stems(["caching", "rebalanced"])) | {"exp-042"}
    text = "Caches cached; the rebalancing of EXP-042 (not EXP-0421) and a cache."
    marked = [text[a:b] for a, b in highlights(analyzer, text, terms)]
    assert marked == ["Caches", "cached", "rebalancing", "EXP-042", "cache"]
    assert highlights(analyzer, "the of and", set(analyzer.stems(["the"]))) == []  # stopwords
    assert highlights(analyzer, "x marks", {"x"}) == []  # one letter: no word
    snippet = make(analyzer, text, 7, 9, terms)
    assert (snippet.first, snippet.last, snippet.text) == (7, 9, text)


def test_a_long_passage_is_cut_around_its_first_mark() -> None:
    from cortexfs.recall.snippets import MAX_CHARS, make
    from cortexfs.recall.tokenize import Analyzer

    analyzer = Analyzer()
    text = "filler " * 200 + "needle " + "filler " * 200
    snippet = make(analyzer, text, 1, 1, set(analyzer.stems(["needle"])))
    assert snippet.text.startswith("…") and snippet.text.endswith("…")
    assert len(snippet.text) == MAX_CHARS + 2
    [(a, b)] = snippet.spans
    assert snippet.text[a:b] == "needle"
    start = make(analyzer, "needle " + "x " * 400, 1, 1, set(analyzer.stems(["needle"])))
    assert not start.text.startswith("…") and start.text.endswith("…")
    assert start.text[slice(*start.spans[0])] == "needle"
