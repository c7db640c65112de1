"""The date a query names (`on 9 November, 2022`, `in March 2024`): the `when` signal."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august",
                "september", "october", "november", "december")
_MONTH = {m: i for i, m in enumerate(_MONTH_NAMES, start=1)} | \
    {m[:3]: i for i, m in enumerate(_MONTH_NAMES, start=1) if m != "may"} | {"sept": 9}
_M = r"(" + "|".join(sorted(_MONTH, key=len, reverse=True)) + r")\.?"
# The forms a date takes in a query, most precise first: (pattern, fields in group order).
_DATE_FORMS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), "ymd"),
    (re.compile(r"\b(\d{1,2}) " + _M + r",? (\d{4})\b"), "dmy"),
    (re.compile(r"\b" + _M + r" (\d{1,2}),? ?(\d{4})\b"), "mdy"),
    (re.compile(r"\b(\d{4})-(\d{1,2})\b"), "ym"),
    (re.compile(r"\b" + _M + r",? (\d{4})\b"), "my"),
    (re.compile(r"\b(?:in|during|since|by|before|after|of) (19\d\d|20\d\d)\b"), "y"),
]


@dataclass(frozen=True)
class Period:
    """The days a query's date names: first..last, both included."""

    first: int  # date.toordinal()
    last: int

    def distance(self, day: int) -> int:
        return max(self.first - day, day - self.last, 0)


def query_period(query: str) -> Period | None:
    """The day, month or year a query names (`on 9 November, 2022`, `November 9th 2022`,
    `in March 2024`, `2024-03`, `in 2023`), or None. A month without a year, or a bare
    number, names nothing: too ambiguous to rank by."""
    text = re.sub(r"\b(\d{1,2})(?:st|nd|rd|th)\b", r"\1", query.lower())
    for pattern, fields in _DATE_FORMS:
        for m in pattern.finditer(text):
            parts = dict(zip(fields, m.groups(), strict=True))
            month = parts.get("m")
            try:
                year = int(parts["y"])
                mon = (int(month) if month.isdigit() else _MONTH[month]) if month else None
                if mon is None:
                    first, last = dt.date(year, 1, 1), dt.date(year, 12, 31)
                elif "d" in parts:
                    first = last = dt.date(year, mon, int(parts["d"]))
                else:
                    first = dt.date(year, mon, 1)
                    last = (dt.date(year + mon // 12, mon % 12 + 1, 1) - dt.timedelta(days=1))
            except (ValueError, KeyError):
                continue  # 31 February, month 13: not a date
            return Period(first.toordinal(), last.toordinal())
    return None



def parse_ts(ts: str) -> dt.datetime | None:
    try:
        parsed = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)

