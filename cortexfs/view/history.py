"""Reads per atom per day, from a project's access log: the heat view and read histories.

The log is append-only, so its per-day counts are cached (`.cache/view/history/<project>.bin`)
with the log's `accesslog.mark` at the offset folded so far; a log that no longer continues
it (replaced, shrunk or rewritten by a merge) is folded again from the start, as
cortexfs.accesslog.resume does for the lifetime counts.
"""

from __future__ import annotations

import os
import re
import stat

from cortexfs import accesslog, cache
from cortexfs.store import Project

KIND = "view-history"
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")

# file name (EXP-001.md) → day (YYYY-MM-DD) → reads
Days = dict[str, dict[str, int]]


def daily_reads(project: Project) -> Days:
    """Reads per atom file per day in the project's access log (a symlinked log is not
    read: it is not part of the store)."""
    log = project.access_log
    try:
        st = os.lstat(log)
    except OSError:
        return {}
    if not stat.S_ISREG(st.st_mode):
        return {}
    path = project.store.cache_dir / "view" / "history" / f"{project.name}.bin"
    saved = cache.load(path, KIND)
    days: Days = {}
    offset = 0
    if (isinstance(saved, list) and len(saved) == 2 and isinstance(saved[1], dict)
            and accesslog.continued(log, saved[0])):
        offset, days = saved[0][2], saved[1]
    if offset == st.st_size and saved is not None:
        return days
    entries, end = accesslog.read_entries(log, offset)
    for file, ts in entries:
        if _DAY.match(ts):
            per_day = days.setdefault(file, {})
            day = ts[:10]
            per_day[day] = per_day.get(day, 0) + 1
    cache.save(path, KIND, [accesslog.mark(log, end), days])
    return days
