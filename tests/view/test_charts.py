"""cortexfs.view.charts: the timeline and the heat of reads, drawn server-side, every text
escaped; a timeline of many experiments turns its dots into bars."""

from __future__ import annotations

import re
from typing import Any

from cortexfs.view.charts import MAX_STACK, heat, reads_chart, timeline


def experiment(n: int, day: str | None, status: str = "active", group: str = "active",
               summary: str = "a run") -> dict[str, Any]:
    return {"day": day, "stem": f"EXP-{n}", "id": f"EXP-{n:03d}", "summary": summary,
            "status": status, "group": group}


def test_a_dot_per_dated_experiment_linking_to_its_page_and_escaped() -> None:
    svg = str(timeline([experiment(1, "2026-01-05"), experiment(2, None),
                        experiment(3, "2026-03-01", "challenged", "active",
                                   '<script>alert("x")</script>')]))
    assert svg.count("<circle") == 2 and "EXP-2.html" not in svg
    assert '<a href="EXP-1.html"><circle class="st-active"' in svg
    assert 'class="st-challenged"' in svg
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert re.findall(r'class="tick">([^<]+)<', svg)[:1] == ["Feb 2026"]


def test_no_dated_experiment_is_said_in_words() -> None:
    assert str(timeline([experiment(1, None)])) == '<p class="empty">No dated experiments.</p>'


def test_too_many_on_one_day_become_bars_per_status() -> None:
    many = [experiment(n, "2026-01-05", *(("invalidated", "invalidated") if n % 2 else ()))
            for n in range(MAX_STACK + 5)]
    svg = str(timeline([*many, experiment(999, "2026-06-01")]))
    assert "<circle" not in svg
    assert re.findall(r'<title>2026-01-05: (\d+) (\w+)</title>', svg) == [
        ("15", "active"), ("14", "invalidated")]


def test_heat_sums_reads_per_period_of_the_atoms_shown() -> None:
    history = {"EXP-1.md": {"2026-01-01": 2, "2026-01-02": 1}, "K-1.md": {"2026-01-02": 6},
               "gone.md": {"2026-01-01": 50}}
    names = {"EXP-1.md": ("EXP-001", "EXP-1"), "K-1.md": ("K-001", "K-1")}
    chart = heat(history, names)
    assert chart["unit"] == "day" and chart["columns"] == ["2026-01-01", "2026-01-02"]
    assert chart["rows"] == [("K-001", "K-1", 6, [(0, 0), (6, 5)]),
                             ("EXP-001", "EXP-1", 3, [(2, 2), (1, 1)])]
    long = heat({"EXP-1.md": {"2026-01-01": 1, "2026-03-30": 1}}, names)
    assert long["unit"] == "week" and long["columns"][0] == "2025-12-29"  # weeks from Monday
    assert heat({"EXP-1.md": {"2024-01-01": 1, "2026-03-30": 1}}, names)["unit"] == "month"
    assert heat({}, names) == {"columns": [], "rows": [], "unit": ""}


def test_reads_chart_shows_the_last_days_of_reads() -> None:
    svg = str(reads_chart({"2026-01-01": 1, "2026-05-01": 4, "2026-05-02": 2}, days=30))
    assert svg.count("<rect") == 2  # January is before the 30 days shown
    assert "<title>2026-05-01: 4 reads</title>" in svg
    assert 'height="40"' in svg  # the busiest day fills the height
    assert str(reads_chart({})) == ""
    assert "<title>2026-05-02: 1 read</title>" in str(reads_chart({"2026-05-02": 1}))
