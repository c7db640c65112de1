"""cortexfs.strength: the power-law decay of hippocampus.md (SPEC §8) and its modifiers."""

from __future__ import annotations

import pytest

from cortexfs.strength import strength


def test_strength_pinned_values() -> None:
    assert strength(0) == 1.0
    assert strength(168) == pytest.approx((1 + 16.8) ** -0.3)
    assert round(strength(168), 2) == 0.42
    assert strength(10_000, priority="amygdala") == 1.0
    assert strength(168, src="manual") == pytest.approx((1 + 16.8) ** -0.15)
    assert strength(168, related=3) == pytest.approx((1 + 16.8) ** -0.21)


def test_strength_only_decays_and_never_below_zero() -> None:
    hours = [0, 1, 24, 168, 720, 8760, 87600]
    values = [strength(h) for h in hours]
    assert values == sorted(values, reverse=True) and values[-1] > 0
    assert strength(-5) == strength(0) == 1.0  # a clock ahead of the access: no decay yet


def test_priorities_scale_the_forgetting_exponent() -> None:
    base = 1 + 0.1 * 168
    assert strength(168, priority="critical") == 1.0
    assert strength(168, priority=" High ") == pytest.approx(base ** -0.09)
    assert strength(168, priority="normal") == strength(168) == strength(168, priority=None)
    assert strength(168, priority="low") == pytest.approx(base ** -0.6)
    assert strength(168, priority="someday") == strength(168)  # unknown: counts as normal


def test_modifiers_apply_together_and_links_count_from_three() -> None:
    base = 1 + 0.1 * 100
    assert strength(100, related=2) == strength(100)
    assert strength(100, src="manual", related=5) == pytest.approx(base ** -(0.3 * 0.5 * 0.7))
    assert strength(100, priority="high", src="manual") == pytest.approx(base ** -(0.3 * 0.3 * 0.5))
    assert strength(100, priority="amygdala", initial=0.8) == 0.8
    assert strength(0, initial=0.5) == 0.5
