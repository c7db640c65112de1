"""The one token estimator: every token figure cortex prints or budgets against uses it.

tokens(text) = ceil(characters / 4), counting Unicode code points. Four characters per
token is the usual rule of thumb for English prose and markdown with BPE tokenizers
(OpenAI's and Anthropic's documentation both quote it); it needs no model download and
is exact arithmetic, so "fits the budget" means the same thing in every command and test.
Code, URLs and non-Latin scripts tokenize denser than that: treat the figures as
estimates, as the neocortex.md and hippocampus.md specifications do.

Because it rounds up per text, the estimate of a concatenation never exceeds the sum of
the estimates of its parts, so packing by parts never overshoots a budget.
"""

from __future__ import annotations

CHARS_PER_TOKEN = 4


def estimate(text: str) -> int:
    """Estimated tokens in `text`: ceil(len(text) / 4)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_joined(texts: list[str]) -> int:
    """`estimate` of the texts joined, without joining them (a brief's 80,000 lines)."""
    return -(-sum(map(len, texts)) // CHARS_PER_TOKEN)


def chars_for(tokens: int) -> int:
    """The most characters a text can have and still estimate at `tokens` or fewer."""
    return max(tokens, 0) * CHARS_PER_TOKEN
