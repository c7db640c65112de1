from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortexfs import accesslog
from cortexfs.strength import strength


def test_strength_pinned_values() -> None:
    assert strength(0) == 1.0
    assert strength(168) == pytest.approx((1 + 16.8) ** -0.3)
    assert round(strength(168), 2) == 0.42
    assert strength(10_000, priority="amygdala") == 1.0
    assert strength(168, src="manual") == pytest.approx((1 + 16.8) ** -0.15)
    assert strength(168, related=3) == pytest.approx((1 + 16.8) ** -0.21)


def test_fold_counts_and_newest_and_resumes(tmp_path: Path) -> None:
    log = tmp_path / "_meta" / "access-log.jsonl"
    accesslog.append(log, [
        accesslog.format_line("EXP-001.md", "Read", "s1", "2026-01-01T00:00:00.000Z"),
        accesslog.format_line("EXP-001.md", "Grep", "s1", "2026-02-01T00:00:00.000Z"),
    ])
    with open(log, "ab") as f:
        f.write(b"not json\n{\"file\": \"K-001.md\", \"ts\": \"2026-03-01T00:00:00.000Z\"}\n{\"fi")
    stats = accesslog.fold(log)
    assert stats.counts == {"EXP-001.md": 2, "K-001.md": 1}
    assert stats.newest["EXP-001.md"] == "2026-02-01T00:00:00.000Z"
    assert stats.bad_lines == 1
    with open(log, "ab") as f:
        f.write(b"le\": \"K-001.md\", \"ts\": \"2026-04-01T00:00:00.000Z\"}\n")
    stats = accesslog.fold(log, stats)
    assert stats.counts["K-001.md"] == 2 and stats.newest["K-001.md"].startswith("2026-04")
    line = json.loads(accesslog.format_line("a.md", "Read", "x"))
    assert set(line) == {"file", "tool", "ts", "session"} and line["ts"].endswith("Z")
