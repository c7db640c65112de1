"""The site's two charts, drawn here rather than in the browser: the timeline of a
project's experiments (SVG) and the heat of reads per atom over time (a table). Both are
small, static and scale with a project (a timeline of 7,000 experiments turns its dots
into stacked bars), and every text in them is escaped."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from cortexfs.escape import html
from cortexfs.view.model import status_class

WIDTH, DOT, MAX_STACK, BAR_HEIGHT = 960, 8, 24, 160
LEFT, BOTTOM = 10, 24
TICK_GAP = 64  # pixels between two date labels of the timeline
GROUPS = ("active", "challenged", "superseded", "invalidated")
HEAT_ROWS = 30
HEAT_LEVELS = 5


def timeline(experiments: Sequence[dict[str, Any]]) -> Markup:
    """An SVG of experiments by date (dicts with day, stem, id, summary, status, group;
    undated ones are left out), one dot per experiment linking to its page, coloured by
    status — or, when a date holds too many to stack, bars per status."""
    dated = sorted((e for e in experiments if e["day"]), key=lambda e: (e["day"], e["id"]))
    if not dated:
        return Markup('<p class="empty">No dated experiments.</p>')
    first = dt.date.fromisoformat(dated[0]["day"])
    last = dt.date.fromisoformat(dated[-1]["day"])
    span = max((last - first).days, 1)
    bins = (WIDTH - 2 * LEFT) // DOT
    stacks: list[list[dict[str, Any]]] = [[] for _ in range(bins + 1)]
    for e in dated:
        offset = (dt.date.fromisoformat(e["day"]) - first).days
        stacks[offset * bins // span].append(e)
    tallest = max(len(s) for s in stacks)
    dots = tallest <= MAX_STACK
    height = (tallest * DOT if dots else BAR_HEIGHT) + BOTTOM + DOT
    base = height - BOTTOM
    parts = [f'<svg class="timeline" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
             f'height="{height}" role="img" aria-label="Experiments by date">']
    for i, stack in enumerate(stacks):
        x = LEFT + i * DOT + DOT // 2
        if dots:
            for k, e in enumerate(stack):
                title = html(f"{e['id']} · {e['day']} · {e['status']} — {e['summary']}")
                cls = status_class(e["status"], e["group"])
                parts.append(f'<a href="{html(e["stem"])}.html"><circle class="st-{cls}" '
                             f'cx="{x}" cy="{base - k * DOT - DOT // 2}" r="3.3">'
                             f'<title>{title}</title></circle></a>')
            continue
        y = base
        for group in GROUPS:
            n = sum(1 for e in stack if status_class(e["status"], e["group"]) == group)
            if not n:
                continue
            h = max(1, round(n * BAR_HEIGHT / tallest))
            y -= h
            day = stack[0]["day"]
            parts.append(f'<rect class="st-{group}" x="{x - DOT // 2 + 1}" y="{y}" '
                         f'width="{DOT - 2}" height="{h}"><title>{html(day)}: {n} {group}'
                         f'</title></rect>')
    last_x = -TICK_GAP
    for label, offset in _ticks(first, span):
        x = LEFT + offset * bins // span * DOT
        if x - last_x >= TICK_GAP:  # labels that would overlap are left out
            parts.append(f'<text x="{x}" y="{height - 6}" class="tick">{html(label)}</text>')
            last_x = x
    parts.append("</svg>")
    return Markup("".join(parts))


def _ticks(first: dt.date, span: int) -> list[tuple[str, int]]:
    """Month starts (or years, over a long span) within the span, as (label, day offset)."""
    out = []
    month = dt.date(first.year, first.month, 1)
    yearly = span > 3 * 365
    while (month - first).days <= span:
        offset = (month - first).days
        if offset >= 0 and (not yearly or month.month == 1):
            out.append((month.strftime("%Y" if yearly else "%b %Y"), offset))
        month = dt.date(month.year + (month.month == 12), month.month % 12 + 1, 1)
    step = max(1, len(out) // 12)
    return out[::step]


def heat(history: dict[str, dict[str, int]], names: dict[str, tuple[str, str]]) \
        -> dict[str, Any]:
    """Reads of the most read atoms per period (days, weeks or months, as the log's span
    asks): {"columns": [label…], "rows": [(id, stem, total, [(reads, level)…])…]}.
    `names`: atom file → (id, stem) of the atoms shown (others are left out)."""
    days = sorted({d for per_day in history.values() for d in per_day})
    if not days:
        return {"columns": [], "rows": [], "unit": ""}
    first, last = dt.date.fromisoformat(days[0]), dt.date.fromisoformat(days[-1])
    span = (last - first).days
    unit = "day" if span < 45 else "week" if span < 7 * 52 else "month"

    def period(day: str) -> str:
        d = dt.date.fromisoformat(day)
        if unit == "week":
            return (d - dt.timedelta(days=d.weekday())).isoformat()
        return day if unit == "day" else day[:7]

    columns = sorted({period(d) for d in days})
    index = {c: i for i, c in enumerate(columns)}
    totals = sorted(((sum(v.values()), f) for f, v in history.items() if f in names),
                    key=lambda t: (-t[0], t[1]))[:HEAT_ROWS]
    grid = []
    peak = 1
    for total, file in totals:
        cells = [0] * len(columns)
        for day, n in history[file].items():
            cells[index[period(day)]] += n
        peak = max(peak, *cells)
        grid.append((file, total, cells))
    rows = [(*names[file], total, [(n, -(-n * HEAT_LEVELS // peak) if n else 0) for n in cells])
            for file, total, cells in grid]
    return {"columns": columns, "rows": rows, "unit": unit}


def reads_chart(reads: dict[str, int], days: int = 90) -> Markup:
    """An SVG of one atom's reads per day over the `days` up to its last read."""
    if not reads:
        return Markup("")
    last = dt.date.fromisoformat(max(reads))
    first = last - dt.timedelta(days=days - 1)
    peak = max(reads.values())
    w, h = 3 * days, 40
    parts = [f'<svg class="reads" viewBox="0 0 {w} {h + 2}" width="{w}" height="{h + 2}" '
             'role="img" aria-label="Reads per day">']
    for day, n in sorted(reads.items()):
        i = (dt.date.fromisoformat(day) - first).days
        if i < 0:
            continue
        bar = max(2, round(n * h / peak))
        parts.append(f'<rect x="{i * 3}" y="{h - bar}" width="2" height="{bar}">'
                     f'<title>{html(day)}: {n} read{"s" if n != 1 else ""}</title></rect>')
    parts.append(f'<line x1="0" y1="{h + 1}" x2="{w}" y2="{h + 1}"/></svg>')
    return Markup("".join(parts))
