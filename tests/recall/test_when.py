"""cortexfs.recall.when: the date a query names."""

from __future__ import annotations

import datetime as dt

import pytest

from cortexfs import recall as rc


@pytest.mark.parametrize(("query", "first", "last"), [
    ("what did we cook on 9 November, 2022?", "2022-11-09", "2022-11-09"),
    ("as said on November 6th, 2023", "2023-11-06", "2023-11-06"),
    ("on December 1,2023", "2023-12-01", "2023-12-01"),
    ("shard moves in March 2024", "2024-03-01", "2024-03-31"),
    ("the sept. 2022 outage", "2022-09-01", "2022-09-30"),
    ("what changed 2024-02", "2024-02-01", "2024-02-29"),
    ("runs from 2024-02-03", "2024-02-03", "2024-02-03"),
    ("decisions made in 2023", "2023-01-01", "2023-12-31"),
    ("on 31 February, 2022", "2022-02-01", "2022-02-28"),  # no such day: the month
])
def test_query_period(query: str, first: str, last: str) -> None:
    period = rc.query_period(query)
    assert period is not None
    assert (period.first, period.last) == (dt.date.fromisoformat(first).toordinal(),
                                           dt.date.fromisoformat(last).toordinal())


@pytest.mark.parametrize("query", ["cache in December", "we may 2x the cache",
                                   "port 2023 open", "5k run with 2000 people", "2024-13"])
def test_query_period_none(query: str) -> None:
    assert rc.query_period(query) is None
