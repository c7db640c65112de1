"""Memory strength: the power-law decay of hippocampus.md v1 (SPEC §8), used by the
HIPPOCAMPUS.md index, the session brief and recall's heat signal.

str = initial × (1 + decay_rate × hours) ^ (-forgetting_rate), defaults 1.0, 0.1, 0.3.
Modifiers (v1): priority `amygdala` freezes decay; `src=manual` decays at 0.5× the rate;
3 or more related entries decay at 0.7× the rate (both apply together).

hippocampus.md v2's priority levels are accepted too and applied the v1 way, as factors
on the forgetting exponent: `critical` never decays (like `amygdala`), `high` 0.3×,
`normal` 1×, `low` 2×. Unknown priorities count as normal.
"""

from __future__ import annotations

INITIAL = 1.0
DECAY_RATE = 0.1
FORGETTING_RATE = 0.3
MANUAL_FACTOR = 0.5
ASSOCIATED_FACTOR = 0.7
ASSOCIATED_MIN_LINKS = 3
PRIORITY_FACTORS: dict[str, float] = {
    "amygdala": 0.0, "critical": 0.0, "high": 0.3, "normal": 1.0, "low": 2.0,
}


def strength(hours: float, *, priority: str | None = None, src: str | None = None,
             related: int = 0, initial: float = INITIAL) -> float:
    """Strength after `hours` since the last access (or since creation if never read)."""
    factor = PRIORITY_FACTORS.get((priority or "normal").strip().lower(), 1.0)
    if factor == 0.0:
        return initial
    rate = FORGETTING_RATE * factor
    if src == "manual":
        rate *= MANUAL_FACTOR
    if related >= ASSOCIATED_MIN_LINKS:
        rate *= ASSOCIATED_FACTOR
    return float(initial * (1.0 + DECAY_RATE * max(hours, 0.0)) ** (-rate))
