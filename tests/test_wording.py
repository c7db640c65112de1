"""cortexfs.wording: counts worded right ("1 error", "3 entries", "a, b and 2 more")."""

from __future__ import annotations

from cortexfs.wording import plural, plural_of, some


def test_plural_says_one_and_many() -> None:
    assert [plural(n, "error") for n in (0, 1, 2)] == ["0 errors", "1 error", "2 errors"]
    assert plural(1, "atom", sep=True) == "1 atom"
    assert plural(1234567, "atom", sep=True) == "1,234,567 atoms"
    assert plural(1234, "atom") == "1234 atoms"


def test_plural_of_knows_the_irregular_nouns_and_the_es_endings() -> None:
    assert [plural_of(n) for n in ("entry", "knowledge", "summary", "directory", "dependency",
                                   "index")] == ["entries", "knowledge", "summaries",
                                                 "directories", "dependencies", "indexes"]
    assert [plural_of(n) for n in ("match", "box", "class", "push", "file")] == [
        "matches", "boxes", "classes", "pushes", "files"]
    assert plural_of("mouse", "mice") == "mice" and plural(2, "mouse", "mice") == "2 mice"
    assert plural(1, "mouse", "mice") == "1 mouse"


def test_some_shows_the_first_and_counts_the_rest() -> None:
    assert some([], 3) == ""
    assert some(["a", "b"], 3) == "a, b"
    assert some(["a", "b", "c"], 3) == "a, b, c"
    assert some(["a", "b", "c", "d", "e"], 2) == "a, b and 3 more"
