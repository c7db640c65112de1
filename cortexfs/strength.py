"""Memory strength: the power-law decay of hippocampus.md v1 (SPEC §8), used by the
HIPPOCAMPUS.md index, the session brief and recall's heat signal.

str = initial × (1 + decay_rate × hours) ^ (-forgetting_rate), defaults 1.0, 0.1, 0.3.
Modifiers: priority `amygdala` freezes decay; `src=manual` decays at 0.5× the rate;
3 or more related entries decay at 0.7× the rate (both apply together).
"""

from __future__ import annotations

INITIAL = 1.0
DECAY_RATE = 0.1
FORGETTING_RATE = 0.3
MANUAL_FACTOR = 0.5
ASSOCIATED_FACTOR = 0.7
ASSOCIATED_MIN_LINKS = 3


def strength(hours: float, *, priority: str | None = None, src: str | None = None,
             related: int = 0, initial: float = INITIAL) -> float:
    """Strength after `hours` since the last access (or since creation if never read)."""
    if priority == "amygdala":
        return initial
    rate = FORGETTING_RATE
    if src == "manual":
        rate *= MANUAL_FACTOR
    if related >= ASSOCIATED_MIN_LINKS:
        rate *= ASSOCIATED_FACTOR
    return float(initial * (1.0 + DECAY_RATE * max(hours, 0.0)) ** (-rate))
