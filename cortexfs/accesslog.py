"""The access log: one JSON line per read of an atom, in each project's _meta/.

Standard library only: the PostToolUse hook imports this on every tool call.
A line is `{"file": "EXP-001.md", "tool": "Read", "ts": "<ISO-8601 UTC>", "session": "…"}`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

LOG_NAME = "access-log.jsonl"
DIRECTORY_SEARCH = "_directory_search"
MAX_LINE = 4000  # one write(2) of < PIPE_BUF-ish size with O_APPEND never interleaves


def utc_now() -> str:
    """The current time as the log writes it: ISO-8601 UTC with milliseconds and Z."""
    now = _dt.datetime.now(_dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def format_line(file: str, tool: str, session: str, ts: str | None = None) -> bytes:
    """One log line, newline included, truncating an absurdly long session id."""
    entry = {"file": file, "tool": tool, "ts": ts or utc_now(), "session": session[:200]}
    return (json.dumps(entry, ensure_ascii=False, separators=(", ", ": ")) + "\n").encode()


def append(log_path: str | os.PathLike[str], lines: Iterable[bytes]) -> int:
    """Append whole lines to the log in one O_APPEND write; returns bytes written."""
    data = b"".join(lines)
    if not data:
        return 0
    os.makedirs(os.path.dirname(os.fspath(log_path)), exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        return written
    finally:
        os.close(fd)


@dataclass
class AccessStats:
    """Per-file lifetime read count and newest timestamp, folded from a log."""

    counts: dict[str, int] = field(default_factory=dict)
    newest: dict[str, str] = field(default_factory=dict)
    offset: int = 0  # bytes of the log folded so far (the log is append-only)
    bad_lines: int = 0

    def add(self, file: str, ts: str) -> None:
        self.counts[file] = self.counts.get(file, 0) + 1
        if ts > self.newest.get(file, ""):
            self.newest[file] = ts


def fold(log_path: str | os.PathLike[str], stats: AccessStats | None = None) -> AccessStats:
    """Fold the log's lines from `stats.offset` on into `stats` (a fresh one by default).

    A partial last line (a writer mid-append) is left for the next fold. Lines that are not
    valid log entries are counted in `bad_lines` and otherwise ignored.
    """
    stats = stats if stats is not None else AccessStats()
    try:
        with open(log_path, "rb") as f:
            f.seek(stats.offset)
            data = f.read()
    except FileNotFoundError:
        return stats
    end = data.rfind(b"\n") + 1
    for raw in data[:end].splitlines():
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
            file, ts = entry["file"], entry.get("ts", "")
            if not isinstance(file, str) or not isinstance(ts, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            stats.bad_lines += 1
            continue
        stats.add(file, ts)
    stats.offset += end
    return stats
