"""cortexfs.tokens: the one token estimate, ceil(characters / 4)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cortexfs.tokens import CHARS_PER_TOKEN, chars_for, estimate, estimate_joined


def test_estimate_rounds_up_per_text() -> None:
    assert CHARS_PER_TOKEN == 4
    assert [estimate("x" * n) for n in (0, 1, 3, 4, 5, 8, 9)] == [0, 1, 1, 1, 2, 2, 3]


def test_estimate_counts_code_points_not_bytes() -> None:
    assert estimate("ééé") == 1 and estimate("日本語の") == 1 and estimate("🙂" * 5) == 2


@given(st.lists(st.text(max_size=40), max_size=12))
def test_joined_is_the_estimate_of_the_join_and_never_over_the_parts(texts: list[str]) -> None:
    assert estimate_joined(texts) == estimate("".join(texts))
    assert estimate_joined(texts) <= sum(map(estimate, texts))


@given(st.integers(-5, 10_000))
def test_chars_for_is_the_most_that_fits(tokens: int) -> None:
    most = chars_for(tokens)
    assert estimate("x" * most) <= max(tokens, 0)
    assert estimate("x" * (most + 1)) > max(tokens, 0)
