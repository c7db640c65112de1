"""Fixtures of the regeneration tests (one test module per module of cortexfs.regen)."""

from __future__ import annotations

import pytest

from regen.helpers import isolate


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch)
