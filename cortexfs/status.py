"""What a project's STATUS.md says: its sections and its current phase (shown by OVERVIEW.md,
the brief, `cortex project list` and the site; checked by cortexfs.governance)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cortexfs.frontmatter import HEADING, HTML_COMMENT

# The four STATUS.md sections, each with the words one of its headings must contain.
# Headings match case-insensitively and loosely: "## Current Phase", "## Phase 2: build",
# "## Blockers", "## What's next" all count.
STATUS_SECTIONS: dict[str, tuple[str, ...]] = {
    "Current phase": ("phase",),
    "Recent progress": ("progress", "recent", "done", "completed"),
    "Open blockers": ("blocker", "blocked", "blocking"),
    "Next steps": ("next", "todo", "to do", "upcoming"),
}


@dataclass
class StatusInfo:
    """What a STATUS.md holds: its size, its sections, and the current phase line."""

    lines: int
    sections: dict[str, int] = field(default_factory=dict)  # section → 1-based heading line
    phase: str | None = None

    @property
    def missing(self) -> list[str]:
        return [s for s in STATUS_SECTIONS if s not in self.sections]


def read_status(text: str) -> StatusInfo:
    """Size, sections and phase of a STATUS.md's text."""
    lines = text.splitlines()
    info = StatusInfo(len(lines))
    heads = [(i, m.group(2)) for i, line in enumerate(lines)
             if (m := HEADING.match(line)) and len(m.group(1)) >= 2]
    for i, title in heads:
        words = " ".join(re.sub(r"[^a-z0-9]+", " ", title.lower()).split())
        for section, keys in STATUS_SECTIONS.items():
            if section not in info.sections and any(
                    re.search(rf"\b{re.escape(k)}", words) for k in keys):
                info.sections[section] = i + 1
                if section == "Current phase":
                    info.phase = _phase_line(lines, i, title)
                break
    return info


def phase_of(text: str | None) -> str | None:
    """The phase a STATUS.md's text states (None without a text or a phase line)."""
    return read_status(text).phase if text else None


def _phase_line(lines: list[str], heading: int, title: str) -> str | None:
    """The phase: the first text line under its heading, else what the heading itself says
    after "phase" (`## Current phase: 2 — build`)."""
    for line in lines[heading + 1:]:
        if HEADING.match(line):
            break
        text = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line).strip()
        text = HTML_COMMENT.sub("", text).strip()
        if text:
            return " ".join(text.split())
    tail = re.split(r"(?i)current phase|phase", title, maxsplit=1)[-1].strip(" :—-")
    return tail or None
